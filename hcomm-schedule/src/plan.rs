//! Plans: how a checked schedule runs on a backend without tags whose ranks
//! issue their operations one call after another (HCCL, NCCL).
//!
//! The language's semantics are the host backend's: channels per
//! `(source, destination, tag)`, non-blocking operations that progress while
//! their rank does other work (collectives included). A device library has
//! no tags and runs each rank's calls in order, so a schedule cannot be issued
//! there statement by statement. A [`Plan`] says, for every rank, the ordered
//! steps that move the same data and complete when every rank issues its own
//! steps in order, each step waiting for the one before:
//!
//! * a [`Step::Group`]: point-to-point operations issued as one group call
//!   (`HcclBatchSendRecv`, `ncclGroupStart..End`), with at most one send to
//!   and one receive from each peer;
//! * a [`Step::Collective`], a [`Step::Local`] copy or accumulate, or a
//!   [`Step::SelfMessage`] (a message of a rank to itself, which is a copy).
//!
//! # How a plan is made
//!
//! The checker's deadlock simulation is an execution of the schedule: it
//! completes every event, in an order that respects every rank's program
//! order. Walking that order, a message *fires* at the first completion of
//! an event that needs it (the blocking `send`/`recv`, the `batch`, or the
//! first of the two ends' `wait`s); at that moment both ends are posted, so
//! the message moves inside both ends' windows (between posting and
//! completion), where the checker proved no other statement touches its
//! regions. A collective fires at the first completion of one of its
//! members, a copy at its own completion. Each rank thus sees its actions in
//! an order that keeps the data of the host execution, and every message is
//! paired with its receive by the checker's matching: no tag is left for the
//! device to resolve.
//!
//! Fired messages get *rounds*: a message joins the latest group call of
//! both its ranks when neither has done anything else since and its regions
//! are disjoint from those of the call's operations that write (or that it
//! writes), else it opens a new call on the round past both ranks' latest. A
//! collective takes the round past all its members' latest. Rounds increase
//! along every rank's steps, and both ends of a message hold it in the same
//! round, so by induction on rounds every step completes: once every step of
//! the rounds before has completed, every rank stands at its calls of the
//! next round, whose partners are all there. A round holding several
//! messages of one channel is split into sub-calls by the message's position
//! on the channel in that round, which both ends count alike.
//!
//! Plans depend on the world size and the scalars, not on the lengths:
//! regions are compared for every value of the length variables. They are
//! made once per (world, scalars) and cached ([`PlanCache`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::compile::compile;
use crate::ir::Schedule;
use crate::lin::overlaps;
use crate::trace::{EvKind, Unrolled};
use crate::unroll::unroll;
use rustc_hash::FxHashMap;

/// One point-to-point operation as a rank's event posts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// A send (else a receive).
    pub send: bool,
    /// The peer rank.
    pub peer: u32,
}

/// What one event of a rank is, for checking that the calls a schedule's
/// body makes are the events the plan was made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventShape {
    /// A blocking `send` or `recv`.
    Blocking(Msg),
    /// A `batch` of these operations, in posting order.
    Batch(Vec<Msg>),
    /// An `isend` or `irecv`.
    Post(Msg),
    /// A `wait` on this many requests.
    Wait(u32),
    /// A `copy` or `accumulate`.
    Copy,
    /// A collective (`barrier` included).
    Collective,
}

/// An operation of a rank: the `index`-th operation of event `event` (0 for
/// a blocking operation and for `isend`/`irecv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpRef {
    /// Index of the event among the rank's events.
    pub event: u32,
    /// Position of the operation in the event.
    pub index: u32,
}

/// One step of a rank's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// These operations as one group call (at most one send to and one
    /// receive from each peer).
    Group(Vec<OpRef>),
    /// A message of the rank to itself: a copy (or combine) from the send's
    /// region to the receive's.
    SelfMessage {
        /// The send.
        send: OpRef,
        /// The receive.
        recv: OpRef,
    },
    /// The `copy`/`accumulate` of this event.
    Local(u32),
    /// The collective of this event.
    Collective(u32),
}

