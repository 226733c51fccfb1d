//! The rotation-symmetry reduction against the full check: whenever the
//! reduction passes a schedule, the full check passes it too, and
//! `check_world` (which tries the reduction first) gives the full check's
//! diagnostics, word for word, on schedules that are symmetric, symmetric
//! but wrong, or symmetric except on one rank.

use proptest::prelude::*;

use super::pass::{direct_all_to_all, pairwise_all_to_all_sending, ring_all_gather, ring_all_reduce};
use super::props::{phase, post, ring_schedule, stmts};
use super::*;
use crate::check::{rotation, symmetry};
use crate::check_world;
use crate::compile::compile;
use crate::verify::full_checks;

/// Compares the reduction and `check_world` with the full check of `s` at
/// `world`; returns whether the reduction passed it, and the diagnostics.
fn agrees(s: &Schedule, world: i64, scalars: &[i64]) -> (bool, Vec<String>) {
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return (false, Vec::new());
    }
    let full: Vec<String> = full_checks(&prog, world, scalars, true)
        .iter()
        .map(ToString::to_string)
        .collect();
    proof_agrees(&prog, world, scalars);
    let reduced = symmetry::passes(&prog, world, scalars);
    assert!(
        !reduced || full.is_empty(),
        "`{}` at world {world}: the reduction passed what the full check rejects: {full:?}",
        s.name
    );
    let got: Vec<String> = check_world(s, world, scalars).iter().map(ToString::to_string).collect();
    assert_eq!(got, full, "`{}` at world {world}", s.name);
    (reduced, full)
}

/// The reduction with rank 0 alone unrolled where the program's shape
/// proves the others its images, and with every rank unrolled and compared:
/// the same verdict and the same buffer units. Returns whether the shape
/// proved it.
fn proof_agrees(prog: &crate::compile::Prog<'_>, world: i64, scalars: &[i64]) -> bool {
    let proven = rotation::units(prog, world, scalars).is_some();
    let with = symmetry::reduced(prog, world, scalars, true);
    let without = symmetry::reduced(prog, world, scalars, false);
    assert_eq!(
        with, without,
        "`{}` at world {world} (proven from the shape: {proven})",
        prog.s.name
    );
    proven
}

fn proven(s: &Schedule, world: i64) -> bool {
    let (prog, diags) = compile(s);
    assert!(diags.is_empty(), "{diags:?}");
    proof_agrees(&prog, world, &[])
}

/// Step `s` of a ring all-gather: a batch passing a block to the right.
fn regular() -> Stmt {
    let out = || p(1, "output");
    batch(vec![
        send(out().chunk((rank() - var("s")) % world()), right()),
        recv(out().chunk((rank() - var("s") - 1) % world()), left()),
    ])
}

/// A ring all-gather that copies its input to output block `own` and runs
/// `step` for `s` in `0..steps`.
fn ring_with(own: Expr, steps: Expr, step: Stmt) -> Schedule {
    S::new("ring_all_gather_odd")
        .input("input", n())
        .output("output", n() * world())
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output").chunk(own)),
            for_("s", 0, steps, vec![step]),
        ])
}

#[test]
fn symmetric_schedules_are_checked_on_one_rank_with_the_full_verdict() {
    for world in 1..=12 {
        for s in [ring_all_gather(1, 12), pairwise_all_to_all_sending(var("to"))] {
            let (reduced, full) = agrees(&s, world, &[]);
            assert!(full.is_empty(), "`{}` at world {world}: {full:?}", s.name);
            assert_eq!(reduced, world >= 2, "`{}` at world {world}", s.name);
            assert_eq!(proven(&s, world), world >= 2, "`{}` at world {world}", s.name);
        }
        // not of the kind the reduction takes (reductions; peers that do
        // not turn with the rank): the full check decides
        for s in [ring_all_reduce(), direct_all_to_all(1, 12)] {
            let (reduced, full) = agrees(&s, world, &[]);
            assert!(!reduced && full.is_empty(), "`{}` at world {world}: {full:?}", s.name);
        }
    }
}

/// The runtime's ring all-reduce of `buf` in place over operator parameter
/// `op`: `scatter` steps of a reduce-scatter ring whose receives reduce
/// with `red`, then an all-gather ring that forwards chunk
/// `rank + fwd - s`.
fn ring_all_reduce_in_place(scatter: Expr, red: OpExpr, fwd: i64) -> Schedule {
    let buf = || p(0, "buf");
    S::new("ring_all_reduce_in_place")
        .op_param("op")
        .output("buf", n() * world())
        .post(PostKind::AllReduce {
            input: bref(0, "buf"),
            output: bref(0, "buf"),
            op: OpExpr::Param(0),
        })
        .body(vec![
            for_(
                "s",
                0,
                scatter,
                vec![batch(vec![
                    send(buf().chunk((rank() - var("s")) % world()), right()),
                    recv_reduce(buf().chunk((rank() - var("s") - 1) % world()), left(), red),
                ])],
            ),
            for_(
                "s",
                0,
                world() - 1,
                vec![batch(vec![
                    send(buf().chunk((rank() + fwd - var("s")) % world()), right()),
                    recv(buf().chunk((rank() - var("s")) % world()), left()),
                ])],
            ),
        ])
}

