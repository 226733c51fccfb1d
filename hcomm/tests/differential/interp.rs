//! Runs a schedule's IR for real on one rank: the calls `comm_schedule!`'s
//! expansion makes on `hcomm::__private::Exec` (same order, same arguments),
//! with expressions evaluated by `hcomm_schedule::eval`, so whatever the
//! executor does is what runs.
//!
//! The prologue mirrors the generated one (lengths, scalar ranges, run-time
//! verification, buffer registration); [`Prologue::Unchecked`] leaves out the
//! verification so that schedules the checker rejects can be run too.

use std::collections::HashMap;

use hcomm::__private::{self as hp, Exec, Handle, Region};
use hcomm::{Comm, Error, ReduceOp, Result};
use hcomm_schedule::eval;
use hcomm_schedule::ir::{
    BufKind, Collective, Expr, ExprKind, NameKind, Op, OpExpr, RegionKind, Schedule, Stmt, StmtKind,
};

/// Whether the run-time verification of the prologue runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prologue {
    /// As generated: `Exec::verify` before the body.
    Checked,
    /// Without `Exec::verify` (the body of a rejected schedule).
    Unchecked,
}

/// Runs `s` on `comm` over `buffers` (one per parameter, in order, each of
/// its declared length at the length variables `lengths`, which the
/// prologue solves again from the buffers, as the generated one does).
pub fn run(
    comm: &Comm,
    s: &'static Schedule,
    scalars: &[i64],
    lengths: &[i64],
    buffers: &mut [Vec<u64>],
    prologue: Prologue,
) -> Result<()> {
    Exec::<u64>::run(comm, s, move |x| {
        let mut env = Env {
            rank: x.rank(),
            world: x.world(),
            scalars: scalars.to_vec(),
            lengths: lengths.to_vec(),
            vars: Vec::new(),
            scratch: Vec::new(),
            handles: Vec::new(),
            params: Vec::new(),
            sites: HashMap::new(),
        };
        number_sites(&s.body, &mut env.sites);
        for r in &s.requires {
            let holds = env.int(r)? != 0;
            x.requires(holds, "#[requires]")?;
        }
        // each length variable from the first buffer whose length uses it
        // (`coef * var + constant`), then every other length checked
        let mut bound = vec![false; s.buffers.len()];
        for (v, var) in s.len_vars.iter().enumerate() {
            let Some(i) = s.buffers.iter().position(|b| uses_len_var(&b.len, v)) else {
                continue;
            };
            let at = |k: i64| {
                let mut probe = Env {
                    lengths: env.lengths.clone(),
                    ..env.clone_scalars()
                };
                probe.lengths[v] = k;
                probe.int(&s.buffers[i].len)
            };
            let (constant, one) = (at(0)?, at(1)?);
            let solved = x.solve_len(
                &s.buffers[i].name,
                buffers[i].len(),
                one - constant,
                constant,
                &var.name,
            )?;
            env.lengths[v] = solved;
            bound[i] = true;
        }
        for ((b, data), bound) in s.buffers.iter().zip(buffers.iter()).zip(bound) {
            if !bound {
                let len = env.int(&b.len)?;
                x.check_len(&b.name, data.len(), len)?;
            }
        }
        for r in &s.verify.scalars {
            let (lo, mut hi) = (env.int(&r.lo)?, env.int(&r.hi)?);
            if r.inclusive {
                hi = hp::add(hi, 1)?;
            }
            let value = usize::try_from(env.scalars[r.scalar]).unwrap_or(usize::MAX);
            x.scalar(&r.name.name, value, lo, hi)?;
        }
        if prologue == Prologue::Checked {
            x.verify(scalars)?;
        }
        for (b, data) in s.buffers.iter().zip(buffers.iter_mut()) {
            let len = hp::int(data.len())?;
            let index = if b.writable {
                x.output(data)
            } else {
                let shared: &Vec<u64> = data;
                x.input(shared)
            };
            env.params.push((index, len));
        }
        env.block(x, &s.body)
    })
}

/// The bindings in scope on this rank.
struct Env {
    rank: i64,
    world: i64,
    scalars: Vec<i64>,
    lengths: Vec<i64>,
    /// Loop variables and `let`s, innermost last.
    vars: Vec<(String, i64)>,
    /// Scratch buffers: name, executor index, length.
    scratch: Vec<(String, usize, i64)>,
    handles: Vec<(String, Handle)>,
    /// Parameter buffers: executor index, length.
    params: Vec<(usize, i64)>,
    /// The call-site number of each `over` collective (by address), as the
    /// expansion numbers them: in source order.
    sites: HashMap<usize, u32>,
}

