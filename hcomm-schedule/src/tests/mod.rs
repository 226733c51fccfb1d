//! IR-building helpers for the checker's tests, and the tests themselves
//! (`pass.rs`: correct algorithms; `fail.rs`: one test per diagnostic kind).

#![allow(clippy::wildcard_imports)]

use std::ops::{Add, BitXor, Div, Mul, Rem, Shl, Sub};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::ir::*;

mod catalogue;
mod counts_paths;
mod eval_props;
mod exact;
mod fail;
mod forms;
mod len_ranges;
mod lockstep;
pub(crate) mod pass;
mod plan;
pub(crate) mod props;
mod resolve;
mod symmetry;
mod symmetry_counts;
mod syntax;
mod timeline;

static NEXT_SPAN: AtomicU32 = AtomicU32::new(1000);

/// A fresh span, so tests can tell which node a diagnostic points at.
pub(crate) fn sp() -> SpanId {
    SpanId(NEXT_SPAN.fetch_add(1, Ordering::Relaxed))
}

fn ex(kind: ExprKind) -> Expr {
    Expr { kind, span: sp() }
}

pub(crate) fn int(v: i64) -> Expr {
    ex(ExprKind::Int(v))
}

fn name(kind: NameKind, text: &str) -> Expr {
    ex(ExprKind::Name(Name {
        kind,
        text: text.to_owned(),
    }))
}

pub(crate) fn rank() -> Expr {
    name(NameKind::Rank, "rank")
}

pub(crate) fn world() -> Expr {
    name(NameKind::World, "world")
}

pub(crate) fn var(text: &str) -> Expr {
    name(NameKind::Var, text)
}

pub(crate) fn scalar(i: usize, text: &str) -> Expr {
    name(NameKind::Scalar(i), text)
}

/// The length variable `n` (index 0).
pub(crate) fn n() -> Expr {
    name(NameKind::LenVar(0), "n")
}

pub(crate) fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    ex(ExprKind::Binary(op, Box::new(a), Box::new(b)))
}

pub(crate) fn call(f: Func, args: Vec<Expr>) -> Expr {
    ex(ExprKind::Call(f, args))
}

pub(crate) fn log2(x: Expr) -> Expr {
    call(Func::Log2, vec![x])
}

pub(crate) fn pow2(x: Expr) -> Expr {
    call(Func::Pow2, vec![x])
}

pub(crate) fn min(a: Expr, b: Expr) -> Expr {
    call(Func::Min, vec![a, b])
}

pub(crate) fn eq(a: Expr, b: impl Into<Expr>) -> Expr {
    bin(BinOp::Eq, a, b.into())
}

pub(crate) fn lt(a: Expr, b: impl Into<Expr>) -> Expr {
    bin(BinOp::Lt, a, b.into())
}

pub(crate) fn ge(a: Expr, b: impl Into<Expr>) -> Expr {
    bin(BinOp::Ge, a, b.into())
}

pub(crate) fn and(a: Expr, b: Expr) -> Expr {
    bin(BinOp::And, a, b)
}

impl From<i64> for Expr {
    fn from(v: i64) -> Self {
        int(v)
    }
}

macro_rules! ops {
    ($($tr:ident $f:ident $op:ident),*) => {$(
        impl<T: Into<Expr>> $tr<T> for Expr {
            type Output = Expr;
            fn $f(self, rhs: T) -> Expr {
                bin(BinOp::$op, self, rhs.into())
            }
        }
    )*};
}
ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Rem, BitXor bitxor BitXor, Shl shl Shl);

/// `(rank + 1) % world`
pub(crate) fn right() -> Expr {
    (rank() + 1) % world()
}

/// `(rank - 1) % world`
pub(crate) fn left() -> Expr {
    (rank() - 1) % world()
}

// ---- regions ----

/// A whole parameter buffer.
pub(crate) fn p(index: usize, text: &str) -> Region {
    Region {
        kind: RegionKind::Whole(BufRef {
            name: text.to_owned(),
            kind: BufKind::Param(index),
            span: sp(),
        }),
        span: sp(),
    }
}

/// A whole scratch buffer.
pub(crate) fn scr(text: &str) -> Region {
    Region {
        kind: RegionKind::Whole(BufRef {
            name: text.to_owned(),
            kind: BufKind::Scratch,
            span: sp(),
        }),
        span: sp(),
    }
}

pub(crate) trait RegionExt {
    fn chunk(self, i: impl Into<Expr>) -> Region;
    fn chunk_of(self, i: impl Into<Expr>, k: impl Into<Expr>) -> Region;
    fn slice(self, a: impl Into<Expr>, b: impl Into<Expr>) -> Region;
}

