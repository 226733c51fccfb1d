//! Buffers lent to in-flight operations on the unwinding path: a panic (or a
//! leaked request followed by a panic) must leave no operation that can write
//! into memory its owner has already freed, and must not consume a message
//! that a later receive is entitled to.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use common::options;
use hcomm::__private::{Exec, Region};
use hcomm::Comm;

const N: usize = 1024;
const SENTINEL: u64 = 0x5EED_5EED_5EED_5EED;

/// Rank 1's message to rank 0, sent after rank 0 says it is ready.
fn message() -> Vec<u64> {
    (0..N as u64).map(|i| i * 3 + 1).collect()
}

/// Runs `posting` on rank 0 (it lends a heap buffer of `N` elements to an
/// operation and then panics, the panic caught here), then checks that the
/// freed buffer's memory is never written and that rank 1's message arrives
/// whole in a fresh receive.
fn after_a_caught_panic(posting: fn(&Comm)) {
    hcomm::host::run_with(2, &options(), |comm| {
        if comm.rank() == 0 {
            let caught = panic::catch_unwind(AssertUnwindSafe(|| posting(comm)));
            assert!(caught.is_err(), "the posting code must panic");
            // Heap blocks of the freed buffer's size are likely to reuse its
            // memory; none of them may be written by the cancelled receive.
            let decoys: Vec<Vec<u64>> = (0..8).map(|_| vec![SENTINEL; N]).collect();
            comm.barrier()?; // rank 1 sends only now
            let mut got = vec![0u64; N];
            comm.recv(&mut got, 1)?;
            assert_eq!(got, message(), "the message must reach the next receive");
            for d in &decoys {
                assert!(d.iter().all(|&v| v == SENTINEL), "freed memory was written");
            }
        } else {
            comm.barrier()?;
            comm.send(&message(), 0)?;
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_leaked_receive_is_cancelled_when_a_panic_leaves_the_scope() {
    after_a_caught_panic(|comm| {
        let mut buf = vec![0u64; N];
        let _ = hcomm::scope(|s| -> hcomm::Result<()> {
            let req = comm.irecv(s, &mut buf, 1)?;
            std::mem::forget(req);
            panic!("the model code fails while the receive is posted");
        });
    });
}

#[test]
fn a_request_dropped_by_a_panic_is_cancelled_not_waited() {
    let start = Instant::now();
    after_a_caught_panic(|comm| {
        let mut buf = vec![0u64; N];
        let _ = hcomm::scope(|s| -> hcomm::Result<()> {
            let _req = comm.irecv(s, &mut buf, 1)?;
            panic!("the model code fails while the receive is posted");
        });
    });
    // Waiting instead of cancelling would block until the timeout.
    assert!(start.elapsed() < options().timeout / 2, "took {:?}", start.elapsed());
}

#[test]
fn a_panic_in_a_batch_posts_nothing() {
    after_a_caught_panic(|comm| {
        let mut buf = vec![0u64; N];
        let _ = comm.batch(|b| -> hcomm::Result<()> {
            b.recv(&mut buf, 1)?;
            panic!("the batch closure fails after adding a receive");
        });
    });
}

hcomm::comm_schedule! {
    #[verify(world in 2..=2)]
    fn two_ranks(a: &mut [T; n]) {
        if rank == 0 { recv a from 1; } else { send a to 0; }
    }
}

#[test]
fn the_schedule_executor_cancels_in_flight_operations_when_its_body_panics() {
    after_a_caught_panic(|comm| {
        let mut buf = vec![0u64; N];
        let _ = Exec::<u64>::run(comm, &two_ranks::SCHEDULE, |x| {
            let out = x.output(&mut buf);
            let _h = x.irecv(
                Region {
                    buf: out,
                    start: 0,
                    end: N as i64,
                },
                1,
                0,
                None,
            )?;
            panic!("the executor's body fails with a receive in flight");
        });
    });
}

#[test]
fn a_panic_while_requests_complete_normally_still_returns_the_data() {
    // The scope's normal path is unchanged: a request waited before the
    // panic delivered its data, and the panic still propagates.
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let peer = 1 - comm.rank();
        let mine = [comm.rank() as u32 + 10; 4];
        let mut theirs = [0u32; 4];
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            hcomm::scope(|s| -> hcomm::Result<()> {
                let r = comm.irecv(s, &mut theirs, peer)?;
                comm.isend(s, &mine, peer)?.wait()?;
                r.wait()?;
                panic!("after both requests completed");
            })
        }));
        assert!(caught.is_err());
        Ok(theirs)
    })
    .unwrap();
    assert_eq!(out, vec![[11; 4], [10; 4]]);
}
