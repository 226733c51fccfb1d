//! The checker's word is exact: cases that a sampled or size-capped check
//! once let through (wrong data with `Ok`), each now decided or reported
//! as not decided.

use super::*;
use crate::verify::{check_world, check_world_unreduced, verify};
use crate::DiagKind;

/// Bruck's all-gather with blocks of `block` elements whose final rotation
/// copies blocks `0..rotated`, its scratch buffer `extra` elements longer
/// than needed.
fn bruck(block: impl Fn() -> Expr, rotated: Expr, extra: i64, worlds: &[i64]) -> Schedule {
    let tmp = || scr("tmp");
    let mut s = S::new("bruck");
    // constant blocks: no length variable
    s.0.len_vars.clear();
    s.input("input", block())
        .output("output", block() * world())
        .world_list(worlds)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            scratch("tmp", block() * world() + extra),
            copy(p(0, "input"), tmp().slice(0, block())),
            for_(
                "k",
                0,
                log2(world() - 1) + 1,
                vec![
                    let_("d", pow2(var("k"))),
                    let_("cnt", min(var("d"), world() - var("d"))),
                    batch(vec![
                        send(tmp().slice(0, var("cnt") * block()), (rank() - var("d")) % world()),
                        recv(
                            tmp().slice(var("d") * block(), (var("d") + var("cnt")) * block()),
                            (rank() + var("d")) % world(),
                        ),
                    ]),
                ],
            ),
            for_(
                "i",
                0,
                rotated,
                vec![copy(
                    tmp().slice(var("i") * block(), (var("i") + 1) * block()),
                    p(1, "output").chunk((rank() + var("i")) % world()),
                )],
            ),
        ])
}

#[test]
fn large_blocks_are_checked_one_symbol_per_block() {
    // 64 ranks of 16384-element blocks: 64 * 129 * 16384 elements, once
    // skipped above 2^26; the run moves one symbol per block
    let d = verify(&bruck(|| int(16384), world() / 2, 0, &[64]));
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 64, rank 0 ends with output block 32 element 0 = rank 0's initial output block 32 \
         element 0, expected rank 32's input block 0 element 0"
    );
    assert!(verify(&bruck(|| int(16384), world(), 0, &[64])).is_empty());
}

#[test]
fn bruck_at_world_8192_with_large_blocks_is_decided() {
    // 8192 ranks of 16384-element blocks: 2^40 elements in all; the
    // program's shape proves it the same on every rank up to a rotation
    // (its scratch buffer addressed alike on every rank, its `log2` bounds
    // exact), so rank 0 alone is unrolled and replayed, one symbol per block
    assert!(verify(&bruck(|| int(16384), world(), 0, &[8192])).is_empty());
    // half the final rotation: rank 0's replay finds it, with the message
    // and notes the full check would give
    let d = verify(&bruck(|| int(16384), world() / 2, 0, &[8192]));
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 8192, rank 0 ends with output block 4096 element 0 = rank 0's initial output block 4096 \
         element 0, expected rank 4096's input block 0 element 0"
    );
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        ["no statement wrote it; the nearest element written, output block 4095 element 16383, was written here"]
    );
}

#[test]
fn blocks_without_a_common_factor_move_as_runs() {
    // one element more in the scratch buffer: no common factor, so one
    // symbol per element would need 64 * (16384 * 129 + 1) of them; cut
    // into runs, 130 per rank
    // (`verify` replays rank 0 alone, the schedule being the same on every
    // rank up to a rotation; the full check on every rank moves runs)
    let s = bruck(|| int(16384), world(), 1, &[64]);
    assert!(verify(&s).is_empty());
    assert!(check_world_unreduced(&s, 64, &[]).is_empty());
    let half = bruck(|| int(16384), world() / 2, 1, &[64]);
    let d = check_world_unreduced(&half, 64, &[]);
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 64, rank 0 ends with output block 32 element 0 = rank 0's initial output block 32 \
         element 0, expected rank 32's input block 0 element 0"
    );
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        ["no statement wrote it; the nearest element written, output block 31 element 16383, was written here"]
    );
    // the same from rank 0's replay, at compile time and at run time
    assert_eq!(verify(&half), std::slice::from_ref(&d));
    assert_eq!(check_world(&half, 64, &[]), std::slice::from_ref(&d));
    // runs that start inside a block: the input lands one element late,
    // and element 0 of every block is never written
    let mut off = bruck(|| int(16384), world(), 1, &[64]);
    if let StmtKind::Copy { dst, .. } = &mut off.body[1].kind {
        *dst = scr("tmp").slice(int(1), int(16385));
    }
    let d = check_world_unreduced(&off, 64, &[]);
    assert_eq!(
        one(&d, DiagKind::PostconditionViolated).message,
        "with world = 64, rank 0 ends with output block 0 element 0 = uninitialized scratch data, expected \
         rank 0's input block 0 element 0"
    );
}

