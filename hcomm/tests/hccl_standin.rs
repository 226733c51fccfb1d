//! The HCCL backend of hcomm driven end to end through hcomm-sys's `dlopen`
//! path against the ABI-faithful stand-in library (`hcomm-hccl-standin`),
//! with ranks as threads. Every result is compared exactly with a serial
//! reference.

use std::sync::OnceLock;
use std::time::Duration;

use hcomm::hccl::Hccl;
use hcomm::{bf16, Comm, CommOptions, DeviceBuffer, Error, ReduceOp};

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

fn run<R: Send>(world: usize, f: impl Fn(&Comm) -> hcomm::Result<R> + Sync) -> hcomm::Result<Vec<R>> {
    hccl().run(world, &options(), f)
}

/// What rank `r` contributes at index `i`.
fn val(r: usize, i: usize) -> i64 {
    ((r * 7 + i * 3) % 11) as i64 - 5
}

fn reduce_ref(op: ReduceOp, w: usize, i: usize, f: impl Fn(usize, usize) -> i64) -> i64 {
    let it = (0..w).map(|r| f(r, i));
    match op {
        ReduceOp::Sum => it.sum(),
        ReduceOp::Prod => it.product(),
        ReduceOp::Max => it.max().unwrap(),
        ReduceOp::Min => it.min().unwrap(),
        // the sum divided once, truncated toward zero
        ReduceOp::Avg => it.sum::<i64>() / w as i64,
    }
}

fn small(r: usize, i: usize) -> i64 {
    [1, 2, -1][(r + i) % 3]
}