fn eval_err(e: eval::EvalError) -> Error {
    Error::Evaluation { message: e.to_string() }
}

fn unbound(what: &str, name: &str) -> Error {
    Error::Evaluation {
        message: format!("{what} `{name}` is not in scope"),
    }
}

/// The generator writes no count parameters (their schedules are tested
/// against the runtime's v-collectives in `tests/vcollectives.rs`).
fn no_counts() -> Error {
    Error::Evaluation {
        message: "the differential interpreter has no count parameters".to_owned(),
    }
}

fn reduce_op(op: Op) -> ReduceOp {
    match op {
        Op::Sum => ReduceOp::Sum,
        Op::Prod => ReduceOp::Prod,
        Op::Max => ReduceOp::Max,
        Op::Min => ReduceOp::Min,
    }
}

/// Whether `e` mentions length variable `v`.
fn uses_len_var(e: &Expr, v: usize) -> bool {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Count(_) => false,
        ExprKind::Name(n) => n.kind == NameKind::LenVar(v),
        ExprKind::Unary(_, x) => uses_len_var(x, v),
        ExprKind::Binary(_, a, b) => uses_len_var(a, v) || uses_len_var(b, v),
        ExprKind::Call(_, args) => args.iter().any(|a| uses_len_var(a, v)),
    }
}

/// Scope marks: what to truncate back to at the end of a block.
type Mark = (usize, usize, usize);

impl Env {
    /// The operator of a statement, an operator parameter read from the
    /// scalars.
    fn op(&self, op: &OpExpr) -> Result<ReduceOp> {
        op.resolve(&self.scalars)
            .map(reduce_op)
            .ok_or_else(|| Error::Evaluation {
                message: format!("{op:?} is not an operator with scalars {:?}", self.scalars),
            })
    }

    fn op_opt(&self, op: Option<&OpExpr>) -> Result<Option<ReduceOp>> {
        op.map(|o| self.op(o)).transpose()
    }

    /// An environment with this one's rank, world and scalars only (to
    /// evaluate buffer lengths).
    fn clone_scalars(&self) -> Env {
        Env {
            rank: self.rank,
            world: self.world,
            scalars: self.scalars.clone(),
            lengths: Vec::new(),
            vars: Vec::new(),
            scratch: Vec::new(),
            handles: Vec::new(),
            params: Vec::new(),
            sites: HashMap::new(),
        }
    }

    fn mark(&self) -> Mark {
        (self.vars.len(), self.scratch.len(), self.handles.len())
    }

    fn restore(&mut self, m: Mark) {
        self.vars.truncate(m.0);
        self.scratch.truncate(m.1);
        self.handles.truncate(m.2);
    }

    fn int(&self, e: &Expr) -> Result<i64> {
        self.int_at(e, self.rank)
    }

    /// `e` with `rank` bound to `rank` (an `over` expression evaluated for
    /// another rank).
    fn int_at(&self, e: &Expr, rank: i64) -> Result<i64> {
        match &e.kind {
            ExprKind::Int(v) => Ok(*v),
            ExprKind::Name(n) => match n.kind {
                NameKind::Rank => Ok(rank),
                NameKind::World => Ok(self.world),
                NameKind::Scalar(i) => self.scalars.get(i).copied().ok_or_else(|| unbound("scalar", &n.text)),
                NameKind::LenVar(i) => self.lengths.get(i).copied().ok_or_else(|| unbound("length", &n.text)),
                NameKind::Var => self
                    .vars
                    .iter()
                    .rev()
                    .find(|(v, _)| *v == n.text)
                    .map(|(_, x)| *x)
                    .ok_or_else(|| unbound("name", &n.text)),
            },
            ExprKind::Unary(op, x) => eval::unary(*op, self.int_at(x, rank)?).map_err(eval_err),
            ExprKind::Binary(op, a, b) => {
                let a = self.int_at(a, rank)?;
                if let Some(v) = eval::short_circuit(*op, a) {
                    return Ok(v);
                }
                eval::binary(*op, a, self.int_at(b, rank)?).map_err(eval_err)
            }
            ExprKind::Call(f, args) => {
                let args = args.iter().map(|a| self.int_at(a, rank)).collect::<Result<Vec<_>>>()?;
                eval::call(*f, &args).map_err(eval_err)
            }
            ExprKind::Count(_) => Err(no_counts()),
        }
    }

