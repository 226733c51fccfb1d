//! Rotation symmetry read off the program instead of its unrolling: when
//! every branch and loop bound reads no `rank`, every peer is
//! `(rank + e) % world` and every region either reads no `rank` or is
//! `b.chunk((rank + e) % world)` (or a slice or chunk of one) with `e` the
//! same on every rank (a scratch buffer's regions read no `rank`), then
//! rank `r`'s trace is rank 0's turned by `r`, event for event, and only
//! rank 0 needs unrolling.
//!
//! Each expression gets a [`Class`] saying how its value on rank `r`
//! relates to its value on rank 0 at the same point of the (then common)
//! control flow, and an interval that holds its value on every rank, so
//! that `rank + e` is known not to overflow on any rank when it does not
//! on rank 0. Buffers get the class of their regions: all the same on every
//! rank, or all turned by `r * len / world` (the unit of
//! [`super::symmetry`]). With count vectors, a parameter's length is
//! `sum(counts)`, whose regions must all be `.part(counts, (rank + e) %
//! world)` (turned part by part), or `counts[(rank + e) % world]`, whose
//! regions must be the same offsets on every rank (the entry renamed), or
//! free of counts and `rank`. Anything else is not proven, and the caller
//! compares the unrolled ranks instead.

use crate::cexpr::{CExpr, CLineKind, CWhich, CK, FIRST_SCALAR, RANK, WORLD};
use crate::compile::{Block, BufSlot, CKind, CRKind, CRegion, Prog};
use crate::ir::{BinOp, Func, UnOp};

/// How an expression's value on rank `r` relates to its value on rank 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// The same on every rank.
    Same,
    /// Congruent to rank 0's value plus `r`, modulo `world` (such as
    /// `rank + e` or `(rank + e) % world + 1`): only `% world` of it is of
    /// use.
    Shift,
    /// Rank 0's value plus `r`, modulo `world` (`(rank + e) % world`).
    Rot,
    /// Anything else.
    Other,
}

/// A class with an interval (in `i128`, so that bounds never wrap) that
/// holds the value on every rank.
#[derive(Clone, Copy, Debug)]
struct Val {
    class: Class,
    lo: i128,
    hi: i128,
}

const MIN: i128 = i64::MIN as i128;
const MAX: i128 = i64::MAX as i128;

impl Val {
    const fn new(class: Class, lo: i128, hi: i128) -> Self {
        Self { class, lo, hi }
    }

    const fn exact(v: i64) -> Self {
        Self::new(Class::Same, v as i128, v as i128)
    }

    const fn any(class: Class) -> Self {
        Self::new(class, MIN, MAX)
    }

    /// A computed value: the interval of an expression the same on every
    /// rank holds what rank 0 computes without error, so it is clipped to
    /// `i64`; a shifted value whose interval leaves `i64` may overflow on
    /// some rank and is not proven.
    fn computed(class: Class, lo: i128, hi: i128) -> Self {
        match class {
            Class::Same => Self::new(class, lo.clamp(MIN, MAX), hi.clamp(MIN, MAX)),
            Class::Shift if lo < MIN || hi > MAX => Self::any(Class::Other),
            _ => Self::new(class, lo, hi),
        }
    }
}

/// How a region on rank `r` relates to rank 0's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RegClass {
    Same,
    /// Moved cyclically by `r` chunks of `len / world`, without wrapping.
    Turned,
}

/// Per parameter buffer: `Some(true)` when its regions turn with the rank,
/// `Some(false)` when they are the same on every rank, `None` when no
/// statement names it; or `None` overall when the program is not proven
/// rotation-symmetric at `world` with `scalars`. Errors of evaluation are
/// the same on every rank, except that a shifted value could overflow on
/// one: the intervals rule that out, so rank 0's unrolling finds every
/// error there is (and a failing rank 0 leaves the decision to the full
/// check).
pub(crate) fn units(prog: &Prog<'_>, world: i64, scalars: &[i64]) -> Option<Vec<Option<bool>>> {
    if world < 2 || prog.rank_lens && prog.s.counts.is_empty() || prog.s.counts.iter().any(|c| c.matrix) {
        return None;
    }
    let mut p = Proof {
        world,
        slots: vec![Val::any(Class::Other); prog.nslots],
        bufs: vec![None; prog.s.buffers.len()],
        lens: Vec::with_capacity(prog.buf_len.len()),
    };
    p.slots[RANK as usize] = Val::new(Class::Rot, 0, i128::from(world) - 1);
    p.slots[WORLD as usize] = Val::exact(world);
    for (i, v) in scalars.iter().enumerate() {
        *p.slots.get_mut(FIRST_SCALAR as usize + i)? = Val::exact(*v);
    }
    for len in &prog.buf_len {
        let kind = p.len_kind(len)?;
        p.lens.push(kind);
    }
    p.block(&prog.body)?;
    Some(p.bufs.iter().map(|c| c.map(|c| c == RegClass::Turned)).collect())
}