/// One rank's plan: the events it was made from and the steps to issue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankPlan {
    /// The rank's events, in program order.
    pub events: Vec<EventShape>,
    /// The steps, in the order to issue them.
    pub steps: Vec<Step>,
}

/// Every rank's plan at one world size and scalar combination.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Indexed by rank.
    pub ranks: Vec<RankPlan>,
}

/// Makes the plan of `s` at `world` with `scalars` (in the order of
/// [`Schedule::scalars`]). The schedule must pass the checker there (as it
/// does when it compiled for that world or passed run-time verification);
/// `Err` carries the checker's first diagnostic otherwise.
pub fn plan(s: &Schedule, world: i64, scalars: &[i64]) -> Result<Plan, String> {
    let (prog, diags) = compile(s);
    if let Some(d) = diags.first() {
        return Err(d.to_string());
    }
    if scalars.len() != s.scalars.len() {
        return Err(format!(
            "`{}` takes {} scalar values, but {} were given",
            s.name,
            s.scalars.len(),
            scalars.len()
        ));
    }
    let mut un = unroll(&prog, world, scalars).map_err(|d| first(&d))?;
    let d = crate::check::matching::check(&mut un);
    if !d.is_empty() {
        return Err(first(&d));
    }
    let order = crate::check::deadlock::check(&un).map_err(|d| first(&d))?;
    Ok(Planner::new(&un).run(&order))
}

fn first(d: &[crate::diag::Diagnostic]) -> String {
    d.first()
        .map_or_else(|| "the checker failed".to_owned(), ToString::to_string)
}

/// A rank's step while planning; a group call's operations carry their
/// sub-call (the message's position on its channel in the round) and their
/// index among the rank's operations.
enum Draft {
    Group { ops: Vec<(u32, u32, OpRef)> },
    Other(Step),
}

struct Planner<'u, 'p, 's> {
    un: &'u Unrolled<'p, 's>,
    drafts: Vec<Vec<Draft>>,
    /// Round of each rank's latest round-holding step (`None` before any).
    last: Vec<Option<u32>>,
    /// Whether the rank's latest step is a group call new operations may join.
    open: Vec<bool>,
    /// Whether each rank's op was fired.
    fired: Vec<Vec<bool>>,
    coll_fired: HashSet<(u32, u32)>,
    /// Per rank: the event of each of its collectives, by (group, sequence).
    coll_events: Vec<FxHashMap<(u32, u32), u32>>,
    /// Messages per (round, source, destination) so far.
    per_channel: FxHashMap<(u32, u32, u32), u32>,
    overlap_memo: FxHashMap<(u32, u32), bool>,
}

