//! The schedules of `hcomm_examples`, run on the host backend and on the
//! HCCL stand-in (with identical results) for world 1..=8 and compared
//! element for element with the runtime's built-in collectives.

mod backends;
use std::time::Duration;

use hcomm::{CommOptions, Error};
use hcomm_examples::{all_gather, collectives};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

fn input(rank: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| (rank * 1000 + i) as i64).collect()
}

/// Runs `custom` and the built-in all-gather on every rank; returns both.
fn compare_all_gather(
    world: usize,
    n: usize,
    custom: impl Fn(&hcomm::Comm, &[i64], &mut [i64]) -> hcomm::Result<()> + Sync,
) -> Vec<(Vec<i64>, Vec<i64>)> {
    backends::on_both(world, &options(), |comm| {
        let mine = input(comm.rank(), n);
        let mut ours = vec![-1i64; n * world];
        let mut builtin = vec![-2i64; n * world];
        custom(comm, &mine, &mut ours)?;
        comm.all_gather(&mine, &mut builtin)?;
        Ok((ours, builtin))
    })
    .unwrap_or_else(|e| panic!("world {world}, n {n}: {e}"))
}

/// What every rank must hold after an all-gather of `input(r, n)`.
fn gathered(world: usize, n: usize) -> Vec<i64> {
    (0..world).flat_map(|r| input(r, n)).collect()
}

#[test]
fn custom_all_gathers_match_the_builtin_one() {
    for world in 1..=8 {
        for n in [1, 3] {
            for (name, out) in [
                ("ring", compare_all_gather(world, n, all_gather::ring_all_gather)),
                ("bruck", compare_all_gather(world, n, all_gather::bruck_all_gather)),
            ] {
                for (r, (ours, builtin)) in out.iter().enumerate() {
                    assert_eq!(ours, builtin, "{name}, world {world}, n {n}, rank {r}");
                    assert_eq!(ours, &gathered(world, n), "{name}, world {world}, n {n}, rank {r}");
                }
            }
            if world.is_power_of_two() {
                let out = compare_all_gather(world, n, all_gather::recursive_doubling_all_gather);
                for (r, (ours, builtin)) in out.iter().enumerate() {
                    assert_eq!(ours, builtin, "recursive doubling, world {world}, rank {r}");
                }
            }
            for local in (1..=world).filter(|l| world % l == 0) {
                let out = compare_all_gather(world, n, |c, i, o| all_gather::two_level_all_gather(c, i, o, local));
                for (r, (ours, builtin)) in out.iter().enumerate() {
                    assert_eq!(ours, builtin, "two-level with local {local}, world {world}, rank {r}");
                }
            }
        }
    }
}

#[test]
fn sparse_all_gather_moves_only_active_segments() {
    for world in 1..=8 {
        for active in 0..=world {
            let n = 2;
            let out = compare_all_gather(world, n, |c, i, o| all_gather::sparse_all_gather(c, i, o, active));
            for (r, (ours, builtin)) in out.iter().enumerate() {
                assert_eq!(
                    ours[..active * n],
                    builtin[..active * n],
                    "world {world}, active {active}, rank {r}"
                );
                assert!(ours[active * n..].iter().all(|&x| x == -1), "inactive chunks untouched");
            }
        }
    }
}

#[test]
fn a_schedule_rejects_a_world_that_fails_its_requirement_before_sending() {
    let err = hcomm::host::run_with(3, &options(), |comm| {
        let mut out = vec![0i64; 3];
        all_gather::recursive_doubling_all_gather(comm, &[1], &mut out)
    })
    .unwrap_err();
    assert!(
        matches!(&err, Error::Precondition { message } if message.contains("is_pow2(world)")),
        "{err}"
    );
}

#[test]
fn wrong_buffer_lengths_are_reported_before_any_communication() {
    let err = hcomm::host::run_with(2, &options(), |comm| {
        let mut out = vec![0i64; 5];
        all_gather::ring_all_gather(comm, &[1, 2], &mut out)
    })
    .unwrap_err();
    assert!(matches!(&err, Error::BufferLength { actual: 5, .. }), "{err}");
}

