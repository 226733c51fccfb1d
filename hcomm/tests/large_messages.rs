//! Messages large enough that the host fabric hands the copy to the
//! receiver (when the receiver is blocked waiting): exchanges, a sender
//! polling `test` while its receiver waits, and collectives, each checked
//! element by element against a serial reference.

mod common;

use std::time::Duration;

use common::options;
use hcomm::{Progress, ReduceOp};

/// Elements per message: 1 MiB of `i32`, far above the hand-over size.
const N: usize = 1 << 18;

fn value(rank: usize, round: usize, i: usize) -> i32 {
    (rank * 1_000_003 + round * 7919 + i) as i32
}

#[test]
fn large_exchanges_in_both_directions_arrive_intact() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let (r, peer) = (comm.rank(), 1 - comm.rank());
        let mut errors = 0;
        for round in 0..4 {
            let mine: Vec<i32> = (0..N).map(|i| value(r, round, i)).collect();
            let mut theirs = vec![0i32; N];
            comm.send_recv(&mine, peer, &mut theirs, peer)?;
            errors += (0..N).filter(|&i| theirs[i] != value(peer, round, i)).count();
        }
        Ok(errors)
    })
    .unwrap();
    assert_eq!(out, vec![0, 0]);
}

#[test]
fn a_sender_polling_test_completes_while_its_receiver_waits() {
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let data: Vec<i32> = (0..N).map(|i| value(0, 1, i)).collect();
        if comm.rank() == 0 {
            // Let rank 1 block in its wait first, so the copy is handed to it.
            std::thread::sleep(Duration::from_millis(50));
            let polls = hcomm::scope(|s| {
                let mut request = comm.isend(s, &data, 1)?;
                let mut polls = 0usize;
                loop {
                    polls += 1;
                    match request.test()? {
                        Progress::Done => return Ok(polls),
                        Progress::Pending(r) => request = r,
                    }
                    std::thread::yield_now();
                }
            })?;
            Ok(usize::from(polls == 0))
        } else {
            let mut got = vec![0i32; N];
            hcomm::scope(|s| comm.irecv(s, &mut got, 0)?.wait())?;
            Ok((0..N).filter(|&i| got[i] != data[i]).count())
        }
    })
    .unwrap();
    assert_eq!(out, vec![0, 0]);
}

#[test]
fn large_collectives_match_the_serial_reference() {
    let w = 3;
    let out = hcomm::host::run_with(w, &options(), |comm| {
        let r = comm.rank();
        let mut wrong = Vec::new();
        // all_reduce
        let send: Vec<i32> = (0..N).map(|i| value(r, 0, i)).collect();
        let mut recv = vec![0i32; N];
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        let want = |i: usize| (0..w).map(|q| value(q, 0, i)).fold(0i32, i32::wrapping_add);
        wrong.push((0..N).filter(|&i| recv[i] != want(i)).count());
        // reduce_scatter: block r of the sum
        let b = N / w;
        let mut block = vec![0i32; b];
        comm.reduce_scatter(&send[..b * w], &mut block, ReduceOp::Sum)?;
        wrong.push((0..b).filter(|&i| block[i] != want(r * b + i)).count());
        // all_gather
        let mine: Vec<i32> = (0..b).map(|i| value(r, 1, i)).collect();
        let mut all = vec![0i32; b * w];
        comm.all_gather(&mine, &mut all)?;
        wrong.push((0..b * w).filter(|&i| all[i] != value(i / b, 1, i % b)).count());
        // all_to_all: block j of rank q goes to rank j as block q
        let out_blocks: Vec<i32> = (0..b * w).map(|i| value(r, 2, i)).collect();
        let mut in_blocks = vec![0i32; b * w];
        comm.all_to_all(&out_blocks, &mut in_blocks)?;
        wrong.push(
            (0..b * w)
                .filter(|&i| in_blocks[i] != value(i / b, 2, r * b + i % b))
                .count(),
        );
        // broadcast from rank 1
        let mut buf: Vec<i32> = if r == 1 {
            (0..N).map(|i| value(1, 3, i)).collect()
        } else {
            vec![0; N]
        };
        comm.broadcast(&mut buf, 1)?;
        wrong.push((0..N).filter(|&i| buf[i] != value(1, 3, i)).count());
        Ok(wrong)
    })
    .unwrap();
    assert_eq!(out, vec![vec![0; 5]; w]);
}

/// Messages of 9 MiB and a few bytes, from and to buffers that start at odd
/// element offsets: above the size from which host copies bypass the cache
/// (an eighth of the last-level cache), so the streaming copy's unaligned
/// head, its body and its tail all run; exchanged, and all-to-all.
#[test]
fn messages_that_bypass_the_cache_arrive_intact() {
    const M: usize = (9 << 20) / 4 + 3;
    let out = hcomm::host::run_with(2, &options(), |comm| {
        let (r, peer) = (comm.rank(), 1 - comm.rank());
        let mine: Vec<i32> = (0..=M).map(|i| value(r, 5, i)).collect();
        let mut theirs = vec![0i32; M + 2];
        comm.send_recv(&mine[1..], peer, &mut theirs[2..], peer)?;
        let mut wrong = (0..M).filter(|&i| theirs[i + 2] != value(peer, 5, i + 1)).count();
        wrong += usize::from(theirs[..2] != [0, 0]);
        let out_blocks: Vec<i32> = (0..2 * M).map(|i| value(r, 6, i)).collect();
        let mut in_blocks = vec![0i32; 2 * M];
        comm.all_to_all(&out_blocks, &mut in_blocks)?;
        wrong += (0..2 * M)
            .filter(|&i| in_blocks[i] != value(i / M, 6, r * M + i % M))
            .count();
        Ok(wrong)
    })
    .unwrap();
    assert_eq!(out, vec![0, 0]);
}
