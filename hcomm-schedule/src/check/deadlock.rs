//! Step 4: deadlock and collective mismatch, by simulating every rank under
//! rendezvous semantics (language reference, section 7, check 4).
//!
//! A rank stands at an event until the event completes: a blocking `send` or
//! `recv` when its partner has been posted (the partner's rank has reached
//! the partner's event), a `batch` when all of its partners have, a `wait`
//! when the waited requests' partners have, a collective when every member of
//! its group has reached its own matching collective on that group (the k-th
//! call on a group matches the k-th). A rank that cannot move registers with
//! the one rank it waits for and is woken when that rank moves, so the
//! simulation costs O(events).

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::compile::CollKind;
use crate::diag::{DiagKind, Diagnostic};
use crate::situation::{tag_text, Situation};
use crate::trace::{CollCall, EvKind, Unrolled};
use rustc_hash::FxHashMap;

struct CollState {
    arrived: u32,
    /// The first member to arrive: (rank, index into its `colls`).
    first: (u32, u32),
    done: bool,
    waiters: Vec<u32>,
}

struct Sim<'u, 'p, 's> {
    un: &'u Unrolled<'p, 's>,
    pc: Vec<u32>,
    /// Whether the rank's arrival at its current collective was counted.
    arrived: Vec<bool>,
    /// Progress inside the current `batch` / `wait`.
    cursor: Vec<u32>,
    waiters: Vec<Vec<u32>>,
    queued: Vec<bool>,
    queue: VecDeque<u32>,
    colls: FxHashMap<(u32, u32), CollState>,
    /// The rank of each completed event, in the order of completion.
    order: Vec<u32>,
}

/// Runs the simulation; returns the step-4 diagnostics, or when there are
/// none, the order in which events completed (the rank of each; a rank's
/// events complete in its own order). Replaying it is an execution of the
/// schedule, which the postcondition check uses.
pub(crate) fn check(un: &Unrolled<'_, '_>) -> Result<Vec<u32>, Vec<Diagnostic>> {
    let end = simulate(un);
    if end.diags.is_empty() {
        Ok(end.order)
    } else {
        Err(end.diags)
    }
}

/// A cheaper proof that nothing deadlocks, for schedules without
/// collectives: when every step waits only for partners posted at an event
/// index no later than its own, the ranks can advance in lockstep (each rank
/// completes its event `i` once every rank stands at `i` or has finished), so
/// every rank finishes; the lockstep order (rank by rank within each event
/// index) is then an execution, like the order [`check`] returns. Rendezvous
/// waits are monotone, so whether a schedule deadlocks does not depend on the
/// order in which ranks are run, and neither does the data each receive gets
/// (see the postcondition check): the verdict is [`check`]'s. `None`: the
/// proof does not apply; run the simulation.
pub(crate) fn lockstep(un: &Unrolled<'_, '_>) -> Option<Vec<u32>> {
    let posted_by = |ops: &[crate::trace::P2p], k: u32, i: u32| ops.get(k as usize).is_some_and(|o| o.partner_ev <= i);
    let mut longest = 0;
    let mut total = 0;
    for t in &un.ranks {
        for (i, ev) in t.events.iter().enumerate() {
            let i = u32::try_from(i).ok()?;
            let ready = match ev.kind {
                EvKind::Copy(_) | EvKind::Post(_) => true,
                EvKind::Blocking(k) => posted_by(&t.ops, k, i),
                EvKind::Batch(a, b) => (a..b).all(|k| posted_by(&t.ops, k, i)),
                EvKind::Wait(a, b) => {
                    (a..b).all(|w| t.wait_ops.get(w as usize).is_some_and(|&k| posted_by(&t.ops, k, i)))
                }
                EvKind::Coll(_) => false,
            };
            if !ready {
                return None;
            }
        }
        longest = longest.max(t.events.len());
        total += t.events.len();
    }
    let lens: Vec<usize> = un.ranks.iter().map(|t| t.events.len()).collect();
    let mut order = Vec::with_capacity(total);
    for i in 0..longest {
        order.extend((0..lens.len() as u32).filter(|&r| i < lens[r as usize]));
    }
    Some(order)
}

/// Where the simulation stopped (read by the drawing in `timeline`).
pub(crate) struct End {
    /// The rank of each completed event, in the order of completion.
    pub(crate) order: Vec<u32>,
    /// Per rank: the event it stands at (its event count once finished).
    pub(crate) pc: Vec<u32>,
    /// The ranks of the reported wait-for cycle, from its lowest rank.
    pub(crate) cycle: Vec<u32>,
    /// The step-4 diagnostics (empty when every rank finished).
    pub(crate) diags: Vec<Diagnostic>,
}

