//! Every collective × algorithm × element type × world 1..=8 × odd lengths,
#![allow(
    clippy::float_cmp,
    reason = "the values compared are small integers, exact in every type"
)]
//! compared element for element with a serial reference.

mod common;

use common::{options, value, TestElem};
use hcomm::{bf16, f16, Algorithm, Collective, ReduceOp};
use proptest::prelude::*;

/// The reduction over ranks `0..world` of the values at `index`, in rank order.
/// The serial reference: the ranks' values combined in rank order; for
/// `Avg` that sum divided once by the number of ranks (the element
/// kernels' division, checked on its own in the library's unit tests).
fn fold<T: TestElem>(world: usize, op: ReduceOp, index: usize) -> T {
    let acc = (1..world).fold(value::<T>(0, index, op), |acc, r| {
        T::combine(op, acc, value(r, index, op))
    });
    let mut out = [acc];
    if op == ReduceOp::Avg {
        T::divide(&mut out, world);
    }
    out[0]
}

fn run_case<T: TestElem>(
    collective: Collective,
    algorithm: Algorithm,
    world: usize,
    n: usize,
    op: ReduceOp,
    root: usize,
) {
    let opts = options().with_algorithm(collective, algorithm);
    let out = hcomm::host::run_with(world, &opts, |comm| {
        let r = comm.rank();
        let w = comm.world();
        let got: Vec<T> = match collective {
            Collective::AllReduce => {
                let send: Vec<T> = (0..n).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; n];
                if r % 2 == 0 {
                    comm.all_reduce(&send, &mut recv, op)?;
                } else {
                    recv.copy_from_slice(&send);
                    comm.all_reduce_in_place(&mut recv, op)?;
                }
                recv
            }
            Collective::AllGather => {
                let send: Vec<T> = (0..n).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; n * w];
                comm.all_gather(&send, &mut recv)?;
                recv
            }
            Collective::ReduceScatter => {
                let send: Vec<T> = (0..n * w).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; n];
                comm.reduce_scatter(&send, &mut recv, op)?;
                recv
            }
            Collective::AllToAll => {
                let send: Vec<T> = (0..n * w).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; n * w];
                comm.all_to_all(&send, &mut recv)?;
                recv
            }
            Collective::Broadcast => {
                let mut buf: Vec<T> = (0..n).map(|i| value(r + 100, i, op)).collect();
                if r == root {
                    buf = (0..n).map(|i| value(root, i, op)).collect();
                }
                comm.broadcast(&mut buf, root)?;
                buf
            }
            Collective::Reduce => {
                let send: Vec<T> = (0..n).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; if r == root { n } else { 0 }];
                comm.reduce(&send, &mut recv, op, root)?;
                recv
            }
            Collective::Gather => {
                let send: Vec<T> = (0..n).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; if r == root { n * w } else { 0 }];
                comm.gather(&send, &mut recv, root)?;
                recv
            }
            Collective::Scatter => {
                let send: Vec<T> = if r == root {
                    (0..n * w).map(|i| value(root, i, op)).collect()
                } else {
                    Vec::new()
                };
                let mut recv = vec![T::ZERO; n];
                comm.scatter(&send, &mut recv, root)?;
                recv
            }
            Collective::AllToAllV => {
                // Rank r sends (r + j) % 3 elements to rank j.
                let counts_to = |from: usize, to: usize| (from + to + n) % 3;
                let send_counts: Vec<usize> = (0..w).map(|j| counts_to(r, j)).collect();
                let recv_counts: Vec<usize> = (0..w).map(|j| counts_to(j, r)).collect();
                let send: Vec<T> = (0..send_counts.iter().sum()).map(|i| value(r, i, op)).collect();
                let mut recv = vec![T::ZERO; recv_counts.iter().sum()];
                comm.all_to_allv(&send, &send_counts, &mut recv, &recv_counts)?;
                recv
            }
            Collective::Barrier => {
                comm.barrier()?;
                Vec::new()
            }
            // `Collective` is non-exhaustive: a new one fails here until it
            // has a case
            other => panic!("{other}: no case in this test"),
        };
        let used = comm.last_algorithm(collective);
        if algorithm.supports_world(w) {
            assert_eq!(used, Some(algorithm), "the forced algorithm must run");
        } else {
            assert!(used.is_some_and(|a| a.supports_world(w) && Algorithm::for_collective(collective).contains(&a)));
        }
        Ok(got)
    })
    .unwrap_or_else(|e| panic!("{collective} with {algorithm} on {world} ranks, n = {n}: {e}"));

    for (r, got) in out.iter().enumerate() {
        let expected: Vec<T> = match collective {
            Collective::AllReduce => (0..n).map(|i| fold(world, op, i)).collect(),
            Collective::AllGather => (0..n * world).map(|k| value(k / n.max(1), k % n.max(1), op)).collect(),
            Collective::ReduceScatter => (0..n).map(|i| fold(world, op, r * n + i)).collect(),
            Collective::AllToAll => (0..n * world)
                .map(|k| value(k / n.max(1), r * n + k % n.max(1), op))
                .collect(),
            Collective::Broadcast => (0..n).map(|i| value(root, i, op)).collect(),
            Collective::Reduce => {
                if r == root {
                    (0..n).map(|i| fold(world, op, i)).collect()
                } else {
                    Vec::new()
                }
            }
            Collective::Gather => {
                if r == root {
                    (0..n * world).map(|k| value(k / n.max(1), k % n.max(1), op)).collect()
                } else {
                    Vec::new()
                }
            }
            Collective::Scatter => (0..n).map(|i| value(root, r * n + i, op)).collect(),
            Collective::AllToAllV => {
                let counts_to = |from: usize, to: usize| (from + to + n) % 3;
                (0..world)
                    .flat_map(|j| {
                        let offset: usize = (0..r).map(|q| counts_to(j, q)).sum();
                        (0..counts_to(j, r)).map(move |i| value(j, offset + i, op))
                    })
                    .collect()
            }
            Collective::Barrier => Vec::new(),
            other => panic!("{other}: no serial reference in this test"),
        };
        assert_eq!(
            got, &expected,
            "{collective} with {algorithm} on {world} ranks, n = {n}, op {op}: rank {r}"
        );
    }
}