/// An `all_gather` statement of 16384-element blocks into a scratch
/// buffer one element longer (no common factor), then copied to the
/// output with its blocks turned by `turn`.
fn gather_through_scratch(turn: i64) -> Schedule {
    let tmp = || scr("tmp");
    let b = int(16384);
    let mut s = S::new("gather")
        .input("input", b.clone())
        .output("output", b.clone() * world())
        .world_list(&[64])
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            scratch("tmp", b.clone() * world() + 1),
            coll(Collective::AllGather {
                src: p(0, "input"),
                dst: tmp().slice(0, b.clone() * world()),
            }),
            copy(
                tmp().slice(b.clone() * turn, b.clone() * world()),
                p(1, "output").slice(0, b.clone() * (world() - turn)),
            ),
            copy(
                tmp().slice(0, b.clone() * turn),
                p(1, "output").slice(b.clone() * (world() - turn), b * world()),
            ),
        ]);
    s.len_vars.clear();
    s
}

#[test]
fn a_collective_statement_over_large_blocks_moves_as_runs() {
    // 64 * (16384 * 129 + 1) elements share no common factor, once past
    // the limit; the collective's blocks are cut into runs alike, 2 runs
    // per block
    let s = gather_through_scratch(0);
    assert_eq!(verify(&s), Vec::new());
    assert_eq!(check_world(&s, 64, &[]), Vec::new());
    assert!(crate::VerifyCache::new().check(&s, 64, &[]).is_ok());
    // the blocks turned by one: rank 0's block 0 holds rank 1's input
    let d = verify(&gather_through_scratch(1));
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 64, rank 0 ends with output block 0 element 0 = rank 1's input block 0 element 0, \
         expected rank 0's input block 0 element 0"
    );
}

#[test]
fn runs_past_their_limit_are_counted_not_cut() {
    let s = gather_through_scratch(0);
    let (prog, diags) = crate::compile::compile(&s);
    assert!(diags.is_empty(), "{diags:?}");
    let un = crate::unroll::unroll(&prog, 4, &[]).unwrap();
    // 4 ranks: input 2 cuts, tmp 6, output 5 (blocks); cut further by the
    // copies' bounds at 0 and 4 * 16384 only
    let Some(Ok(cuts)) = crate::check::runs::cuts(&un, &[], 1000) else {
        panic!("no cuts")
    };
    assert_eq!(cuts.iter().map(Vec::len).sum::<usize>(), 4 * (2 + 6 + 5));
    assert_eq!(crate::check::runs::cuts(&un, &[], 20), Some(Err(52)));
}

#[test]
fn a_length_variable_is_run_past_the_crossings_of_the_bounds() {
    // forwards elements 0..1 and n - 1..n of each block: right at n = 1 and
    // n = 2, the middle of the block is lost from n = 3 on
    let out = || p(1, "output");
    let blk = |k: Expr| out().chunk(k);
    let s = all_gather_claim("ends").worlds(2, 4).body(vec![
        copy(p(0, "input"), out().chunk(rank())),
        for_(
            "s",
            0,
            world() - 1,
            vec![
                batch(vec![
                    send(blk((rank() - var("s")) % world()).slice(0, 1), right()),
                    recv(blk((rank() - var("s") - 1) % world()).slice(0, 1), left()),
                ]),
                batch(vec![
                    send(blk((rank() - var("s")) % world()).slice(n() - 1, n()), right()),
                    recv(blk((rank() - var("s") - 1) % world()).slice(n() - 1, n()), left()),
                ]),
            ],
        ),
    ]);
    let d = verify(&s);
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 2, n = 3, rank 0 ends with output block 1 element 1 = rank 0's initial output block 1 \
         element 1, expected rank 1's input block 0 element 1"
    );
    // no statement wrote the element: the note points at the statement
    // that wrote its neighbour (the first batch's receive of `[0..1]`)
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        ["no statement wrote it; the nearest element written, output block 1 element 0, was written here"]
    );
}

