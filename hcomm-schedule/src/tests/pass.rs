//! Correct algorithms: each verifies with its postcondition.

use super::*;
use crate::{check_world, verify};

/// The spec's ring all-gather.
pub(crate) fn ring_all_gather(lo: i64, hi: i64) -> Schedule {
    S::new("ring_all_gather")
        .input("input", n())
        .output("output", n() * world())
        .worlds(lo, hi)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output").chunk(rank())),
            for_(
                "s",
                0,
                world() - 1,
                vec![batch(vec![
                    send(p(1, "output").chunk((rank() - var("s")) % world()), right()),
                    recv(p(1, "output").chunk((rank() - var("s") - 1) % world()), left()),
                ])],
            ),
        ])
}

#[track_caller]
fn assert_ok(s: &Schedule) {
    let d = verify(s);
    assert!(
        d.is_empty(),
        "expected no diagnostics, got: {:#?}",
        d.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
}

#[test]
fn ring_all_gather_verifies_for_1_to_64() {
    assert_ok(&ring_all_gather(1, 64));
}

#[test]
fn recursive_doubling_all_gather() {
    // block group of `d` ranks: mine starts at (rank / d) * d, the peer's at
    // (peer / d) * d; exchange them with slices in units of `n`
    let out = || p(1, "output");
    let s = S::new("rd_all_gather")
        .input("input", n())
        .output("output", n() * world())
        .worlds(1, 64)
        .requires(call(Func::IsPow2, vec![world()]))
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), out().chunk(rank())),
            for_(
                "k",
                0,
                log2(world()),
                vec![
                    let_("d", pow2(var("k"))),
                    let_("peer", rank() ^ var("d")),
                    let_("mine", rank() / var("d") * var("d")),
                    let_("theirs", var("peer") / var("d") * var("d")),
                    batch(vec![
                        send(
                            out().slice(var("mine") * n(), (var("mine") + var("d")) * n()),
                            var("peer"),
                        ),
                        recv(
                            out().slice(var("theirs") * n(), (var("theirs") + var("d")) * n()),
                            var("peer"),
                        ),
                    ]),
                ],
            ),
        ]);
    assert_ok(&s);
}

#[test]
fn bruck_all_gather_any_world() {
    let tmp = || scr("tmp");
    let s = S::new("bruck")
        .input("input", n())
        .output("output", n() * world())
        .worlds(1, 33)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            scratch("tmp", n() * world()),
            copy(p(0, "input"), tmp().chunk(0)),
            // ceil(log2(world)) steps
            for_(
                "k",
                0,
                log2(world() * 2 - 1),
                vec![
                    let_("d", pow2(var("k"))),
                    let_("cnt", min(var("d"), world() - var("d"))),
                    batch(vec![
                        send(tmp().slice(0, var("cnt") * n()), (rank() - var("d")) % world()),
                        recv(
                            tmp().slice(var("d") * n(), (var("d") + var("cnt")) * n()),
                            (rank() + var("d")) % world(),
                        ),
                    ]),
                ],
            ),
            for_(
                "i",
                0,
                world(),
                vec![copy(
                    tmp().chunk(var("i")),
                    p(1, "output").chunk((rank() + var("i")) % world()),
                )],
            ),
        ]);
    assert_ok(&s);
}

pub(crate) fn ring_all_reduce() -> Schedule {
    ring_all_reduce_by(Op::Sum.into(), S::new("ring_all_reduce"))
}

/// [`ring_all_reduce`] with `op` (a keyword or an operator parameter of `s`).
pub(crate) fn ring_all_reduce_by(op: OpExpr, s: S) -> Schedule {
    let out = || p(1, "output");
    s.input("input", n() * world())
        .output("output", n() * world())
        .worlds(1, 24)
        .post(PostKind::AllReduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: op.clone(),
        })
        .body(vec![
            copy(p(0, "input"), out()),
            // reduce-scatter: rank r ends with chunk (r + 1) % world complete
            for_(
                "s",
                0,
                world() - 1,
                vec![batch(vec![
                    send(out().chunk((rank() - var("s")) % world()), right()),
                    recv_reduce(out().chunk((rank() - var("s") - 1) % world()), left(), op),
                ])],
            ),
            // all-gather of the complete chunks
            for_(
                "s",
                0,
                world() - 1,
                vec![batch(vec![
                    send(out().chunk((rank() - var("s") + 1) % world()), right()),
                    recv(out().chunk((rank() - var("s")) % world()), left()),
                ])],
            ),
        ])
}

#[test]
fn ring_all_reduce_with_recv_reduce() {
    assert_ok(&ring_all_reduce());
}

