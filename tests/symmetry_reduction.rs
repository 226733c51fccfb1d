//! The checker tries a rotation-symmetric schedule on rank 0 alone before
//! checking every rank: on every built-in and example schedule, at world
//! sizes 1 to 12 and every scalar value in range, `check_world` gives the
//! diagnostics of the full check, word for word.

use hcomm::checker::{check_world, check_world_unreduced, requires_holds, scalar_range, Schedule};
use hcomm::schedules;

/// Every scalar combination of `s` at `world` (the ranges of `#[verify]`).
fn combinations(s: &Schedule, world: i64) -> Vec<Vec<i64>> {
    let mut combos = vec![Vec::new()];
    for i in 0..s.scalars.len() {
        let (lo, hi) = scalar_range(s, i, world).expect("every scalar has a range");
        combos = combos
            .into_iter()
            .flat_map(|c| {
                (lo..hi).map(move |v| {
                    let mut c = c.clone();
                    c.push(v);
                    c
                })
            })
            .collect();
    }
    combos
}

#[test]
fn the_reduced_check_gives_the_full_diagnostics_on_every_schedule() {
    let all: Vec<(&str, &Schedule)> = vec![
        ("ring_all_gather", &schedules::ring_all_gather::SCHEDULE),
        (
            "recursive_doubling_all_gather",
            &schedules::recursive_doubling_all_gather::SCHEDULE,
        ),
        ("bruck_all_gather", &schedules::bruck_all_gather::SCHEDULE),
        ("pairwise_all_to_all", &schedules::pairwise_all_to_all::SCHEDULE),
        ("binomial_broadcast", &schedules::binomial_broadcast::SCHEDULE),
        ("ring_all_reduce", &schedules::ring_all_reduce::SCHEDULE),
        ("direct_all_reduce", &schedules::direct_all_reduce::SCHEDULE),
        ("direct_reduce_scatter", &schedules::direct_reduce_scatter::SCHEDULE),
        (
            "halving_doubling_all_reduce",
            &schedules::halving_doubling_all_reduce::SCHEDULE,
        ),
        (
            "recursive_doubling_all_reduce",
            &schedules::recursive_doubling_all_reduce::SCHEDULE,
        ),
        (
            "recursive_halving_reduce_scatter",
            &schedules::recursive_halving_reduce_scatter::SCHEDULE,
        ),
        ("ring_reduce_scatter", &schedules::ring_reduce_scatter::SCHEDULE),
        ("binomial_reduce", &schedules::binomial_reduce::SCHEDULE),
        (
            "scatter_all_gather_broadcast",
            &schedules::scatter_all_gather_broadcast::SCHEDULE,
        ),
        ("one_shot_all_reduce", &schedules::one_shot_all_reduce::SCHEDULE),
        ("one_shot_all_gather", &schedules::one_shot_all_gather::SCHEDULE),
        ("one_shot_reduce_scatter", &schedules::one_shot_reduce_scatter::SCHEDULE),
        ("one_shot_all_to_all", &schedules::one_shot_all_to_all::SCHEDULE),
        ("one_shot_broadcast", &schedules::one_shot_broadcast::SCHEDULE),
        (
            "two_level_all_gather",
            &hcomm_examples::all_gather::two_level_all_gather::SCHEDULE,
        ),
        (
            "sparse_all_gather",
            &hcomm_examples::vcollectives::sparse_all_gather::SCHEDULE,
        ),
        ("moe_dispatch", &hcomm_examples::vcollectives::moe_dispatch::SCHEDULE),
    ];
    let text = |d: Vec<hcomm::checker::Diagnostic>| d.iter().map(ToString::to_string).collect::<Vec<_>>();
    for (name, s) in all {
        for world in 1..=12 {
            for scalars in combinations(s, world) {
                if !requires_holds(s, world, &scalars).unwrap_or(true) {
                    continue;
                }
                assert_eq!(
                    text(check_world(s, world, &scalars)),
                    text(check_world_unreduced(s, world, &scalars)),
                    "{name} at world {world} with scalars {scalars:?}"
                );
            }
        }
    }
}
