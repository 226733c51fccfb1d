//! The one-shot collectives of in-process ranks (the board): long runs of
//! calls of changing sizes with ranks at different speeds, interleaved with
//! collectives that run on messages, and every way a call can go wrong:
//! ranks that disagree, a rank that never calls, a rank that comes too
//! late. Every case has a timeout; none may hang.

use std::time::Duration;

use hcomm::{Algorithm, Collective, CommOptions, Error, ReduceOp};

fn options(timeout_ms: u64) -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_millis(timeout_ms))
}

/// Many calls in a row, each rank pausing at its own moments, sizes from
/// empty to the board's limit, all-reduces, all-gathers and barriers on the
/// board between collectives that run on messages: every result exact.
#[test]
fn long_runs_of_calls_are_exact() {
    for world in [2, 3, 5] {
        let out = hcomm::host::run_with(world, &options(20_000), |comm| {
            let r = comm.rank();
            for call in 0..300usize {
                if (call * 7 + r * 3) % 11 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let n = [0, 1, 3, 64, 1000, 16 << 10][call % 6];
                let send: Vec<i32> = (0..n).map(|i| (r * 1000 + i + call) as i32).collect();
                match call % 6 {
                    0 => {
                        let mut recv = vec![0i32; n];
                        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
                        assert_eq!(comm.last_algorithm(Collective::AllReduce), Some(Algorithm::OneShot));
                        let expected: Vec<i32> = (0..n)
                            .map(|i| (0..world).map(|q| (q * 1000 + i + call) as i32).sum())
                            .collect();
                        assert_eq!(recv, expected, "call {call}, rank {r}");
                    }
                    1 => {
                        let mut recv = vec![0i32; n * world];
                        comm.all_gather(&send, &mut recv)?;
                        let expected: Vec<i32> = (0..world)
                            .flat_map(|q| (0..n).map(move |i| (q * 1000 + i + call) as i32))
                            .collect();
                        assert_eq!(recv, expected, "call {call}, rank {r}");
                    }
                    2 => comm.barrier()?,
                    3 => {
                        // Rank r's block j is (r, j, i); rank r ends with
                        // every rank's block r, in rank order.
                        let block = n.div_ceil(world).min(64 << 10 >> 2 >> 3);
                        let send: Vec<i32> = (0..block * world)
                            .map(|x| (r * 1_000_000 + (x / block) * 1000 + x % block + call) as i32)
                            .collect();
                        let mut recv = vec![0i32; block * world];
                        comm.all_to_all(&send, &mut recv)?;
                        assert_eq!(comm.last_algorithm(Collective::AllToAll), Some(Algorithm::OneShot));
                        let expected: Vec<i32> = (0..block * world)
                            .map(|x| ((x / block) * 1_000_000 + r * 1000 + x % block + call) as i32)
                            .collect();
                        assert_eq!(recv, expected, "all-to-all, call {call}, rank {r}");
                    }
                    4 => {
                        let chunk = n.div_ceil(world).min(64 << 10 >> 2 >> 3);
                        let send: Vec<i32> = (0..chunk * world).map(|x| (r * 7 + x + call) as i32).collect();
                        let mut recv = vec![0i32; chunk];
                        comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum)?;
                        assert_eq!(comm.last_algorithm(Collective::ReduceScatter), Some(Algorithm::OneShot));
                        let expected: Vec<i32> = (0..chunk)
                            .map(|i| (0..world).map(|q| (q * 7 + r * chunk + i + call) as i32).sum())
                            .collect();
                        assert_eq!(recv, expected, "reduce-scatter, call {call}, rank {r}");
                    }
                    _ => {
                        // On messages: larger than the board takes.
                        let big = vec![r as i64; 20_000];
                        let mut recv = vec![0i64; 20_000];
                        comm.all_reduce(&big, &mut recv, ReduceOp::Max)?;
                        assert_ne!(comm.last_algorithm(Collective::AllReduce), Some(Algorithm::OneShot));
                        assert!(recv.iter().all(|&v| v == world as i64 - 1), "call {call}, rank {r}");
                    }
                }
            }
            Ok(())
        });
        out.unwrap_or_else(|e| panic!("{world} ranks: {e}"));
    }
}

fn errors(out: Vec<Option<Error>>) -> Vec<String> {
    out.into_iter()
        .enumerate()
        .map(|(r, e)| e.unwrap_or_else(|| panic!("rank {r} succeeded")).to_string())
        .collect()
}

