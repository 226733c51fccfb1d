//! A space-time model of a schedule at one world size: what a drawing shows,
//! as plain data (no graphics).
//!
//! [`timeline`] unrolls the schedule for every rank and runs the checker's
//! passes on it. Each rank is a lane; its steps (blocking `send`/`recv`,
//! `batch`, `isend`/`irecv` posts, `wait`, `copy`/`accumulate`, collectives)
//! sit in columns. The columns follow the checker's deadlock simulation under
//! rendezvous semantics, one column per step: a rank's step stands one column
//! after its previous step, and a step that completes only once its partners
//! are posted (a blocking operation, a `batch`, a `wait`, a collective) stands
//! no earlier than the column where each partner's posting step could start.
//! Matched steps therefore share a column, and the layout is an execution of
//! the schedule, in the order the checker simulated it.
//!
//! A failing check is part of the model ([`Failure`]): a deadlock keeps the
//! steps that completed, the step each rank is stuck at, and the wait-for
//! cycle; unmatched messages (which leave nothing to simulate) are laid out
//! in each rank's program order and dangle; a wrong postcondition marks the
//! rank and the step that last wrote the wrong element.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::check::{completion, deadlock, hazards, matching, postcondition};
use crate::compile::compile;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::Schedule;
use crate::trace::{CollCall, EvKind, Mode, Reg, Unrolled, NONE};
use crate::unroll::unroll;
use rustc_hash::FxHashMap;

/// One schedule at one world size and scalar combination, laid out in
/// columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// The schedule's name.
    pub name: String,
    /// The number of ranks (one lane each).
    pub world: u32,
    /// The scalar values as diagnostics write them (an operator parameter
    /// by its keyword, `op = max`), with their names.
    pub scalars: Vec<(String, String)>,
    /// How the columns were found.
    pub order: Order,
    /// The number of columns used.
    pub columns: u32,
    /// Every step drawn, lane by lane, in each rank's order.
    pub steps: Vec<Step>,
    /// Every message (one per matched send, and one per unmatched
    /// operation).
    pub messages: Vec<Message>,
    /// Every collective call, one per group and call.
    pub collectives: Vec<Collective>,
    /// Non-blocking operations, from their post to their `wait`.
    pub pending: Vec<Pending>,
    /// The first failing check, when one fails.
    pub failure: Option<Failure>,
}

/// How the columns of a [`Timeline`] were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// The checker's rendezvous simulation (steps of one exchange share a
    /// column).
    Simulated,
    /// Each rank's own order, one column per step: messages are unmatched,
    /// so there is nothing to simulate.
    Program,
    /// The device plan ([`crate::plan`]): each rank's group calls,
    /// collectives and local steps in the order a device backend issues
    /// them, a step standing no earlier than its partners' steps.
    Plan,
}

/// One step of one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The rank (lane).
    pub rank: u32,
    /// The column.
    pub column: u32,
    /// What it does.
    pub kind: StepKind,
    /// A short label: `batch`, `send to 1`, `wait r`, `all_gather`, ...
    pub label: String,
    /// The enclosing loop values, e.g. `s = 1` (empty outside loops).
    pub detail: String,
    /// Whether the rank is stuck here (a deadlock).
    pub blocked: bool,
}

/// What a [`Step`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// A blocking `send`.
    Send,
    /// A blocking `recv`.
    Recv,
    /// A `batch` of sends and receives posted together.
    Batch,
    /// An `isend` or `irecv` being posted.
    Post,
    /// A `wait` on requests.
    Wait,
    /// A local `copy` or `accumulate`.
    Copy,
    /// This rank's part of a collective.
    Collective,
}

/// One message: from the sender's posting column to the receiver's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Sending rank.
    pub from: u32,
    /// Receiving rank (the peer an unmatched operation names).
    pub to: u32,
    /// Column of the sender's posting step; `None` for a `recv` without a
    /// send.
    pub send_column: Option<u32>,
    /// Column of the receiver's posting step; `None` for a `send` without a
    /// receive.
    pub recv_column: Option<u32>,
    /// The column where the data moves: the later of the two posts.
    pub column: u32,
    /// The sender's region, e.g. `output[n..2n]` (the receiver's for an
    /// unmatched `recv`).
    pub region: String,
    /// Its length in elements, e.g. `n`.
    pub len: String,
    /// The same length as numbers: the constant term, then one coefficient
    /// per length variable (in the order of [`Schedule::len_vars`], zeros
    /// for the absent ones); `None` when it depends on a count parameter.
    pub len_form: Option<[i64; 4]>,
    /// The message tag.
    pub tag: i64,
    /// The receive's reduction operator (`sum`, ...), if it reduces.
    pub reduce: Option<String>,
    /// Whether one side has no partner (its column is `None`): the
    /// message dangles.
    pub unmatched: bool,
}