    fn tag(&self, t: Option<&Expr>) -> Result<i64> {
        t.map_or(Ok(0), |t| self.int(t))
    }

    fn region(&self, r: &hcomm_schedule::ir::Region) -> Result<Region> {
        match &r.kind {
            RegionKind::Whole(b) => {
                let (index, len) = match b.kind {
                    BufKind::Param(i) => *self.params.get(i).ok_or_else(|| unbound("buffer", &b.name))?,
                    BufKind::Scratch => self
                        .scratch
                        .iter()
                        .rev()
                        .find(|(name, ..)| *name == b.name)
                        .map(|&(_, i, l)| (i, l))
                        .ok_or_else(|| unbound("scratch buffer", &b.name))?,
                };
                Ok(hp::region(index, 0, len))
            }
            RegionKind::Slice { base, start, end } => {
                let r = self.region(base)?;
                let add = |x: i64| eval::binary(hcomm_schedule::ir::BinOp::Add, r.start, x).map_err(eval_err);
                Ok(hp::region(r.buf, add(self.int(start)?)?, add(self.int(end)?)?))
            }
            RegionKind::Chunk { base, index, parts } => {
                let b = self.region(base)?;
                let index = self.int(index)?;
                let parts = parts.as_ref().map_or(Ok(self.world), |p| self.int(p))?;
                hp::chunk(b, index, parts)
            }
            RegionKind::Part { .. } => Err(no_counts()),
        }
    }

    fn block(&mut self, x: &mut Exec<'_, u64>, body: &[Stmt]) -> Result<()> {
        let m = self.mark();
        for s in body {
            self.stmt(x, s)?;
        }
        self.restore(m);
        Ok(())
    }

