//! Runs a [`TextSchedule`] on a communicator: the IR walked statement by
//! statement on the executor that `comm_schedule!` functions use
//! (`crate::__private::Exec`), with the generated code's prologue — scalars,
//! `#[requires]`, count parameters, length variables, scalar ranges, the
//! entry agreement and run-time verification of world sizes outside the
//! verify set — and the same calls in the same order.

use std::cell::Cell;
use std::rc::Rc;

use hcomm_schedule::ir::{self, BinOp, Expr, ExprKind, Func, NameKind, OpExpr, RegionKind, Stmt, StmtKind, UnOp};

use super::text::{Parsed, TextSchedule};
use crate::__private::{self as hp, Batch, CountLine, Counts, Exec, Group, Handle, Region};
use crate::{Buffer, BufferMut, Comm, Element, Error, ReduceOp, Result};

/// Registers one buffer argument with the executor (`true`: read-only).
type Register<'a, T> = Box<dyn FnOnce(&mut Exec<'a, T>, bool) -> usize + 'a>;

/// A buffer argument of a [`Call`].
struct BufArg<'a, T: Element> {
    name: String,
    elems: usize,
    writable: bool,
    register: Register<'a, T>,
}

/// One call of a [`TextSchedule`]: its arguments by name, then
/// [`Call::run`].
///
/// Every parameter of the schedule must be given once: buffers with
/// [`Call::input`] (a `&[T; ..]` parameter) or [`Call::output`] (`&mut [T;
/// ..]`, or a read-only one), scalars (`usize`) with [`Call::scalar`],
/// operator parameters with [`Call::op`], count parameters with
/// [`Call::counts`].
#[must_use = "a call does nothing until `run`"]
pub struct Call<'a, T: Element> {
    schedule: &'static Parsed,
    comm: &'a Comm,
    buffers: Vec<BufArg<'a, T>>,
    scalars: Vec<(String, usize)>,
    ops: Vec<(String, ReduceOp)>,
    counts: Vec<(String, &'a [usize])>,
}

impl TextSchedule {
    /// Starts a call of this schedule on `comm`, with element type `T`.
    pub fn call<'a, T: Element>(&self, comm: &'a Comm) -> Call<'a, T> {
        Call {
            schedule: self.parsed,
            comm,
            buffers: Vec::new(),
            scalars: Vec::new(),
            ops: Vec::new(),
            counts: Vec::new(),
        }
    }
}

impl<'a, T: Element> Call<'a, T> {
    /// The read-only buffer parameter `name`.
    pub fn input<B: Buffer<Elem = T> + ?Sized>(mut self, name: &str, buf: &'a B) -> Self {
        self.buffers.push(BufArg {
            name: name.to_owned(),
            elems: buf.elems(),
            writable: false,
            register: Box::new(move |x: &mut Exec<'a, T>, _| x.input(buf)),
        });
        self
    }

    /// The writable buffer parameter `name` (also accepted for a read-only
    /// one).
    pub fn output<B: BufferMut<Elem = T> + ?Sized>(mut self, name: &str, buf: &'a mut B) -> Self {
        self.buffers.push(BufArg {
            name: name.to_owned(),
            elems: buf.elems(),
            writable: true,
            register: Box::new(move |x: &mut Exec<'a, T>, read_only| {
                if read_only {
                    let buf: &'a B = buf;
                    x.input(buf)
                } else {
                    x.output(buf)
                }
            }),
        });
        self
    }

    /// The scalar parameter `name` (`name: usize`).
    pub fn scalar(mut self, name: &str, value: usize) -> Self {
        self.scalars.push((name.to_owned(), value));
        self
    }

    /// The operator parameter `name` (`name: ReduceOp`).
    pub fn op(mut self, name: &str, op: ReduceOp) -> Self {
        self.ops.push((name.to_owned(), op));
        self
    }

    /// The count parameter `name`: `world` entries, or `world * world`
    /// row-major for a matrix.
    pub fn counts(mut self, name: &str, values: &'a [usize]) -> Self {
        self.counts.push((name.to_owned(), values));
        self
    }

    /// Runs the call: what the `comm_schedule!` function of the same source
    /// does with the same arguments, on every rank of `comm`.
    ///
    /// # Errors
    ///
    /// `Precondition` naming the argument when one is missing, unknown,
    /// given twice or read-only where the schedule writes; otherwise the
    /// errors of the generated function (lengths, ranges, `#[requires]`,
    /// run-time verification, the operations).
    pub fn run(self) -> Result<()> {
        let Call {
            schedule,
            comm,
            buffers,
            scalars,
            ops,
            counts,
        } = self;
        let bound = bind(schedule, buffers, &scalars, &ops, &counts);
        Exec::<T>::run(comm, &schedule.ir, move |x| {
            let bound = bound?;
            Interp::new(schedule, x, bound)?.body(x)
        })
    }
}