impl Message {
    /// `output[n..2n] (n)`, plus the tag and reduction when present.
    pub fn label(&self) -> String {
        let mut s = format!("{} ({})", self.region, self.len);
        if self.tag != 0 {
            let _ = write!(s, " tag {}", self.tag);
        }
        if let Some(op) = &self.reduce {
            let _ = write!(s, " reduce {op}");
        }
        s
    }
}

/// One collective call across its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collective {
    /// `all_gather`, `barrier`, ...
    pub kind: String,
    /// The column where every member completes it.
    pub column: u32,
    /// The members, increasing.
    pub ranks: Vec<u32>,
    /// Whether the group is the whole communicator (not an `over` group).
    pub world_group: bool,
}

/// A non-blocking operation from its post to the `wait` that completes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The rank.
    pub rank: u32,
    /// Column of the `isend`/`irecv`.
    pub post_column: u32,
    /// Column of the `wait`; `None` when it is never reached.
    pub wait_column: Option<u32>,
    /// `isend output[0..n] to 1`.
    pub label: String,
}

/// The first failing check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The checker's diagnostic.
    pub diagnostic: Diagnostic,
    /// What to mark on the drawing.
    pub marks: Vec<Mark>,
}

/// A mark of a [`Failure`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// On a deadlock's wait-for cycle: `rank`, stuck at `column`, waits for
    /// `waits_for`.
    Waits {
        /// The waiting rank.
        rank: u32,
        /// The column of its stuck step.
        column: u32,
        /// The rank it waits for.
        waits_for: u32,
    },
    /// [`Timeline::messages`]`[message]` has no partner.
    Unmatched {
        /// Index into [`Timeline::messages`].
        message: usize,
    },
    /// The first output element that the postcondition finds wrong.
    WrongOutput {
        /// The rank that ends with it.
        rank: u32,
        /// The column of the step that wrote it; `None` when nothing wrote
        /// it, or when its statement ran more than once on the rank.
        column: Option<u32>,
        /// `output block 2`, as the diagnostic says.
        place: String,
    },
}

/// Lays out schedule `s` at `world` with `scalars` (in the order of
/// [`Schedule::scalars`]) and runs the checks on it. `#[requires]` is not
/// consulted. `Err` when there is nothing to draw: the schedule does not
/// compile, or its evaluation or a rank or region range fails (the
/// diagnostic says which).
pub fn timeline(s: &Schedule, world: i64, scalars: &[i64]) -> Result<Timeline, Diagnostic> {
    let (prog, diags) = compile(s);
    if let Some(d) = diags.into_iter().next() {
        return Err(d);
    }
    if scalars.len() != s.scalars.len() || world < 1 {
        return Err(Diagnostic::new(
            DiagKind::EvaluationError,
            s.span,
            format!(
                "`{}` is drawn at a world size of at least 1 with {} scalar values, not world = {world} with {}",
                s.name,
                s.scalars.len(),
                scalars.len()
            ),
        ));
    }
    let mut un = unroll(&prog, world, scalars).map_err(|d| d.into_iter().next().unwrap_or_else(|| no_events(s)))?;
    let unmatched = matching::check(&mut un);
    let mut lay = Layout::new(&un);
    if !unmatched.is_empty() {
        lay.program_order();
        let mut t = lay.finish(Order::Program);
        let marks = t
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.unmatched)
            .map(|(message, _)| Mark::Unmatched { message })
            .collect();
        t.failure = first(unmatched).map(|diagnostic| Failure { diagnostic, marks });
        return Ok(t);
    }
    let end = deadlock::simulate(&un);
    lay.replay(&end.order);
    let failure = if end.diags.is_empty() {
        lay.postcondition_or_other(&end.order)
    } else {
        let marks = lay.stuck(&end);
        first(end.diags).map(|diagnostic| Failure { diagnostic, marks })
    };
    let mut t = lay.finish(Order::Simulated);
    t.failure = failure;
    Ok(t)
}