    fn stmt(&mut self, x: &mut Exec<'_, u64>, s: &Stmt) -> Result<()> {
        if let Some(done) = self.control(x, s, Self::block) {
            return done;
        }
        match &s.kind {
            StmtKind::Send { region, peer, tag } => {
                let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                x.send(r, p, t)
            }
            StmtKind::Recv {
                region,
                peer,
                tag,
                reduce,
            } => {
                let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                x.recv(r, p, t, self.op_opt(reduce.as_ref())?)
            }
            StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                let h = x.isend(r, p, t)?;
                self.handles.push((handle.name.clone(), h));
                Ok(())
            }
            StmtKind::Irecv {
                handle,
                region,
                peer,
                tag,
                reduce,
            } => {
                let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                let h = x.irecv(r, p, t, self.op_opt(reduce.as_ref())?)?;
                self.handles.push((handle.name.clone(), h));
                Ok(())
            }
            StmtKind::Wait { handles } => {
                let hs = handles
                    .iter()
                    .map(|h| {
                        self.handles
                            .iter()
                            .rev()
                            .find(|(name, _)| *name == h.name)
                            .map(|&(_, h)| h)
                            .ok_or_else(|| unbound("request", &h.name))
                    })
                    .collect::<Result<Vec<Handle>>>()?;
                x.wait(&hs)
            }
            StmtKind::WaitAll => x.wait_all(),
            StmtKind::Batch { body } => {
                let mut b = x.batch();
                self.batch_block(&mut b, body)?;
                b.finish()
            }
            StmtKind::Copy { src, dst } => {
                let (a, b) = (self.region(src)?, self.region(dst)?);
                x.copy(a, b)
            }
            StmtKind::Accumulate { src, dst, op } => {
                let (a, b) = (self.region(src)?, self.region(dst)?);
                x.accumulate(a, b, self.op(op)?)
            }
            StmtKind::Scratch { name, len } => {
                let n = self.int(len)?;
                let i = x.scratch(n)?;
                self.scratch.push((name.name.clone(), i, n));
                Ok(())
            }
            StmtKind::Collective { kind, over } => {
                let site = self.sites.get(&(std::ptr::from_ref(s) as usize)).copied().unwrap_or(0);
                self.collective(x, kind, over.as_ref(), site)
            }
            StmtKind::Let { .. } | StmtKind::For { .. } | StmtKind::If { .. } => Ok(()),
        }
    }

    /// `let`, `for` and `if`, their bodies run by `run` (one block each);
    /// `None` for every other statement.
    fn control<C>(
        &mut self,
        cx: &mut C,
        s: &Stmt,
        run: fn(&mut Env, &mut C, &[Stmt]) -> Result<()>,
    ) -> Option<Result<()>> {
        match &s.kind {
            StmtKind::Let { name, value } => Some(self.int(value).map(|v| self.vars.push((name.name.clone(), v)))),
            StmtKind::For {
                var,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => Some((|| {
                let (a, b) = (self.int(start)?, self.int(end)?);
                for v in range(a, b, *inclusive, *reverse) {
                    self.vars.push((var.name.clone(), v));
                    run(self, cx, body)?;
                    self.vars.pop();
                }
                Ok(())
            })()),
            StmtKind::If { branches, else_body } => Some((|| {
                for (cond, body) in branches {
                    if self.int(cond)? != 0 {
                        return run(self, cx, body);
                    }
                }
                else_body.as_ref().map_or(Ok(()), |body| run(self, cx, body))
            })()),
            _ => None,
        }
    }

    /// The statements of a `batch` (only `send`, `recv`, `let`, `for`, `if`
    /// are allowed there).
    fn batch_block(&mut self, b: &mut hp::Batch<'_, '_, u64>, body: &[Stmt]) -> Result<()> {
        let m = self.mark();
        for s in body {
            if let Some(done) = self.control(b, s, Self::batch_block) {
                done?;
                continue;
            }
            match &s.kind {
                StmtKind::Send { region, peer, tag } => {
                    let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                    b.send(r, p, t)?;
                }
                StmtKind::Recv {
                    region,
                    peer,
                    tag,
                    reduce,
                } => {
                    let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                    b.recv(r, p, t, self.op_opt(reduce.as_ref())?)?;
                }
                _ => {
                    return Err(Error::Evaluation {
                        message: "statement not allowed in a `batch`".into(),
                    })
                }
            }
        }
        self.restore(m);
        Ok(())
    }

    fn collective(&mut self, x: &mut Exec<'_, u64>, kind: &Collective, over: Option<&Expr>, site: u32) -> Result<()> {
        let group = match over {
            Some(e) => Some(x.group(site, &|r| self.int_at(e, r))?),
            None => None,
        };
        match kind {
            Collective::AllReduce { src, dst, op } => {
                let s = self.region(src)?;
                let d = dst.as_ref().map_or(Ok(s), |d| self.region(d))?;
                x.all_reduce(s, d, self.op(op)?, group)
            }
            Collective::AllGather { src, dst } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_gather(s, d, group)
            }
            Collective::ReduceScatter { src, dst, op } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.reduce_scatter(s, d, self.op(op)?, group)
            }
            Collective::AllToAll { src, dst } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_to_all(s, d, group)
            }
            Collective::Broadcast { region, root } => {
                let (r, root) = (self.region(region)?, self.int(root)?);
                x.broadcast(r, root, group)
            }
            Collective::Reduce { src, dst, op, root } => {
                let (s, d, root) = (self.region(src)?, self.region(dst)?, self.int(root)?);
                x.reduce(s, d, self.op(op)?, root, group)
            }
            Collective::AllGatherV { .. } | Collective::AllToAllV { .. } => Err(no_counts()),
            Collective::Barrier => x.barrier(group),
        }
    }
}

/// Numbers the `over` collectives of `body` in source order.
fn number_sites(body: &[Stmt], sites: &mut HashMap<usize, u32>) {
    for s in body {
        match &s.kind {
            StmtKind::Collective { over: Some(_), .. } => {
                let next = sites.len() as u32;
                sites.insert(std::ptr::from_ref(s) as usize, next);
            }
            StmtKind::Batch { body } | StmtKind::For { body, .. } => number_sites(body, sites),
            StmtKind::If { branches, else_body } => {
                for (_, b) in branches {
                    number_sites(b, sites);
                }
                if let Some(b) = else_body {
                    number_sites(b, sites);
                }
            }
            _ => {}
        }
    }
}

/// The values of `for v in a..b` (`..=` when `inclusive`, `.rev()` when
/// `reverse`), as the generated Rust loop runs them.
fn range(a: i64, b: i64, inclusive: bool, reverse: bool) -> Box<dyn Iterator<Item = i64>> {
    match (inclusive, reverse) {
        (false, false) => Box::new(a..b),
        (true, false) => Box::new(a..=b),
        (false, true) => Box::new((a..b).rev()),
        (true, true) => Box::new((a..=b).rev()),
    }
}
