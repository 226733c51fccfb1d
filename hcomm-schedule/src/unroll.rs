//! Unrolling: the body run for every rank at one world size and one scalar
//! combination, giving each rank's list of events (steps 1 and 2 are checked
//! on the way, and request bookkeeping for step 6 is recorded).

use std::collections::HashMap;

use crate::cexpr::{eval_c, eval_fast, eval_lin, CExpr, Fail};
use crate::compile::{Block, BufSlot, CColl, CKind, CRKind, CRegion, CStmt, P2pStmt, Prog, RANK, WORLD};
use crate::diag::{stmt_key, DiagKind, Diagnostic, Sink};
use crate::ir::{Expr, Op, OpExpr, StmtKind};
use crate::lin::Lin;
use crate::ranges;
use crate::situation::Situation;
use crate::trace::{
    BufInfo, CollCall, EvKind, Event, LocalCopy, Mode, P2p, RankTrace, Reg, RequestIssue, Unrolled, NONE,
};
use rustc_hash::FxHashMap;

/// At most this many loop iterations per rank (language reference, section 7, check 1).
pub(crate) const MAX_ITERATIONS: u64 = 1 << 24;

/// At most this many events plus operations per rank (indices are `u32`;
/// loops are capped separately, but one iteration may hold many steps).
pub(crate) const MAX_STEPS: usize = 1 << 28;

/// Region interning, shared by all ranks.
struct Regs {
    list: Vec<Reg>,
    ids: FxHashMap<Reg, u32>,
    /// (region node, base id or buffer, index, count) → id.
    memo: FxHashMap<(u32, u32, i64, i64), u32>,
    /// Per chunk node: ids by chunk index for the first (base, count) the
    /// node met, which is the only one in most schedules (a lookup without
    /// hashing); other bases and counts go through `memo`.
    chunks: Vec<Option<ChunkMemo>>,
    /// Per whole-parameter node: its id, or [`NONE`].
    whole: Vec<u32>,
    /// Per node `param.chunk(i)` (a chunk of a whole parameter into `world`
    /// parts, at most [`DENSE_CHUNKS`]): ids by chunk index, [`NONE`] when
    /// not computed yet; empty for other nodes. The base and the count are
    /// the same for the whole unrolling, so the index alone is the key.
    simple: Vec<Vec<u32>>,
    /// (region node, base id, line, index) → id of a part that passed its
    /// checks.
    parts: FxHashMap<(u32, u32, crate::counts::Line, i64), u32>,
}

/// Chunk ids of one region node for one base region and count.
struct ChunkMemo {
    base: u32,
    parts: i64,
    /// Indexed by chunk index, [`NONE`] when not computed yet.
    ids: Vec<u32>,
}

/// Chunk counts up to this use a [`ChunkMemo`].
const DENSE_CHUNKS: i64 = 1 << 16;

impl Regs {
    fn new(nodes: usize) -> Self {
        Self {
            list: Vec::new(),
            ids: FxHashMap::default(),
            memo: FxHashMap::default(),
            chunks: (0..nodes).map(|_| None).collect(),
            whole: vec![NONE; nodes],
            simple: vec![Vec::new(); nodes],
            parts: FxHashMap::default(),
        }
    }

    /// Records `rid` as chunk `index` of the `param.chunk(i)` node `node`
    /// with `parts == world` chunks.
    fn remember_simple(&mut self, node: u32, index: i64, parts: i64, rid: u32) {
        if !(1..=DENSE_CHUNKS).contains(&parts) {
            return;
        }
        if let Some(t) = self.simple.get_mut(node as usize) {
            if t.is_empty() {
                *t = vec![NONE; parts as usize];
            }
            if let Some(slot) = usize::try_from(index).ok().and_then(|i| t.get_mut(i)) {
                *slot = rid;
            }
        }
    }

    /// The memoized id of chunk `index` of `parts` of region `base` at
    /// region node `node`.
    #[inline]
    fn chunk(&self, node: u32, base: u32, index: i64, parts: i64) -> Option<u32> {
        if let Some(Some(m)) = self.chunks.get(node as usize) {
            if m.base == base && m.parts == parts {
                return usize::try_from(index)
                    .ok()
                    .and_then(|i| m.ids.get(i))
                    .copied()
                    .filter(|&id| id != NONE);
            }
        }
        self.memo.get(&(node, base, index, parts)).copied()
    }

    fn remember_chunk(&mut self, node: u32, base: u32, index: i64, parts: i64, id: u32) {
        if let Some(entry) = self.chunks.get_mut(node as usize) {
            if entry.is_none() && (1..=DENSE_CHUNKS).contains(&parts) {
                *entry = Some(ChunkMemo {
                    base,
                    parts,
                    ids: vec![NONE; parts as usize],
                });
            }
            if let Some(m) = entry {
                if m.base == base && m.parts == parts {
                    if let Some(slot) = usize::try_from(index).ok().and_then(|i| m.ids.get_mut(i)) {
                        *slot = id;
                        return;
                    }
                }
            }
        }
        self.memo.insert((node, base, index, parts), id);
    }

    fn intern(&mut self, r: Reg) -> u32 {
        let next = self.list.len() as u32;
        let id = *self.ids.entry(r.clone()).or_insert(next);
        if id == next {
            self.list.push(r);
        }
        id
    }
}