/// Runs the simulation to its end.
pub(crate) fn simulate(un: &Unrolled<'_, '_>) -> End {
    let n = un.ranks.len();
    let mut sim = Sim {
        un,
        pc: vec![0; n],
        arrived: vec![false; n],
        cursor: vec![0; n],
        waiters: vec![Vec::new(); n],
        queued: vec![true; n],
        queue: (0..n as u32).collect(),
        colls: FxHashMap::default(),
        order: Vec::with_capacity(un.ranks.iter().map(|t| t.events.len()).sum()),
    };
    let mut diags = Vec::new();
    let mut cycle = Vec::new();
    while let Some(r) = sim.queue.pop_front() {
        sim.queued[r as usize] = false;
        if let Err(d) = sim.run(r) {
            diags.push(d);
            break;
        }
    }
    if diags.is_empty() {
        (diags, cycle) = sim.stuck();
    }
    End {
        order: sim.order,
        pc: sim.pc,
        cycle,
        diags,
    }
}

impl Sim<'_, '_, '_> {
    fn wake(&mut self, r: u32) {
        if !self.queued[r as usize] {
            self.queued[r as usize] = true;
            self.queue.push_back(r);
        }
    }

    /// Whether the partner of `op` has been posted.
    #[inline]
    fn partner_posted(&self, op: &crate::trace::P2p) -> bool {
        self.pc[op.partner.0 as usize] >= op.partner_ev
    }

    /// Runs rank `r` as far as it goes.
    fn run(&mut self, r: u32) -> Result<(), Diagnostic> {
        let ri = r as usize;
        let trace = &self.un.ranks[ri];
        let mut moved = false;
        loop {
            let pc = self.pc[ri] as usize;
            let Some(ev) = trace.events.get(pc) else {
                break;
            };
            let blocked_on = match ev.kind {
                EvKind::Copy(_) | EvKind::Post(_) => None,
                EvKind::Blocking(i) => {
                    let op = &trace.ops[i as usize];
                    (!self.partner_posted(op)).then_some(op.partner.0)
                }
                EvKind::Batch(a, b) => self.first_unposted(r, a, b, |k| k),
                EvKind::Wait(a, b) => self.first_unposted(r, a, b, |k| trace.wait_ops[k as usize]),
                EvKind::Coll(ci) => {
                    if self.collective(r, ci)? {
                        None
                    } else {
                        // registered with the collective's waiters
                        break;
                    }
                }
            };
            if let Some(q) = blocked_on {
                self.waiters[q as usize].push(r);
                break;
            }
            self.pc[ri] += 1;
            self.order.push(r);
            self.arrived[ri] = false;
            self.cursor[ri] = 0;
            moved = true;
        }
        if moved {
            // keep the vector's capacity: ranks block again and again
            let mut ws = std::mem::take(&mut self.waiters[ri]);
            for &w in &ws {
                self.wake(w);
            }
            ws.clear();
            self.waiters[ri] = ws;
        }
        Ok(())
    }

    /// For a `batch` (ops `a..b`) or `wait` (wait slots `a..b`), the rank
    /// of the first partner not yet posted.
    fn first_unposted(&mut self, r: u32, a: u32, b: u32, op_of: impl Fn(u32) -> u32) -> Option<u32> {
        let ri = r as usize;
        let ops = &self.un.ranks[ri].ops;
        let mut k = a.max(a + self.cursor[ri]);
        while k < b {
            let op = &ops[op_of(k) as usize];
            if !self.partner_posted(op) {
                self.cursor[ri] = k - a;
                return Some(op.partner.0);
            }
            k += 1;
        }
        None
    }

    /// Arrival at / completion of a collective; `Ok(true)` when it is done.
    fn collective(&mut self, r: u32, ci: u32) -> Result<bool, Diagnostic> {
        let ri = r as usize;
        let c = &self.un.ranks[ri].colls[ci as usize];
        let key = (c.group, c.seq);
        let size = self.un.groups.get(c.group as usize).map_or(1, Vec::len) as u32;
        if !self.arrived[ri] {
            self.arrived[ri] = true;
            let st = self.colls.entry(key).or_insert(CollState {
                arrived: 0,
                first: (r, ci),
                done: false,
                waiters: Vec::new(),
            });
            st.arrived += 1;
            let first = st.first;
            let done = st.arrived >= size;
            if done {
                st.done = true;
                let ws = std::mem::take(&mut st.waiters);
                for w in ws {
                    self.wake(w);
                }
            }
            if first.0 != r {
                let other = &self.un.ranks[first.0 as usize].colls[first.1 as usize];
                if let Some(d) = self.mismatch(first.0, other, r, c) {
                    return Err(d);
                }
            }
            if done {
                return Ok(true);
            }
        }
        let st = self.colls.get_mut(&key);
        match st {
            Some(st) if st.done => Ok(true),
            Some(st) => {
                st.waiters.push(r);
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// Compares two members' calls of the same collective.
    fn mismatch(&self, ra: u32, a: &CollCall, rb: u32, b: &CollCall) -> Option<Diagnostic> {
        let names = &self.un.prog.len_names;
        let len = |c: &CollCall| c.src.as_ref().map(crate::trace::Reg::len);
        let out_len = |c: &CollCall| {
            if c.kind == CollKind::Reduce {
                None
            } else {
                c.dst.as_ref().map(crate::trace::Reg::len)
            }
        };
        let what = if a.kind != b.kind {
            format!(
                "rank {ra} calls `{}` while rank {rb} calls `{}`",
                a.kind.name(),
                b.kind.name()
            )
        } else if a.op != b.op {
            let op = |c: &CollCall| c.op.map_or("", crate::ir::Op::as_str);
            format!(
                "rank {ra} calls `{}` with `{}` while rank {rb} uses `{}`",
                a.kind.name(),
                op(a),
                op(b)
            )
        } else if a.root != b.root {
            format!(
                "rank {ra} calls `{}` with root {} while rank {rb} uses root {}",
                a.kind.name(),
                a.root.unwrap_or(0),
                b.root.unwrap_or(0)
            )
        } else if a.counts != b.counts {
            let name = |c: &CollCall| {
                c.counts
                    .and_then(|i| self.un.prog.s.counts.get(i as usize))
                    .map_or("?", |p| p.name.as_str())
            };
            format!(
                "rank {ra} calls `{}` over the counts `{}` while rank {rb} uses `{}`",
                a.kind.name(),
                name(a),
                name(b)
            )
        } else if a.counts.is_none() && (len(a) != len(b) || out_len(a) != out_len(b)) {
            // a v-collective's lengths differ by rank; each is checked
            // against its own counts in step 3
            let show = |c: &CollCall| {
                let i = len(c).map(|l| l.display(names).to_string()).unwrap_or_default();
                match out_len(c) {
                    Some(o) if c.dst.is_some() => format!("{i} -> {}", o.display(names)),
                    _ => i,
                }
            };
            format!(
                "rank {ra} calls `{}` with {} elements while rank {rb} uses {}",
                a.kind.name(),
                show(a),
                show(b)
            )
        } else {
            return None;
        };
        let ev_b = self.event_of_coll(rb, b);
        let ev_a = self.event_of_coll(ra, a);
        let sit = Situation::plain(self.un.prog, self.un.world, &self.un.scalars);
        let (span_b, loops_b) = ev_b.map_or((self.un.prog.s.span, String::new()), |(st, ctx)| {
            (self.un.span(st), loop_text(self.un, rb, st, ctx))
        });
        let mut d = Diagnostic::new(
            DiagKind::CollectiveMismatch,
            span_b,
            format!("{sit}{loops_b}, {what}"),
        )
        .with_hint("every rank of a group must call the same collectives, with the same operation, root and lengths, in the same order");
        if let Some((st, _)) = ev_a {
            let sa = self.un.span(st);
            if sa != span_b {
                d = d.with_note(sa, format!("rank {ra} calls `{}` here", a.kind.name()));
            }
        }
        Some(d)
    }

    /// The (statement, ctx) of a collective call.
    fn event_of_coll(&self, r: u32, c: &CollCall) -> Option<(u32, u32)> {
        let t = &self.un.ranks[r as usize];
        let ci = t.colls.iter().position(|x| std::ptr::eq(x, c))? as u32;
        t.events
            .iter()
            .find(|e| e.kind == EvKind::Coll(ci))
            .map(|e| (e.stmt, e.ctx))
    }

    /// Nobody can move: report a collective some member skipped, else the
    /// cycle of waiting ranks (also returned).
    fn stuck(&self) -> (Vec<Diagnostic>, Vec<u32>) {
        const SHOWN: usize = 6;
        let un = self.un;
        let finished = |r: u32| self.pc[r as usize] as usize >= un.ranks[r as usize].events.len();
        let blocked: Vec<u32> = (0..un.ranks.len() as u32).filter(|&r| !finished(r)).collect();
        if blocked.is_empty() {
            return (Vec::new(), Vec::new());
        }
        // members of a rank's current collective that are not standing at it
        let missing = |r: u32| -> Vec<u32> {
            let t = &un.ranks[r as usize];
            let ev = t.events[self.pc[r as usize] as usize];
            let EvKind::Coll(ci) = ev.kind else {
                return Vec::new();
            };
            let c = &t.colls[ci as usize];
            un.groups[c.group as usize]
                .iter()
                .copied()
                .filter(|&m| {
                    let tm = &un.ranks[m as usize];
                    let at = tm.events.get(self.pc[m as usize] as usize).is_some_and(|e| {
                        matches!(e.kind, EvKind::Coll(cj)
                            if tm.colls[cj as usize].group == c.group
                                && tm.colls[cj as usize].seq == c.seq)
                    });
                    !at
                })
                .collect()
        };
        for &r in &blocked {
            if let Some(&m) = missing(r).iter().find(|&&m| finished(m)) {
                let t = &un.ranks[r as usize];
                let ev = t.events[self.pc[r as usize] as usize];
                let EvKind::Coll(ci) = ev.kind else { continue };
                let c = &t.colls[ci as usize];
                let sit = Situation::plain(un.prog, un.world, &un.scalars);
                let lt = loop_text(un, r, ev.stmt, ev.ctx);
                let group = if c.group == 0 {
                    String::new()
                } else {
                    " of its `over` group".to_owned()
                };
                let d = Diagnostic::new(
                    DiagKind::CollectiveMismatch,
                    un.span(ev.stmt),
                    format!(
                        "{sit}, rank {r} calls `{}`{lt} but rank {m}{group} finishes without calling it",
                        c.kind.name()
                    ),
                )
                .with_hint("every rank of a group must call the same collectives in the same order");
                return (vec![d], Vec::new());
            }
        }
        // wait-for edges, then the cycle reached from the lowest blocked rank
        let edge = |r: u32| -> (u32, String) {
            let t = &un.ranks[r as usize];
            let ev = t.events[self.pc[r as usize] as usize];
            let lt = loop_text(un, r, ev.stmt, ev.ctx);
            let cur = self.cursor[r as usize];
            match ev.kind {
                EvKind::Blocking(i) => {
                    let o = &t.ops[i as usize];
                    (o.peer, format!("rank {r} blocks in {}{lt}", op_text(o, "")))
                }
                EvKind::Batch(a, _) => {
                    let o = &t.ops[(a + cur) as usize];
                    (
                        o.peer,
                        format!("rank {r} blocks in `batch`{lt} on its {}", op_text(o, "")),
                    )
                }
                EvKind::Wait(a, _) => {
                    let oi = t.wait_ops[(a + cur) as usize];
                    let o = &t.ops[oi as usize];
                    let h = un.prog.handle_names.get(o.handle as usize).copied().unwrap_or("?");
                    let all = un
                        .prog
                        .stmts
                        .get(ev.stmt as usize)
                        .is_some_and(|s| matches!(s.stmt.kind, crate::ir::StmtKind::WaitAll));
                    let op = op_text(o, "i");
                    let text = if all {
                        format!("rank {r} blocks in `wait all`{lt} for its {op} (`{h}`)")
                    } else {
                        format!("rank {r} blocks in `wait {h}`{lt} for its {op}")
                    };
                    (o.peer, text)
                }
                EvKind::Coll(ci) => {
                    let c = &t.colls[ci as usize];
                    let m = missing(r).first().copied().unwrap_or(r);
                    (
                        m,
                        format!("rank {r} blocks in `{}`{lt} waiting for rank {m}", c.kind.name()),
                    )
                }
                EvKind::Copy(_) | EvKind::Post(_) => (r, format!("rank {r} blocks")),
            }
        };
        let mut seen = vec![u32::MAX; un.ranks.len()];
        let mut path: Vec<u32> = Vec::new();
        let mut r = blocked[0];
        while seen[r as usize] == u32::MAX {
            seen[r as usize] = path.len() as u32;
            path.push(r);
            r = edge(r).0;
        }
        let mut cycle: Vec<u32> = path[seen[r as usize] as usize..].to_vec();
        if let Some(pos) = cycle.iter().enumerate().min_by_key(|(_, &x)| x).map(|(i, _)| i) {
            cycle.rotate_left(pos);
        }
        let descs: Vec<String> = cycle.iter().map(|&x| edge(x).1).collect();
        let mut text = descs[0].clone();
        let rest: Vec<&String> = descs.iter().skip(1).take(SHOWN - 1).collect();
        if !rest.is_empty() {
            text.push_str(" while ");
            let joined: Vec<&str> = rest.iter().map(|s| s.as_str()).collect();
            text.push_str(&joined.join(", "));
        }
        if descs.len() > SHOWN {
            let _ = write!(text, ", and {} more ranks wait around the cycle", descs.len() - SHOWN);
        }
        let sit = Situation::plain(un.prog, un.world, &un.scalars);
        let span_of = |x: u32| {
            let t = &un.ranks[x as usize];
            un.span(t.events[self.pc[x as usize] as usize].stmt)
        };
        let primary = span_of(cycle[0]);
        let has_coll = cycle.iter().any(|&x| {
            let t = &un.ranks[x as usize];
            matches!(t.events[self.pc[x as usize] as usize].kind, EvKind::Coll(_))
        });
        let hint = if has_coll {
            "a collective completes only when every member of its group reaches it: no member may first wait for a point-to-point step of a rank that is already in the collective"
        } else if orders_by_parity(&un.prog.s.body) {
            "the schedule already branches on the parity of `rank`, but the ranks of this cycle wait on each other in the same order: post both directions at once with `batch` (or `isend`/`irecv`)"
        } else {
            "post both directions at once with `batch` (or `isend`/`irecv`), or order by parity: even ranks send first while odd ranks receive first"
        };
        let mut d = Diagnostic::new(DiagKind::Deadlock, primary, format!("{sit}, {text}")).with_hint(hint);
        let mut noted = vec![primary];
        for (&x, desc) in cycle.iter().zip(&descs).skip(1) {
            let sp = span_of(x);
            if !noted.contains(&sp) {
                noted.push(sp);
                d = d.with_note(sp, format!("{desc} here"));
            }
        }
        (vec![d], cycle)
    }
}

/// "`send` to rank 1 with tag 2", "`irecv` from rank 0 reduce sum".
fn op_text(o: &crate::trace::P2p, prefix: &str) -> String {
    let reduce = o.reduce.map_or(String::new(), |op| format!(" reduce {}", op.as_str()));
    let (kw, dir) = if o.send { ("send", "to") } else { ("recv", "from") };
    format!("`{prefix}{kw}` {dir} rank {}{}{reduce}", o.peer, tag_text(o.tag))
}

/// " (s = 0, i = 1)" for an event inside loops, else "".
pub(crate) fn loop_text(un: &Unrolled<'_, '_>, r: u32, stmt: u32, ctx: u32) -> String {
    let sit = un.at(r, stmt, ctx);
    if sit.loops.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = sit
        .loops
        .iter()
        .zip(sit.vals)
        .map(|((n, _), v)| format!("{n} = {v}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

/// Whether some `if` of the body branches on the parity of `rank`
/// (`rank % 2`, `rank & 1`): the code already orders by parity.
fn orders_by_parity(body: &[crate::ir::Stmt]) -> bool {
    use crate::ir::{BinOp, ExprKind, NameKind, StmtKind};
    fn parity(e: &crate::ir::Expr) -> bool {
        match &e.kind {
            ExprKind::Binary(op, a, b) => {
                let two = matches!(b.kind, ExprKind::Int(2)) && *op == BinOp::Rem
                    || matches!(b.kind, ExprKind::Int(1)) && *op == BinOp::BitAnd;
                let on_rank = matches!(&a.kind, ExprKind::Name(n) if n.kind == NameKind::Rank);
                (two && on_rank) || parity(a) || parity(b)
            }
            ExprKind::Unary(_, x) => parity(x),
            ExprKind::Call(_, args) => args.iter().any(parity),
            ExprKind::Int(_) | ExprKind::Name(_) | ExprKind::Count(_) => false,
        }
    }
    body.iter().any(|st| match &st.kind {
        StmtKind::If { branches, else_body } => {
            branches.iter().any(|(c, b)| parity(c) || orders_by_parity(b))
                || else_body.as_ref().is_some_and(|b| orders_by_parity(b))
        }
        StmtKind::For { body, .. } | StmtKind::Batch { body } => orders_by_parity(body),
        _ => false,
    })
}