/// The arguments in the IR's order.
struct Bound<'a, T: Element> {
    /// Per buffer parameter.
    buffers: Vec<BufArg<'a, T>>,
    /// Per scalar parameter: the value, and the operator of an operator
    /// parameter.
    scalars: Vec<(usize, Option<ReduceOp>)>,
    /// Per count parameter.
    counts: Vec<&'a [usize]>,
}

fn argument(schedule: &Parsed, message: std::fmt::Arguments<'_>) -> Error {
    Error::Precondition {
        message: format!("`{}`: {message}", schedule.ir.name),
    }
}

/// Matches the named arguments to the schedule's parameters.
fn bind<'a, T: Element>(
    s: &Parsed,
    mut buffers: Vec<BufArg<'a, T>>,
    scalars: &[(String, usize)],
    ops: &[(String, ReduceOp)],
    counts: &[(String, &'a [usize])],
) -> Result<Bound<'a, T>> {
    let ir = &s.ir;
    let mut names: Vec<&str> = buffers.iter().map(|b| b.name.as_str()).collect();
    names.extend(scalars.iter().map(|(n, _)| n.as_str()));
    names.extend(ops.iter().map(|(n, _)| n.as_str()));
    names.extend(counts.iter().map(|(n, _)| n.as_str()));
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(argument(s, format_args!("argument `{name}` is given twice")));
        }
        let known = ir.buffers.iter().any(|b| b.name == *name)
            || ir.scalars.iter().any(|p| p.name == *name)
            || ir.counts.iter().any(|c| c.name == *name);
        if !known {
            return Err(argument(s, format_args!("`{name}` is not a parameter of the schedule")));
        }
    }
    let mut ordered = Vec::with_capacity(ir.buffers.len());
    for b in &ir.buffers {
        let i = buffers
            .iter()
            .position(|a| a.name == b.name)
            .ok_or_else(|| argument(s, format_args!("buffer argument `{}` is missing", b.name)))?;
        let arg = buffers.swap_remove(i);
        if b.writable && !arg.writable {
            return Err(argument(
                s,
                format_args!("buffer `{}` is written by the schedule: pass it with `output`", b.name),
            ));
        }
        ordered.push(arg);
    }
    if let Some(extra) = buffers.first() {
        return Err(argument(s, format_args!("`{}` is not a buffer parameter", extra.name)));
    }
    let mut values = Vec::with_capacity(ir.scalars.len());
    for p in &ir.scalars {
        if p.op {
            let op = ops
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, op)| *op)
                .ok_or_else(|| argument(s, format_args!("operator argument `{}` is missing", p.name)))?;
            values.push((0, Some(op)));
        } else {
            let v = scalars
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, v)| *v)
                .ok_or_else(|| argument(s, format_args!("scalar argument `{}` is missing", p.name)))?;
            values.push((v, None));
        }
    }
    let mut lines = Vec::with_capacity(ir.counts.len());
    for c in &ir.counts {
        let v = counts
            .iter()
            .find(|(n, _)| *n == c.name)
            .map(|(_, v)| *v)
            .ok_or_else(|| argument(s, format_args!("count argument `{}` is missing", c.name)))?;
        lines.push(v);
    }
    Ok(Bound {
        buffers: ordered,
        scalars: values,
        counts: lines,
    })
}

