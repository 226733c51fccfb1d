//! Building schedule IR in code: expressions (operators are functions:
//! `Expr` is a foreign type here), regions,
//! statements and the three parameter buffers every generated schedule has.

use hcomm_schedule::ir::{
    BinOp, BufKind, BufRef, Buffer, Collective, Expr, ExprKind, Func, Ident, Name, NameKind, Op, Region, RegionKind,
    Schedule, SpanId, Stmt, StmtKind, VerifySpec, WorldSet,
};

/// The parameter buffers: `inp: &[T; n * world]`, `out` and `acc`:
/// `&mut [T; n * world]`.
pub const INP: usize = 0;
/// See [`INP`].
pub const OUT: usize = 1;
/// See [`INP`].
pub const ACC: usize = 2;
/// Their names.
pub const NAMES: [&str; 3] = ["inp", "out", "acc"];

fn ex(kind: ExprKind) -> Expr {
    Expr {
        kind,
        span: SpanId::default(),
    }
}

pub fn int(v: i64) -> Expr {
    ex(ExprKind::Int(v))
}

fn name(kind: NameKind, text: &str) -> Expr {
    ex(ExprKind::Name(Name {
        kind,
        text: text.to_owned(),
    }))
}

pub fn rank() -> Expr {
    name(NameKind::Rank, "rank")
}

pub fn world() -> Expr {
    name(NameKind::World, "world")
}

pub fn var(text: &str) -> Expr {
    name(NameKind::Var, text)
}

/// The length variable `n`.
pub fn n() -> Expr {
    name(NameKind::LenVar(0), "n")
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    ex(ExprKind::Binary(op, Box::new(a), Box::new(b)))
}

pub fn min(a: Expr, b: Expr) -> Expr {
    ex(ExprKind::Call(Func::Min, vec![a, b]))
}

pub fn eq(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Eq, a, b)
}

pub fn lt(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Lt, a, b)
}

pub fn ne(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Ne, a, b)
}

/// `a + b`
pub fn add(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Add, a, b)
}

/// `a - b`
pub fn sub(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Sub, a, b)
}

/// `a * b`
pub fn mul(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Mul, a, b)
}

/// `a / b`
pub fn div(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Div, a, b)
}

/// `a % b`
pub fn rem(a: Expr, b: Expr) -> Expr {
    bin(BinOp::Rem, a, b)
}

/// `(rank + k) % world`
pub fn right(k: Expr) -> Expr {
    rem(add(rank(), k), world())
}

/// `(rank - k) % world`
pub fn left(k: Expr) -> Expr {
    rem(sub(rank(), k), world())
}

// ---- regions ----

/// A whole parameter buffer.
pub fn buf(index: usize) -> Region {
    whole(BufRef {
        name: NAMES[index].to_owned(),
        kind: BufKind::Param(index),
        span: SpanId::default(),
    })
}

/// A whole scratch buffer.
pub fn scratch_buf(text: &str) -> Region {
    whole(BufRef {
        name: text.to_owned(),
        kind: BufKind::Scratch,
        span: SpanId::default(),
    })
}

fn whole(b: BufRef) -> Region {
    Region {
        kind: RegionKind::Whole(b),
        span: SpanId::default(),
    }
}

/// `base.chunk(index)` (`world` parts).
pub fn chunk(base: Region, index: Expr) -> Region {
    Region {
        kind: RegionKind::Chunk {
            base: Box::new(base),
            index,
            parts: None,
        },
        span: SpanId::default(),
    }
}

/// `base.chunk(index, parts)`.
pub fn chunk_of(base: Region, index: Expr, parts: Expr) -> Region {
    Region {
        kind: RegionKind::Chunk {
            base: Box::new(base),
            index,
            parts: Some(parts),
        },
        span: SpanId::default(),
    }
}

// ---- statements ----

fn st(kind: StmtKind) -> Stmt {
    Stmt {
        kind,
        span: SpanId::default(),
    }
}

pub fn ident(text: &str) -> Ident {
    Ident {
        name: text.to_owned(),
        span: SpanId::default(),
    }
}

fn tag_expr(tag: i64) -> Option<Expr> {
    (tag != 0).then(|| int(tag))
}

pub fn send(region: Region, peer: Expr, tag: i64) -> Stmt {
    st(StmtKind::Send {
        region,
        peer,
        tag: tag_expr(tag),
    })
}

pub fn recv(region: Region, peer: Expr, tag: i64, reduce: Option<Op>) -> Stmt {
    st(StmtKind::Recv {
        region,
        peer,
        tag: tag_expr(tag),
        reduce: reduce.map(Into::into),
    })
}

pub fn isend(handle: &str, region: Region, peer: Expr, tag: i64) -> Stmt {
    st(StmtKind::Isend {
        handle: ident(handle),
        region,
        peer,
        tag: tag_expr(tag),
    })
}

pub fn irecv(handle: &str, region: Region, peer: Expr, tag: i64, reduce: Option<Op>) -> Stmt {
    st(StmtKind::Irecv {
        handle: ident(handle),
        region,
        peer,
        tag: tag_expr(tag),
        reduce: reduce.map(Into::into),
    })
}

pub fn wait(handles: &[String]) -> Stmt {
    st(StmtKind::Wait {
        handles: handles.iter().map(|h| ident(h)).collect(),
    })
}

pub fn batch(body: Vec<Stmt>) -> Stmt {
    st(StmtKind::Batch { body })
}

pub fn copy(src: Region, dst: Region) -> Stmt {
    st(StmtKind::Copy { src, dst })
}

pub fn accumulate(src: Region, dst: Region, op: Op) -> Stmt {
    st(StmtKind::Accumulate {
        src,
        dst,
        op: op.into(),
    })
}

pub fn let_(text: &str, value: Expr) -> Stmt {
    st(StmtKind::Let {
        name: ident(text),
        value,
    })
}

pub fn scratch(text: &str, len: Expr) -> Stmt {
    st(StmtKind::Scratch { name: ident(text), len })
}

pub fn for_(v: &str, start: Expr, end: Expr, reverse: bool, body: Vec<Stmt>) -> Stmt {
    st(StmtKind::For {
        var: ident(v),
        start,
        end,
        inclusive: false,
        reverse,
        body,
    })
}

pub fn if_(cond: Expr, then: Vec<Stmt>, other: Option<Vec<Stmt>>) -> Stmt {
    st(StmtKind::If {
        branches: vec![(cond, then)],
        else_body: other,
    })
}

pub fn coll(kind: Collective, over: Option<Expr>) -> Stmt {
    st(StmtKind::Collective { kind, over })
}

/// A schedule over the three parameter buffers, verified at `world` only.
pub fn schedule(name: &str, size: i64, body: Vec<Stmt>) -> Schedule {
    let len = mul(n(), world());
    Schedule {
        name: name.to_owned(),
        buffers: (0..3)
            .map(|i| Buffer {
                name: NAMES[i].to_owned(),
                writable: i != INP,
                len: len.clone(),
                span: SpanId::default(),
            })
            .collect(),
        scalars: Vec::new(),
        counts: Vec::new(),
        len_vars: vec![ident("n")],
        verify: VerifySpec {
            world: WorldSet::List(vec![size]),
            ..VerifySpec::default_for(SpanId::default())
        },
        requires: Vec::new(),
        postcondition: None,
        body,
        span: SpanId::default(),
    }
}