fn run_typed(
    dtype: usize,
    collective: Collective,
    algorithm: Algorithm,
    world: usize,
    n: usize,
    op: ReduceOp,
    root: usize,
) {
    match dtype {
        0 => run_case::<f32>(collective, algorithm, world, n, op, root),
        1 => run_case::<f64>(collective, algorithm, world, n, op, root),
        2 => run_case::<i8>(collective, algorithm, world, n, op, root),
        3 => run_case::<u8>(collective, algorithm, world, n, op, root),
        4 => run_case::<i32>(collective, algorithm, world, n, op, root),
        5 => run_case::<i64>(collective, algorithm, world, n, op, root),
        6 => run_case::<u64>(collective, algorithm, world, n, op, root),
        7 => run_case::<f16>(collective, algorithm, world, n, op, root),
        8 => run_case::<u32>(collective, algorithm, world, n, op, root),
        _ => run_case::<bf16>(collective, algorithm, world, n, op, root),
    }
}

fn case(collective: Collective) -> impl Strategy<Value = (Algorithm, usize, usize, usize, ReduceOp, usize)> {
    let algos = Algorithm::for_collective(collective).to_vec();
    (
        proptest::sample::select(algos),
        1usize..=8,
        prop_oneof![Just(0usize), Just(1usize), 2usize..=37],
        0usize..10,
        proptest::sample::select(ReduceOp::ALL.to_vec()),
        0usize..8,
    )
}

macro_rules! collective_property {
    ($name:ident, $coll:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
            #[test]
            fn $name((algorithm, world, n, dtype, op, root) in case($coll)) {
                run_typed(dtype, $coll, algorithm, world, n, op, root % world);
            }
        }
    };
}

