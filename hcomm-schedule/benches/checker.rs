//! Verification speed of the ring all-gather: compile time (a verify
//! set), run time (one world size), and the first call of many rank threads.

// `criterion_group!` defines an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use hcomm_schedule::{
    verify, BinOp, BufKind, BufRef, Expr, ExprKind, Ident, Name, NameKind, PostKind, Postcondition, Region, RegionKind,
    Schedule, SpanId, Stmt, StmtKind, VerifySpec, WorldSet,
};

const S: SpanId = SpanId(0);

fn e(kind: ExprKind) -> Expr {
    Expr { kind, span: S }
}

fn name(kind: NameKind, text: &str) -> Expr {
    e(ExprKind::Name(Name {
        kind,
        text: text.to_owned(),
    }))
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    e(ExprKind::Binary(op, Box::new(a), Box::new(b)))
}

fn int(v: i64) -> Expr {
    e(ExprKind::Int(v))
}

fn buf(index: usize, text: &str) -> BufRef {
    BufRef {
        name: text.to_owned(),
        kind: BufKind::Param(index),
        span: S,
    }
}

fn chunk(index: Expr) -> Region {
    Region {
        kind: RegionKind::Chunk {
            base: Box::new(Region {
                kind: RegionKind::Whole(buf(1, "output")),
                span: S,
            }),
            index,
            parts: None,
        },
        span: S,
    }
}

fn stmt(kind: StmtKind) -> Stmt {
    Stmt { kind, span: S }
}

/// The spec's `ring_all_gather`, checked for `world in 1..=hi`.
fn ring_all_gather(hi: i64) -> Schedule {
    let rank = || name(NameKind::Rank, "rank");
    let world = || name(NameKind::World, "world");
    let s = || name(NameKind::Var, "s");
    let n = || name(NameKind::LenVar(0), "n");
    let modw = |x: Expr| bin(BinOp::Rem, x, world());
    let body = vec![
        stmt(StmtKind::Copy {
            src: Region {
                kind: RegionKind::Whole(buf(0, "input")),
                span: S,
            },
            dst: chunk(rank()),
        }),
        stmt(StmtKind::For {
            var: Ident {
                name: "s".to_owned(),
                span: S,
            },
            start: int(0),
            end: bin(BinOp::Sub, world(), int(1)),
            inclusive: false,
            reverse: false,
            body: vec![stmt(StmtKind::Batch {
                body: vec![
                    stmt(StmtKind::Send {
                        region: chunk(modw(bin(BinOp::Sub, rank(), s()))),
                        peer: modw(bin(BinOp::Add, rank(), int(1))),
                        tag: None,
                    }),
                    stmt(StmtKind::Recv {
                        region: chunk(modw(bin(BinOp::Sub, bin(BinOp::Sub, rank(), s()), int(1)))),
                        peer: modw(bin(BinOp::Sub, rank(), int(1))),
                        tag: None,
                        reduce: None,
                    }),
                ],
            })],
        }),
    ];
    Schedule {
        name: "ring_all_gather".to_owned(),
        buffers: vec![
            hcomm_schedule::Buffer {
                name: "input".to_owned(),
                writable: false,
                len: n(),
                span: S,
            },
            hcomm_schedule::Buffer {
                name: "output".to_owned(),
                writable: true,
                len: bin(BinOp::Mul, n(), world()),
                span: S,
            },
        ],
        scalars: Vec::new(),
        counts: Vec::new(),
        len_vars: vec![Ident {
            name: "n".to_owned(),
            span: S,
        }],
        verify: VerifySpec {
            world: WorldSet::Range {
                lo: 1,
                hi,
                inclusive: true,
            },
            scalars: Vec::new(),
            lengths: Vec::new(),
            span: S,
        },
        requires: Vec::new(),
        postcondition: Some(Postcondition {
            kind: PostKind::AllGather {
                input: buf(0, "input"),
                output: buf(1, "output"),
            },
            span: S,
        }),
        body,
        span: S,
    }
}

fn bench(c: &mut Criterion) {
    let big = ring_all_gather(256);
    assert!(verify(&big).is_empty());
    let mut g = c.benchmark_group("verify");
    g.sample_size(10);
    g.bench_function("ring_all_gather 1..=256", |b| {
        b.iter(|| verify(black_box(&big)));
    });
    let small = ring_all_gather(16);
    g.bench_function("ring_all_gather 1..=16", |b| {
        b.iter(|| verify(black_box(&small)));
    });
    for world in [512, 4096] {
        let one = ring_all_gather(world);
        g.bench_function(format!("ring_all_gather at {world} (run time)"), |b| {
            b.iter(|| hcomm_schedule::check_world(black_box(&one), world, &[]));
        });
    }
    g.finish();

    // The first call of 16 rank threads at world 256 (outside the verify
    // set): each thread checking on its own, as the cache used to let them,
    // against one shared check the others wait for.
    let (threads, world) = (16, 256);
    let s = ring_all_gather(16);
    let mut g = c.benchmark_group("first call of 16 rank threads at world 256");
    g.sample_size(10);
    g.bench_function("every thread checks", |b| {
        b.iter(|| {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| assert!(hcomm_schedule::check_world(&s, world, &[]).is_empty()));
                }
            });
        });
    });
    g.bench_function("one check per process", |b| {
        b.iter(|| {
            let cache = hcomm_schedule::VerifyCache::new();
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| assert_eq!(cache.check(&s, world, &[]), Ok(())));
                }
            });
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
