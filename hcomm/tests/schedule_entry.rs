//! The entry agreement check of `comm_schedule!` calls on in-process ranks:
//! disagreeing calls name both calls (operators by name, other schedules
//! by name) on every rank, and what the check costs per call. The same
//! check between processes is tested in `hcomm-run/tests/multiproc.rs`.

use std::time::{Duration, Instant};

use hcomm::schedules::{bruck_all_gather, ring_all_gather, ring_all_reduce};
use hcomm::{comm_schedule, CommOptions, Error, ReduceOp};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

/// Each rank's `Mismatch` message, after checking it came within seconds.
fn mismatches(world: usize, f: impl Fn(&hcomm::Comm) -> hcomm::Result<()> + Sync) -> Vec<String> {
    hcomm::host::run_with(world, &options(), |c| {
        let start = Instant::now();
        let e = f(c).expect_err("disagreeing ranks must fail");
        assert!(start.elapsed() < Duration::from_secs(10));
        match e {
            Error::Mismatch { message } => Ok(message),
            other => panic!("rank {}: expected a mismatch, got {other}", c.rank()),
        }
    })
    .unwrap()
}

#[test]
fn different_operators_are_named_by_their_keywords() {
    let got = mismatches(2, |c| {
        let op = if c.rank() == 1 { ReduceOp::Max } else { ReduceOp::Sum };
        ring_all_reduce(c, &mut [1i32; 4], op)
    });
    let want = "ranks 0 and 1 disagree on their call of `ring_all_reduce` (every rank must pass the same scalars and \
                lengths): rank 0 with T = i32, op = sum, n = 2; rank 1 with T = i32, op = max, n = 2";
    assert_eq!(got, vec![want; 2]);
}

#[test]
fn different_schedules_are_named() {
    let got = mismatches(3, |c| {
        let mut out = [0u32; 6];
        if c.rank() == 2 {
            bruck_all_gather(c, &[1, 2], &mut out)
        } else {
            ring_all_gather(c, &[1, 2], &mut out)
        }
    });
    // the first pair found is the one every rank reports
    assert!(
        got.iter().all(|m| m == &got[0]),
        "every rank reports the same disagreement: {got:?}"
    );
    let m = &got[0];
    assert!(
        m.starts_with("ranks 0 and 2 disagree on which schedule they call")
            || m.starts_with("ranks 1 and 2 disagree on which schedule they call"),
        "{m}"
    );
    assert!(
        m.ends_with(
            "called `ring_all_gather` with T = u32, n = 2; rank 2 called `bruck_all_gather` with T = u32, n = 2"
        ),
        "{m}"
    );
}

comm_schedule! {
    /// One local copy, no message.
    #[verify(world in 1..=8)]
    fn local_copy(a: &[T; n], b: &mut [T; n]) {
        copy a -> b;
    }
}

/// The cost of the entry check per call and rank, on 2 and 4 in-process
/// ranks, with the check on and off in alternate rounds of the same run:
/// `cargo test --release -p hcomm --test schedule_entry -- --ignored
/// --nocapture entry_check_cost`.
#[test]
#[ignore = "a measurement, not a check"]
fn entry_check_cost() {
    const CALLS: u32 = 100_000;
    for world in [2, 4] {
        let medians = hcomm::host::run_with(world, &options(), |c| {
            let (a, mut b) = ([1i32; 4], [0i32; 4]);
            let mut times = [Vec::new(), Vec::new()];
            for round in 0..10 {
                let on = round % 2 == 0;
                hcomm::__private::set_entry_check(c, on);
                c.barrier()?;
                let start = Instant::now();
                for _ in 0..CALLS {
                    local_copy(c, &a, &mut b)?;
                }
                times[usize::from(on)].push(start.elapsed() / CALLS);
            }
            for t in &mut times {
                t.sort();
            }
            Ok((times[1][2], times[0][2]))
        })
        .unwrap();
        let on = medians.iter().map(|m| m.0).max().unwrap();
        let off = medians.iter().map(|m| m.1).max().unwrap();
        eprintln!(
            "schedule call, {world} in-process ranks (slowest rank's median of 5 rounds): {on:?} with the entry check, \
             {off:?} without, {:?} for the check, ratio {:.2}",
            on.saturating_sub(off),
            on.as_secs_f64() / off.as_secs_f64()
        );
    }
}