/// Ranks that call the same collective with different operators, or
/// different collectives, all get a mismatch naming both calls.
#[test]
fn ranks_that_disagree_all_get_a_mismatch() {
    let out = hcomm::host::run_with(3, &options(5_000), |comm| {
        let send = vec![1.0f32; 100];
        let mut recv = vec![0.0f32; 100];
        let op = if comm.rank() == 1 { ReduceOp::Max } else { ReduceOp::Sum };
        Ok(comm.all_reduce(&send, &mut recv, op).err())
    })
    .unwrap();
    for (r, e) in errors(out).iter().enumerate() {
        assert!(
            e.starts_with("mismatch:") && e.contains("max") && e.contains("sum"),
            "rank {r}: {e}"
        );
    }
    let out = hcomm::host::run_with(2, &options(5_000), |comm| {
        let send = vec![1u8; 10];
        let mut recv = vec![0u8; 20];
        Ok(if comm.rank() == 0 {
            comm.all_gather(&send, &mut recv).err()
        } else {
            comm.all_reduce(&send, &mut recv[..10], ReduceOp::Sum).err()
        })
    })
    .unwrap();
    for (r, e) in errors(out).iter().enumerate() {
        assert!(
            e.starts_with("mismatch:") && e.contains("all_gather") && e.contains("all_reduce"),
            "rank {r}: {e}"
        );
    }
}

/// Ranks whose lengths differ so much that one runs on the board and the
/// other on messages: both get a mismatch, neither waits for the timeout,
/// and the communicator's later collectives fail the same way.
#[test]
fn board_and_message_paths_that_disagree_fail_fast() {
    let start = std::time::Instant::now();
    let out = hcomm::host::run_with(2, &options(30_000), |comm| {
        let n = if comm.rank() == 0 { 16 } else { 100_000 };
        let send = vec![1i64; n];
        let mut recv = vec![0i64; n];
        let first = comm.all_reduce(&send, &mut recv, ReduceOp::Sum).err();
        let later = comm.barrier().err();
        Ok((first, later))
    })
    .unwrap();
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    for (r, (first, later)) in out.into_iter().enumerate() {
        let first = first.unwrap_or_else(|| panic!("rank {r} succeeded")).to_string();
        assert!(
            first.starts_with("mismatch:") && first.contains("x 16") && first.contains("x 100000"),
            "rank {r}: {first}"
        );
        let later = later
            .unwrap_or_else(|| panic!("rank {r}'s barrier succeeded"))
            .to_string();
        assert!(later.starts_with("mismatch:"), "rank {r}: {later}");
    }
}

/// A rank that returns without calling the collective: the others get
/// `PeerFailed` naming it and the collective it did not call.
#[test]
fn a_rank_that_never_calls_is_named() {
    let out = hcomm::host::run_with(3, &options(20_000), |comm| {
        if comm.rank() == 2 {
            return Ok(None);
        }
        let send = vec![1u32; 8];
        let mut recv = vec![0u32; 8];
        Ok(Some(comm.all_reduce(&send, &mut recv, ReduceOp::Sum).unwrap_err()))
    })
    .unwrap();
    for (r, e) in out.into_iter().take(2).enumerate() {
        let e = e.unwrap();
        assert!(
            matches!(&e, Error::PeerFailed { rank: 2, reason } if reason.contains("without calling collective #0")),
            "rank {r}: {e}"
        );
    }
}

/// A rank later than the timeout: the others time out naming it.
#[test]
fn a_late_rank_is_named_in_the_timeout() {
    let out = hcomm::host::run_with(2, &options(200), |comm| {
        if comm.rank() == 1 {
            std::thread::sleep(Duration::from_secs(1));
            return Ok(None);
        }
        let mut buf = vec![1.0f64; 4];
        Ok(Some(comm.all_reduce_in_place(&mut buf, ReduceOp::Sum).unwrap_err()))
    })
    .unwrap();
    let e = out[0].as_ref().unwrap();
    assert!(
        matches!(e, Error::Timeout { rank: 0, operation, .. } if operation.contains("waiting for rank 1")),
        "{e}"
    );
}

/// A forced one-shot call larger than the board runs on messages instead.
#[test]
fn a_forced_one_shot_too_large_for_the_board_runs_on_messages() {
    let opts = options(20_000).with_algorithm(Collective::AllReduce, Algorithm::OneShot);
    let out = hcomm::host::run_with(2, &opts, |comm| {
        let send = vec![comm.rank() as u64 + 1; 100_000];
        let mut recv = vec![0u64; 100_000];
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        Ok((recv.iter().all(|&v| v == 3), comm.last_algorithm(Collective::AllReduce)))
    })
    .unwrap();
    for (ok, algorithm) in out {
        assert!(ok);
        assert_ne!(algorithm, Some(Algorithm::OneShot));
    }
}