#[test]
fn a_wrong_element_a_message_brought_names_the_send_it_came_from() {
    // every rank sends input block `to + 1` where block `to` is due
    let s = super::pass::pairwise_all_to_all_sending((var("to") + 1) % world());
    let d = verify(&s);
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 ends with output block 1 = rank 1's input block 1, expected rank 1's input block 0"
    );
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        ["rank 1 sent it from here", "the postcondition is declared here"]
    );
}

#[test]
fn overlaps_with_two_length_variables_are_exact() {
    // c[m..m + 1] and c[n - 1..n] share an element when n = m + 1, which no
    // sample point of the old check hit
    let m = || {
        ex(ExprKind::Name(Name {
            kind: NameKind::LenVar(1),
            text: "m".to_owned(),
        }))
    };
    let c = || p(2, "c");
    let mut b = S::new("two")
        .input("a", n())
        .input("b", m())
        .output("c", n() + m())
        .worlds(3, 3);
    b.0.len_vars.push(ident("m"));
    let s = b.body(vec![batch(vec![
        send(p(0, "a").slice(0, 1), right()),
        send(p(1, "b").slice(0, 1), left()),
        recv(c().slice(m(), m() + 1), left()),
        recv(c().slice(n() - 1, n()), right()),
    ])]);
    let d = verify(&s);
    assert!(
        !d.is_empty() && d.iter().all(|x| x.kind == DiagKind::BufferHazard),
        "{d:#?}"
    );
    assert!(d[0].message.contains("when n = 2, m = 1"), "{}", d[0].message);
}

#[test]
fn bounds_that_cross_far_out_are_reported_not_sampled() {
    // a scratch buffer of n + 100 elements next to blocks at 2n: the
    // bounds cross at n = 100, past the values the checker runs
    let out = || p(1, "output");
    let s = S::new("far")
        .input("input", n())
        .output("output", n() * world())
        .worlds(2, 2)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            scratch("tmp", n() + 100),
            copy(p(0, "input"), scr("tmp").slice(0, n())),
            copy(scr("tmp").slice(0, n()), out().chunk(rank())),
            batch(vec![
                send(out().chunk(rank()), right()),
                recv(out().chunk(left()), left()),
            ]),
        ]);
    let d = verify(&s);
    let d = one(&d, DiagKind::EvaluationError);
    assert_eq!(
        d.message,
        "with world = 2, the postcondition is not decided: deciding every value of `n` takes a run at each `n` \
         up to 203, and the checker runs at most 64"
    );
    // 10 more elements: run at every n up to 2 * 10 + 3, and right
    let mut s = s;
    if let StmtKind::Scratch { len, .. } = &mut s.body[0].kind {
        *len = n() + 10;
    }
    assert!(verify(&s).is_empty());
}

#[test]
fn a_peer_out_of_range_gets_the_hint_its_shape_calls_for() {
    let exchange = |s: S| {
        s.input("input", n())
            .output("output", n())
            .world_list(&[3])
            .body(vec![batch(vec![
                send(p(0, "input"), rank() ^ 1),
                recv(p(1, "output"), rank() ^ 1),
            ])])
    };
    // a partner that world = 3 does not give rank 2: a guard or a
    // `#[requires]`, not `% world` (which would pair rank 2 with rank 0,
    // whose partner is rank 1)
    let d = verify(&exchange(S::new("pairs")));
    assert_eq!(d[0].kind, DiagKind::RankOutOfRange);
    assert_eq!(
        d[0].hint.as_deref(),
        Some(
            "rank 2 has no partner `rank ^ 1` at world = 3: guard the statement (`if rank ^ 1 < world { .. }`), \
             or limit the world sizes with `#[requires(..)]` (e.g. `#[requires(is_pow2(world))]`)"
        )
    );
    // the schedule's own `#[requires]` lets 3 through
    let d = verify(&exchange(S::new("pairs").requires(ge(world(), 2))));
    assert_eq!(
        d[0].hint.as_deref(),
        Some(
            "rank 2 has no partner `rank ^ 1` at world = 3: guard the statement (`if rank ^ 1 < world { .. }`), \
             or tighten the schedule's `#[requires]`, which lets world = 3 through"
        )
    );
    // a ring's neighbour: wrap it
    let s = S::new("ring")
        .input("input", n())
        .output("output", n())
        .world_list(&[3])
        .body(vec![batch(vec![
            send(p(0, "input"), rank() + 1),
            recv(p(1, "output"), left()),
        ])]);
    let d = verify(&s);
    assert_eq!(d[0].kind, DiagKind::RankOutOfRange);
    assert_eq!(
        d[0].hint.as_deref(),
        Some("wrap the peer with `% world` (`%` is Euclidean, so `(rank - 1) % world` wraps too)")
    );
}