/// Pairwise all-to-all: step `s` sends input block `block` (an expression
/// of `to = rank + s`; `to` itself is right) to rank `to` and receives
/// output block `from` from `from = rank - s`.
pub(crate) fn pairwise_all_to_all_sending(block: Expr) -> Schedule {
    S::new("pairwise")
        .input("input", n() * world())
        .output("output", n() * world())
        .worlds(1, 24)
        .post(PostKind::AllToAll {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input").chunk(rank()), p(1, "output").chunk(rank())),
            for_(
                "s",
                1,
                world(),
                vec![
                    let_("to", (rank() + var("s")) % world()),
                    let_("from", (rank() - var("s")) % world()),
                    batch(vec![
                        send(p(0, "input").chunk(block), var("to")),
                        recv(p(1, "output").chunk(var("from")), var("from")),
                    ]),
                ],
            ),
        ])
}

#[test]
fn pairwise_all_to_all() {
    assert_ok(&pairwise_all_to_all_sending(var("to")));
}

/// Direct all-to-all: one `batch` whose `for` posts a send and a receive per
/// peer, the caller itself included (a message to self inside a `batch` is
/// allowed, also when a loop or `if` in the batch produces it).
pub(crate) fn direct_all_to_all(lo: i64, hi: i64) -> Schedule {
    S::new("direct_all_to_all")
        .input("a", n() * world())
        .output("b", n() * world())
        .worlds(lo, hi)
        .post(PostKind::AllToAll {
            input: bref(0, "a"),
            output: bref(1, "b"),
        })
        .body(vec![batch(vec![for_(
            "j",
            0,
            world(),
            vec![
                send(p(0, "a").chunk(var("j")), var("j")),
                recv(p(1, "b").chunk(var("j")), var("j")),
            ],
        )])])
}

#[test]
fn direct_all_to_all_with_self_messages_in_a_batch_loop() {
    assert_ok(&direct_all_to_all(1, 16));
}

#[test]
fn self_messages_under_if_and_let_inside_a_batch() {
    // the self message is split off by an `if`, and its peer named by a `let`
    let s = S::new("direct_all_to_all_if")
        .input("a", n() * world())
        .output("b", n() * world())
        .worlds(1, 9)
        .post(PostKind::AllToAll {
            input: bref(0, "a"),
            output: bref(1, "b"),
        })
        .body(vec![batch(vec![
            let_("me", rank()),
            if_(
                ge(world(), 1),
                vec![
                    send(p(0, "a").chunk(var("me")), var("me")),
                    recv(p(1, "b").chunk(var("me")), var("me")),
                ],
            ),
            for_(
                "s",
                1,
                world(),
                vec![
                    let_("to", (rank() + var("s")) % world()),
                    let_("from", (rank() - var("s")) % world()),
                    send(p(0, "a").chunk(var("to")), var("to")),
                    recv(p(1, "b").chunk(var("from")), var("from")),
                ],
            ),
        ])]);
    assert_ok(&s);
}

pub(crate) fn binomial_broadcast() -> Schedule {
    let buf = || p(0, "buf");
    S::new("binomial_broadcast")
        .output("buf", n())
        .scalar("root")
        .worlds(1, 16)
        .range(0, int(0), world())
        .post(PostKind::Broadcast {
            buf: bref(0, "buf"),
            root: scalar(0, "root"),
        })
        .body(vec![
            let_("vr", (rank() - scalar(0, "root")) % world()),
            for_(
                "k",
                0,
                log2(world() * 2 - 1),
                vec![
                    let_("d", pow2(var("k"))),
                    st(StmtKind::If {
                        branches: vec![
                            (
                                and(lt(var("vr"), var("d")), lt(var("vr") + var("d"), world())),
                                vec![send(buf(), (rank() + var("d")) % world())],
                            ),
                            (
                                and(ge(var("vr"), var("d")), lt(var("vr"), var("d") * 2)),
                                vec![recv(buf(), (rank() - var("d")) % world())],
                            ),
                        ],
                        else_body: None,
                    }),
                ],
            ),
        ])
}

#[test]
fn binomial_broadcast_with_root_scalar() {
    assert_ok(&binomial_broadcast());
}

#[test]
fn two_dimensional_all_reduce_over_subgroups() {
    let ar = || Collective::AllReduce {
        src: p(0, "buf"),
        dst: None,
        op: Op::Sum.into(),
    };
    let s = S::new("all_reduce_2d")
        .output("buf", n())
        .world_list(&[1, 4, 9, 16])
        .post(PostKind::AllReduce {
            input: bref(0, "buf"),
            output: bref(0, "buf"),
            op: Op::Sum.into(),
        })
        .body(vec![
            // columns, then rows, of a square grid
            let_("side", call(Func::Max, vec![int(1), world() / 4 + 1])),
            coll_over(ar(), rank() % var("side")),
            coll_over(ar(), rank() / var("side")),
        ]);
    // world 9 / 16: side = 3 / 5; only the square sizes 1, 4 and 9 work with
    // `side` = sqrt(world): 1 -> 1, 4 -> 2, 9 -> 3; 16 -> 5 is wrong
    let d = verify(&s);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].kind, crate::DiagKind::PostconditionViolated, "{}", d[0]);
    assert!(d[0].message.starts_with("with world = 16,"), "{}", d[0]);
    // and the grid version proper at 4 passes
    assert!(check_world(&s, 4, &[]).is_empty());
}