/// Lays out the device plan of `s` at `world` with `scalars`: the steps are
/// the plan's group calls (shaded like batches), collectives, local copies
/// and messages to self, in each rank's issue order. A schedule that fails
/// the checker there has no plan; it is drawn as [`timeline`] draws it,
/// failure included.
pub fn plan_timeline(s: &Schedule, world: i64, scalars: &[i64]) -> Result<Timeline, Diagnostic> {
    let checked = timeline(s, world, scalars)?;
    if checked.failure.is_some() {
        return Ok(checked);
    }
    let no_plan = |e: String| Diagnostic::new(DiagKind::EvaluationError, s.span, e);
    let plan = crate::plan::plan(s, world, scalars).map_err(no_plan)?;
    let (prog, _) = compile(s);
    let mut un = unroll(&prog, world, scalars).map_err(|d| first(d).unwrap_or_else(|| no_events(s)))?;
    matching::check(&mut un);
    Ok(PlanLayout::new(&un, &plan).finish())
}

fn first(d: Vec<Diagnostic>) -> Option<Diagnostic> {
    d.into_iter().next()
}

fn no_events(s: &Schedule) -> Diagnostic {
    Diagnostic::new(
        DiagKind::EvaluationError,
        s.span,
        format!("`{}` could not be unrolled", s.name),
    )
}

/// The column of every event, found by replaying the simulated order.
struct Layout<'u, 'p, 's> {
    un: &'u Unrolled<'p, 's>,
    /// Per rank, per event: its column, or [`NONE`] when not reached.
    col: Vec<Vec<u32>>,
    /// Per rank, per event: whether it completed.
    done: Vec<Vec<bool>>,
    /// Per rank, per event: whether the rank is stuck there.
    blocked: Vec<Vec<bool>>,
}

impl<'u, 'p, 's> Layout<'u, 'p, 's> {
    fn new(un: &'u Unrolled<'p, 's>) -> Self {
        let per_rank = |v| un.ranks.iter().map(|t| vec![v; t.events.len()]).collect::<Vec<_>>();
        Self {
            un,
            col: per_rank(NONE),
            done: un.ranks.iter().map(|t| vec![false; t.events.len()]).collect(),
            blocked: un.ranks.iter().map(|t| vec![false; t.events.len()]).collect(),
        }
    }

    /// The first column where event `e` of rank `r` can start: the one after
    /// the rank's previous step.
    fn start(&self, r: u32, e: u32) -> u32 {
        if e == 0 {
            0
        } else {
            self.col[r as usize][e as usize - 1].saturating_add(1)
        }
    }

    /// Each rank's events in its own order.
    fn program_order(&mut self) {
        for (r, t) in self.un.ranks.iter().enumerate() {
            for e in 0..t.events.len() {
                self.col[r][e] = e as u32;
                self.done[r][e] = true;
            }
        }
    }

    /// Replays the simulated completion order.
    fn replay(&mut self, order: &[u32]) {
        let un = self.un;
        // the event of each member of each collective call
        let mut calls: FxHashMap<(u32, u32), Vec<(u32, u32)>> = FxHashMap::default();
        for (r, t) in un.ranks.iter().enumerate() {
            for (e, ev) in t.events.iter().enumerate() {
                if let EvKind::Coll(ci) = ev.kind {
                    let c = &t.colls[ci as usize];
                    calls.entry((c.group, c.seq)).or_default().push((r as u32, e as u32));
                }
            }
        }
        let mut pc = vec![0_u32; un.ranks.len()];
        for &r in order {
            let t = &un.ranks[r as usize];
            let e = pc[r as usize];
            pc[r as usize] += 1;
            let Some(ev) = t.events.get(e as usize) else { continue };
            let partner = |k: u32| {
                let o = &t.ops[k as usize];
                self.start(o.partner.0, o.partner_ev)
            };
            let mut c = self.start(r, e);
            match ev.kind {
                EvKind::Copy(_) | EvKind::Post(_) => {}
                EvKind::Blocking(i) => c = c.max(partner(i)),
                EvKind::Batch(a, b) => c = (a..b).map(partner).fold(c, u32::max),
                EvKind::Wait(a, b) => c = (a..b).map(|k| partner(t.wait_ops[k as usize])).fold(c, u32::max),
                EvKind::Coll(ci) => {
                    let call = &t.colls[ci as usize];
                    if let Some(members) = calls.get(&(call.group, call.seq)) {
                        c = members.iter().map(|&(m, f)| self.start(m, f)).fold(c, u32::max);
                    }
                }
            }
            self.col[r as usize][e as usize] = c;
            self.done[r as usize][e as usize] = true;
        }
    }