struct Proof {
    world: i64,
    /// What each variable slot holds.
    slots: Vec<Val>,
    /// The class of each parameter's regions so far.
    bufs: Vec<Option<RegClass>>,
    /// How each parameter's length relates between ranks.
    lens: Vec<LenKind>,
}

/// A parameter's length, as the count-aware rotation of
/// [`super::symmetry`] reads it: rank `r`'s length is rank 0's with count
/// entry `i` renamed `i + r`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LenKind {
    /// No count and no `rank` in it: the same on every rank.
    Plain,
    /// `sum(counts)`, the whole of count vector `p`: the same on every
    /// rank, laid out by its parts.
    Line(u32),
    /// `counts[(rank + e) % world]`: one entry, renamed with the rank.
    Entry,
}

/// Whether a count occurs in `e`.
fn mentions_count(e: &CExpr) -> bool {
    match &e.kind {
        CK::Count(_) => true,
        CK::Int(_) | CK::Slot(_) | CK::Len(_) => false,
        CK::Unary(_, x) => mentions_count(x),
        CK::Binary(_, a, b) => mentions_count(a) || mentions_count(b),
        CK::Call(_, args) => args.iter().any(mentions_count),
    }
}

impl Proof {
    /// The kind of a parameter's length, or `None` when it is none of
    /// [`LenKind`]'s (another rank's length would not be rank 0's renamed).
    fn len_kind(&self, len: &CExpr) -> Option<LenKind> {
        if !mentions_count(len) {
            return (!len.reads_rank()).then_some(LenKind::Plain);
        }
        let CK::Count(c) = &len.kind else {
            return None;
        };
        match (&c.line.kind, &c.which) {
            (CLineKind::Vector, CWhich::Sum(None)) => Some(LenKind::Line(c.line.param)),
            (CLineKind::Vector, CWhich::Entry(i)) if self.expr(i).class == Class::Rot => Some(LenKind::Entry),
            _ => None,
        }
    }

    fn block(&mut self, b: &Block<'_>) -> Option<()> {
        b.stmts.iter().try_for_each(|s| self.stmt(&s.kind))
    }

    fn same(&self, e: &CExpr) -> Option<Val> {
        let v = self.expr(e);
        (v.class == Class::Same).then_some(v)
    }

    fn stmt(&mut self, k: &CKind<'_>) -> Option<()> {
        match k {
            CKind::P2p(p) => {
                // a reducing receive's operator is a keyword or an operator
                // parameter: the same on every rank
                if self.expr(&p.peer).class != Class::Rot {
                    return None;
                }
                if let Some(t) = &p.tag {
                    self.same(t)?;
                }
                self.region(&p.region)
            }
            CKind::Wait(_) | CKind::WaitAll => Some(()),
            CKind::Batch(b) => self.block(b),
            CKind::Copy { src, dst, op: None } => {
                self.region(src)?;
                self.region(dst)
            }
            CKind::Let { slot, value } => {
                let v = self.expr(value);
                *self.slots.get_mut(*slot as usize)? = v;
                Some(())
            }
            CKind::For {
                slot, start, end, body, ..
            } => {
                // the loop variable lies between the bounds (inclusive or not)
                let (a, b) = (self.same(start)?, self.same(end)?);
                *self.slots.get_mut(*slot as usize)? = Val::new(Class::Same, a.lo, b.hi.max(a.lo));
                self.block(body)
            }
            CKind::If { branches, else_body } => {
                for (cond, body) in branches {
                    self.same(cond)?;
                    self.block(body)?;
                }
                else_body.as_ref().map_or(Some(()), |b| self.block(b))
            }
            // a scratch buffer of the same length on every rank: its
            // regions must be the same too (it starts uninitialized on
            // every rank, which every turn leaves as it is)
            CKind::Scratch { len, .. } => self.same(len).map(|_| ()),
            CKind::Copy { op: Some(_), .. } | CKind::Coll(_) => None,
        }
    }

    /// The class of a region, recorded for its buffer (a buffer whose
    /// regions are of both classes is not proven).
    fn region(&mut self, r: &CRegion<'_>) -> Option<()> {
        let BufSlot::Param(b) = r.buf else {
            return (self.region_class(r)? == RegClass::Same).then_some(());
        };
        let class = match *self.lens.get(b as usize)? {
            LenKind::Plain => self.region_class(r)?,
            // the whole buffer, or a slice of it at offsets without counts:
            // the same offsets on every rank, the length renamed
            LenKind::Entry => (self.region_class(r)? == RegClass::Same).then_some(RegClass::Same)?,
            // part `(rank + e) % world` of the whole buffer: rank 0's part
            // `j` turned into part `j + r`
            LenKind::Line(p) => match &r.kind {
                CRKind::Part { base, line, index }
                    if matches!(base.kind, CRKind::Whole)
                        && line.param == p
                        && matches!(line.kind, CLineKind::Vector)
                        && self.expr(index).class == Class::Rot =>
                {
                    RegClass::Turned
                }
                _ => return None,
            },
        };
        let slot = self.bufs.get_mut(b as usize)?;
        match slot {
            Some(c) if *c != class => None,
            _ => {
                *slot = Some(class);
                Some(())
            }
        }
    }