#[test]
fn ring_all_reduce_pairwise_all_to_all_and_binomial_broadcast_match_serial_references() {
    for world in 1..=8 {
        let n = 3;
        let out = backends::on_both(world, &options(), |comm| {
            let r = comm.rank();
            let mut sum = input(r, n * world);
            collectives::ring_all_reduce(comm, &mut sum, hcomm::ReduceOp::Sum)?;
            let mut a2a = vec![0i64; n * world];
            collectives::pairwise_all_to_all(comm, &input(r, n * world), &mut a2a)?;
            let mut bcast = Vec::new();
            for root in 0..world {
                let mut buf = if r == root { input(root, n) } else { input(r + 10, n) };
                collectives::binomial_broadcast(comm, &mut buf, root)?;
                bcast.push(buf);
            }
            Ok((sum, a2a, bcast))
        })
        .unwrap();
        for (r, (sum, a2a, bcast)) in out.iter().enumerate() {
            let want_sum: Vec<i64> = (0..n * world)
                .map(|i| (0..world).map(|q| input(q, n * world)[i]).sum())
                .collect();
            assert_eq!(sum, &want_sum, "ring all-reduce, world {world}, rank {r}");
            let want_a2a: Vec<i64> = (0..n * world).map(|k| input(k / n, n * world)[r * n + k % n]).collect();
            assert_eq!(a2a, &want_a2a, "pairwise all-to-all, world {world}, rank {r}");
            for (root, got) in bcast.iter().enumerate() {
                assert_eq!(got, &input(root, n), "broadcast from {root}, world {world}, rank {r}");
            }
        }
    }
}

#[test]
fn a_root_outside_its_range_is_a_precondition_error() {
    let err = hcomm::host::run_with(2, &options(), |comm| {
        collectives::binomial_broadcast(comm, &mut [0u8; 2], 5)
    })
    .unwrap_err();
    assert!(
        matches!(&err, Error::Precondition { message } if message.contains("root")),
        "{err}"
    );
}

#[test]
fn sizes_outside_the_verify_set_are_verified_at_run_time() {
    // `sparse_all_gather` is verified for world 1..=8 at compile time; 9 ranks
    // are checked when first called (and cached).
    let out = compare_all_gather(9, 1, |c, i, o| all_gather::sparse_all_gather(c, i, o, 9));
    for (ours, builtin) in &out {
        assert_eq!(ours, builtin);
    }
}

hcomm::comm_schedule! {
    /// Even ranks send first, odd ranks receive first. Verified for even
    /// world sizes only; at world 1 it is a blocking send to itself.
    #[verify(world in [2, 4, 6])]
    fn parity_shift(buf: &[T; n], from_left: &mut [T; n]) {
        if rank % 2 == 0 {
            send buf to (rank + 1) % world;
            recv from_left from (rank - 1) % world;
        } else {
            recv from_left from (rank - 1) % world;
            send buf to (rank + 1) % world;
        }
    }
}

#[test]
fn a_wrong_schedule_at_an_unverified_size_fails_before_any_message() {
    let ok = backends::on_both(4, &options(), |comm| {
        let mut left = [0u32; 2];
        parity_shift(comm, &[comm.rank() as u32; 2], &mut left)?;
        Ok(left[0])
    })
    .unwrap();
    assert_eq!(ok, vec![3, 0, 1, 2]);
    let err = hcomm::host::run_with(1, &options(), |comm| parity_shift(comm, &[1u32], &mut [0u32])).unwrap_err();
    let Error::Schedule { schedule, message } = &err else {
        panic!("{err}")
    };
    assert_eq!(schedule, "parity_shift");
    assert!(message.starts_with("send to self"), "{message}");
    assert!(message.contains("world = 1"), "{message}");
}