/// The state of one rank's walk: the values the generated code keeps in
/// locals.
struct Interp {
    schedule: &'static Parsed,
    /// `rank` (a cell: an `over` expression is evaluated for other ranks).
    rank: Cell<i64>,
    world: i64,
    /// Scalars as the checker's integers (an operator is its index).
    scalars: Vec<i64>,
    /// Operator parameters, by scalar index.
    ops: Vec<Option<ReduceOp>>,
    /// Length variables.
    lens: Vec<i64>,
    /// Buffer parameters: slot and length.
    params: Vec<(usize, i64)>,
    /// Loop variables and `let`s in scope, innermost last.
    vars: Vec<(&'static str, i64)>,
    /// Scratch buffers in scope: name, slot, length.
    scratch: Vec<(&'static str, usize, i64)>,
    /// Request handles in scope.
    handles: Vec<(&'static str, Handle)>,
    counts: Rc<Counts>,
}

impl Interp {
    /// The prologue of the generated function, up to the registration of
    /// the buffers.
    fn new<'a, T: Element>(s: &'static Parsed, x: &mut Exec<'a, T>, bound: Bound<'a, T>) -> Result<Self> {
        let ir = &s.ir;
        let mut scalars = Vec::with_capacity(bound.scalars.len());
        let mut ops = Vec::with_capacity(bound.scalars.len());
        for &(v, op) in &bound.scalars {
            scalars.push(match op {
                Some(op) => hp::op_index(op)?,
                None => hp::int(v)?,
            });
            ops.push(op);
        }
        let mut me = Interp {
            schedule: s,
            rank: Cell::new(x.rank()),
            world: x.world(),
            scalars,
            ops,
            lens: vec![0; ir.len_vars.len()],
            params: Vec::with_capacity(ir.buffers.len()),
            vars: Vec::new(),
            scratch: Vec::new(),
            handles: Vec::new(),
            counts: x.count_table(),
        };
        for (e, text) in ir.requires.iter().zip(&s.requires) {
            let holds = me.cond(e)?;
            x.requires(holds, text)?;
        }
        for (c, values) in ir.counts.iter().zip(&bound.counts) {
            x.counts(&c.name, values, c.matrix)?;
        }
        me.counts = x.count_table();
        for b in &s.len_bindings {
            let (Some(buffer), Some(arg), Some(var)) = (
                ir.buffers.get(b.buffer),
                bound.buffers.get(b.buffer),
                ir.len_vars.get(b.var),
            ) else {
                return Err(me.internal("a length binding names no buffer"));
            };
            let (coef, constant) = (me.int(&b.coef)?, me.int(&b.constant)?);
            let v = x.solve_len(&buffer.name, arg.elems, coef, constant, &var.name)?;
            if let Some(slot) = me.lens.get_mut(b.var) {
                *slot = v;
            }
        }
        for (i, (buffer, arg)) in ir.buffers.iter().zip(&bound.buffers).enumerate() {
            if s.len_bindings.iter().any(|b| b.buffer == i) {
                continue;
            }
            let expected = me.int(&buffer.len)?;
            x.check_len(&buffer.name, arg.elems, expected)?;
        }
        for r in &ir.verify.scalars {
            let Some(&(value, _)) = bound.scalars.get(r.scalar) else {
                return Err(me.internal("a scalar range names no scalar"));
            };
            let lo = me.int(&r.lo)?;
            let mut hi = me.int(&r.hi)?;
            if r.inclusive {
                hi = hp::add(hi, 1)?;
            }
            let v = x.scalar(&r.name.name, value, lo, hi)?;
            if let Some(slot) = me.scalars.get_mut(r.scalar) {
                *slot = v;
            }
        }
        x.verify(&me.scalars)?;
        for (buffer, arg) in ir.buffers.iter().zip(bound.buffers) {
            let len = hp::int(arg.elems)?;
            let slot = (arg.register)(x, !buffer.writable);
            me.params.push((slot, len));
        }
        Ok(me)
    }

    fn internal(&self, what: &str) -> Error {
        Error::Schedule {
            schedule: self.schedule.ir.name.clone(),
            message: format!("internal error: {what}; please report it"),
        }
    }

    // ------------------------------------------------------------ expressions

    fn arg<'e>(&self, args: &'e [Expr], i: usize) -> Result<&'e Expr> {
        args.get(i)
            .ok_or_else(|| self.internal("a function call lacks an argument"))
    }

