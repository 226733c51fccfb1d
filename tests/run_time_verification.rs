//! Run-time verification at world sizes outside the verify set: checked once
//! per process while the other rank threads wait for the verdict, before any
//! rank communicates, so a short operation timeout does not fire while a
//! peer is still verifying.

use std::time::Duration;

use hcomm::schedules::{bruck_all_gather, ring_all_gather};
use hcomm::CommOptions;

/// Runs an all-gather schedule at `world` ranks (verified at run time: the
/// built-in schedules are verified for 1..=32 at compile time) with a short
/// timeout; every rank must end with every rank's input.
fn all_gather_at(world: usize, schedule: fn(&hcomm::Comm, &[u64], &mut [u64]) -> hcomm::Result<()>) {
    let options = CommOptions::default().with_timeout(Duration::from_secs(10));
    let n = 2;
    let out = hcomm::host::run_with(world, &options, |comm| {
        let mine: Vec<u64> = (0..n).map(|i| (comm.rank() * 10 + i) as u64).collect();
        let mut all = vec![u64::MAX; n * world];
        schedule(comm, &mine, &mut all)?;
        Ok(all)
    })
    .unwrap_or_else(|e| panic!("world {world}: {e}"));
    let expected: Vec<u64> = (0..world)
        .flat_map(|r| (0..n).map(move |i| (r * 10 + i) as u64))
        .collect();
    for (r, all) in out.iter().enumerate() {
        assert_eq!(all, &expected, "world {world}, rank {r}");
    }
}

#[test]
fn bruck_at_64_ranks_verifies_once_within_a_short_timeout() {
    all_gather_at(64, bruck_all_gather);
}

#[test]
fn ring_at_128_ranks_verifies_once_within_a_short_timeout() {
    all_gather_at(128, ring_all_gather);
}
