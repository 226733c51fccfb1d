//! Point-to-point semantics: ordering per channel, tags, batches, scoped
#![allow(
    clippy::float_cmp,
    reason = "the values compared are small integers, exact in every type"
)]
//! non-blocking requests, and the errors for bad input.

mod common;

use common::options;
use hcomm::{Error, Progress, ReduceOp};

#[test]
fn messages_on_one_channel_do_not_overtake_and_tags_are_separate_channels() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        if comm.rank() == 0 {
            let a = [1i32, 1];
            let b = [2i32, 2];
            let c = [3i32, 3];
            hcomm::scope(|s| {
                let r1 = comm.isend_tagged(s, &a, 1, 0)?;
                let r2 = comm.isend_tagged(s, &b, 1, 7)?;
                let r3 = comm.isend_tagged(s, &c, 1, 0)?;
                hcomm::wait_all([r3, r1, r2])
            })?;
            Ok(vec![])
        } else {
            let mut tag7 = [0i32; 2];
            let mut first = [0i32; 2];
            let mut second = [0i32; 2];
            comm.recv_tagged(&mut tag7, 0, 7)?;
            comm.recv_tagged(&mut first, 0, 0)?;
            comm.recv_tagged(&mut second, 0, 0)?;
            Ok(vec![tag7, first, second])
        }
    })
    .unwrap();
    assert_eq!(out[1], vec![[2, 2], [1, 1], [3, 3]]);
}

#[test]
fn a_batch_exchanges_both_directions_with_one_peer_and_with_itself() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let r = comm.rank();
        let peer = 1 - r;
        let a = [r as u64 * 10 + 1; 3];
        let b = [r as u64 * 10 + 2; 5];
        let mut got_a = [0u64; 3];
        let mut got_b = [0u64; 5];
        let mut from_self = [0u64; 3];
        comm.batch(|x| {
            // Receives first: posting order inside a batch does not matter.
            x.recv(&mut got_a, peer)?;
            x.recv(&mut got_b, peer)?;
            x.send(&a, peer)?;
            x.send(&b, peer)?;
            x.send_tagged(&a, r, 9)?;
            x.recv_tagged(&mut from_self, r, 9)
        })?;
        Ok((got_a, got_b, from_self))
    })
    .unwrap();
    for (r, (got_a, got_b, from_self)) in out.iter().enumerate() {
        let p = 1 - r as u64;
        assert_eq!(*got_a, [p * 10 + 1; 3], "rank {r}");
        assert_eq!(*got_b, [p * 10 + 2; 5], "rank {r}");
        assert_eq!(*from_self, [r as u64 * 10 + 1; 3], "rank {r}");
    }
}

#[test]
fn non_blocking_requests_complete_out_of_order() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        if comm.rank() == 0 {
            // Sends tag 1 first although rank 1 posted tag 0 first.
            comm.send_tagged(&[11i64; 4], 1, 1)?;
            comm.send_tagged(&[10i64; 2], 1, 0)?;
            return Ok(([0; 2], [0; 4], 0));
        }
        let mut t0 = [0i64; 2];
        let mut t1 = [0i64; 4];
        let mut polls = 0;
        hcomm::scope(|s| {
            let r0 = comm.irecv_tagged(s, &mut t0, 0, 0)?;
            let mut r1 = comm.irecv_tagged(s, &mut t1, 0, 1)?;
            loop {
                match r1.test()? {
                    Progress::Done => break,
                    Progress::Pending(r) => {
                        polls += 1;
                        r1 = r;
                        std::thread::yield_now();
                    }
                }
            }
            r0.wait()
        })?;
        Ok((t0, t1, polls))
    })
    .unwrap();
    assert_eq!(out[1].0, [10; 2]);
    assert_eq!(out[1].1, [11; 4]);
}

#[test]
fn a_leaked_request_is_completed_by_its_scope() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let mut buf = [0u8; 16];
        if comm.rank() == 0 {
            buf = [7; 16];
            hcomm::scope(|s| {
                std::mem::forget(comm.isend(s, &buf, 1)?);
                Ok(())
            })?;
        } else {
            hcomm::scope(|s| {
                let r = comm.irecv(s, &mut buf, 0)?;
                drop(r); // dropping waits
                Ok(())
            })?;
        }
        Ok(buf)
    })
    .unwrap();
    assert_eq!(out[1], [7; 16]);
}

#[test]
fn receive_with_reduce_combines_in_place() {
    let out = hcomm::host::run_with(3, &options(), |comm| {
        let mut acc = [comm.rank() as f64 + 1.0; 4];
        if comm.rank() == 0 {
            comm.recv_reduce(&mut acc, 1, 0, ReduceOp::Sum)?;
            comm.recv_reduce(&mut acc, 2, 0, ReduceOp::Max)?;
        } else {
            comm.send(&acc, 0)?;
        }
        Ok(acc)
    })
    .unwrap();
    assert_eq!(out[0], [3.0; 4]);
}

#[test]
fn mismatched_lengths_fail_on_both_ranks() {
    let errs = std::sync::Mutex::new(Vec::new());
    let res = hcomm::host::run_with(2, &options(), |comm| {
        let e = if comm.rank() == 0 {
            comm.send(&[1i32; 4], 1)
        } else {
            let mut b = [0i32; 5];
            comm.recv(&mut b, 0)
        };
        errs.lock().unwrap().push(e.clone());
        e
    });
    assert!(matches!(res, Err(Error::Mismatch { .. })), "{res:?}");
    let errs = errs.into_inner().unwrap();
    assert_eq!(errs.len(), 2);
    for e in errs {
        let Err(Error::Mismatch { message }) = e else {
            panic!("{e:?}")
        };
        assert!(
            message.contains("rank 0 sends 4 elements of i32 to rank 1 (tag 0), which receives 5"),
            "{message}"
        );
    }
}

#[test]
fn bad_peers_and_blocking_self_messages_are_errors() {
    hcomm::host::run_with(2, &options(), |comm| {
        let e = comm.send(&[1u8], 2).unwrap_err();
        assert!(
            matches!(&e, Error::Precondition { message } if message.contains("rank 2 is out of range")),
            "{e}"
        );
        let e = comm.recv(&mut [0u8], comm.rank()).unwrap_err();
        assert!(
            matches!(&e, Error::Precondition { message } if message.contains("to itself can never complete")),
            "{e}"
        );
        let e = comm.broadcast(&mut [0u8], 5).unwrap_err();
        assert!(
            matches!(&e, Error::Precondition { message } if message.contains("root 5 is out of range")),
            "{e}"
        );
        let e = comm.all_gather(&[1u8; 2], &mut [0u8; 3]).unwrap_err();
        assert!(matches!(&e, Error::BufferLength { actual: 3, .. }), "{e}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn zero_length_messages_and_collectives_work() {
    hcomm::host::run_with(3, &options(), |comm| {
        let empty: [f32; 0] = [];
        let mut out: [f32; 0] = [];
        comm.send_recv(&empty, (comm.rank() + 1) % 3, &mut out, (comm.rank() + 2) % 3)?;
        comm.all_reduce(&empty, &mut out, ReduceOp::Sum)?;
        comm.all_gather(&empty, &mut out)?;
        comm.broadcast(&mut out, 1)?;
        comm.barrier()
    })
    .unwrap();
}
