//! Non-blocking collectives bound to `hcomm::scope`: gradient buckets that
//! overlap other work, `test` progress, leaked requests, and the unwinding
//! path (a leaked request and then a panic) leaving no buffer in use.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use common::options;
use hcomm::{Error, ReduceOp};

fn bucket(r: usize, b: usize, len: usize) -> Vec<f32> {
    (0..len).map(|i| (r * 100 + b * 10 + i) as f32).collect()
}

#[test]
fn gradient_buckets_overlap_other_work_and_match_serial_sums() {
    for w in 1..=5usize {
        hcomm::host::run_with(w, &options(), |comm| {
            let r = comm.rank();
            let lens = [7, 1, 0, 33];
            let mut buckets: Vec<Vec<f32>> = lens.iter().enumerate().map(|(b, &n)| bucket(r, b, n)).collect();
            let mine = [r as i64, 2 * r as i64];
            let mut gathered = vec![0i64; 2 * w];
            let rs_in: Vec<u32> = (0..3 * w).map(|i| (r * 3 + i) as u32).collect();
            let mut rs_out = vec![0u32; 3];
            let src = bucket(r, 9, 5);
            let mut dst = vec![0.0f32; 5];
            hcomm::scope(|s| {
                let mut reqs = Vec::new();
                for b in &mut buckets {
                    reqs.push(comm.iall_reduce_in_place(s, b, ReduceOp::Sum)?);
                }
                reqs.push(comm.iall_gather(s, &mine, &mut gathered)?);
                reqs.push(comm.ireduce_scatter(s, &rs_in, &mut rs_out, ReduceOp::Max)?);
                reqs.push(comm.iall_reduce(s, &src, &mut dst, ReduceOp::Min)?);
                // Blocking collectives and point-to-point meanwhile.
                let mut x = [r as u64 + 1];
                comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
                assert_eq!(x[0] as usize, w * (w + 1) / 2);
                hcomm::wait_all(reqs)
            })?;
            for (b, got) in buckets.iter().enumerate() {
                let want: Vec<f32> = (0..lens[b])
                    .map(|i| (0..w).map(|q| bucket(q, b, lens[b])[i]).sum())
                    .collect();
                assert_eq!(*got, want, "bucket {b}");
            }
            let want: Vec<i64> = (0..w).flat_map(|q| [q as i64, 2 * q as i64]).collect();
            assert_eq!(gathered, want);
            let want: Vec<u32> = (0..3).map(|i| ((w - 1) * 3 + r * 3 + i) as u32).collect();
            assert_eq!(rs_out, want);
            assert_eq!(dst, bucket(0, 9, 5));
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn test_reports_progress_and_leaked_requests_complete_with_the_scope() {
    hcomm::host::run_with(3, &options(), |comm| {
        let r = comm.rank();
        let mut a = vec![r as i32; 4];
        let mut b = vec![10 * r as i32; 2];
        hcomm::scope(|s| {
            let mut req = comm.iall_reduce_in_place(s, &mut a, ReduceOp::Sum)?;
            loop {
                match req.test()? {
                    hcomm::Progress::Done => break,
                    hcomm::Progress::Pending(again) => {
                        req = again;
                        std::thread::yield_now();
                    }
                }
            }
            // Leaked: the scope waits for it before `b` is released.
            std::mem::forget(comm.iall_reduce_in_place(s, &mut b, ReduceOp::Sum)?);
            Ok(())
        })?;
        assert_eq!(a, vec![3; 4]);
        assert_eq!(b, vec![30; 2]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn argument_errors_are_immediate() {
    hcomm::host::run_with(2, &options(), |comm| {
        let (two, mut three) = ([1u8; 2], [0u8; 3]);
        let e = hcomm::scope(|s| comm.iall_gather(s, &two, &mut three).map(|_| ())).unwrap_err();
        assert!(matches!(e, Error::BufferLength { .. }), "{e}");
        let (three, mut two) = ([1u8; 3], [0u8; 2]);
        let e = hcomm::scope(|s| comm.ireduce_scatter(s, &three, &mut two, ReduceOp::Sum).map(|_| ())).unwrap_err();
        assert!(matches!(e, Error::BufferLength { .. }), "{e}");
        Ok(())
    })
    .unwrap();
}

const N: usize = 4096;
const SENTINEL: u64 = 0x5EED_5EED_5EED_5EED;

/// Rank 0 lends heap buffers to `posted` non-blocking all-reduces, leaks
/// the requests and panics before its peers have joined; the panic is
/// caught. Its freed buffers must never be written afterwards, the peers'
/// copies of the collectives fail instead of hanging, and the communicator
/// itself keeps working.
fn leaked_then_panic(posted: usize) {
    let results = hcomm::host::run_with(3, &options(), |comm| {
        if comm.rank() == 0 {
            let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                let mut bufs: Vec<Vec<u64>> = (0..posted).map(|_| vec![1u64; N]).collect();
                let _ = hcomm::scope(|s| -> hcomm::Result<()> {
                    for b in &mut bufs {
                        std::mem::forget(comm.iall_reduce_in_place(s, b, ReduceOp::Sum)?);
                    }
                    // Most likely the helper thread is running the first one
                    // by now; queued or running, the cancel is the same.
                    std::thread::sleep(Duration::from_millis(20));
                    panic!("the backward pass fails while gradients are in flight");
                });
            }));
            assert!(caught.is_err(), "the panic must reach catch_unwind");
            // Blocks of the freed buffers' size likely reuse their memory.
            let decoys: Vec<Vec<u64>> = (0..8).map(|_| vec![SENTINEL; N]).collect();
            comm.barrier()?; // the peers join the collectives only now
            comm.barrier()?;
            for d in &decoys {
                assert!(d.iter().all(|&v| v == SENTINEL), "freed memory was written");
            }
            Ok(true)
        } else {
            // Join only once rank 0 has unwound out of its scope.
            comm.barrier()?;
            let mut bufs: Vec<Vec<u64>> = (0..posted).map(|_| vec![1u64; N]).collect();
            let out = hcomm::scope(|s| {
                let reqs = bufs
                    .iter_mut()
                    .map(|b| comm.iall_reduce_in_place(s, b, ReduceOp::Sum))
                    .collect::<hcomm::Result<Vec<_>>>()?;
                hcomm::wait_all(reqs)
            });
            comm.barrier()?;
            Ok(matches!(out, Err(Error::Aborted { .. })))
        }
    })
    .unwrap();
    assert_eq!(results, vec![true; 3], "the peers' collectives must fail, not hang");
}

#[test]
fn a_running_leaked_collective_is_stopped_when_a_panic_leaves_the_scope() {
    leaked_then_panic(1);
}

#[test]
fn queued_leaked_collectives_are_withdrawn_when_a_panic_leaves_the_scope() {
    leaked_then_panic(3);
}

#[test]
fn a_request_dropped_while_unwinding_is_cancelled() {
    let results = hcomm::host::run_with(2, &options(), |comm| {
        if comm.rank() == 0 {
            let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                let mut buf = vec![1u64; N];
                let _ = hcomm::scope(|s| -> hcomm::Result<()> {
                    let _req = comm.iall_reduce_in_place(s, &mut buf, ReduceOp::Sum)?;
                    std::thread::sleep(Duration::from_millis(50));
                    panic!("fails with the request alive");
                });
            }));
            assert!(caught.is_err());
            comm.barrier()?;
            Ok(true)
        } else {
            comm.barrier()?;
            let mut buf = vec![1u64; N];
            let out = hcomm::scope(|s| comm.iall_reduce_in_place(s, &mut buf, ReduceOp::Sum)?.wait());
            Ok(matches!(out, Err(Error::Aborted { .. })))
        }
    })
    .unwrap();
    assert_eq!(results, vec![true; 2]);
}