/// Group interning and the `over` cache, shared by all ranks.
struct Groups {
    sets: Vec<Vec<u32>>,
    ids: HashMap<Vec<u32>, u32>,
    /// (statement, values of the `over` key slots) → group of each rank.
    over: HashMap<(u32, Vec<i64>), Vec<u32>>,
}

impl Groups {
    fn intern(&mut self, members: Vec<u32>) -> u32 {
        if let Some(&id) = self.ids.get(&members) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(members.clone());
        self.ids.insert(members, id);
        id
    }
}

/// Unrolls `prog` for every rank. `Err` holds the diagnostics of step 1
/// (evaluation) or, when there are none, step 2 (ranges).
pub(crate) fn unroll<'p, 's>(
    prog: &'p Prog<'s>,
    world: i64,
    scalars: &[i64],
) -> Result<Unrolled<'p, 's>, Vec<Diagnostic>> {
    unroll_each(prog, world, scalars, |_, _, trace, ranks| {
        ranks.push(trace);
        true
    })
}

/// [`unroll`], handing each rank's trace, as soon as it is unrolled, to
/// `each` with the regions interned so far and the traces kept so far;
/// `each` keeps it (pushes it) or not, and returns whether to go on. When
/// it stops early, or keeps only some traces, the result holds what was
/// kept (the caller knows what that means).
pub(crate) fn unroll_each<'p, 's>(
    prog: &'p Prog<'s>,
    world: i64,
    scalars: &[i64],
    mut each: impl FnMut(&[Reg], u32, RankTrace, &mut Vec<RankTrace>) -> bool,
) -> Result<Unrolled<'p, 's>, Vec<Diagnostic>> {
    let mut un = Unrolled {
        prog,
        world,
        scalars: scalars.to_vec(),
        ranks: Vec::new(),
        groups: Vec::new(),
        regs: Vec::new(),
    };
    let Ok(nranks) = u32::try_from(world) else {
        let d = Diagnostic::new(
            DiagKind::EvaluationError,
            prog.s.span,
            format!("world = {world} is not a valid communicator size"),
        );
        return Err(vec![d]);
    };
    if nranks == 0 || nranks == NONE {
        let d = Diagnostic::new(
            DiagKind::EvaluationError,
            prog.s.span,
            format!("world = {world} is not a valid communicator size"),
        );
        return Err(vec![d]);
    }
    for (sc, v) in prog.s.scalars.iter().zip(scalars) {
        if sc.op && Op::from_index(*v).is_none() {
            let d = Diagnostic::new(
                DiagKind::EvaluationError,
                sc.span,
                format!(
                    "{} = {v} is not an operator (0 = sum, 1 = prod, 2 = max, 3 = min)",
                    sc.name
                ),
            );
            return Err(vec![d]);
        }
    }
    let mut groups = Groups {
        sets: Vec::new(),
        ids: HashMap::new(),
        over: HashMap::new(),
    };
    groups.intern((0..nranks).collect());
    let mut regs = Regs::new(prog.nregions);

    let mut env = vec![0_i64; prog.nslots];
    env[WORLD as usize] = world;
    for (i, v) in scalars.iter().enumerate() {
        if let Some(slot) = env.get_mut(crate::compile::FIRST_SCALAR as usize + i) {
            *slot = *v;
        }
    }
    crate::counts::set_params(prog.s.counts.iter().map(|c| (c.name.clone(), c.matrix)).collect());
    // Parameter lengths are the same on every rank, unless a count makes
    // them depend on `rank` (then they are evaluated per rank below).
    let mut step1 = Sink::default();
    let mut step2 = Sink::default();
    let param_lens = |env: &[i64], step1: &mut Sink, rank: Option<u32>| {
        let mut bufs = Vec::with_capacity(prog.buf_len.len());
        for (i, e) in prog.buf_len.iter().enumerate() {
            let len = match eval_lin(e, env) {
                Ok(l) => l,
                Err(f) => {
                    let sit = Situation::plain(prog, world, scalars);
                    step1.push(crate::diag::span_key(e.span), fail_diag(f, &sit, rank));
                    Lin::constant(0)
                }
            };
            bufs.push(BufInfo {
                len,
                param: Some(i as u32),
                name: prog.s.buffers[i].name.clone(),
            });
        }
        bufs
    };
    let mut bufs = param_lens(&env, &mut step1, None);
    if prog.rank_lens {
        step1 = Sink::default();
        for r in 0..nranks {
            let mut env_r = env.clone();
            env_r[RANK as usize] = i64::from(r);
            param_lens(&env_r, &mut step1, Some(r));
        }
    }
    if !step1.is_empty() {
        return Err(step1.into_vec());
    }
    let mut hint = (0, 0, 0);
    let mut fixed = vec![(NONE, 0_u32); prog.stmts.len()];
    un.ranks.reserve(nranks as usize);
    for r in 0..nranks {
        let mut env_r = env.clone();
        env_r[RANK as usize] = i64::from(r);
        if prog.rank_lens {
            // this rank's parameter lengths, and no memo of another's
            bufs = param_lens(&env_r, &mut step1, Some(r));
            regs.whole.fill(NONE);
            regs.simple.iter_mut().for_each(Vec::clear);
        }
        let mut ru = RankUnroller {
            prog,
            world,
            nranks,
            rank: r,
            env: env_r,
            scratch: vec![NONE; prog.nscratch],
            handles: vec![NONE; prog.nhandles],
            orphans: Vec::new(),
            loop_vals: Vec::new(),
            ctx_gen: 0,
            last_gen: u64::MAX,
            last_ctx: 0,
            iters: 0,
            // ranks usually unroll alike: the previous one's sizes save the
            // vectors' regrowth
            out: RankTrace {
                bufs: bufs.clone(),
                events: Vec::with_capacity(hint.0),
                ops: Vec::with_capacity(hint.1),
                ctx: Vec::with_capacity(hint.2),
                ..RankTrace::default()
            },
            groups: &mut groups,
            regs: &mut regs,
            coll_seq: Vec::new(),
            step1: &mut step1,
            step2: &mut step2,
            scalars,
            fixed: &mut fixed,
            self_posted: Vec::new(),
        };
        // An evaluation error ends this rank's unrolling; others go on so
        // that every statement at fault is reported once.
        if ru.block(&prog.body, false).is_ok() {
            ru.end_block(&prog.body);
            // what no `wait all` completed
            for op in std::mem::take(&mut ru.orphans) {
                ru.out.issues.push(RequestIssue::Unwaited { op });
            }
        }
        let trace = ru.out;
        hint = (trace.events.len(), trace.ops.len(), trace.ctx.len());
        if !each(&regs.list, r, trace, &mut un.ranks) || step1.is_full() {
            break;
        }
    }
    if !step1.is_empty() {
        return Err(step1.into_vec());
    }
    if !step2.is_empty() {
        return Err(step2.into_vec());
    }
    un.groups = groups.sets;
    un.regs = regs.list;
    Ok(un)
}