#[test]
fn every_collective_matches_a_serial_reference_for_worlds_1_to_8() {
    for w in 1..=8usize {
        let out = run(w, |comm| {
            let (r, w) = (comm.rank(), comm.world());
            assert_eq!(comm.backend_name(), "hccl");
            let n = 5;
            // all_reduce, every operator, out of place and in place
            for op in ReduceOp::ALL {
                let f = if op == ReduceOp::Prod { small } else { val };
                let mine: Vec<i64> = (0..n).map(|i| f(r, i)).collect();
                let mut out = vec![0i64; n];
                comm.all_reduce(&mine, &mut out, op)?;
                let want: Vec<i64> = (0..n).map(|i| reduce_ref(op, w, i, f)).collect();
                assert_eq!(out, want, "all_reduce {op} world {w}");
                let mut inplace = mine.clone();
                comm.all_reduce_in_place(&mut inplace, op)?;
                assert_eq!(inplace, want, "all_reduce_in_place {op}");
            }
            // other element types
            let mut xf = vec![r as f32 + 0.5; 3];
            comm.all_reduce_in_place(&mut xf, ReduceOp::Sum)?;
            assert_eq!(xf, vec![(0..w).map(|q| q as f32 + 0.5).sum::<f32>(); 3]);
            let mut xb = [bf16::from_f32(r as f32); 2];
            comm.all_reduce_in_place(&mut xb, ReduceOp::Max)?;
            assert_eq!(xb, [bf16::from_f32((w - 1) as f32); 2]);
            // all_gather
            let mine: Vec<i64> = (0..n).map(|i| val(r, i)).collect();
            let mut all = vec![0i64; n * w];
            comm.all_gather(&mine, &mut all)?;
            let want: Vec<i64> = (0..w).flat_map(|q| (0..n).map(move |i| val(q, i))).collect();
            assert_eq!(all, want, "all_gather");
            // reduce_scatter
            let send: Vec<i64> = (0..n * w).map(|i| val(r, i)).collect();
            let mut block = vec![0i64; n];
            comm.reduce_scatter(&send, &mut block, ReduceOp::Sum)?;
            let want: Vec<i64> = (0..n).map(|i| reduce_ref(ReduceOp::Sum, w, r * n + i, val)).collect();
            assert_eq!(block, want, "reduce_scatter");
            // all_to_all: block j of rank q holds 100 q + 10 j + i
            let send: Vec<i64> = (0..w * n).map(|k| (100 * r + 10 * (k / n) + k % n) as i64).collect();
            let mut recv = vec![0i64; w * n];
            comm.all_to_all(&send, &mut recv)?;
            let want: Vec<i64> = (0..w * n).map(|k| (100 * (k / n) + 10 * r + k % n) as i64).collect();
            assert_eq!(recv, want, "all_to_all");
            // all_to_allv: rank q sends q + j + 1 elements (value 1000 q + j) to rank j
            let send_counts: Vec<usize> = (0..w).map(|j| r + j + 1).collect();
            let recv_counts: Vec<usize> = (0..w).map(|q| q + r + 1).collect();
            let send: Vec<i64> = (0..w)
                .flat_map(|j| std::iter::repeat_n((1000 * r + j) as i64, r + j + 1))
                .collect();
            let mut recv = vec![0i64; recv_counts.iter().sum()];
            comm.all_to_allv(&send, &send_counts, &mut recv, &recv_counts)?;
            let want: Vec<i64> = (0..w)
                .flat_map(|q| std::iter::repeat_n((1000 * q + r) as i64, q + r + 1))
                .collect();
            assert_eq!(recv, want, "all_to_allv");
            // broadcast from the last rank
            let root = w - 1;
            let mut buf: Vec<i64> = if r == root {
                (0..n).map(|i| val(root, i)).collect()
            } else {
                vec![0; n]
            };
            comm.broadcast(&mut buf, root)?;
            assert_eq!(buf, (0..n).map(|i| val(root, i)).collect::<Vec<_>>(), "broadcast");
            // reduce to rank w / 2
            let root = w / 2;
            let mine: Vec<i64> = (0..n).map(|i| val(r, i)).collect();
            let mut out = if r == root { vec![0i64; n] } else { Vec::new() };
            comm.reduce(&mine, &mut out, ReduceOp::Min, root)?;
            if r == root {
                let want: Vec<i64> = (0..n).map(|i| reduce_ref(ReduceOp::Min, w, i, val)).collect();
                assert_eq!(out, want, "reduce");
            }
            // gather to rank 0 (HCCL has none: one batch call)
            let mut all = if r == 0 { vec![0i64; n * w] } else { Vec::new() };
            comm.gather(&mine, &mut all, 0)?;
            if r == 0 {
                let want: Vec<i64> = (0..w).flat_map(|q| (0..n).map(move |i| val(q, i))).collect();
                assert_eq!(all, want, "gather");
            }
            // scatter from the last rank
            let root = w - 1;
            let src: Vec<i64> = if r == root {
                (0..n * w).map(|k| k as i64 * 3).collect()
            } else {
                Vec::new()
            };
            let mut mine = vec![0i64; n];
            comm.scatter(&src, &mut mine, root)?;
            assert_eq!(
                mine,
                (0..n).map(|i| ((r * n + i) * 3) as i64).collect::<Vec<_>>(),
                "scatter"
            );
            comm.barrier()?;
            // zero-length collectives are fine
            let mut empty: [f32; 0] = [];
            comm.all_reduce_in_place(&mut empty, ReduceOp::Sum)?;
            Ok(r)
        })
        .unwrap_or_else(|e| panic!("world {w}: {e}"));
        assert_eq!(out, (0..w).collect::<Vec<_>>());
    }
}