impl<'u, 'p, 's> Planner<'u, 'p, 's> {
    fn new(un: &'u Unrolled<'p, 's>) -> Self {
        let n = un.ranks.len();
        Planner {
            un,
            drafts: (0..n).map(|_| Vec::new()).collect(),
            last: vec![None; n],
            open: vec![false; n],
            fired: un.ranks.iter().map(|t| vec![false; t.ops.len()]).collect(),
            coll_fired: HashSet::new(),
            coll_events: un
                .ranks
                .iter()
                .map(|t| {
                    t.events
                        .iter()
                        .enumerate()
                        .filter_map(|(e, ev)| match ev.kind {
                            EvKind::Coll(ci) => {
                                let c = &t.colls[ci as usize];
                                Some(((c.group, c.seq), e as u32))
                            }
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
            per_channel: FxHashMap::default(),
            overlap_memo: FxHashMap::default(),
        }
    }

    fn run(mut self, order: &[u32]) -> Plan {
        let un = self.un;
        let mut pc = vec![0_usize; un.ranks.len()];
        for &r in order {
            let ri = r as usize;
            let t = &un.ranks[ri];
            let e = pc[ri];
            pc[ri] += 1;
            let Some(ev) = t.events.get(e) else { continue };
            match ev.kind {
                EvKind::Copy(_) => self.local(r, Step::Local(e as u32)),
                EvKind::Post(_) => {}
                EvKind::Blocking(i) => self.fire(r, i),
                EvKind::Batch(a, b) => (a..b).for_each(|i| self.fire(r, i)),
                EvKind::Wait(a, b) => {
                    for k in a..b {
                        self.fire(r, t.wait_ops[k as usize]);
                    }
                }
                EvKind::Coll(ci) => self.collective(r, ci),
            }
        }
        let ranks = self
            .drafts
            .into_iter()
            .zip(&un.ranks)
            .map(|(drafts, t)| RankPlan {
                events: shapes(t),
                steps: drafts.into_iter().flat_map(materialize).collect(),
            })
            .collect();
        Plan { ranks }
    }

    fn op_ref(&self, r: u32, i: u32) -> OpRef {
        let t = &self.un.ranks[r as usize];
        let op = &t.ops[i as usize];
        let first = match t.events.get(op.ev as usize).map(|e| e.kind) {
            Some(EvKind::Batch(a, _)) => a,
            _ => i,
        };
        OpRef {
            event: op.ev,
            index: i - first,
        }
    }

    fn local(&mut self, r: u32, step: Step) {
        self.drafts[r as usize].push(Draft::Other(step));
        self.open[r as usize] = false;
    }

    /// Fires op `i` of rank `r` and its partner, unless fired already.
    fn fire(&mut self, r: u32, i: u32) {
        if self.fired[r as usize][i as usize] {
            return;
        }
        let op = &self.un.ranks[r as usize].ops[i as usize];
        let (q, j) = op.partner;
        let (send_end, recv_end) = if op.send { ((r, i), (q, j)) } else { ((q, j), (r, i)) };
        self.fired[r as usize][i as usize] = true;
        self.fired[q as usize][j as usize] = true;
        if q == r {
            let step = Step::SelfMessage {
                send: self.op_ref(send_end.0, send_end.1),
                recv: self.op_ref(recv_end.0, recv_end.1),
            };
            self.local(r, step);
            return;
        }
        let round = self.joinable(r, i).max(self.joinable(q, j));
        let key = (round, send_end.0, recv_end.0);
        let count = self.per_channel.entry(key).or_insert(0);
        let sub = *count;
        *count += 1;
        self.place(r, i, round, sub);
        self.place(q, j, round, sub);
    }

    /// The first round op `i` of rank `r` may take: the rank's open call's
    /// when the op conflicts with none of its operations, else the next.
    fn joinable(&mut self, r: u32, i: u32) -> u32 {
        let ri = r as usize;
        let Some(last) = self.last[ri] else { return 0 };
        if !self.open[ri] {
            return last + 1;
        }
        let Some(Draft::Group { ops, .. }) = self.drafts[ri].last() else {
            return last + 1;
        };
        let t = &self.un.ranks[ri];
        let me = &t.ops[i as usize];
        let others: Vec<(u32, bool)> = ops
            .iter()
            .map(|&(_, k, _)| {
                let o = &t.ops[k as usize];
                (o.reg, !o.send)
            })
            .collect();
        let conflict = others
            .into_iter()
            .any(|(reg, writes)| (writes || !me.send) && self.regions_overlap(me.reg, reg));
        if conflict {
            last + 1
        } else {
            last
        }
    }

    fn regions_overlap(&mut self, a: u32, b: u32) -> bool {
        let key = (a.min(b), a.max(b));
        let regs = &self.un.regs;
        *self.overlap_memo.entry(key).or_insert_with(|| {
            let (x, y) = (&regs[a as usize], &regs[b as usize]);
            x.buf == y.buf && overlaps(&x.start, &x.end, &y.start, &y.end)
        })
    }

    /// Puts op `i` of rank `r` into the rank's call of `round`.
    fn place(&mut self, r: u32, i: u32, round: u32, sub: u32) {
        let ri = r as usize;
        let op = self.op_ref(r, i);
        if self.open[ri] && self.last[ri] == Some(round) {
            if let Some(Draft::Group { ops, .. }) = self.drafts[ri].last_mut() {
                ops.push((sub, i, op));
                return;
            }
        }
        self.drafts[ri].push(Draft::Group {
            ops: vec![(sub, i, op)],
        });
        self.last[ri] = Some(round);
        self.open[ri] = true;
    }

    /// Fires collective `ci` of rank `r` on every member, unless fired.
    fn collective(&mut self, r: u32, ci: u32) {
        let c = &self.un.ranks[r as usize].colls[ci as usize];
        let key = (c.group, c.seq);
        if !self.coll_fired.insert(key) {
            return;
        }
        let members = self.un.groups.get(c.group as usize).map_or(&[][..], Vec::as_slice);
        let round = members
            .iter()
            .map(|&m| self.last[m as usize].map_or(0, |x| x + 1))
            .max()
            .unwrap_or(0);
        for &m in members {
            let mi = m as usize;
            // the member's event of this collective
            let Some(&ev) = self.coll_events[mi].get(&key) else {
                continue;
            };
            self.drafts[mi].push(Draft::Other(Step::Collective(ev)));
            self.last[mi] = Some(round);
            self.open[mi] = false;
        }
    }
}

/// A draft step as issued: a group call split into its sub-calls.
fn materialize(d: Draft) -> Vec<Step> {
    match d {
        Draft::Other(s) => vec![s],
        Draft::Group { ops, .. } => {
            let mut subs: BTreeMap<u32, Vec<OpRef>> = BTreeMap::new();
            for (sub, _, op) in ops {
                subs.entry(sub).or_default().push(op);
            }
            subs.into_values().map(Step::Group).collect()
        }
    }
}

fn shapes(t: &crate::trace::RankTrace) -> Vec<EventShape> {
    let msg = |i: u32| {
        let o = &t.ops[i as usize];
        Msg {
            send: o.send,
            peer: o.peer,
        }
    };
    t.events
        .iter()
        .map(|e| match e.kind {
            EvKind::Blocking(i) => EventShape::Blocking(msg(i)),
            EvKind::Batch(a, b) => EventShape::Batch((a..b).map(msg).collect()),
            EvKind::Post(i) => EventShape::Post(msg(i)),
            EvKind::Wait(a, b) => EventShape::Wait(b - a),
            EvKind::Copy(_) => EventShape::Copy,
            EvKind::Coll(_) => EventShape::Collective,
        })
        .collect()
}

type Slot = Arc<OnceLock<Result<Arc<Plan>, String>>>;

/// Plans of one schedule by (world size, scalars), made once per process:
/// the first caller makes the plan while later callers for the same key wait
/// for it (nothing has been sent yet, so no peer waits on them).
#[derive(Debug, Default)]
pub struct PlanCache {
    map: Mutex<BTreeMap<(i64, Vec<i64>), Slot>>,
}

impl PlanCache {
    /// An empty cache (usable in a `static`).
    pub const fn new() -> Self {
        Self {
            map: Mutex::new(BTreeMap::new()),
        }
    }

    /// The plan of `s` at `world` with `scalars` (see [`plan`]).
    pub fn get(&self, s: &Schedule, world: i64, scalars: &[i64]) -> Result<Arc<Plan>, String> {
        let slot: Slot = {
            let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(map.entry((world, scalars.to_vec())).or_default())
        };
        slot.get_or_init(|| plan(s, world, scalars).map(Arc::new)).clone()
    }
}