/// The diagnostic of an evaluation failure.
pub(crate) fn fail_diag(f: Fail, sit: &Situation<'_>, rank: Option<u32>) -> Diagnostic {
    let who = rank.map_or(String::new(), |r| format!(", rank {r}"));
    match f {
        Fail::Eval(span, e) => Diagnostic::new(DiagKind::EvaluationError, span, format!("{sit}{who} hits {e}")),
        Fail::NonLinear(span) => Diagnostic::new(
            DiagKind::NonLinearLength,
            span,
            "a length variable is used where a plain integer is needed",
        ),
    }
}

struct RankUnroller<'a, 'p, 's> {
    /// Messages to self posted so far: (tag, sends, receives).
    self_posted: Vec<(i64, u32, u32)>,
    prog: &'p Prog<'s>,
    world: i64,
    nranks: u32,
    rank: u32,
    env: Vec<i64>,
    /// Scratch slot → buffer id.
    scratch: Vec<u32>,
    /// Handle slot → pending op, or [`NONE`].
    handles: Vec<u32>,
    /// Pending ops whose handles went out of scope or were shadowed: only a
    /// `wait all` completes them.
    orphans: Vec<u32>,
    loop_vals: Vec<i64>,
    ctx_gen: u64,
    last_gen: u64,
    last_ctx: u32,
    iters: u64,
    out: RankTrace,
    groups: &'a mut Groups,
    regs: &'a mut Regs,
    /// (group, number of collectives on it so far).
    coll_seq: Vec<(u32, u32)>,
    step1: &'a mut Sink,
    step2: &'a mut Sink,
    scalars: &'a [i64],
    /// Per statement: (rank, range-checked value) of a `peer_fixed` peer
    /// evaluated by that rank ([`NONE`]: none yet).
    fixed: &'a mut Vec<(u32, u32)>,
}

/// Unrolling of this rank stops (an evaluation error was recorded).
struct Abort;

impl<'s> RankUnroller<'_, '_, 's> {
    /// The operator of a statement with this combination's scalars (operator
    /// parameters were checked by [`unroll`]).
    fn op(&self, op: Option<&OpExpr>) -> Option<Op> {
        op.and_then(|o| o.resolve(self.scalars))
    }