#[test]
fn device_buffers_run_collectives_without_staging() {
    let out = run(4, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        let mine: Vec<f32> = (0..6).map(|i| (r * 10 + i) as f32).collect();
        let send = DeviceBuffer::from_host(comm, &mine)?;
        assert_eq!(send.len(), 6);
        assert_eq!(send.device(), r as i32);
        // out of place and in place all-reduce
        let mut recv = DeviceBuffer::<f32>::zeros(comm, 6)?;
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        let want: Vec<f32> = (0..6).map(|i| (0..w).map(|q| (q * 10 + i) as f32).sum()).collect();
        assert_eq!(recv.to_host()?, want);
        comm.all_reduce_in_place(&mut recv, ReduceOp::Max)?;
        assert_eq!(recv.to_host()?, want);
        // all_gather into a device buffer
        let mut all = DeviceBuffer::<f32>::zeros(comm, 6 * w)?;
        comm.all_gather(&send, &mut all)?;
        let want: Vec<f32> = (0..w).flat_map(|q| (0..6).map(move |i| (q * 10 + i) as f32)).collect();
        assert_eq!(all.to_host()?, want);
        // mixed: device send, host receive
        let mut host = vec![0f32; 6];
        comm.all_reduce(&send, &mut host, ReduceOp::Min)?;
        assert_eq!(host, (0..6).map(|i| i as f32).collect::<Vec<_>>());
        // broadcast and all_to_allv on device memory
        let mut b = DeviceBuffer::from_host(comm, &[r as f32; 3])?;
        comm.broadcast(&mut b, 2)?;
        assert_eq!(b.to_host()?, vec![2.0; 3]);
        let counts = vec![1usize; w];
        let s = DeviceBuffer::from_host(comm, &(0..w).map(|j| (r * 100 + j) as f32).collect::<Vec<_>>())?;
        let mut d = DeviceBuffer::<f32>::zeros(comm, w)?;
        comm.all_to_allv(&s, &counts, &mut d, &counts)?;
        assert_eq!(d.to_host()?, (0..w).map(|q| (q * 100 + r) as f32).collect::<Vec<_>>());
        // copies are length-checked
        let mut small = DeviceBuffer::<f32>::zeros(comm, 2)?;
        assert!(matches!(
            small.copy_from_host(&[1.0; 3]),
            Err(Error::BufferLength { .. })
        ));
        small.copy_from_host(&[7.0, 8.0])?;
        assert_eq!(small.to_host()?, vec![7.0, 8.0]);
        // point-to-point on device memory
        let mut got = DeviceBuffer::<f32>::zeros(comm, 3)?;
        let to_send = DeviceBuffer::from_host(comm, &[r as f32; 3])?;
        comm.send_recv(&to_send, (r + 1) % w, &mut got, (r + w - 1) % w)?;
        assert_eq!(got.to_host()?, vec![((r + w - 1) % w) as f32; 3]);
        Ok(())
    });
    out.unwrap();
}