collective_property!(all_reduce_matches_serial_reference, Collective::AllReduce);
collective_property!(all_gather_matches_serial_reference, Collective::AllGather);
collective_property!(reduce_scatter_matches_serial_reference, Collective::ReduceScatter);
collective_property!(all_to_all_matches_serial_reference, Collective::AllToAll);
collective_property!(all_to_allv_matches_serial_reference, Collective::AllToAllV);
collective_property!(broadcast_matches_serial_reference, Collective::Broadcast);
collective_property!(reduce_matches_serial_reference, Collective::Reduce);
collective_property!(gather_matches_serial_reference, Collective::Gather);
collective_property!(scatter_matches_serial_reference, Collective::Scatter);
collective_property!(barrier_completes, Collective::Barrier);

/// Every algorithm of every collective at every world size 1..=8, with a
/// length that is not a multiple of the world size, exhaustively.
#[test]
fn every_algorithm_at_every_world_size() {
    for collective in Collective::ALL {
        for &algorithm in Algorithm::for_collective(collective) {
            for world in 1..=8 {
                run_case::<i32>(collective, algorithm, world, 13, ReduceOp::Sum, world - 1);
            }
        }
    }
}

/// Large messages go through the segmented (pipelined) path of the ring.
#[test]
fn segmented_ring_transfers_are_exact() {
    for collective in [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter] {
        let opts = options().with_algorithm(collective, Algorithm::Ring);
        let mut opts = opts;
        opts.segment_bytes = 64;
        let n = 1000;
        let out = hcomm::host::run_with(5, &opts, |comm| {
            let r = comm.rank() as i64;
            let send: Vec<i64> = (0..n * 5).map(|i| r * 10_000 + i as i64).collect();
            let mut recv = vec![0i64; n * 5];
            match collective {
                Collective::AllReduce => comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?,
                Collective::AllGather => comm.all_gather(&send[..n], &mut recv)?,
                _ => comm.reduce_scatter(&send, &mut recv[..n], ReduceOp::Sum)?,
            }
            Ok(recv)
        })
        .unwrap();
        for (r, got) in out.iter().enumerate() {
            let expected: Vec<i64> = match collective {
                Collective::AllReduce => (0..n * 5)
                    .map(|i| (0..5).map(|q| q * 10_000 + i as i64).sum())
                    .collect(),
                Collective::AllGather => (0..n * 5).map(|k| (k / n) as i64 * 10_000 + (k % n) as i64).collect(),
                _ => (0..n)
                    .map(|i| (0..5).map(|q| q * 10_000 + (r * n + i) as i64).sum())
                    .chain(std::iter::repeat_n(0, n * 4))
                    .collect(),
            };
            assert_eq!(got, &expected, "{collective} rank {r}");
        }
    }
}

/// The direct all-reduce in pieces (many per part): every operator, 1 to 7
/// ranks, lengths shorter than the world, odd and empty, in place and not,
/// exact against the serial reference.
#[test]
fn direct_all_reduce_in_pieces_is_exact() {
    let mut opts = options().with_algorithm(Collective::AllReduce, Algorithm::Direct);
    opts.segment_bytes = 8;
    for world in 1..=7 {
        for op in ReduceOp::ALL {
            for n in [0, 1, 2, 3, 5, 6, 7, 13, 61] {
                let out = hcomm::host::run_with(world, &opts, |comm| {
                    let r = comm.rank();
                    let send: Vec<i32> = (0..n).map(|i| value(r, i, op)).collect();
                    let mut recv = vec![0i32; n];
                    if (r + n) % 2 == 0 {
                        comm.all_reduce(&send, &mut recv, op)?;
                    } else {
                        recv.copy_from_slice(&send);
                        comm.all_reduce_in_place(&mut recv, op)?;
                    }
                    assert_eq!(comm.last_algorithm(Collective::AllReduce), Some(Algorithm::Direct));
                    Ok(recv)
                })
                .unwrap_or_else(|e| panic!("{world} ranks, {op}, n = {n}: {e}"));
                let expected: Vec<i32> = (0..n).map(|i| fold(world, op, i)).collect();
                for (r, got) in out.iter().enumerate() {
                    assert_eq!(got, &expected, "{world} ranks, {op}, n = {n}: rank {r}");
                }
            }
        }
    }
}