    /// The peer of point-to-point statement `stmt` as written.
    fn written_peer(&self, stmt: u32) -> Option<&'s Expr> {
        match &self.prog.stmts.get(stmt as usize)?.stmt.kind {
            StmtKind::Send { peer, .. }
            | StmtKind::Recv { peer, .. }
            | StmtKind::Isend { peer, .. }
            | StmtKind::Irecv { peer, .. } => Some(peer),
            _ => None,
        }
    }

    fn situation(&self, stmt: u32) -> Situation<'_> {
        let loops = self.prog.stmts.get(stmt as usize).map_or(&[][..], |i| &i.loops[..]);
        Situation {
            prog: self.prog,
            world: self.world,
            scalars: self.scalars,
            loops,
            vals: &self.loop_vals,
        }
    }

    fn fail(&mut self, stmt: u32, f: Fail) -> Abort {
        let d = fail_diag(f, &self.situation(stmt), Some(self.rank));
        self.step1.push(stmt_key(stmt), d);
        Abort
    }

    fn range_error(&mut self, stmt: u32, d: Diagnostic) {
        self.step2.push(stmt_key(stmt), d);
    }

    #[inline]
    fn eval(&mut self, stmt: u32, e: &CExpr) -> Result<i64, Abort> {
        if let Some(v) = eval_fast(e, &self.env) {
            return Ok(v);
        }
        self.eval_slow(stmt, e)
    }

    #[inline(never)]
    fn eval_slow(&mut self, stmt: u32, e: &CExpr) -> Result<i64, Abort> {
        eval_c(e, &self.env).map_err(|f| self.fail(stmt, f))
    }

    fn eval_lin(&mut self, stmt: u32, e: &CExpr) -> Result<Lin, Abort> {
        eval_lin(e, &self.env).map_err(|f| self.fail(stmt, f))
    }

    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn ctx(&mut self) -> u32 {
        if self.last_gen != self.ctx_gen {
            self.last_gen = self.ctx_gen;
            self.last_ctx = self.out.ctx.len() as u32;
            if let [v] = self.loop_vals[..] {
                self.out.ctx.push(v);
            } else {
                self.out.ctx.extend_from_slice(&self.loop_vals);
            }
        }
        self.last_ctx
    }

    #[inline]
    fn push_event(&mut self, kind: EvKind, stmt: u32) -> u32 {
        let ctx = self.ctx();
        self.push_event_at(kind, stmt, ctx)
    }

    /// [`Self::push_event`] with the loop context already known.
    #[inline]
    fn push_event_at(&mut self, kind: EvKind, stmt: u32, ctx: u32) -> u32 {
        let idx = self.out.events.len() as u32;
        self.out.events.push(Event { kind, stmt, ctx });
        idx
    }

    fn block(&mut self, b: &Block<'_>, in_batch: bool) -> Result<(), Abort> {
        for st in &b.stmts {
            match &st.kind {
                // the straight path of `stmt`, without the call
                CKind::Batch(body) if self.flat_ok(body) => {
                    self.flat_batch(st.id, body)?;
                }
                _ => self.stmt(st, in_batch)?,
            }
        }
        Ok(())
    }

    /// Whether `b` is a flat batch body none of whose statements (nor the
    /// `batch` itself) can reach the step limit.
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn flat_ok(&self, b: &Block<'_>) -> bool {
        b.flat && self.out.events.len() + self.out.ops.len() + b.stmts.len().max(1) <= MAX_STEPS
    }

    /// A `batch` of `send`s and `recv`s (`b.flat`) when no statement of it
    /// can reach the step limit: its operations push no event of their own,
    /// so each records the index of the batch's event when it is pushed.
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn flat_batch(&mut self, id: u32, b: &Block<'_>) -> Result<(), Abort> {
        let first = self.out.ops.len() as u32;
        // the loop context is the same for every operation of the batch
        let ctx = self.ctx();
        for st in &b.stmts {
            if let CKind::P2p(p) = &st.kind {
                self.batch_op(st.id, p, ctx)?;
            }
        }
        let end = self.out.ops.len() as u32;
        self.push_event_at(EvKind::Batch(first, end), id, ctx);
        Ok(())
    }

    /// Handles defined in `b` go out of scope: their pending ops are left
    /// to a later `wait all`.
    fn end_block(&mut self, b: &Block<'_>) {
        for &h in &b.handles {
            if let Some(slot) = self.handles.get_mut(h as usize) {
                let op = std::mem::replace(slot, NONE);
                if op != NONE {
                    self.orphans.push(op);
                }
            }
        }
    }

    /// `wait all`: every pending op of the rank, in posting order.
    fn wait_all(&mut self, id: u32) {
        let first = self.out.wait_ops.len() as u32;
        let ev = self.out.events.len() as u32;
        let mut ops = std::mem::take(&mut self.orphans);
        ops.extend(
            self.handles
                .iter_mut()
                .map(|s| std::mem::replace(s, NONE))
                .filter(|&op| op != NONE),
        );
        ops.sort_unstable();
        for op in ops {
            self.out.wait_ops.push(op);
            if let Some(o) = self.out.ops.get_mut(op as usize) {
                o.done = ev;
            }
        }
        let end = self.out.wait_ops.len() as u32;
        self.push_event(EvKind::Wait(first, end), id);
    }

    fn stmt(&mut self, st: &CStmt<'_>, in_batch: bool) -> Result<(), Abort> {
        let id = st.id;
        if self.out.events.len() + self.out.ops.len() >= MAX_STEPS {
            let span = self
                .prog
                .stmts
                .get(id as usize)
                .map_or(self.prog.s.span, |i| i.stmt.span);
            let d = Diagnostic::new(
                DiagKind::EvaluationError,
                span,
                format!(
                    "{}, rank {} unrolls to more than 2^28 steps",
                    self.situation(id),
                    self.rank
                ),
            );
            self.step1.push(stmt_key(id), d);
            return Err(Abort);
        }
        match &st.kind {
            CKind::P2p(p) => self.p2p(id, p, in_batch),
            CKind::Wait(hs) => {
                let first = self.out.wait_ops.len() as u32;
                let ev = self.out.events.len() as u32;
                for (slot, ident) in hs {
                    let pending = slot
                        .and_then(|s| self.handles.get_mut(s as usize))
                        .map(|p| std::mem::replace(p, NONE));
                    match pending {
                        Some(op) if op != NONE => {
                            self.out.wait_ops.push(op);
                            if let Some(o) = self.out.ops.get_mut(op as usize) {
                                o.done = ev;
                            }
                        }
                        other => {
                            let ctx = self.ctx();
                            self.out.issues.push(RequestIssue::Unknown {
                                stmt: id,
                                ctx,
                                name: ident.name.clone(),
                                waited: other.is_some(),
                            });
                        }
                    }
                }
                let end = self.out.wait_ops.len() as u32;
                self.push_event(EvKind::Wait(first, end), id);
                Ok(())
            }
            CKind::WaitAll => {
                self.wait_all(id);
                Ok(())
            }
            CKind::Batch(b) => {
                if self.flat_ok(b) {
                    return self.flat_batch(id, b);
                }
                // A batch's operations push no event of their own (only
                // `send`/`recv`, `let`, `for` and `if` stand in it), so each
                // records the index of the batch's event when it is pushed.
                let first = self.out.ops.len() as u32;
                self.block(b, true)?;
                let end = self.out.ops.len() as u32;
                self.push_event(EvKind::Batch(first, end), id);
                Ok(())
            }
            CKind::Copy { src, dst, op } => {
                let src = self.region(id, src)?;
                let dst = self.region(id, dst)?;
                let idx = self.out.copies.len() as u32;
                self.out.copies.push(LocalCopy {
                    src,
                    dst,
                    op: self.op(op.as_ref()),
                });
                self.push_event(EvKind::Copy(idx), id);
                Ok(())
            }
            CKind::Let { slot, value } => {
                let v = self.eval(id, value)?;
                if let Some(s) = self.env.get_mut(*slot as usize) {
                    *s = v;
                }
                Ok(())
            }
            CKind::Scratch { slot, len, name } => {
                let len = self.eval_lin(id, len)?;
                if !len.nonneg_always() {
                    let names = &self.prog.len_names;
                    let msg = format!(
                        "{}, rank {} declares `{}` with length {}, which can be negative",
                        self.situation(id),
                        self.rank,
                        name.name,
                        len.display(names)
                    );
                    let span = self.prog.stmts[id as usize].stmt.span;
                    self.range_error(id, Diagnostic::new(DiagKind::RegionOutOfBounds, span, msg));
                }
                let buf = self.out.bufs.len() as u32;
                self.out.bufs.push(BufInfo {
                    len,
                    param: None,
                    name: name.name.clone(),
                });
                if let Some(s) = self.scratch.get_mut(*slot as usize) {
                    *s = buf;
                }
                Ok(())
            }
            CKind::For {
                slot,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => {
                let a = self.eval(id, start)?;
                let b = self.eval(id, end)?;
                let last = if *inclusive { i128::from(b) } else { i128::from(b) - 1 };
                let count = (last - i128::from(a) + 1).max(0);
                let total = i128::from(self.iters) + count;
                if total > i128::from(MAX_ITERATIONS) {
                    let span = self.prog.stmts[id as usize].stmt.span;
                    let d = Diagnostic::new(
                        DiagKind::EvaluationError,
                        span,
                        format!(
                            "{}, rank {} runs more than 2^24 loop iterations (this loop alone runs {count})",
                            self.situation(id),
                            self.rank
                        ),
                    )
                    .with_hint("a schedule must unroll to at most 2^24 loop iterations per rank");
                    self.step1.push(stmt_key(id), d);
                    return Err(Abort);
                }
                self.iters = total as u64;
                self.loop_vals.push(0);
                let depth = self.loop_vals.len() - 1;
                // when there is an iteration, `a <= last <= b`: both fit,
                // and so does every value between them
                let (a, last) = (a, i64::try_from(last).unwrap_or(0));
                let count = count as i64;
                let mut k: i64 = 0;
                while k < count {
                    let v = if *reverse { last - k } else { a + k };
                    self.loop_vals[depth] = v;
                    self.ctx_gen += 1;
                    if let Some(s) = self.env.get_mut(*slot as usize) {
                        *s = v;
                    }
                    // a body that is one flat `batch` (it defines no handle)
                    if let [CStmt {
                        id: bid,
                        kind: CKind::Batch(bb),
                    }] = &body.stmts[..]
                    {
                        if self.flat_ok(bb) {
                            self.flat_batch(*bid, bb)?;
                            k += 1;
                            continue;
                        }
                    }
                    let r = self.block(body, in_batch);
                    self.end_block(body);
                    r?;
                    k += 1;
                }
                self.loop_vals.pop();
                self.ctx_gen += 1;
                Ok(())
            }
            CKind::If { branches, else_body } => {
                for (cond, body) in branches {
                    if self.eval(id, cond)? != 0 {
                        let r = self.block(body, in_batch);
                        self.end_block(body);
                        return r;
                    }
                }
                if let Some(body) = else_body {
                    let r = self.block(body, in_batch);
                    self.end_block(body);
                    return r;
                }
                Ok(())
            }
            CKind::Coll(c) => self.collective(id, c),
        }
    }

    fn p2p(&mut self, id: u32, p: &P2pStmt<'_>, in_batch: bool) -> Result<(), Abort> {
        let peer = self.eval(id, &p.peer)?;
        let tag = match &p.tag {
            Some(t) => self.eval(id, t)?,
            None => 0,
        };
        let reg = self.region_id(id, &p.region)?;
        let mode = if p.handle.is_some() {
            Mode::Nonblocking
        } else if in_batch {
            Mode::Batch
        } else {
            Mode::Blocking
        };
        let peer_u = if peer >= 0 && peer < self.world {
            peer as u32
        } else {
            let d = ranges::peer_out_of_range(&self.situation(id), self.rank, p, peer, self.written_peer(id));
            self.range_error(id, d);
            self.rank
        };
        if peer == i64::from(self.rank) && !self.post_to_self(p.send, tag, mode == Mode::Blocking) {
            let d = ranges::self_message(
                &self.situation(id),
                self.rank,
                p.send,
                self.prog.stmts[id as usize].stmt.span,
            );
            self.range_error(id, d);
        }
        let idx = self.out.ops.len() as u32;
        let ctx = self.ctx();
        self.out.ops.push(P2p {
            send: p.send,
            mode,
            peer: peer_u,
            tag,
            reg,
            reduce: self.op(p.reduce.as_ref()),
            stmt: id,
            ctx,
            ev: self.out.events.len() as u32,
            done: NONE,
            handle: p.handle.unwrap_or(NONE),
            partner: (NONE, NONE),
            partner_ev: NONE,
        });
        match mode {
            Mode::Blocking => {
                self.push_event(EvKind::Blocking(idx), id);
            }
            Mode::Nonblocking => {
                self.push_event(EvKind::Post(idx), id);
                if let Some(h) = p.handle {
                    if let Some(slot) = self.handles.get_mut(h as usize) {
                        let old = std::mem::replace(slot, idx);
                        if old != NONE {
                            // the previous iteration's request
                            self.orphans.push(old);
                        }
                    }
                }
            }
            Mode::Batch => {}
        }
        Ok(())
    }

    /// Counts a message to self on channel `(rank, rank, tag)`; for a
    /// blocking one, whether its matching operation (the k-th send for the
    /// k-th receive, FIFO) was posted before it, so that it can complete.
    fn post_to_self(&mut self, send: bool, tag: i64, blocking: bool) -> bool {
        let i = self.self_posted.iter().position(|e| e.0 == tag).unwrap_or_else(|| {
            self.self_posted.push((tag, 0, 0));
            self.self_posted.len() - 1
        });
        let (_, sends, recvs) = &mut self.self_posted[i];
        let ok = !blocking || if send { *recvs > *sends } else { *sends > *recvs };
        if send {
            *sends += 1;
        } else {
            *recvs += 1;
        }
        ok
    }

    /// [`Self::p2p`] for a `send` or `recv` of a batch.
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn batch_op(&mut self, id: u32, p: &P2pStmt<'_>, ctx: u32) -> Result<(), Abort> {
        // A `peer_fixed` peer has one value all through the rank: evaluated
        // and range-checked at its first operation, then taken from
        // `fixed` (a range error would be recorded under the statement's
        // key again, which the sink ignores).
        let known = if p.peer_fixed {
            match self.fixed.get(id as usize) {
                Some(&(stamp, peer_u)) if stamp == self.rank => Some(peer_u),
                _ => None,
            }
        } else {
            None
        };
        let peer = match known {
            Some(_) => 0,
            None => self.eval(id, &p.peer)?,
        };
        let tag = match &p.tag {
            Some(t) => self.eval(id, t)?,
            None => 0,
        };
        let reg = self.region_id(id, &p.region)?;
        let peer_u = if let Some(peer_u) = known {
            peer_u
        } else {
            let peer_u = if peer >= 0 && peer < self.world {
                peer as u32
            } else {
                let d = ranges::peer_out_of_range(&self.situation(id), self.rank, p, peer, self.written_peer(id));
                self.range_error(id, d);
                self.rank
            };
            if p.peer_fixed {
                if let Some(slot) = self.fixed.get_mut(id as usize) {
                    *slot = (self.rank, peer_u);
                }
            }
            peer_u
        };
        if peer_u == self.rank {
            self.post_to_self(p.send, tag, false);
        }
        self.out.ops.push(P2p {
            send: p.send,
            mode: Mode::Batch,
            peer: peer_u,
            tag,
            reg,
            reduce: self.op(p.reduce.as_ref()),
            stmt: id,
            ctx,
            ev: self.out.events.len() as u32,
            done: NONE,
            handle: NONE,
            partner: (NONE, NONE),
            partner_ev: NONE,
        });
        Ok(())
    }

    fn region(&mut self, id: u32, r: &CRegion<'_>) -> Result<Reg, Abort> {
        match &r.kind {
            CRKind::Whole => {
                let buf = match r.buf {
                    BufSlot::Param(i) => i,
                    BufSlot::Scratch(s) => self.scratch.get(s as usize).copied().unwrap_or(NONE),
                };
                let len = self.out.bufs.get(buf as usize).map_or(Lin::constant(0), |b| b.len);
                Ok(Reg {
                    buf,
                    start: Lin::constant(0),
                    end: len,
                })
            }
            CRKind::Slice { base, start, end } => {
                let b = self.region(id, base)?;
                let s = self.eval_lin(id, start)?;
                let e = self.eval_lin(id, end)?;
                let blen = b.len();
                let zero = Lin::constant(0);
                if !(zero.le_always(&s) && s.le_always(&e) && e.le_always(&blen)) {
                    let d = ranges::slice_out_of_bounds(&self.situation(id), self.rank, r, &s, &e, &blen);
                    self.range_error(id, d);
                }
                let at = |err| Fail::Eval(r.ir.span, err);
                let start = b.start.add(&s).map_err(|x| self.fail(id, at(x)))?;
                let end = b.start.add(&e).map_err(|x| self.fail(id, at(x)))?;
                Ok(Reg { buf: b.buf, start, end })
            }
            CRKind::Chunk { base, index, parts } => {
                let b = self.region(id, base)?;
                let k = match parts {
                    Some(p) => self.eval(id, p)?,
                    None => self.world,
                };
                let idx = self.eval_lin(id, index)?;
                self.chunk_of(id, r, &b, idx, k)
            }
            CRKind::Part { base, line, index } => {
                let b = self.region(id, base)?;
                Ok(self.part_of(id, r, &b, line, index)?.0)
            }
        }
    }

    /// Part `index` of region `b` laid out by `line`, with the checks of
    /// step 2, and whether they passed.
    fn part_of(
        &mut self,
        id: u32,
        r: &CRegion<'_>,
        b: &Reg,
        line: &crate::cexpr::CLine,
        index: &CExpr,
    ) -> Result<(Reg, bool), Abort> {
        let i = self.eval(id, index)?;
        let (sel, w) = crate::cexpr::line_of(line, &self.env, r.ir.span).map_err(|f| self.fail(id, f))?;
        if !(0..w).contains(&i) {
            let d = ranges::part_out_of_range(&self.situation(id), self.rank, r, i, w, index.span);
            self.range_error(id, d);
            return Ok((b.clone(), false));
        }
        let i = i.unsigned_abs();
        let before = Lin::count(crate::counts::line_part(line.param, sel, 0, i));
        let entry = Lin::count(crate::counts::line_part(line.param, sel, i, i + 1));
        let at = |err| Fail::Eval(r.ir.span, err);
        let start = b.start.add(&before).map_err(|x| self.fail(id, at(x)))?;
        let end = start.add(&entry).map_err(|x| self.fail(id, at(x)))?;
        let inside = end.le_always(&b.end);
        if !inside {
            let (s, e, blen) = (before, before.add(&entry).map_err(|x| self.fail(id, at(x)))?, b.len());
            let d = ranges::slice_out_of_bounds(&self.situation(id), self.rank, r, &s, &e, &blen);
            self.range_error(id, d);
        }
        Ok((Reg { buf: b.buf, start, end }, inside))
    }

    /// Part `idx` of `k` of region `b`, with the checks of step 2.
    fn chunk_of(&mut self, id: u32, r: &CRegion<'_>, b: &Reg, idx: Lin, k: i64) -> Result<Reg, Abort> {
        let CRKind::Chunk { base, index, parts } = &r.kind else {
            return Err(Abort);
        };
        let k_span = parts.as_ref().map_or(r.ir.span, |p| p.span);
        if k <= 0 {
            let d = Diagnostic::new(
                DiagKind::EvaluationError,
                k_span,
                format!(
                    "{}, rank {} divides `{}` into {k} chunks",
                    self.situation(id),
                    self.rank,
                    base.ir
                ),
            );
            self.step1.push(stmt_key(id), d);
            return Err(Abort);
        }
        let blen = b.len();
        let clen = if let Some(c) = blen.div_exact(k) {
            c
        } else {
            let d = ranges::uneven_chunk(&self.situation(id), self.rank, r, &blen, k);
            self.range_error(id, d);
            blen
        };
        let in_range = match idx.as_const() {
            Some(i) => (0..k).contains(&i),
            None => Lin::constant(0).le_always(&idx) && idx.le_always(&Lin::constant(k - 1)),
        };
        if !in_range {
            let d = ranges::chunk_out_of_bounds(&self.situation(id), self.rank, r, &idx, k, index.span);
            self.range_error(id, d);
        }
        let at = |err| Fail::Eval(r.ir.span, err);
        let off = match (idx.as_const(), clen.as_const()) {
            (Some(i), _) => clen.scale(i),
            (_, Some(c)) => idx.scale(c),
            _ => return Err(self.fail(id, Fail::NonLinear(index.span))),
        }
        .map_err(|x| self.fail(id, at(x)))?;
        let start = b.start.add(&off).map_err(|x| self.fail(id, at(x)))?;
        let end = start.add(&clen).map_err(|x| self.fail(id, at(x)))?;
        Ok(Reg { buf: b.buf, start, end })
    }

    /// The interned id of a region. Chunks with integer index and count are
    /// memoized on (region, base, index, count): a schedule names few
    /// distinct chunks, so most operations skip the region arithmetic.
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn region_id(&mut self, id: u32, r: &CRegion<'_>) -> Result<u32, Abort> {
        // the common case, inline: `param.chunk(i)` with a memoized chunk
        if let CRKind::Chunk {
            base,
            index,
            parts: None,
        } = &r.kind
        {
            if let (CRKind::Whole, BufSlot::Param(_), Some(i)) = (&base.kind, base.buf, eval_fast(index, &self.env)) {
                // a negative index becomes a huge one, which is not there
                if let Some(&rid) = self.regs.simple.get(r.id as usize).and_then(|t| t.get(i as usize)) {
                    if rid != NONE {
                        return Ok(rid);
                    }
                }
            }
        }
        self.region_id_slow(id, r)
    }

    #[inline(never)]
    fn region_id_slow(&mut self, id: u32, r: &CRegion<'_>) -> Result<u32, Abort> {
        match &r.kind {
            CRKind::Chunk { base, index, parts } if !index.has_len && parts.as_ref().is_none_or(|p| !p.has_len) => {
                let known = match (&base.kind, base.buf) {
                    (CRKind::Whole, BufSlot::Param(_)) => self.regs.whole.get(base.id as usize).copied(),
                    _ => None,
                };
                let b = match known {
                    Some(b) if b != NONE => b,
                    _ => self.region_id(id, base)?,
                };
                let k = match parts {
                    Some(p) => self.eval(id, p)?,
                    None => self.world,
                };
                let i = self.eval(id, index)?;
                let rid = if let Some(rid) = self.regs.chunk(r.id, b, i, k) {
                    rid
                } else {
                    let base_reg = self.regs.list.get(b as usize).cloned().ok_or(Abort)?;
                    let reg = self.chunk_of(id, r, &base_reg, Lin::constant(i), k)?;
                    let rid = self.regs.intern(reg);
                    self.regs.remember_chunk(r.id, b, i, k, rid);
                    rid
                };
                if parts.is_none() && matches!((&base.kind, base.buf), (CRKind::Whole, BufSlot::Param(_))) {
                    self.regs.remember_simple(r.id, i, k, rid);
                }
                Ok(rid)
            }
            CRKind::Whole if matches!(r.buf, BufSlot::Param(_)) => {
                // parameters have the same length on every rank
                if let Some(&rid) = self.regs.whole.get(r.id as usize).filter(|&&x| x != NONE) {
                    return Ok(rid);
                }
                let reg = self.region(id, r)?;
                let rid = self.regs.intern(reg);
                if let Some(slot) = self.regs.whole.get_mut(r.id as usize) {
                    *slot = rid;
                }
                Ok(rid)
            }
            CRKind::Part { base, line, index } => {
                // memoized on (node, base, line, index): the part's bounds
                // and their checks depend on nothing else, and an
                // all-gatherv names each part on every rank
                let b = self.region_id(id, base)?;
                let i = self.eval(id, index)?;
                let (sel, _) = crate::cexpr::line_of(line, &self.env, r.ir.span).map_err(|f| self.fail(id, f))?;
                let key = (r.id, b, sel, i);
                if let Some(&rid) = self.regs.parts.get(&key) {
                    return Ok(rid);
                }
                let base_reg = self.regs.list.get(b as usize).cloned().ok_or(Abort)?;
                let (reg, clean) = self.part_of(id, r, &base_reg, line, index)?;
                let rid = self.regs.intern(reg);
                if clean {
                    self.regs.parts.insert(key, rid);
                }
                Ok(rid)
            }
            _ => {
                let reg = self.region(id, r)?;
                Ok(self.regs.intern(reg))
            }
        }
    }

    fn collective(&mut self, id: u32, c: &CColl<'_>) -> Result<(), Abort> {
        let group = match &c.over {
            None => 0,
            Some(over) => self.group_of(id, over)?,
        };
        let gsize = self.groups.sets.get(group as usize).map_or(1, Vec::len) as i64;
        let root = match &c.root {
            Some(e) => {
                let v = self.eval(id, e)?;
                if !(0..gsize).contains(&v) {
                    let d =
                        ranges::root_out_of_range(&self.situation(id), self.rank, v, gsize, c.over.is_some(), e.span);
                    self.range_error(id, d);
                }
                Some(v)
            }
            None => None,
        };
        let src = match &c.src {
            Some(r) => Some(self.region(id, r)?),
            None => None,
        };
        let dst = match &c.dst {
            Some(r) => Some(self.region(id, r)?),
            None => None,
        };
        let seq = if let Some((_, n)) = self.coll_seq.iter_mut().find(|(g, _)| *g == group) {
            *n += 1;
            *n - 1
        } else {
            self.coll_seq.push((group, 1));
            0
        };
        let idx = self.out.colls.len() as u32;
        self.out.colls.push(CollCall {
            kind: c.kind,
            op: self.op(c.op.as_ref()),
            src,
            dst,
            root,
            group,
            counts: c.counts,
            seq,
        });
        self.push_event(EvKind::Coll(idx), id);
        Ok(())
    }

    /// The group of this rank for `over`: ranks whose value of the
    /// expression equals this rank's, computed once per distinct binding of
    /// the names it reads.
    fn group_of(&mut self, id: u32, over: &crate::compile::COver) -> Result<u32, Abort> {
        let key_vals: Vec<i64> = over
            .key_slots
            .iter()
            .map(|&s| self.env.get(s as usize).copied().unwrap_or(0))
            .collect();
        let key = (id, key_vals);
        if let Some(g) = self.groups.over.get(&key) {
            return Ok(g[self.rank as usize]);
        }
        let mut env = self.env.clone();
        let mut vals = Vec::with_capacity(self.nranks as usize);
        for r in 0..self.nranks {
            env[RANK as usize] = i64::from(r);
            match eval_c(&over.expr, &env) {
                Ok(v) => vals.push(v),
                Err(f) => {
                    let d = fail_diag(f, &self.situation(id), Some(r));
                    self.step1.push(stmt_key(id), d);
                    return Err(Abort);
                }
            }
        }
        let mut by_val: HashMap<i64, Vec<u32>> = HashMap::new();
        for (r, v) in vals.iter().enumerate() {
            by_val.entry(*v).or_default().push(r as u32);
        }
        let mut ids = vec![0_u32; self.nranks as usize];
        let mut sets: Vec<Vec<u32>> = by_val.into_values().collect();
        sets.sort_unstable();
        for members in sets {
            let gid = self.groups.intern(members.clone());
            for m in members {
                ids[m as usize] = gid;
            }
        }
        let mine = ids[self.rank as usize];
        self.groups.over.insert(key, ids);
        Ok(mine)
    }
}