    /// After a deadlock: places each rank's stuck step and returns the
    /// marks of the wait-for cycle.
    fn stuck(&mut self, end: &deadlock::End) -> Vec<Mark> {
        let un = self.un;
        for (r, t) in un.ranks.iter().enumerate() {
            let e = end.pc[r];
            if (e as usize) < t.events.len() {
                self.col[r][e as usize] = self.start(r as u32, e);
                self.blocked[r][e as usize] = true;
            }
        }
        let n = end.cycle.len();
        end.cycle
            .iter()
            .enumerate()
            .filter_map(|(i, &r)| {
                let e = *end.pc.get(r as usize)?;
                let column = *self.col.get(r as usize)?.get(e as usize)?;
                let waits_for = if n > 1 { end.cycle[(i + 1) % n] } else { r };
                Some(Mark::Waits {
                    rank: r,
                    column,
                    waits_for,
                })
            })
            .collect()
    }

    /// Steps 5-7 after a simulation that finished.
    fn postcondition_or_other(&self, order: &[u32]) -> Option<Failure> {
        let un = self.un;
        for d in [hazards::check(un), completion::check(un)] {
            if let Some(diagnostic) = first(d) {
                return Some(Failure {
                    diagnostic,
                    marks: Vec::new(),
                });
            }
        }
        let (d, wrong) = postcondition::check_located(un, order);
        let diagnostic = first(d)?;
        let marks = wrong
            .map(|w| {
                let t = &un.ranks[w.rank as usize];
                // the writer is a statement: its step when it ran once on
                // this rank (in a loop the iteration is unknown)
                let mut steps: Vec<u32> = t
                    .events
                    .iter()
                    .enumerate()
                    .filter(|(_, ev)| ev.stmt == w.writer)
                    .map(|(e, _)| e as u32)
                    .chain(t.ops.iter().filter(|o| o.stmt == w.writer).map(|o| o.ev))
                    .collect();
                steps.dedup();
                let column = match steps[..] {
                    [e] if w.writer != NONE => Some(self.col[w.rank as usize][e as usize]),
                    _ => None,
                };
                Mark::WrongOutput {
                    rank: w.rank,
                    column,
                    place: w.place,
                }
            })
            .into_iter()
            .collect();
        Some(Failure { diagnostic, marks })
    }

    fn finish(self, order: Order) -> Timeline {
        let un = self.un;
        let mut t = Timeline::empty(un, order);
        let mut seen_calls: HashSet<(u32, u32)> = HashSet::new();
        for (r, rt) in un.ranks.iter().enumerate() {
            let ru = r as u32;
            for (e, ev) in rt.events.iter().enumerate() {
                let column = self.col[r][e];
                if column == NONE {
                    continue;
                }
                t.columns = t.columns.max(column + 1);
                let handle = |k: u32| {
                    let o = &rt.ops[k as usize];
                    un.prog.handle_names.get(o.handle as usize).copied().unwrap_or("?")
                };
                let (kind, label) = match ev.kind {
                    EvKind::Blocking(i) => {
                        let o = &rt.ops[i as usize];
                        if o.send {
                            (StepKind::Send, format!("send to {}", o.peer))
                        } else {
                            (StepKind::Recv, format!("recv from {}", o.peer))
                        }
                    }
                    EvKind::Batch(..) => (StepKind::Batch, "batch".to_owned()),
                    EvKind::Post(i) => {
                        let kw = if rt.ops[i as usize].send { "isend" } else { "irecv" };
                        (StepKind::Post, format!("{kw} {}", handle(i)))
                    }
                    EvKind::Wait(a, b) => {
                        let hs: Vec<&str> = (a..b).map(|k| handle(rt.wait_ops[k as usize])).collect();
                        (StepKind::Wait, format!("wait {}", hs.join(", ")))
                    }
                    EvKind::Copy(i) => {
                        let kw = if rt.copies[i as usize].op.is_some() {
                            "accumulate"
                        } else {
                            "copy"
                        };
                        (StepKind::Copy, kw.to_owned())
                    }
                    EvKind::Coll(ci) => {
                        let c = &rt.colls[ci as usize];
                        if self.done[r][e] {
                            add_call(&mut t, &mut seen_calls, un, c, column);
                        }
                        (StepKind::Collective, c.kind.name().to_owned())
                    }
                };
                // " (s = 1)" as the diagnostics say it, without the brackets
                let loops = deadlock::loop_text(un, ru, ev.stmt, ev.ctx);
                let detail = loops.trim_start_matches(" (").trim_end_matches(')');
                t.steps.push(Step {
                    rank: ru,
                    column,
                    kind,
                    label,
                    detail: detail.to_owned(),
                    blocked: self.blocked[r][e],
                });
            }
            self.ops(ru, &mut t);
        }
        t
    }