#[test]
fn blocking_p2p_and_batches() {
    run(4, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        // ring of blocking pairs: even ranks send first
        let right = (r + 1) % w;
        let left = (r + w - 1) % w;
        let mut got = [0i32; 4];
        if r % 2 == 0 {
            comm.send(&[r as i32; 4], right)?;
            comm.recv(&mut got, left)?;
        } else {
            comm.recv(&mut got, left)?;
            comm.send(&[r as i32; 4], right)?;
        }
        assert_eq!(got, [left as i32; 4]);
        // one batch: two sends to the right neighbour (two channel positions,
        // so two library calls), a message to itself, receives from the left
        let (a, b) = ([r as i64; 2], [10 * r as i64; 3]);
        let (mut ga, mut gb) = ([0i64; 2], [0i64; 3]);
        let me = [r as u8; 5];
        let mut me_back = [0u8; 5];
        comm.batch(|bt| {
            bt.recv(&mut ga, left)?;
            bt.send(&a, right)?;
            bt.send(&b, right)?;
            bt.recv(&mut me_back, r)?;
            bt.send(&me, r)?;
            bt.recv(&mut gb, left)
        })?;
        assert_eq!((ga, gb), ([left as i64; 2], [10 * left as i64; 3]));
        assert_eq!(me_back, me);
        // receive-and-combine
        let mut acc = [1i64, 2, 3];
        let contribution = [r as i64; 3];
        comm.batch(|bt| {
            bt.send(&contribution, right)?;
            bt.recv_reduce(&mut acc, left, 0, ReduceOp::Sum)
        })?;
        assert_eq!(acc, [1 + left as i64, 2 + left as i64, 3 + left as i64]);
        let mut dacc = DeviceBuffer::from_host(comm, &[5i64, 5, 5])?;
        let mine = DeviceBuffer::from_host(comm, &[r as i64; 3])?;
        comm.batch(|bt| {
            bt.send(&mine, right)?;
            bt.recv_reduce(&mut dacc, left, 0, ReduceOp::Max)
        })?;
        assert_eq!(dacc.to_host()?, vec![5.max(left as i64); 3]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn nonblocking_requests_out_of_order_progress_together() {
    run(5, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        // Three messages to every other rank and three from each, receives
        // posted first, everything waited in reverse order: the library sees
        // one batch call per channel position.
        let sends: Vec<Vec<i64>> = (0..w * 3).map(|k| vec![(1000 * r + k) as i64; 1 + k % 4]).collect();
        let mut recvs: Vec<Vec<i64>> = (0..w * 3).map(|k| vec![0; 1 + (r * 3 + k % 3) % 4]).collect();
        hcomm::scope(|s| {
            let mut reqs = Vec::new();
            for (k, buf) in recvs.iter_mut().enumerate() {
                let peer = k / 3;
                if peer != r {
                    reqs.push(comm.irecv(s, buf, peer)?);
                }
            }
            for (k, buf) in sends.iter().enumerate() {
                let peer = k / 3;
                if peer != r {
                    // message m to `peer` is sends[peer * 3 + m]
                    reqs.push(comm.isend(s, buf, peer)?);
                }
            }
            while let Some(req) = reqs.pop() {
                req.wait()?;
            }
            Ok(())
        })?;
        for (k, got) in recvs.iter().enumerate() {
            let (peer, m) = (k / 3, k % 3);
            if peer != r {
                let want = vec![(1000 * peer + r * 3 + m) as i64; got.len()];
                assert_eq!(got, &want, "message {m} from {peer}");
            }
        }
        // test() drives progress too: a ring of isend/irecv polled until done
        let mut left = [0u32; 2];
        let mine = [r as u32; 2];
        hcomm::scope(|s| {
            let mut rr = comm.irecv(s, &mut left, (r + w - 1) % w)?;
            let sr = comm.isend(s, &mine, (r + 1) % w)?;
            loop {
                match rr.test()? {
                    hcomm::Progress::Done => break,
                    hcomm::Progress::Pending(again) => rr = again,
                }
            }
            sr.wait()
        })?;
        assert_eq!(left, [((r + w - 1) % w) as u32; 2]);
        // an in-flight receive overlapping a collective: posted before it,
        // completed after it
        let mut early = [0u8; 3];
        let token = [7u8 + r as u8; 3];
        hcomm::scope(|s| {
            let rq = comm.irecv(s, &mut early, (r + 1) % w)?;
            let sq = comm.isend(s, &token, (r + w - 1) % w)?;
            let mut x = [1i32];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            assert_eq!(x, [w as i32]);
            hcomm::wait_all([rq, sq])
        })?;
        assert_eq!(early, [7 + ((r + 1) % w) as u8; 3]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn tagged_messages_in_the_same_order_arrive_and_a_reordered_tag_is_a_clear_mismatch() {
    run(2, |comm| {
        let r = comm.rank();
        let peer = 1 - r;
        let (a, b) = ([1.0f64; 4], [2.0f64; 4]);
        let (mut x, mut y) = ([0f64; 4], [0f64; 4]);
        hcomm::scope(|s| {
            let q1 = comm.isend_tagged(s, &a, peer, 5)?;
            let q2 = comm.isend_tagged(s, &b, peer, 9)?;
            let q3 = comm.irecv_tagged(s, &mut x, peer, 5)?;
            let q4 = comm.irecv_tagged(s, &mut y, peer, 9)?;
            hcomm::wait_all([q4, q3, q2, q1])
        })?;
        assert_eq!((x, y), (a, b));
        Ok(())
    })
    .unwrap();
    // The host backend matches tags; device libraries deliver a rank pair's
    // messages in posting order. A receive order that differs by tag is
    // reported on both ranks instead of delivering data to the wrong buffer.
    let err = run(2, |comm| {
        let (a, b) = ([1i32; 4], [2i32; 4]);
        let (mut x, mut y) = ([0i32; 4], [0i32; 4]);
        hcomm::scope(|s| {
            if comm.rank() == 0 {
                let q1 = comm.isend_tagged(s, &a, 1, 1)?;
                let q2 = comm.isend_tagged(s, &b, 1, 2)?;
                hcomm::wait_all([q1, q2])
            } else {
                let q1 = comm.irecv_tagged(s, &mut y, 0, 2)?;
                let q2 = comm.irecv_tagged(s, &mut x, 0, 1)?;
                hcomm::wait_all([q1, q2])
            }
        })
    })
    .unwrap_err();
    match &err {
        Error::Mismatch { message } => {
            assert!(message.contains("tag 1") && message.contains("tag 2"), "{message}");
            assert!(message.contains("posting order"), "{message}");
        }
        other => panic!("expected a mismatch, got {other}"),
    }
}

#[test]
fn subcommunicators_from_split_including_reordered_and_nested() {
    run(6, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        // parity groups, natural order
        let sub = comm.split(Some((r % 2) as u32), 0)?.expect("a member");
        assert_eq!((sub.rank(), sub.world(), sub.backend_name()), (r / 2, 3, "hccl"));
        let mut x = [r as i64];
        sub.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        let want: i64 = (0..w).filter(|q| q % 2 == r % 2).map(|q| q as i64).sum();
        assert_eq!(x, [want]);
        // reversed order inside the group: library ranks differ from ranks
        let rev = comm.split(Some((r % 2) as u32), -(r as i64))?.expect("a member");
        let members: Vec<usize> = (0..w).rev().filter(|q| q % 2 == r % 2).collect();
        let me = rev.rank();
        assert_eq!(members[me], r);
        let n = 2;
        let mine = [r as i64 * 10, r as i64 * 10 + 1];
        let mut all = vec![0i64; n * 3];
        rev.all_gather(&mine, &mut all)?;
        let want: Vec<i64> = members
            .iter()
            .flat_map(|&q| [q as i64 * 10, q as i64 * 10 + 1])
            .collect();
        assert_eq!(all, want, "all_gather in a reordered group");
        let send: Vec<i64> = (0..n * 3).map(|k| (r * 100 + k) as i64).collect();
        let mut block = vec![0i64; n];
        rev.reduce_scatter(&send, &mut block, ReduceOp::Sum)?;
        let want: Vec<i64> = (0..n)
            .map(|i| members.iter().map(|&q| (q * 100 + me * n + i) as i64).sum())
            .collect();
        assert_eq!(block, want, "reduce_scatter in a reordered group");
        let send: Vec<i64> = (0..3).map(|j| (r * 10 + j) as i64).collect();
        let mut recv = vec![0i64; 3];
        rev.all_to_all(&send, &mut recv)?;
        let want: Vec<i64> = members.iter().map(|&q| (q * 10 + me) as i64).collect();
        assert_eq!(recv, want, "all_to_all in a reordered group");
        let counts = [1usize, 2, 1];
        let send: Vec<i64> = vec![r as i64; 4];
        let mut recv = vec![0i64; 3 * counts[me]];
        let recv_counts = [counts[me]; 3];
        rev.all_to_allv(&send, &counts, &mut recv, &recv_counts)?;
        let want: Vec<i64> = members.iter().flat_map(|&q| vec![q as i64; counts[me]]).collect();
        assert_eq!(recv, want, "all_to_allv in a reordered group");
        let mut src = if me == 0 { vec![1i64, 2, 3] } else { Vec::new() };
        let mut one = [0i64];
        rev.scatter(&src, &mut one, 0)?;
        assert_eq!(one, [me as i64 + 1], "scatter in a reordered group");
        rev.gather(&[r as i64], &mut src, 0)?;
        if me == 0 {
            assert_eq!(src, members.iter().map(|&q| q as i64).collect::<Vec<_>>(), "gather");
        }
        let mut b = [if me == 1 { 42u64 } else { 0 }];
        rev.broadcast(&mut b, 1)?;
        assert_eq!(b, [42]);
        // p2p by the group's ranks
        let mut got = [0usize as i32];
        rev.send_recv(&[r as i32], (me + 1) % 3, &mut got, (me + 2) % 3)?;
        assert_eq!(got, [members[(me + 2) % 3] as i32]);
        // a split of a split (HCCL splits one level deep: made from the world)
        let pair = sub.split(Some(u32::from(sub.rank() < 2)), 0)?.expect("a member");
        let mut y = [1u8];
        pair.all_reduce_in_place(&mut y, ReduceOp::Sum)?;
        assert_eq!(y, [pair.world() as u8]);
        // ranks that pass no colour join nothing
        let none = comm.split(if r == 0 { None } else { Some(0) }, 0)?;
        assert_eq!(none.is_none(), r == 0);
        if let Some(c) = none {
            c.barrier()?;
            assert_eq!(c.world(), w - 1);
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn rejections_surface_as_clear_errors() {
    // more ranks than devices
    let err = run(9, |_| Ok(())).unwrap_err();
    assert!(
        matches!(&err, Error::Config { message } if message.contains("9 ranks need 9 devices")),
        "{err}"
    );
    // a library that is not there
    let err = Hccl::load_from("/nonexistent/libhccl.so").unwrap_err();
    assert!(
        matches!(&err, Error::Backend { backend: "hccl", message } if message.contains("/nonexistent/libhccl.so")),
        "{err}"
    );
    run(2, |comm| {
        let r = comm.rank();
        // a device buffer of another communicator's device
        let other = hccl().init_rank(1, 0, &hccl().root_info(5)?, 5, &options())?;
        // a device the process cannot see (a `LOCAL_RANK` past the devices)
        let visible = hccl().device_count()?;
        let err = hccl()
            .init_rank(1, 0, &hccl().root_info(5)?, visible as i32, &options())
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config { message }
                if message.contains(&format!("asks for device {visible}, but {visible} device(s) are visible"))),
            "{err}"
        );
        let foreign = DeviceBuffer::from_host(&other, &[1.0f32; 2])?;
        assert_eq!(foreign.device(), 5);
        let mut out = [0f32; 2];
        let err = comm.all_reduce(&foreign, &mut out, ReduceOp::Sum).unwrap_err();
        assert!(
            matches!(&err, Error::Precondition { message } if message.contains("hccl")),
            "{err}"
        );
        // the host backend takes no device buffers
        let host = &hcomm::host::comms(1, &CommOptions::default())?[0];
        let err = host.all_reduce(&foreign, &mut out, ReduceOp::Sum).unwrap_err();
        assert!(matches!(err, Error::Precondition { .. }), "{err}");
        let err = DeviceBuffer::<f32>::zeros(host, 1).unwrap_err();
        assert!(
            matches!(&err, Error::Precondition { message } if message.contains("device communicator")),
            "{err}"
        );
        // peers out of range are caught before the library sees them
        let err = comm.send(&[1u8], 7).unwrap_err();
        assert!(matches!(err, Error::Precondition { .. }), "{err}");
        // a length disagreement between a send and its receive is the
        // stand-in's (HCCL-like) rejection, surfaced on both ranks
        let err = if r == 0 {
            comm.send(&[1u8; 3], 1).unwrap_err()
        } else {
            comm.recv(&mut [0u8; 4], 0).unwrap_err()
        };
        assert!(
            matches!(&err, Error::Mismatch { message } if message.contains("3 elements")),
            "{err}"
        );
        Ok(())
    })
    .unwrap();
}

#[test]
fn init_rank_from_root_info_bytes_and_init_all() {
    use hcomm::hccl::RootInfo;
    let h = hccl();
    // As with one process per rank: rank 0 makes the root info, its bytes
    // travel (here: a copy), every rank joins with them.
    let bytes = h.root_info(0).unwrap().as_bytes().to_vec();
    assert_eq!(bytes.len(), RootInfo::BYTES);
    assert!(RootInfo::from_bytes(&bytes[1..]).is_none());
    let sums: Vec<i32> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|r| {
                let bytes = &bytes;
                s.spawn(move || -> hcomm::Result<i32> {
                    let root = RootInfo::from_bytes(bytes).expect("4108 bytes");
                    let comm = h.init_rank(3, r, &root, r as i32, &options())?;
                    assert_eq!((comm.rank(), comm.world()), (r, 3));
                    let mut x = [r as i32 + 1];
                    comm.all_reduce_in_place(&mut x, ReduceOp::Prod)?;
                    let sub = comm.split(Some(0), -(r as i64))?.expect("a member");
                    assert_eq!(sub.rank(), 2 - r);
                    sub.barrier()?;
                    Ok(x[0])
                })
            })
            .collect();
        handles.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
    });
    assert_eq!(sums, vec![6, 6, 6]);
    // HcclCommInitAll: one communicator per device, driven by our threads
    let comms = h.init_all(&[2, 3, 4, 5], &options()).unwrap();
    let gathered: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                s.spawn(move || -> hcomm::Result<Vec<u64>> {
                    let buf = DeviceBuffer::from_host(&comm, &[comm.rank() as u64 * 3])?;
                    assert_eq!(buf.device(), comm.rank() as i32 + 2);
                    let mut all = vec![0u64; comm.world()];
                    comm.all_gather(&buf, &mut all)?;
                    Ok(all)
                })
            })
            .collect();
        handles.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
    });
    assert_eq!(gathered, vec![vec![0, 3, 6, 9]; 4]);
    assert!(h.device_count().unwrap() >= 8);
}