    /// An integer expression, as the generated code computes it.
    fn int(&self, e: &Expr) -> Result<i64> {
        match &e.kind {
            ExprKind::Int(v) => Ok(*v),
            ExprKind::Name(n) => self.name(n),
            ExprKind::Unary(UnOp::Neg, a) => hp::neg(self.int(a)?),
            ExprKind::Binary(op, a, b) => match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Shl | BinOp::Shr => {
                    let a = self.int(a)?;
                    hp::binary(*op, a, self.int(b)?)
                }
                BinOp::BitAnd => Ok(self.int(a)? & self.int(b)?),
                BinOp::BitOr => Ok(self.int(a)? | self.int(b)?),
                BinOp::BitXor => Ok(self.int(a)? ^ self.int(b)?),
                _ => Ok(i64::from(self.cond(e)?)),
            },
            ExprKind::Unary(UnOp::Not, _) | ExprKind::Call(Func::IsPow2, _) => Ok(i64::from(self.cond(e)?)),
            ExprKind::Call(f, args) => {
                let a = self.int(self.arg(args, 0)?)?;
                match f {
                    Func::Log2 => hp::log2(a),
                    Func::CeilLog2 => hp::ceil_log2(a),
                    Func::Pow2 => hp::pow2(a),
                    Func::Min => Ok(a.min(self.int(self.arg(args, 1)?)?)),
                    Func::Max => Ok(a.max(self.int(self.arg(args, 1)?)?)),
                    Func::IsPow2 => Ok(i64::from(hp::is_pow2(a))),
                }
            }
            ExprKind::Count(ir::Count::Entry(line, i)) => {
                let line = self.line(line)?;
                self.counts.count(line, self.int(i)?)
            }
            ExprKind::Count(ir::Count::Sum(line, None)) => self.counts.count_sum(self.line(line)?),
            ExprKind::Count(ir::Count::Sum(line, Some((a, b)))) => {
                let line = self.line(line)?;
                let (a, b) = (self.int(a)?, self.int(b)?);
                hp::sub(self.counts.count_prefix(line, b)?, self.counts.count_prefix(line, a)?)
            }
        }
    }

    /// A condition: the expression is non-zero (`&&`, `||` short-circuit).
    fn cond(&self, e: &Expr) -> Result<bool> {
        match &e.kind {
            ExprKind::Unary(UnOp::Not, a) => Ok(!self.cond(a)?),
            ExprKind::Binary(BinOp::And, a, b) => Ok(self.cond(a)? && self.cond(b)?),
            ExprKind::Binary(BinOp::Or, a, b) => Ok(self.cond(a)? || self.cond(b)?),
            ExprKind::Binary(op @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b) => {
                let (a, b) = (self.int(a)?, self.int(b)?);
                Ok(match op {
                    BinOp::Eq => a == b,
                    BinOp::Ne => a != b,
                    BinOp::Lt => a < b,
                    BinOp::Le => a <= b,
                    BinOp::Gt => a > b,
                    _ => a >= b,
                })
            }
            ExprKind::Call(Func::IsPow2, args) => Ok(hp::is_pow2(self.int(self.arg(args, 0)?)?)),
            _ => Ok(self.int(e)? != 0),
        }
    }

    fn name(&self, n: &ir::Name) -> Result<i64> {
        let found = match n.kind {
            NameKind::Rank => Some(self.rank.get()),
            NameKind::World => Some(self.world),
            NameKind::Scalar(i) => self.scalars.get(i).copied(),
            NameKind::LenVar(i) => self.lens.get(i).copied(),
            NameKind::Var => self.vars.iter().rev().find(|(v, _)| *v == n.text).map(|(_, v)| *v),
        };
        found.ok_or_else(|| self.internal("a name the checker resolved is not bound"))
    }

    fn line(&self, line: &ir::CountLine) -> Result<CountLine> {
        let p = line.count.param;
        Ok(match &line.kind {
            ir::LineKind::Vector => CountLine::Vector(p),
            ir::LineKind::Row(i) => CountLine::Row(p, self.int(i)?),
            ir::LineKind::Col(j) => CountLine::Col(p, self.int(j)?),
        })
    }

    fn region(&self, r: &ir::Region) -> Result<Region> {
        match &r.kind {
            RegionKind::Whole(buf) => {
                let (slot, len) = match buf.kind {
                    ir::BufKind::Param(i) => self.params.get(i).copied(),
                    ir::BufKind::Scratch => self
                        .scratch
                        .iter()
                        .rev()
                        .find(|(n, _, _)| *n == buf.name)
                        .map(|(_, slot, len)| (*slot, *len)),
                }
                .ok_or_else(|| self.internal("a buffer the checker resolved is not bound"))?;
                Ok(hp::region(slot, 0, len))
            }
            RegionKind::Slice { base, start, end } => {
                let base = self.region(base)?;
                let start = hp::add(base.start, self.int(start)?)?;
                let end = hp::add(base.start, self.int(end)?)?;
                Ok(hp::region(base.buf, start, end))
            }
            RegionKind::Chunk { base, index, parts } => {
                let base = self.region(base)?;
                let index = self.int(index)?;
                let parts = match parts {
                    Some(p) => self.int(p)?,
                    None => self.world,
                };
                hp::chunk(base, index, parts)
            }
            RegionKind::Part { base, line, index } => {
                let base = self.region(base)?;
                let line = self.line(line)?;
                self.counts.part(base, line, self.int(index)?)
            }
        }
    }

    fn tag(&self, tag: Option<&Expr>) -> Result<i64> {
        tag.map_or(Ok(0), |t| self.int(t))
    }

    fn op(&self, op: &OpExpr) -> Result<ReduceOp> {
        match op {
            OpExpr::Lit(ir::Op::Sum) => Ok(ReduceOp::Sum),
            OpExpr::Lit(ir::Op::Prod) => Ok(ReduceOp::Prod),
            OpExpr::Lit(ir::Op::Max) => Ok(ReduceOp::Max),
            OpExpr::Lit(ir::Op::Min) => Ok(ReduceOp::Min),
            OpExpr::Param(i) => self
                .ops
                .get(*i)
                .copied()
                .flatten()
                .ok_or_else(|| self.internal("an operator parameter is not bound")),
            OpExpr::Name(_) => Err(self.internal("an operator name was not resolved")),
        }
    }

    fn reduce(&self, reduce: Option<&OpExpr>) -> Result<Option<ReduceOp>> {
        reduce.map(|op| self.op(op)).transpose()
    }

    // ------------------------------------------------------------ statements

    fn body<T: Element>(&mut self, x: &mut Exec<'_, T>) -> Result<()> {
        self.block(x, &self.schedule.ir.body)
    }

    /// Runs `stmts` in a scope of their own, on `x`: the schedule itself or
    /// a `batch` being built.
    fn block<X: Target>(&mut self, x: &mut X, stmts: &'static [Stmt]) -> Result<()> {
        let scope = (self.vars.len(), self.scratch.len(), self.handles.len());
        let out = stmts.iter().try_for_each(|s| self.stmt(x, s));
        self.vars.truncate(scope.0);
        self.scratch.truncate(scope.1);
        self.handles.truncate(scope.2);
        out
    }

    /// The statements that may stand both in the body and in a `batch`
    /// (`send`, `recv`, `let`, `for`, `if`); the others go to
    /// [`Target::other`].
    fn stmt<X: Target>(&mut self, x: &mut X, stmt: &'static Stmt) -> Result<()> {
        match &stmt.kind {
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
                x.recv(r, p, t, self.reduce(reduce.as_ref())?)
            }
            StmtKind::Let { name, value } => {
                let v = self.int(value)?;
                self.vars.push((&name.name, v));
                Ok(())
            }
            StmtKind::For {
                var,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => {
                let bounds = (self.int(start)?, self.int(end)?);
                for_each(bounds, *inclusive, *reverse, |v| {
                    self.vars.push((&var.name, v));
                    let out = self.block(x, body);
                    self.vars.pop();
                    out
                })
            }
            StmtKind::If { branches, else_body } => {
                for (cond, body) in branches {
                    if self.cond(cond)? {
                        return self.block(x, body);
                    }
                }
                match else_body {
                    Some(body) => self.block(x, body),
                    None => Ok(()),
                }
            }
            _ => x.other(self, stmt),
        }
    }

    /// A statement of the body that cannot stand in a `batch`.
    fn exec_stmt<T: Element>(&mut self, x: &mut Exec<'_, T>, stmt: &'static Stmt) -> Result<()> {
        match &stmt.kind {
            StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                let (r, p, t) = (self.region(region)?, self.int(peer)?, self.tag(tag.as_ref())?);
                let h = x.isend(r, p, t)?;
                self.handles.push((&handle.name, h));
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
                let h = x.irecv(r, p, t, self.reduce(reduce.as_ref())?)?;
                self.handles.push((&handle.name, h));
                Ok(())
            }
            StmtKind::Wait { handles } => {
                let mut hs = Vec::with_capacity(handles.len());
                for h in handles {
                    let found = self.handles.iter().rev().find(|(n, _)| *n == h.name);
                    hs.push(
                        found
                            .ok_or_else(|| self.internal("wait on a request that is not in scope"))?
                            .1,
                    );
                }
                x.wait(&hs)
            }
            StmtKind::WaitAll => x.wait_all(),
            StmtKind::Batch { body } => {
                let mut b = x.batch();
                self.block(&mut b, body)?;
                b.finish()
            }
            StmtKind::Copy { src, dst } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.copy(s, d)
            }
            StmtKind::Accumulate { src, dst, op } => {
                let (s, d, op) = (self.region(src)?, self.region(dst)?, self.op(op)?);
                x.accumulate(s, d, op)
            }
            StmtKind::Scratch { name, len } => {
                let n = self.int(len)?;
                let slot = x.scratch(n)?;
                self.scratch.push((&name.name, slot, n));
                Ok(())
            }
            StmtKind::Collective { kind, over } => self.collective(x, stmt, kind, over.as_ref()),
            StmtKind::Send { .. }
            | StmtKind::Recv { .. }
            | StmtKind::Let { .. }
            | StmtKind::For { .. }
            | StmtKind::If { .. } => self.stmt(x, stmt),
        }
    }

    fn collective<T: Element>(
        &mut self,
        x: &mut Exec<'_, T>,
        stmt: &'static Stmt,
        kind: &'static ir::Collective,
        over: Option<&'static Expr>,
    ) -> Result<()> {
        let group: Option<Group> = match over {
            Some(e) => {
                let site = self
                    .schedule
                    .sites
                    .get(&(std::ptr::from_ref(stmt) as usize))
                    .copied()
                    .ok_or_else(|| self.internal("an `over` collective has no call site"))?;
                let me = &*self;
                let color = |r: i64| -> Result<i64> {
                    let rank = me.rank.replace(r);
                    let out = me.int(e);
                    me.rank.set(rank);
                    out
                };
                Some(x.group(site, &color)?)
            }
            None => None,
        };
        match kind {
            ir::Collective::AllReduce { src, dst, op } => {
                let s = self.region(src)?;
                let d = match dst {
                    Some(d) => self.region(d)?,
                    None => s,
                };
                x.all_reduce(s, d, self.op(op)?, group)
            }
            ir::Collective::AllGather { src, dst } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_gather(s, d, group)
            }
            ir::Collective::ReduceScatter { src, dst, op } => {
                let (s, d, op) = (self.region(src)?, self.region(dst)?, self.op(op)?);
                x.reduce_scatter(s, d, op, group)
            }
            ir::Collective::AllToAll { src, dst } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_to_all(s, d, group)
            }
            ir::Collective::Broadcast { region, root } => {
                let (r, root) = (self.region(region)?, self.int(root)?);
                x.broadcast(r, root, group)
            }
            ir::Collective::Reduce { src, dst, op, root } => {
                let (s, d, op, root) = (self.region(src)?, self.region(dst)?, self.op(op)?, self.int(root)?);
                x.reduce(s, d, op, root, group)
            }
            ir::Collective::AllGatherV { src, dst, counts } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_gatherv(s, d, counts.param)
            }
            ir::Collective::AllToAllV { src, dst, sizes } => {
                let (s, d) = (self.region(src)?, self.region(dst)?);
                x.all_to_allv(s, d, sizes.param)
            }
            ir::Collective::Barrier => x.barrier(group),
        }
    }
}