    /// The messages and pending operations of rank `r`.
    fn ops(&self, r: u32, t: &mut Timeline) {
        let un = self.un;
        let rt = &un.ranks[r as usize];
        let at = |q: u32, e: u32| {
            let (q, e) = (q as usize, e as usize);
            (self.done.get(q)?.get(e).copied()?).then(|| self.col[q][e])
        };
        for o in &rt.ops {
            if o.mode == Mode::Nonblocking {
                if let Some(post_column) = at(r, o.ev) {
                    let (region, _) = region(un, r, &un.regs[o.reg as usize]);
                    let (kw, dir) = if o.send { ("isend", "to") } else { ("irecv", "from") };
                    t.pending.push(Pending {
                        rank: r,
                        post_column,
                        wait_column: (o.done != NONE).then(|| at(r, o.done)).flatten(),
                        label: format!("{kw} {region} {dir} {}", o.peer),
                    });
                }
            }
            let unmatched = o.partner.0 == NONE;
            if !o.send && !unmatched {
                continue; // drawn with its send
            }
            let Some(own) = at(r, o.ev) else { continue };
            let other = if unmatched {
                None
            } else {
                let Some(c) = at(o.partner.0, o.partner_ev) else {
                    continue;
                };
                Some(c)
            };
            let (send_column, recv_column) = if o.send { (Some(own), other) } else { (other, Some(own)) };
            let reg = &un.regs[o.reg as usize];
            let (region, len) = region(un, r, reg);
            let reduce = if unmatched {
                o.reduce
            } else {
                un.ranks[o.partner.0 as usize].ops[o.partner.1 as usize].reduce
            };
            let (from, to) = if o.send { (r, o.peer) } else { (o.peer, r) };
            t.messages.push(Message {
                from,
                to,
                send_column,
                recv_column,
                column: other.map_or(own, |c| c.max(own)),
                region,
                len,
                len_form: reg.len().written_coefficients(&un.prog.len_names),
                tag: o.tag,
                reduce: reduce.map(|op| op.as_str().to_owned()),
                unmatched,
            });
        }
    }
}

/// The columns of a device plan's steps.
struct PlanLayout<'u, 'p, 's> {
    un: &'u Unrolled<'p, 's>,
    plan: &'u crate::plan::Plan,
    /// Per rank, per op: the plan step that issues it.
    step_of_op: Vec<Vec<u32>>,
    /// Per rank, per plan step: its column.
    col: Vec<Vec<u32>>,
}