impl RegionExt for Region {
    fn chunk(self, i: impl Into<Expr>) -> Region {
        Region {
            kind: RegionKind::Chunk {
                base: Box::new(self),
                index: i.into(),
                parts: None,
            },
            span: sp(),
        }
    }

    fn chunk_of(self, i: impl Into<Expr>, k: impl Into<Expr>) -> Region {
        Region {
            kind: RegionKind::Chunk {
                base: Box::new(self),
                index: i.into(),
                parts: Some(k.into()),
            },
            span: sp(),
        }
    }

    fn slice(self, a: impl Into<Expr>, b: impl Into<Expr>) -> Region {
        Region {
            kind: RegionKind::Slice {
                base: Box::new(self),
                start: a.into(),
                end: b.into(),
            },
            span: sp(),
        }
    }
}

// ---- statements ----

fn st(kind: StmtKind) -> Stmt {
    Stmt { kind, span: sp() }
}

pub(crate) fn ident(text: &str) -> Ident {
    Ident {
        name: text.to_owned(),
        span: sp(),
    }
}

pub(crate) fn send(region: Region, peer: impl Into<Expr>) -> Stmt {
    st(StmtKind::Send {
        region,
        peer: peer.into(),
        tag: None,
    })
}

pub(crate) fn send_tag(region: Region, peer: impl Into<Expr>, tag: i64) -> Stmt {
    st(StmtKind::Send {
        region,
        peer: peer.into(),
        tag: Some(int(tag)),
    })
}

pub(crate) fn recv(region: Region, peer: impl Into<Expr>) -> Stmt {
    st(StmtKind::Recv {
        region,
        peer: peer.into(),
        tag: None,
        reduce: None,
    })
}

pub(crate) fn recv_tag(region: Region, peer: impl Into<Expr>, tag: i64) -> Stmt {
    st(StmtKind::Recv {
        region,
        peer: peer.into(),
        tag: Some(int(tag)),
        reduce: None,
    })
}

pub(crate) fn recv_reduce(region: Region, peer: impl Into<Expr>, op: impl Into<OpExpr>) -> Stmt {
    st(StmtKind::Recv {
        region,
        peer: peer.into(),
        tag: None,
        reduce: Some(op.into()),
    })
}

pub(crate) fn isend(h: &str, region: Region, peer: impl Into<Expr>) -> Stmt {
    st(StmtKind::Isend {
        handle: ident(h),
        region,
        peer: peer.into(),
        tag: None,
    })
}

pub(crate) fn irecv(h: &str, region: Region, peer: impl Into<Expr>) -> Stmt {
    st(StmtKind::Irecv {
        handle: ident(h),
        region,
        peer: peer.into(),
        tag: None,
        reduce: None,
    })
}

pub(crate) fn wait(hs: &[&str]) -> Stmt {
    st(StmtKind::Wait {
        handles: hs.iter().map(|h| ident(h)).collect(),
    })
}

pub(crate) fn batch(body: Vec<Stmt>) -> Stmt {
    st(StmtKind::Batch { body })
}

pub(crate) fn copy(src: Region, dst: Region) -> Stmt {
    st(StmtKind::Copy { src, dst })
}

pub(crate) fn accumulate(src: Region, dst: Region, op: impl Into<OpExpr>) -> Stmt {
    st(StmtKind::Accumulate {
        src,
        dst,
        op: op.into(),
    })
}

pub(crate) fn let_(text: &str, value: Expr) -> Stmt {
    st(StmtKind::Let {
        name: ident(text),
        value,
    })
}

pub(crate) fn scratch(text: &str, len: Expr) -> Stmt {
    st(StmtKind::Scratch { name: ident(text), len })
}

pub(crate) fn for_(v: &str, start: impl Into<Expr>, end: impl Into<Expr>, body: Vec<Stmt>) -> Stmt {
    st(StmtKind::For {
        var: ident(v),
        start: start.into(),
        end: end.into(),
        inclusive: false,
        reverse: false,
        body,
    })
}

pub(crate) fn for_rev(v: &str, start: impl Into<Expr>, end: impl Into<Expr>, body: Vec<Stmt>) -> Stmt {
    st(StmtKind::For {
        var: ident(v),
        start: start.into(),
        end: end.into(),
        inclusive: false,
        reverse: true,
        body,
    })
}

pub(crate) fn if_(cond: Expr, then: Vec<Stmt>) -> Stmt {
    st(StmtKind::If {
        branches: vec![(cond, then)],
        else_body: None,
    })
}

pub(crate) fn if_else(cond: Expr, then: Vec<Stmt>, other: Vec<Stmt>) -> Stmt {
    st(StmtKind::If {
        branches: vec![(cond, then)],
        else_body: Some(other),
    })
}

pub(crate) fn coll(kind: Collective) -> Stmt {
    st(StmtKind::Collective { kind, over: None })
}