/// Runs `f` on each value of `start..end` (`start..=end` when `inclusive`),
/// in reverse when `reverse`, stopping at the first error.
/// Where [`Interp::block`] sends point-to-point statements: the schedule's
/// [`Exec`], or a [`Batch`] being built. One walker serves both, so `let`,
/// `for` and `if` mean the same inside and outside a `batch`.
trait Target {
    fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()>;
    fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()>;
    /// A statement other than `send`, `recv`, `let`, `for` and `if`.
    fn other(&mut self, it: &mut Interp, stmt: &'static Stmt) -> Result<()>;
}

impl<T: Element> Target for Exec<'_, T> {
    fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()> {
        Exec::send(self, r, peer, tag)
    }

    fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()> {
        Exec::recv(self, r, peer, tag, reduce)
    }

    fn other(&mut self, it: &mut Interp, stmt: &'static Stmt) -> Result<()> {
        it.exec_stmt(self, stmt)
    }
}

impl<T: Element> Target for Batch<'_, '_, T> {
    fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()> {
        Batch::send(self, r, peer, tag)
    }

    fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()> {
        Batch::recv(self, r, peer, tag, reduce)
    }

    fn other(&mut self, it: &mut Interp, _: &'static Stmt) -> Result<()> {
        Err(it.internal("a statement the checker rejects inside `batch`"))
    }
}

fn for_each(
    (start, end): (i64, i64),
    inclusive: bool,
    reverse: bool,
    mut f: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    match (inclusive, reverse) {
        (false, false) => (start..end).try_for_each(&mut f),
        (false, true) => (start..end).rev().try_for_each(&mut f),
        (true, false) => (start..=end).try_for_each(&mut f),
        (true, true) => (start..=end).rev().try_for_each(&mut f),
    }
}