impl<'u, 'p, 's> PlanLayout<'u, 'p, 's> {
    fn new(un: &'u Unrolled<'p, 's>, plan: &'u crate::plan::Plan) -> Self {
        use crate::plan::Step as P;
        let mut step_of_op: Vec<Vec<u32>> = un.ranks.iter().map(|t| vec![NONE; t.ops.len()]).collect();
        for (r, rp) in plan.ranks.iter().enumerate() {
            for (k, st) in rp.steps.iter().enumerate() {
                let refs: Vec<crate::plan::OpRef> = match st {
                    P::Group(ops) => ops.clone(),
                    P::SelfMessage { send, recv } => vec![*send, *recv],
                    P::Local(_) | P::Collective(_) => Vec::new(),
                };
                for o in refs {
                    if let Some(i) = op_index(un, r, o) {
                        step_of_op[r][i] = k as u32;
                    }
                }
            }
        }
        let col = plan.ranks.iter().map(|rp| vec![0; rp.steps.len()]).collect();
        let mut lay = Self {
            un,
            plan,
            step_of_op,
            col,
        };
        lay.relax();
        lay
    }

    /// The plan steps of the partners of rank `r`'s step `k`.
    fn partners(&self, r: usize, k: usize, calls: &FxHashMap<(u32, u32), Vec<(u32, u32)>>) -> Vec<(u32, u32)> {
        use crate::plan::Step as P;
        let t = &self.un.ranks[r];
        match &self.plan.ranks[r].steps[k] {
            P::Group(ops) => ops
                .iter()
                .filter_map(|o| op_index(self.un, r, *o))
                .filter_map(|i| {
                    let (q, j) = t.ops[i].partner;
                    let step = *self.step_of_op.get(q as usize)?.get(j as usize)?;
                    (step != NONE).then_some((q, step))
                })
                .collect(),
            P::Collective(e) => match t.events.get(*e as usize).map(|ev| ev.kind) {
                Some(EvKind::Coll(ci)) => {
                    let c = &t.colls[ci as usize];
                    calls.get(&(c.group, c.seq)).cloned().unwrap_or_default()
                }
                _ => Vec::new(),
            },
            P::SelfMessage { .. } | P::Local(_) => Vec::new(),
        }
    }

