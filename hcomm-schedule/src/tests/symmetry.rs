//! The rotation-symmetry reduction against the full check: whenever the
//! reduction passes a schedule, the full check passes it too, and
//! `check_world` (which tries the reduction first) gives the full check's
//! diagnostics, word for word, on schedules that are symmetric, symmetric
//! but wrong, or symmetric except on one rank.

use proptest::prelude::*;

use super::pass::{direct_all_to_all, pairwise_all_to_all_sending, ring_all_gather, ring_all_reduce};
use super::props::{phase, post, ring_schedule, stmts};
use super::*;
use crate::check::symmetry;
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
    let full: Vec<String> = full_checks(&prog, world, scalars)
        .iter()
        .map(ToString::to_string)
        .collect();
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
        }
        // not of the kind the reduction takes (reductions; peers that do
        // not turn with the rank): the full check decides
        for s in [ring_all_reduce(), direct_all_to_all(1, 12)] {
            let (reduced, full) = agrees(&s, world, &[]);
            assert!(!reduced && full.is_empty(), "`{}` at world {world}: {full:?}", s.name);
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

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
