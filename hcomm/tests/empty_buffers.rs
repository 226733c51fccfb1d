//! Empty buffers (an empty gradient bucket): every collective of the public
//! API, through every algorithm the host backend selects for it, returns
//! `Ok` with nothing changed, on 1 to 4 ranks; the built-in schedules, whose
//! length variables range from 0 (`n in 0..`), run with `n = 0`.

use hcomm::{Algorithm, Collective, Comm, CommOptions, ReduceOp};

/// The algorithms each collective may be forced to on the host backend.
fn algorithms(c: Collective) -> Vec<Option<Algorithm>> {
    use Algorithm as A;
    let forced: &[Algorithm] = match c {
        Collective::AllReduce => &[
            A::Ring,
            A::HalvingDoubling,
            A::ReduceBroadcast,
            A::RecursiveDoubling,
            A::Direct,
            A::OneShot,
        ],
        Collective::AllGather => &[A::Ring, A::RecursiveDoubling, A::Bruck, A::Direct, A::OneShot],
        Collective::ReduceScatter => &[A::Ring, A::RecursiveHalving, A::Direct, A::OneShot],
        Collective::AllToAll => &[A::Pairwise, A::Direct, A::OneShot],
        Collective::Broadcast => &[A::BinomialTree, A::ScatterAllGather, A::OneShot],
        _ => &[],
    };
    std::iter::once(None).chain(forced.iter().copied().map(Some)).collect()
}

/// Runs every collective with empty slices on `comm`.
fn empty_collectives(comm: &Comm) -> hcomm::Result<()> {
    let send: [f32; 0] = [];
    let mut recv: [f32; 0] = [];
    for op in [ReduceOp::Sum, ReduceOp::Max] {
        comm.all_reduce(&send, &mut recv, op)?;
        comm.all_reduce_in_place(&mut recv, op)?;
        comm.reduce_scatter(&send, &mut recv, op)?;
        comm.reduce(&send, &mut recv, op, 0)?;
    }
    comm.all_gather(&send, &mut recv)?;
    comm.all_to_all(&send, &mut recv)?;
    comm.broadcast(&mut recv, 0)?;
    comm.gather(&send, &mut recv, 0)?;
    comm.scatter(&send, &mut recv, 0)?;
    comm.all_gatherv(&send, &mut recv, &vec![0; comm.world()])?;
    Ok(())
}

#[test]
fn every_collective_with_empty_slices_returns_ok_on_every_algorithm() {
    for world in 1..=4 {
        for c in [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::AllToAll,
            Collective::Broadcast,
        ] {
            for algorithm in algorithms(c) {
                let mut opts = CommOptions::default();
                if let Some(a) = algorithm {
                    opts = opts.with_algorithm(c, a);
                }
                opts.timeout = std::time::Duration::from_secs(10);
                hcomm::host::run_with(world, &opts, empty_collectives)
                    .unwrap_or_else(|e| panic!("world {world}, {c:?} through {algorithm:?}: {e}"));
            }
        }
    }
}

/// The built-in schedules called directly with `n = 0`: `Ok`, nothing
/// written; then with `n = 2` on the same communicator, exact (the ranks
/// still agree on every call).
#[test]
fn builtin_schedules_run_with_n_0_and_then_with_data() {
    use hcomm::schedules as s;
    for world in 1..=4 {
        let out = hcomm::host::run(world, |comm| {
            let r = comm.rank() as i64;
            let (none, mut nothing): ([i64; 0], [i64; 0]) = ([], []);
            s::ring_all_gather(comm, &none, &mut nothing)?;
            s::bruck_all_gather(comm, &none, &mut nothing)?;
            if comm.world().is_power_of_two() {
                s::recursive_doubling_all_gather(comm, &none, &mut nothing)?;
            }
            s::pairwise_all_to_all(comm, &none, &mut nothing)?;
            s::binomial_broadcast(comm, &mut nothing, 0)?;
            s::ring_all_reduce(comm, &mut nothing, ReduceOp::Sum)?;
            s::ring_reduce_scatter(comm, &none, &mut nothing, ReduceOp::Sum)?;
            let mut all = vec![0_i64; 2 * comm.world()];
            s::ring_all_gather(comm, &[r, r + 10], &mut all)?;
            Ok(all)
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
        let expected: Vec<i64> = (0..world as i64).flat_map(|r| [r, r + 10]).collect();
        for (rank, got) in out.iter().enumerate() {
            assert_eq!(got, &expected, "world {world}, rank {rank}");
        }
    }
}

/// Gradient buckets, some empty, all-reduced in place without blocking
/// (then once more blocking): every bucket ends with the sum over the
/// ranks, exact against the serial reference, the empty ones stay empty.
#[test]
fn empty_gradient_buckets_among_full_ones_reduce_exactly() {
    let lens = [3_usize, 0, 2, 0, 1];
    let value = |rank: usize, bucket: usize, i: usize| (rank * 100 + bucket * 10 + i) as i64;
    for world in 1..=4 {
        let out = hcomm::host::run(world, |comm| {
            let r = comm.rank();
            let mut buckets: Vec<Vec<i64>> = lens
                .iter()
                .enumerate()
                .map(|(b, &len)| (0..len).map(|i| value(r, b, i)).collect())
                .collect();
            hcomm::scope(|s| {
                let mut reqs = Vec::new();
                for b in &mut buckets {
                    reqs.push(comm.iall_reduce_in_place(s, b, ReduceOp::Sum)?);
                }
                hcomm::wait_all(reqs)
            })?;
            let mut again: Vec<i64> = Vec::new();
            comm.all_reduce_in_place(&mut again, ReduceOp::Sum)?;
            Ok(buckets)
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
        for (rank, got) in out.iter().enumerate() {
            for (b, &len) in lens.iter().enumerate() {
                let want: Vec<i64> = (0..len).map(|i| (0..world).map(|q| value(q, b, i)).sum()).collect();
                assert_eq!(got[b], want, "world {world}, rank {rank}, bucket {b}");
            }
        }
    }
}

/// The same on the HCCL backend driven through the stand-in library:
/// collectives with empty slices, and a schedule whose plan holds
/// zero-length messages (`ring_all_gather` at `n = 0`) followed by one with
/// data, exact.
#[test]
fn empty_buffers_on_the_hccl_stand_in() {
    let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
    let hccl = hcomm::hccl::Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CommOptions::default().with_timeout(std::time::Duration::from_secs(20));
    for world in 1..=4 {
        let out = hccl
            .run(world, &opts, |comm| {
                empty_collectives(comm)?;
                let (none, mut nothing): ([f32; 0], [f32; 0]) = ([], []);
                hcomm::schedules::ring_all_gather(comm, &none, &mut nothing)?;
                hcomm::schedules::ring_all_reduce(comm, &mut nothing, ReduceOp::Sum)?;
                let mut all = vec![0.0_f32; 2 * comm.world()];
                let r = comm.rank() as f32;
                hcomm::schedules::ring_all_gather(comm, &[r, r + 0.5], &mut all)?;
                Ok(all)
            })
            .unwrap_or_else(|e| panic!("world {world}: {e}"));
        let expected: Vec<f32> = (0..world).flat_map(|r| [r as f32, r as f32 + 0.5]).collect();
        for (rank, got) in out.iter().enumerate() {
            assert_eq!(got, &expected, "world {world}, rank {rank}");
        }
    }
}