    /// Raises columns until every step stands after its rank's previous step
    /// and no earlier than its partners' (a plan completes, so this ends).
    fn relax(&mut self) {
        use crate::plan::Step as P;
        // each collective call's (rank, plan step), by (group, sequence)
        let mut calls: FxHashMap<(u32, u32), Vec<(u32, u32)>> = FxHashMap::default();
        for (r, rp) in self.plan.ranks.iter().enumerate() {
            for (k, st) in rp.steps.iter().enumerate() {
                if let P::Collective(e) = st {
                    if let Some(EvKind::Coll(ci)) = self.un.ranks[r].events.get(*e as usize).map(|ev| ev.kind) {
                        let c = &self.un.ranks[r].colls[ci as usize];
                        calls.entry((c.group, c.seq)).or_default().push((r as u32, k as u32));
                    }
                }
            }
        }
        let partners: Vec<Vec<Vec<(u32, u32)>>> = (0..self.plan.ranks.len())
            .map(|r| {
                (0..self.plan.ranks[r].steps.len())
                    .map(|k| self.partners(r, k, &calls))
                    .collect()
            })
            .collect();
        let bound: usize = self.plan.ranks.iter().map(|rp| rp.steps.len()).sum::<usize>() + 1;
        for _ in 0..bound {
            let mut changed = false;
            for (r, steps) in partners.iter().enumerate() {
                for (k, of_step) in steps.iter().enumerate() {
                    let mut c = if k == 0 { 0 } else { self.col[r][k - 1] + 1 };
                    for &(q, j) in of_step {
                        c = c.max(self.col[q as usize][j as usize]);
                    }
                    if c != self.col[r][k] {
                        self.col[r][k] = c;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// The plan's steps and messages.
    fn finish(self) -> Timeline {
        use crate::plan::Step as P;
        let un = self.un;
        let mut t = Timeline::empty(un, Order::Plan);
        let mut seen_calls: HashSet<(u32, u32)> = HashSet::new();
        for (r, rp) in self.plan.ranks.iter().enumerate() {
            let rt = &un.ranks[r];
            for (k, st) in rp.steps.iter().enumerate() {
                let column = self.col[r][k];
                t.columns = t.columns.max(column + 1);
                let (kind, label, detail) = match st {
                    P::Group(ops) => {
                        let n = ops.len();
                        let what = if n == 1 {
                            "1 operation".to_owned()
                        } else {
                            format!("{n} operations")
                        };
                        (StepKind::Batch, "group call".to_owned(), what)
                    }
                    P::SelfMessage { .. } => (StepKind::Copy, "to self".to_owned(), String::new()),
                    P::Local(e) => {
                        let acc = match rt.events.get(*e as usize).map(|ev| ev.kind) {
                            Some(EvKind::Copy(i)) => rt.copies[i as usize].op.is_some(),
                            _ => false,
                        };
                        let kw = if acc { "accumulate" } else { "copy" };
                        (StepKind::Copy, kw.to_owned(), String::new())
                    }
                    P::Collective(e) => {
                        let Some(EvKind::Coll(ci)) = rt.events.get(*e as usize).map(|ev| ev.kind) else {
                            continue;
                        };
                        let c = &rt.colls[ci as usize];
                        add_call(&mut t, &mut seen_calls, un, c, column);
                        (StepKind::Collective, c.kind.name().to_owned(), String::new())
                    }
                };
                t.steps.push(Step {
                    rank: r as u32,
                    column,
                    kind,
                    label,
                    detail,
                    blocked: false,
                });
            }
            for (i, o) in rt.ops.iter().enumerate() {
                let (q, j) = o.partner;
                if !o.send || q == NONE || q as usize == r {
                    continue; // receives are drawn with their send; self messages are steps
                }
                let at = |rank: usize, op: usize| {
                    let k = *self.step_of_op.get(rank)?.get(op)?;
                    (k != NONE).then(|| self.col[rank][k as usize])
                };
                let (Some(sc), Some(rc)) = (at(r, i), at(q as usize, j as usize)) else {
                    continue;
                };
                let reg = &un.regs[o.reg as usize];
                let (region, len) = region(un, r as u32, reg);
                t.messages.push(Message {
                    from: r as u32,
                    to: q,
                    send_column: Some(sc),
                    recv_column: Some(rc),
                    column: sc.max(rc),
                    region,
                    len,
                    len_form: reg.len().written_coefficients(&un.prog.len_names),
                    tag: o.tag,
                    reduce: un.ranks[q as usize].ops[j as usize]
                        .reduce
                        .map(|op| op.as_str().to_owned()),
                    unmatched: false,
                });
            }
        }
        t
    }
}

impl Timeline {
    /// Nothing drawn yet.
    fn empty(un: &Unrolled<'_, '_>, order: Order) -> Self {
        let s = un.prog.s;
        Timeline {
            name: s.name.clone(),
            world: un.ranks.len() as u32,
            scalars: s
                .scalars
                .iter()
                .zip(&un.scalars)
                .map(|(x, &v)| (x.name.clone(), x.show(v)))
                .collect(),
            order,
            columns: 0,
            steps: Vec::new(),
            messages: Vec::new(),
            collectives: Vec::new(),
            pending: Vec::new(),
            failure: None,
        }
    }
}

/// Adds the collective call `c` standing at `column`, once per call.
fn add_call(t: &mut Timeline, seen: &mut HashSet<(u32, u32)>, un: &Unrolled<'_, '_>, c: &CollCall, column: u32) {
    if seen.insert((c.group, c.seq)) {
        t.collectives.push(Collective {
            kind: c.kind.name().to_owned(),
            column,
            ranks: un.groups.get(c.group as usize).cloned().unwrap_or_default(),
            world_group: c.group == 0,
        });
    }
}

/// `output[n..2 * n]` and its length `n`: a region of rank `r`.
fn region(un: &Unrolled<'_, '_>, r: u32, reg: &Reg) -> (String, String) {
    let names = &un.prog.len_names;
    let buf = un.ranks[r as usize]
        .bufs
        .get(reg.buf as usize)
        .map_or("?", |b| b.name.as_str());
    (
        format!("{buf}[{}..{}]", reg.start.display(names), reg.end.display(names)),
        reg.len().display(names).to_string(),
    )
}

/// The index among rank `r`'s operations of the operation `o` names.
fn op_index(un: &Unrolled<'_, '_>, r: usize, o: crate::plan::OpRef) -> Option<usize> {
    let t = un.ranks.get(r)?;
    match t.events.get(o.event as usize)?.kind {
        EvKind::Blocking(i) | EvKind::Post(i) => Some(i as usize),
        EvKind::Batch(a, b) => (a + o.index < b).then_some((a + o.index) as usize),
        _ => None,
    }
}