#[test]
fn collectives_compose() {
    // reduce_scatter then all_gather is an all_reduce; reduce + broadcast too
    let s = S::new("rs_ag")
        .input("input", n() * world())
        .output("output", n() * world())
        .worlds(1, 8)
        .post(PostKind::AllReduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: Op::Max.into(),
        })
        .body(vec![
            scratch("part", n()),
            coll(Collective::ReduceScatter {
                src: p(0, "input"),
                dst: scr("part"),
                op: Op::Max.into(),
            }),
            coll(Collective::AllGather {
                src: scr("part"),
                dst: p(1, "output"),
            }),
        ]);
    assert_ok(&s);
    let s = S::new("reduce_bcast")
        .input("input", n())
        .output("output", n())
        .worlds(1, 8)
        .post(PostKind::AllReduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: Op::Prod.into(),
        })
        .body(vec![
            coll(Collective::Reduce {
                src: p(0, "input"),
                dst: p(1, "output"),
                op: Op::Prod.into(),
                root: world() - 1,
            }),
            coll(Collective::Broadcast {
                region: p(1, "output"),
                root: world() - 1,
            }),
        ]);
    assert_ok(&s);
}

#[test]
fn nonblocking_ring_with_waits() {
    let s = S::new("nb_ring")
        .input("input", n())
        .output("output", n() * world())
        .worlds(1, 16)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output").chunk(rank())),
            for_rev(
                "t",
                1,
                world(),
                vec![
                    // t runs world-1 .. 1; s = world - 1 - t
                    let_("s", world() - 1 - var("t")),
                    st(StmtKind::Irecv {
                        handle: ident("r"),
                        region: p(1, "output").chunk((rank() - var("s") - 1) % world()),
                        peer: left(),
                        tag: Some(var("s")),
                        reduce: None,
                    }),
                    st(StmtKind::Isend {
                        handle: ident("h"),
                        region: p(1, "output").chunk((rank() - var("s")) % world()),
                        peer: right(),
                        tag: Some(var("s")),
                    }),
                    wait(&["h", "r"]),
                ],
            ),
        ]);
    assert_ok(&s);
}

#[test]
fn recursive_doubling_all_reduce_with_accumulate() {
    let s = S::new("rd_all_reduce")
        .output("buf", n() * 2 + 1)
        .worlds(1, 32)
        .requires(call(Func::IsPow2, vec![world()]))
        .post(PostKind::AllReduce {
            input: bref(0, "buf"),
            output: bref(0, "buf"),
            op: Op::Sum.into(),
        })
        .body(vec![
            scratch("tmp", n() * 2 + 1),
            for_(
                "k",
                0,
                log2(world()),
                vec![
                    let_("peer", rank() ^ pow2(var("k"))),
                    batch(vec![send(p(0, "buf"), var("peer")), recv(scr("tmp"), var("peer"))]),
                    accumulate(scr("tmp"), p(0, "buf"), Op::Sum),
                ],
            ),
        ]);
    assert_ok(&s);
    // with `max` in the accumulate the postcondition (a sum) fails
    let mut bad = s.clone();
    if let StmtKind::For { body, .. } = &mut bad.body[1].kind {
        body[2] = accumulate(scr("tmp"), p(0, "buf"), Op::Max);
    }
    let d = verify(&bad);
    assert_eq!(d.len(), 1);
    assert!(
        d[0].message.starts_with("with world = 2, rank 0 ends with buf element 0 = a `max` of 2 contributions (rank 0's initial buf element 0, rank 1's initial buf element 0), expected the `sum` of every rank's buf element 0, each once"),
        "{}",
        d[0]
    );
}

/// `cargo test --release -p hcomm-schedule -- --ignored --nocapture timing`
#[test]
#[ignore = "timing, run in release"]
fn timing_ring_all_gather() {
    for hi in [16, 64, 256] {
        let s = ring_all_gather(1, hi);
        let t = std::time::Instant::now();
        assert!(verify(&s).is_empty());
        println!("ring all-gather 1..={hi}: {:?}", t.elapsed());
    }
    let s = ring_all_reduce();
    let t = std::time::Instant::now();
    assert!(verify(&s).is_empty());
    println!("ring all-reduce 1..=24: {:?}", t.elapsed());
}