/// A pipeline: rank r passes its input to rank r + 1, `guard` deciding
/// which ranks send.
fn pipeline(guard: Option<Expr>) -> Schedule {
    let send_it = send(p(0, "input"), rank() + 1);
    S::new("pipeline")
        .input("input", n())
        .output("output", n())
        .world_list(&[3])
        .body(vec![
            match guard {
                Some(g) => if_(g, vec![send_it]),
                None => send_it,
            },
            if_(ge(rank(), 1), vec![recv(p(1, "output"), rank() - 1)]),
        ])
}

#[test]
fn a_peer_out_of_range_under_a_guard_or_in_a_chain_gets_a_guard_not_a_wrap() {
    // the guard lets the last rank through: the guard is at fault, and
    // `% world` would add a message from rank world - 1 to rank 0 that no
    // rank receives
    let d = verify(&pipeline(Some(lt(rank(), world()))));
    assert_eq!(d[0].kind, DiagKind::RankOutOfRange);
    assert_eq!(
        d[0].message,
        "with world = 3, rank 2 sends to 3, which is not in `0..world`"
    );
    assert_eq!(
        d[0].hint.as_deref(),
        Some(
            "rank world - 1 sends to rank world, which the guard `if rank < world` lets through: \
             exclude it with `rank + 1 < world` in the guard"
        )
    );
    // no guard and no peer wrapped anywhere: a chain is as likely as a ring
    let d = verify(&pipeline(None));
    assert_eq!(d[0].kind, DiagKind::RankOutOfRange);
    assert_eq!(
        d[0].hint.as_deref(),
        Some(
            "rank world - 1 sends to rank world: for a chain or pipeline, guard the statement \
             (`if rank + 1 < world { .. }`); for a ring, wrap the peer with `% world` \
             (`%` is Euclidean, so `(rank - 1) % world` wraps too)"
        )
    );
    // the right guard passes
    assert!(verify(&pipeline(Some(lt(rank() + 1, world())))).is_empty());
}

/// The second length variable, `m`.
fn m() -> Expr {
    ex(ExprKind::Name(Name {
        kind: NameKind::LenVar(1),
        text: "m".to_owned(),
    }))
}

/// A ring all-gather of blocks of `n + m` elements that forwards each
/// block in two pieces, `[0..n + 1]` and then `[from..m + n]` (a third
/// buffer, `tail`, of `m` elements, fixes `m`).
fn two_piece_ring(worlds: (i64, i64), from: &dyn Fn() -> Expr) -> Schedule {
    let out = || p(1, "output");
    let mut b = S::new("pieces")
        .input("input", n() + m())
        .output("output", (n() + m()) * world())
        .input("tail", m())
        .worlds(worlds.0, worlds.1)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        });
    b.0.len_vars.push(ident("m"));
    let mine = || (rank() - var("s")) % world();
    let theirs = || (rank() - var("s") - 1) % world();
    b.body(vec![
        copy(p(0, "input"), out().chunk(rank())),
        for_(
            "s",
            0,
            world() - 1,
            vec![
                batch(vec![
                    send(out().chunk(mine()).slice(0, n() + 1), right()),
                    recv(out().chunk(theirs()).slice(0, n() + 1), left()),
                ]),
                batch(vec![
                    send(out().chunk(mine()).slice(from(), m() + n()), right()),
                    recv(out().chunk(theirs()).slice(from(), m() + n()), left()),
                ]),
            ],
        ),
    ])
}