pub(crate) fn coll_over(kind: Collective, over: Expr) -> Stmt {
    st(StmtKind::Collective { kind, over: Some(over) })
}

pub(crate) fn bref(index: usize, text: &str) -> BufRef {
    BufRef {
        name: text.to_owned(),
        kind: BufKind::Param(index),
        span: sp(),
    }
}

// ---- schedules ----

/// `input: [T; n]` and `output: [T; n * world]`, the buffers of an
/// all-gather.
pub(crate) fn gather_bufs(name: &str) -> S {
    S::new(name).input("input", n()).output("output", n() * world())
}

/// [`gather_bufs`] claiming `all_gather(input -> output)`.
pub(crate) fn all_gather_claim(name: &str) -> S {
    gather_bufs(name).post(PostKind::AllGather {
        input: bref(0, "input"),
        output: bref(1, "output"),
    })
}

/// A schedule builder.
pub(crate) struct S(pub(crate) Schedule);

impl S {
    pub(crate) fn new(name: &str) -> Self {
        let span = sp();
        S(Schedule {
            name: name.to_owned(),
            buffers: Vec::new(),
            scalars: Vec::new(),
            counts: Vec::new(),
            len_vars: vec![ident("n")],
            verify: VerifySpec::default_for(span),
            requires: Vec::new(),
            postcondition: None,
            body: Vec::new(),
            span,
        })
    }

    /// A read-only buffer.
    pub(crate) fn input(mut self, text: &str, len: Expr) -> Self {
        self.0.buffers.push(Buffer {
            name: text.to_owned(),
            writable: false,
            len,
            span: sp(),
        });
        self
    }

    /// A writable buffer.
    pub(crate) fn output(mut self, text: &str, len: Expr) -> Self {
        self.0.buffers.push(Buffer {
            name: text.to_owned(),
            writable: true,
            len,
            span: sp(),
        });
        self
    }

    pub(crate) fn scalar(mut self, text: &str) -> Self {
        self.0.scalars.push(Scalar {
            name: text.to_owned(),
            op: false,
            span: sp(),
        });
        self
    }

    /// An operator parameter `text: ReduceOp`.
    pub(crate) fn op_param(mut self, text: &str) -> Self {
        self.0.scalars.push(Scalar {
            name: text.to_owned(),
            op: true,
            span: sp(),
        });
        self
    }

    pub(crate) fn worlds(mut self, lo: i64, hi: i64) -> Self {
        self.0.verify.world = WorldSet::Range {
            lo,
            hi,
            inclusive: true,
        };
        self
    }

    pub(crate) fn world_list(mut self, l: &[i64]) -> Self {
        self.0.verify.world = WorldSet::List(l.to_vec());
        self
    }

    /// `NAME in lo..hi` for scalar `i`.
    pub(crate) fn range(mut self, i: usize, lo: Expr, hi: Expr) -> Self {
        let text = self.0.scalars[i].name.clone();
        self.0.verify.scalars.push(ScalarRange {
            scalar: i,
            name: ident(&text),
            lo,
            hi,
            inclusive: false,
            span: sp(),
        });
        self
    }

    pub(crate) fn requires(mut self, e: Expr) -> Self {
        self.0.requires.push(e);
        self
    }

    pub(crate) fn post(mut self, kind: PostKind) -> Self {
        self.0.postcondition = Some(Postcondition { kind, span: sp() });
        self
    }

    pub(crate) fn body(mut self, body: Vec<Stmt>) -> Schedule {
        self.0.body = body;
        self.0
    }
}

/// Finds a statement by a predicate, depth first.
pub(crate) fn find_stmt<'a>(body: &'a [Stmt], f: &dyn Fn(&Stmt) -> bool) -> Option<&'a Stmt> {
    for s in body {
        if f(s) {
            return Some(s);
        }
        let inner: Vec<&Vec<Stmt>> = match &s.kind {
            StmtKind::Batch { body } | StmtKind::For { body, .. } => vec![body],
            StmtKind::If { branches, else_body } => branches.iter().map(|(_, b)| b).chain(else_body.iter()).collect(),
            _ => Vec::new(),
        };
        for b in inner {
            if let Some(x) = find_stmt(b, f) {
                return Some(x);
            }
        }
    }
    None
}

/// Asserts exactly one diagnostic of `kind` and returns its full text.
#[track_caller]
pub(crate) fn one(diags: &[crate::Diagnostic], kind: crate::DiagKind) -> crate::Diagnostic {
    assert_eq!(
        diags.len(),
        1,
        "expected one `{kind}` diagnostic, got: {:#?}",
        diags.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
    assert_eq!(diags[0].kind, kind, "got: {}", diags[0]);
    diags[0].clone()
}