/// A rank that calls a different all-reduce while the others are inside the
/// direct one (their pieces posted, not yet received): every rank gets an
/// error, none hangs, and the ranks that posted cancel what is in flight.
#[test]
fn direct_all_reduce_fails_on_every_rank_when_one_disagrees() {
    let mut opts = options().with_algorithm(Collective::AllReduce, Algorithm::Direct);
    opts.segment_bytes = 64;
    opts.timeout = std::time::Duration::from_secs(5);
    let out = hcomm::host::run_with(3, &opts, |comm| {
        let send = vec![1i64; 3000];
        let mut recv = vec![0i64; 3000];
        let op = if comm.rank() == 2 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        Ok(comm.all_reduce(&send, &mut recv, op).err().map(|e| e.to_string()))
    })
    .unwrap();
    for (r, e) in out.iter().enumerate() {
        let e = e.as_deref().unwrap_or_else(|| panic!("rank {r} succeeded"));
        assert!(e.starts_with("mismatch:") && e.contains("all_reduce"), "rank {r}: {e}");
    }
}

/// `last_algorithms` names every algorithm that ran, in order: a ring
/// all-reduce whose tail (fewer elements than ranks) went through
/// recursive doubling names both; small halving-doubling all-reduces combine
/// whole vectors by recursive doubling.
#[test]
fn the_algorithms_that_ran_are_recorded() {
    use Algorithm::{Direct, HalvingDoubling, RecursiveDoubling, Ring};
    let cases: [(Algorithm, usize, &[Algorithm]); 6] = [
        (Ring, 30, &[Ring]),
        (Ring, 31, &[Ring, RecursiveDoubling]),
        (Ring, 2, &[RecursiveDoubling]),
        (HalvingDoubling, 31, &[RecursiveDoubling]),
        (HalvingDoubling, 20_000, &[HalvingDoubling]),
        (Direct, 31, &[Direct]),
    ];
    for (algorithm, n, ran) in cases {
        let opts = options().with_algorithm(Collective::AllReduce, algorithm);
        let out = hcomm::host::run_with(3, &opts, |comm| {
            let mut x = vec![1i32; n];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            assert!(x.iter().all(|&v| v == 3));
            Ok((
                comm.last_algorithm(Collective::AllReduce),
                comm.last_algorithms(Collective::AllReduce),
            ))
        })
        .unwrap();
        for (chosen, got) in out {
            assert_eq!(chosen, Some(algorithm));
            assert_eq!(got, ran, "{algorithm}, n = {n}");
        }
    }
}

/// The direct reduce-scatter in pieces: every operator, 1 to 7 ranks, blocks
/// of 0 to 13 elements, exact against the serial reference.
#[test]
fn direct_reduce_scatter_in_pieces_is_exact() {
    let mut opts = options().with_algorithm(Collective::ReduceScatter, Algorithm::Direct);
    opts.segment_bytes = 8;
    for world in 1..=7 {
        for op in ReduceOp::ALL {
            for n in [0, 1, 2, 5, 13] {
                let out = hcomm::host::run_with(world, &opts, |comm| {
                    let r = comm.rank();
                    let send: Vec<i32> = (0..n * world).map(|i| value(r, i, op)).collect();
                    let mut recv = vec![0i32; n];
                    comm.reduce_scatter(&send, &mut recv, op)?;
                    assert_eq!(comm.last_algorithm(Collective::ReduceScatter), Some(Algorithm::Direct));
                    Ok(recv)
                })
                .unwrap_or_else(|e| panic!("{world} ranks, {op}, n = {n}: {e}"));
                for (r, got) in out.iter().enumerate() {
                    let expected: Vec<i32> = (0..n).map(|i| fold(world, op, r * n + i)).collect();
                    assert_eq!(got, &expected, "{world} ranks, {op}, n = {n}: rank {r}");
                }
            }
        }
    }
}
