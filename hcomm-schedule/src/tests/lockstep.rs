//! The lockstep proof of step 4 against the simulation: whenever it
//! applies, the simulation finds no deadlock either, and the postcondition
//! judged on the lockstep order is judged the same on the simulation's.

use proptest::prelude::*;

use super::pass::{ring_all_gather, ring_all_reduce};
use super::props::{phase, post, ring_schedule, stmts};
use super::*;
use crate::check::{completion, deadlock, hazards, matching, postcondition};
use crate::compile::compile;
use crate::unroll::unroll;

/// Unrolls and matches `s` at `world`; when step 4 is reached, compares the
/// lockstep proof with the simulation. Returns whether the proof applied.
fn agrees(s: &Schedule, world: i64, scalars: &[i64]) -> bool {
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return false;
    }
    let Ok(mut un) = unroll(&prog, world, scalars) else {
        return false;
    };
    if !matching::check(&mut un).is_empty() {
        return false;
    }
    let sim = deadlock::simulate(&un);
    let Some(order) = deadlock::lockstep(&un) else {
        return false;
    };
    assert!(
        sim.diags.is_empty(),
        "lockstep finished where the simulation found {:?}",
        sim.diags
    );
    assert_eq!(order.len(), sim.order.len());
    if hazards::check(&un).is_empty() && completion::check(&un).is_empty() {
        assert_eq!(
            postcondition::check_located(&un, &order).0,
            postcondition::check_located(&un, &sim.order).0
        );
    }
    true
}

#[test]
fn rings_are_proved_in_lockstep_with_the_simulations_verdict() {
    for world in 1..=9 {
        assert!(agrees(&ring_all_gather(1, 16), world, &[]), "world {world}");
        assert!(agrees(&ring_all_reduce(), world, &[]), "world {world}");
    }
}

#[test]
fn a_ring_of_blocking_sends_is_left_to_the_simulation() {
    let s = S::new("ring")
        .input("input", n())
        .output("output", n())
        .body(vec![send(p(0, "input"), right()), recv(p(1, "output"), left())]);
    let (prog, _) = compile(&s);
    let mut un = unroll(&prog, 3, &[]).unwrap();
    assert!(matching::check(&mut un).is_empty());
    assert_eq!(deadlock::lockstep(&un), None);
    assert_eq!(deadlock::simulate(&un).diags[0].kind, crate::DiagKind::Deadlock);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random schedules: the proof never disagrees with the simulation.
    #[test]
    fn lockstep_agrees_with_the_simulation(body in stmts(), post in post()) {
        let mut b = S::new("fuzz").input("input", n()).output("output", n() * world());
        if let Some(p) = post {
            b = b.post(p);
        }
        let s = b.body(body);
        for w in 1..=4 {
            agrees(&s, w, &[]);
        }
    }

    /// Shifted rings in every order, with tags and batches (many of them
    /// deadlock, many are proved).
    #[test]
    fn lockstep_agrees_on_shifted_rings(phases in prop::collection::vec(phase(), 1..=4), world in 1_i64..=7) {
        agrees(&ring_schedule(&phases), world, &[]);
    }
}