#[test]
fn a_postcondition_over_two_length_variables_is_decided_at_every_point() {
    // pieces [0..n + 1] and [m - 1..m + n] cover a block exactly when
    // m <= n + 2, which holds at every point of 1..=2 in each: wrong first
    // at n = 1, m = 4, inside the box the crossing points give
    let d = verify(&two_piece_ring((2, 2), &|| m() - 1));
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 2, n = 1, m = 4, rank 0 ends with output block 1 element 2 = rank 0's initial output \
         block 1 element 2, expected rank 1's input block 0 element 2"
    );
    // [0..n + 1] and [n..n + m] cover every block for every (n, m)
    assert_eq!(verify(&two_piece_ring((1, 2), &n)), Vec::new());
}

#[test]
fn a_box_past_the_limit_over_two_length_variables_is_an_error_naming_it() {
    // a scratch buffer of n + m + 40 elements: the box the crossing points
    // give passes 64 values of each variable
    let mut s = two_piece_ring((2, 2), &n);
    s.body.insert(0, scratch("tmp", n() + m() + 40));
    let d = verify(&s);
    let d = one(&d, DiagKind::EvaluationError);
    assert_eq!(
        d.message,
        "with world = 2, the postcondition is not decided: deciding every value of the length variables takes a \
         run at every point up to 996 in each of `n` and `m`, and the checker runs at most 64 values of each and \
         4096 points in all"
    );
}

/// A ring all-gather whose loop runs `world - 1 - short` steps.
fn ring_short_by(short: i64) -> Schedule {
    let out = || p(1, "output");
    all_gather_claim("ring").worlds(1, 8).body(vec![
        copy(p(0, "input"), out().chunk(rank())),
        for_(
            "s",
            0,
            world() - 1 - short,
            vec![batch(vec![
                send(out().chunk((rank() - var("s")) % world()), right()),
                recv(out().chunk((rank() - var("s") - 1) % world()), left()),
            ])],
        ),
    ])
}

#[test]
fn a_loop_one_step_short_is_blamed_at_its_bound() {
    let d = verify(&ring_short_by(1));
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 ends with output block 1 = rank 0's initial output block 1, expected rank 1's input"
    );
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        [
            "no statement wrote it; the nearest element written, output block 0, was written here",
            "this bound stops the loop one step short: with one more step (`world - 1 - 1 + 1`) the schedule \
             passes every check at world = 2"
        ]
    );
    // two steps short: one more step does not mend it, so no loop is named
    let d = verify(&ring_short_by(2));
    let d = one(&d, DiagKind::PostconditionViolated);
    let notes: Vec<&str> = d.notes.iter().map(|n| n.1.as_str()).collect();
    assert_eq!(
        notes,
        ["no statement wrote it; the nearest element written, output block 0, was written here"]
    );
}

#[test]
fn a_hard_coded_operator_is_blamed_where_it_is_written() {
    // a dissemination all-reduce claimed `max` that accumulates with `sum`:
    // wrong from world 2 on
    let tmp = || scr("tmp");
    let s = S::new("dissemination")
        .output("buf", n())
        .worlds(1, 4)
        .post(PostKind::AllReduce {
            input: bref(0, "buf"),
            output: bref(0, "buf"),
            op: Op::Max.into(),
        })
        .body(vec![
            scratch("tmp", n()),
            for_(
                "k",
                0,
                call(Func::CeilLog2, vec![world()]),
                vec![
                    batch(vec![
                        send(p(0, "buf"), (rank() + pow2(var("k"))) % world()),
                        recv(tmp(), (rank() - pow2(var("k"))) % world()),
                    ]),
                    accumulate(tmp(), p(0, "buf"), Op::Sum),
                ],
            ),
        ]);
    let d = verify(&s);
    let d = one(&d, DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 ends with buf element 0 = a `sum` of 2 contributions (rank 0's initial buf \
         element 0, rank 1's initial buf element 0), expected the `max` of every rank's buf element 0, each once"
    );
    // the accumulate wrote it: the error stands there, and the operator
    // replaced is its hint
    let StmtKind::For { body, .. } = &s.body[1].kind else {
        panic!("not a loop")
    };
    assert_eq!(d.span, body[1].span);
    assert_eq!(
        d.hint.as_deref(),
        Some(
            "this statement reduces with `sum` where the postcondition claims `max`: with `max` here the schedule \
             passes every check at world = 2"
        )
    );
}