#[test]
fn a_ring_all_reduce_in_place_is_checked_on_one_rank_for_every_operator() {
    let right = ring_all_reduce_in_place(world() - 1, OpExpr::Param(0), 1);
    for world in 1..=10 {
        for op in 0..4 {
            let (reduced, full) = agrees(&right, world, &[op]);
            assert!(full.is_empty(), "op {op} at world {world}: {full:?}");
            assert_eq!(reduced, world >= 2, "op {op} at world {world}");
            let (prog, _) = compile(&right);
            assert_eq!(
                proof_agrees(&prog, world, &[op]),
                world >= 2,
                "op {op} at world {world}"
            );
        }
    }
    // wrong on every rank alike: the reduction refuses, the full check
    // gives its diagnostic (`agrees` compares them word for word)
    let wrong = [
        // one reduce-scatter step short: a contribution missing
        ring_all_reduce_in_place(world() - 2, OpExpr::Param(0), 1),
        // the all-gather forwards the chunk it has not completed
        ring_all_reduce_in_place(world() - 1, OpExpr::Param(0), 0),
        // `sum` hard-coded where the postcondition has `op`
        ring_all_reduce_in_place(world() - 1, OpExpr::Lit(Op::Sum), 1),
    ];
    for (k, s) in wrong.iter().enumerate() {
        for world in 3..=10 {
            for op in 1..4 {
                let (reduced, full) = agrees(s, world, &[op]);
                assert!(
                    !reduced && !full.is_empty(),
                    "variant {k}, op {op} at world {world} passes"
                );
            }
        }
    }
}

#[test]
fn a_schedule_different_on_one_rank_gets_the_full_diagnostic() {
    let out = || p(1, "output");
    let mine = || out().chunk((rank() - var("s")) % world());
    let theirs = || out().chunk((rank() - var("s") - 1) % world());
    let odd = [
        // another peer
        batch(vec![send(mine(), (rank() + 2) % world()), recv(theirs(), left())]),
        // another region
        batch(vec![
            send(mine(), right()),
            recv(out().chunk((rank() - var("s") - 2) % world()), left()),
        ]),
        // another tag
        batch(vec![send_tag(mine(), right(), 1), recv(theirs(), left())]),
        // another length
        batch(vec![
            send(
                out().slice(
                    ((rank() - var("s")) % world()) * n(),
                    ((rank() - var("s")) % world()) * n() + 1,
                ),
                right(),
            ),
            recv(theirs(), left()),
        ]),
        // the same events from other statements: a different program on
        // rank 3, so the full check decides (and passes it)
        batch(vec![
            send(mine(), (rank() + 1) % world()),
            recv(theirs(), (rank() + world() - 1) % world()),
        ]),
    ];
    for (k, st) in odd.into_iter().enumerate() {
        let s = ring_with(rank(), world() - 1, if_else(eq(rank(), 3), vec![st], vec![regular()]));
        for world in 1..=12 {
            let (reduced, full) = agrees(&s, world, &[]);
            if k < 4 && world >= 5 {
                assert!(!full.is_empty(), "variant {k} at world {world} passes");
            }
            if k == 4 {
                let symmetric = (2..=3).contains(&world);
                assert!(
                    full.is_empty() && reduced == symmetric,
                    "variant {k} at world {world}: {full:?}"
                );
            }
        }
    }
}

#[test]
fn a_symmetric_schedule_with_a_wrong_result_gets_the_full_diagnostic() {
    // one step short: every rank misses one block
    let short = ring_with(rank(), world() - 2, regular());
    // the own block in the wrong place on every rank
    let shifted = ring_with((rank() + 1) % world(), world() - 1, regular());
    // all-to-all sending the wrong input block everywhere
    let wrong_block = pairwise_all_to_all_sending((var("to") + 1) % world());
    for s in [short, shifted, wrong_block] {
        for world in 2..=12 {
            let (reduced, full) = agrees(&s, world, &[]);
            assert!(!reduced && !full.is_empty(), "`{}` at world {world} passes", s.name);
        }
    }
}