    fn region_class(&self, r: &CRegion<'_>) -> Option<RegClass> {
        match &r.kind {
            CRKind::Whole => Some(RegClass::Same),
            // offsets from the base: the slice moves with it
            CRKind::Slice { base, start, end } => {
                self.same(start)?;
                self.same(end)?;
                self.region_class(base)
            }
            CRKind::Chunk { base, index, parts } => {
                let whole_world = parts.as_ref().is_none_or(|p| matches!(p.kind, CK::Slot(WORLD)));
                match (self.expr(index).class, &base.kind) {
                    (Class::Same, _) => {
                        if let Some(p) = parts {
                            self.same(p)?;
                        }
                        self.region_class(base)
                    }
                    // chunk `(i + r) % world` of `world` is chunk `i` moved
                    // by `r` chunks, or by `r - world` when it would wrap
                    (Class::Rot, CRKind::Whole) if whole_world => Some(RegClass::Turned),
                    _ => None,
                }
            }
            CRKind::Part { .. } => None,
        }
    }

    fn expr(&self, e: &CExpr) -> Val {
        use Class::{Other, Same};
        match &e.kind {
            CK::Int(v) => Val::exact(*v),
            CK::Slot(s) => self.slots.get(*s as usize).copied().unwrap_or(Val::any(Other)),
            CK::Len(_) => Val::any(Same),
            CK::Count(_) => Val::any(Other),
            CK::Unary(op, x) => {
                let x = self.expr(x);
                let class = if x.class == Same { Same } else { Other };
                match op {
                    UnOp::Neg => Val::computed(class, -x.hi, -x.lo),
                    UnOp::Not => Val::new(class, 0, 1),
                }
            }
            CK::Binary(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.binary(*op, a, b)
            }
            CK::Call(f, args) => {
                let vals: Vec<Val> = args.iter().map(|a| self.expr(a)).collect();
                if vals.iter().any(|v| v.class != Same) {
                    return Val::any(Other);
                }
                let (lo, hi) = match (f, vals.as_slice()) {
                    // floor(log2 x) is monotone: exact bounds when x >= 1
                    (Func::Log2, [x]) if x.lo >= 1 => (i128::from(x.lo.ilog2()), i128::from(x.hi.ilog2())),
                    (Func::Log2, _) => (0, 63),
                    (Func::CeilLog2, [x]) if x.lo >= 1 => {
                        let up = |v: i128| if v <= 1 { 0 } else { i128::from((v - 1).ilog2()) + 1 };
                        (up(x.lo), up(x.hi))
                    }
                    (Func::IsPow2, _) => (0, 1),
                    (Func::Pow2, [k]) if k.lo >= 0 && k.hi < 63 => (1 << k.lo, 1 << k.hi),
                    (Func::Min, [x, y]) => (x.lo.min(y.lo), x.hi.min(y.hi)),
                    (Func::Max, [x, y]) => (x.lo.max(y.lo), x.hi.max(y.hi)),
                    _ => (MIN, MAX),
                };
                Val::computed(Same, lo, hi)
            }
        }
    }

    fn binary(&self, op: BinOp, a: Val, b: Val) -> Val {
        use Class::{Other, Rot, Same, Shift};
        let shifted = |c: Class| matches!(c, Shift | Rot);
        let class = match (op, a.class, b.class) {
            (_, Same, Same) => Same,
            (BinOp::Add | BinOp::Sub, x, Same) | (BinOp::Add, Same, x) if shifted(x) => Shift,
            (BinOp::Rem, x, Same) if shifted(x) && b.lo == b.hi && b.lo == i128::from(self.world) => Rot,
            _ => return Val::any(Other),
        };
        let (lo, hi) = match op {
            BinOp::Add => (a.lo + b.lo, a.hi + b.hi),
            BinOp::Sub => (a.lo - b.hi, a.hi - b.lo),
            BinOp::Mul => {
                let p = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
                (p.into_iter().min().unwrap_or(MIN), p.into_iter().max().unwrap_or(MAX))
            }
            BinOp::Div if b.lo == b.hi && b.lo > 0 => (a.lo.div_euclid(b.lo), a.hi.div_euclid(b.lo)),
            BinOp::Rem if b.lo > 0 => (0, b.hi - 1),
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::And | BinOp::Or => (0, 1),
            _ => (MIN, MAX),
        };
        Val::computed(class, lo, hi)
    }
}