#[test]
fn shapes_that_only_look_turned_are_not_proven() {
    let out = || p(1, "output");
    let ring = |send_region: Region, peer: Expr| {
        let step = batch(vec![
            send(send_region, peer),
            recv(out().chunk((rank() - var("s") - 1) % world()), left()),
        ]);
        ring_with(rank(), world() - 1, step)
    };
    let mine = || out().chunk((rank() - var("s")) % world());
    let cases = [
        // a peer without `% world`, out of range on the last rank
        ring(mine(), rank() + 1),
        // a peer that does not turn with the rank
        ring(mine(), (rank() * 3 + 1) % world()),
        // `rank + e` overflows on every rank but 0
        ring(mine(), (rank() + i64::MAX) % world()),
        // a chunk of 2, not of `world`: not the same block turned
        ring(out().chunk_of((rank() - var("s")) % world(), 2), right()),
        // the rank's block of a block: turns within the block, not the buffer
        ring(out().chunk(0).chunk((rank() - var("s")) % world()), right()),
        // one buffer addressed both turned and fixed
        ring(out().chunk(0), right()),
    ];
    for (k, s) in cases.iter().enumerate() {
        for world in 2..=7 {
            agrees(s, world, &[]);
            assert!(!proven(s, world), "case {k} at world {world}");
        }
    }
    // the overflow is an error of step 1 on rank 1, found by the full check
    let d = check_world(&cases[2], 3, &[]);
    assert!(
        d.iter()
            .any(|d| d.kind == crate::DiagKind::EvaluationError && d.message.contains("rank 1")),
        "{d:?}"
    );
}

/// One step of a random rotation-shaped schedule.
#[derive(Clone, Debug)]
struct Step {
    /// The send's region: the input, or the output block `(rank + off) % world`.
    send_block: Option<i64>,
    /// Peers `(rank + to) % world` and `(rank - from) % world`.
    to: i64,
    from: i64,
    /// The received block: `(rank + off) % world`, or `(rank + off + s) % world` in a loop.
    recv_off: i64,
    /// In `for s in 0..world - k` (with `s` added to the offsets), or once.
    looped: Option<i64>,
    batched: bool,
    recv_first: bool,
    /// Under `if world > k`.
    guard: Option<i64>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::option::of(-2_i64..3),
        -2_i64..3,
        -2_i64..3,
        -2_i64..3,
        prop::option::of(0_i64..3),
        prop::bool::ANY,
        prop::bool::ANY,
        prop::option::of(1_i64..4),
    )
        .prop_map(
            |(send_block, to, from, recv_off, looped, batched, recv_first, guard)| Step {
                send_block,
                to,
                from,
                recv_off,
                looped,
                batched,
                recv_first,
                guard,
            },
        )
}

fn shaped(steps: &[Step], all_to_all: bool) -> Schedule {
    let plus = |off: i64, looped: bool| {
        let e = rank() + off;
        if looped {
            e + var("s")
        } else {
            e
        }
    };
    let mut body = vec![copy(
        if all_to_all {
            p(0, "input").chunk(rank())
        } else {
            p(0, "input")
        },
        p(1, "output").chunk(rank()),
    )];
    for st in steps {
        let l = st.looped.is_some();
        let src = match st.send_block {
            Some(off) if all_to_all => p(0, "input").chunk(plus(off, l) % world()),
            Some(off) => p(1, "output").chunk(plus(off, l) % world()),
            None if all_to_all => p(0, "input").chunk(rank()),
            None => p(0, "input"),
        };
        let s = send(src, plus(st.to, l) % world());
        let r = recv(
            p(1, "output").chunk(plus(st.recv_off, l) % world()),
            (plus(0, l) - st.from) % world(),
        );
        let mut inner = if st.recv_first { vec![r, s] } else { vec![s, r] };
        if st.batched {
            inner = vec![batch(inner)];
        }
        if let Some(k) = st.looped {
            inner = vec![for_("s", 0, world() - k, inner)];
        }
        if let Some(k) = st.guard {
            inner = vec![if_(bin(BinOp::Gt, world(), int(k)), inner)];
        }
        body.extend(inner);
    }
    let input_len = if all_to_all { n() * world() } else { n() };
    let post = if all_to_all {
        PostKind::AllToAll {
            input: bref(0, "input"),
            output: bref(1, "output"),
        }
    } else {
        PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        }
    };
    S::new("shaped")
        .input("input", input_len)
        .output("output", n() * world())
        .post(post)
        .body(body)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random rotation-shaped schedules (right or wrong): proven from the
    /// shape, rank 0 alone gives the verdict every rank compared gives,
    /// and the full check's diagnostics.
    #[test]
    fn random_shaped_schedules_get_the_full_verdict(
        steps in prop::collection::vec(step(), 1..=3),
        all_to_all in prop::bool::ANY,
        world in 2_i64..=9,
    ) {
        let s = shaped(&steps, all_to_all);
        prop_assert!(proven(&s, world));
        agrees(&s, world, &[]);
    }

    /// Random shifted rings (orders, tags, batches; symmetric or not).
    #[test]
    fn random_rings_get_the_full_verdict(phases in prop::collection::vec(phase(), 1..=4), world in 1_i64..=9) {
        let s = ring_schedule(&phases);
        agrees(&s, world, &[]);
    }

    /// Random IR with random postconditions.
    #[test]
    fn random_schedules_get_the_full_verdict(body in stmts(), post in post(), size in 1_i64..=5) {
        let mut b = S::new("fuzz").input("input", n()).output("output", n() * world());
        if let Some(p) = post {
            b = b.post(p);
        }
        agrees(&b.body(body), size, &[]);
    }
}
