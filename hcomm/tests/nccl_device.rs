//! Every NCCL-path case one GPU allows (`scripts/device-check.sh` runs this
//! file on a machine with an NVIDIA GPU): each collective with every element
//! type and operator, point-to-point (blocking, batched, non-blocking, to
//! itself), schedules through plans, host buffers staged through device
//! memory, device buffers, sub-communicators and the errors a user sees.
//! Every result is compared exactly with a serial reference.
//!
//! The cases are plain functions of a communicator, so the same bodies also
//! run here on the HCCL backend through the stand-in library (worlds 1 and
//! 3): a case that is wrong fails in CI, not first on a GPU. Without a GPU
//! the NCCL test prints why it was skipped and passes, unless
//! `HCOMM_DEVICE_CHECK=1` (set by the script), where a skip is a failure.

#![allow(
    clippy::float_cmp,
    reason = "results are compared exactly: small integers, or a serial fold the backend reproduces bit for bit"
)]

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::TestElem;
use hcomm::hccl::Hccl;
use hcomm::nccl::Nccl;
use hcomm::schedules::ring_all_gather;
use hcomm::{bf16, comm_schedule, f16, Algorithm, Collective, Comm, CommOptions, DeviceBuffer, Error, ReduceOp};

comm_schedule! {
    /// Receives posted in another order than the sends, messages to the
    /// next rank (to itself at world 1), one send in flight across an
    /// all-reduce.
    #[verify(world in 1..=4)]
    pub fn crossed_with_all_reduce(a: &[T; 3 * n], b: &mut [T; 3 * n], x: &mut [T; n]) {
        let next = (rank + 1) % world;
        let prev = (rank - 1) % world;
        let r2 = irecv b.chunk(2, 3) from prev tag 2;
        let r0 = irecv b.chunk(0, 3) from prev tag 0;
        let s0 = isend a.chunk(0, 3) to next tag 0;
        all_reduce(x, sum);
        let s1 = isend a.chunk(1, 3) to next tag 1;
        let s2 = isend a.chunk(2, 3) to next tag 2;
        recv b.chunk(1, 3) from prev tag 1;
        wait r2, r0, s0, s1, s2;
    }
}

type Case = (&'static str, fn(&Comm) -> hcomm::Result<()>);

/// Every case, in the order the device check runs them.
const CASES: &[Case] = &[
    ("all_reduce_every_type_and_operator", all_reduce_every_type_and_operator),
    (
        "rooted_and_personalised_collectives",
        rooted_and_personalised_collectives,
    ),
    ("device_buffers_without_staging", device_buffers_without_staging),
    ("point_to_point", point_to_point),
    ("schedules_through_plans", schedules_through_plans),
    ("staging_many_sizes_and_repeats", staging_many_sizes_and_repeats),
    ("sub_communicators", sub_communicators),
    ("errors_name_their_cause", errors_name_their_cause),
];

/// What rank `r` contributes at index `i` (non-negative and small, so every
/// element type holds every sum; products only of 1 and 2; for the mean
/// the same on every rank, so NCCL's `ncclAvg`, which scales before it
/// sums, is exact in every type on 1, 2, 4 or 8 ranks).
fn val(r: usize, i: usize, op: ReduceOp) -> i64 {
    match op {
        ReduceOp::Prod => [1, 2, 1][(r + i) % 3],
        ReduceOp::Avg => ((i * 3) % 11) as i64,
        _ => ((r * 7 + i * 3) % 11) as i64,
    }
}

fn reduce_ref(op: ReduceOp, w: usize, i: usize) -> i64 {
    let it = (0..w).map(|r| val(r, i, op));
    match op {
        ReduceOp::Sum => it.sum(),
        ReduceOp::Prod => it.product(),
        ReduceOp::Max => it.max().unwrap_or(0),
        ReduceOp::Min => it.min().unwrap_or(0),
        // the sum divided once, truncated toward zero
        ReduceOp::Avg => it.sum::<i64>() / w as i64,
    }
}

fn all_reduce_typed<T: TestElem>(comm: &Comm, n: usize) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    for op in ReduceOp::ALL {
        let mine: Vec<T> = (0..n).map(|i| T::from_i(val(r, i, op))).collect();
        let want: Vec<T> = (0..n).map(|i| T::from_i(reduce_ref(op, w, i))).collect();
        let mut out = vec![T::from_i(0); n];
        comm.all_reduce(&mine, &mut out, op)?;
        assert_eq!(out, want, "all_reduce {op} {}", std::any::type_name::<T>());
        let mut inplace = mine.clone();
        comm.all_reduce_in_place(&mut inplace, op)?;
        assert_eq!(inplace, want, "all_reduce_in_place {op} {}", std::any::type_name::<T>());
        // reduce to the last rank and reduce-scatter, same values
        let root = w - 1;
        let mut red = if r == root { vec![T::from_i(0); n] } else { Vec::new() };
        comm.reduce(&mine, &mut red, op, root)?;
        if r == root {
            assert_eq!(red, want, "reduce {op} {}", std::any::type_name::<T>());
        }
        let send: Vec<T> = (0..n * w).map(|k| T::from_i(val(r, k, op))).collect();
        let mut block = vec![T::from_i(0); n];
        comm.reduce_scatter(&send, &mut block, op)?;
        let want: Vec<T> = (0..n).map(|i| T::from_i(reduce_ref(op, w, r * n + i))).collect();
        assert_eq!(block, want, "reduce_scatter {op} {}", std::any::type_name::<T>());
    }
    Ok(())
}

fn all_reduce_every_type_and_operator(comm: &Comm) -> hcomm::Result<()> {
    all_reduce_typed::<i8>(comm, 7)?;
    all_reduce_typed::<u8>(comm, 7)?;
    all_reduce_typed::<i32>(comm, 7)?;
    all_reduce_typed::<u32>(comm, 7)?;
    all_reduce_typed::<i64>(comm, 7)?;
    all_reduce_typed::<u64>(comm, 7)?;
    all_reduce_typed::<f16>(comm, 7)?;
    all_reduce_typed::<bf16>(comm, 7)?;
    all_reduce_typed::<f32>(comm, 7)?;
    all_reduce_typed::<f64>(comm, 7)?;
    // the library chose the algorithm, and hcomm says so
    let mut x = [1.0f32];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
    assert_eq!(x, [comm.world() as f32]);
    assert_eq!(comm.last_algorithm(Collective::AllReduce), Some(Algorithm::Library));
    // zero-length collectives are fine
    let mut empty: [f32; 0] = [];
    comm.all_reduce_in_place(&mut empty, ReduceOp::Sum)?;
    Ok(())
}

fn rooted_and_personalised_collectives(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let n = 5;
    let v = |q: usize, i: usize| (q * 100 + i) as i64;
    // all_gather
    let mine: Vec<i64> = (0..n).map(|i| v(r, i)).collect();
    let mut all = vec![0i64; n * w];
    comm.all_gather(&mine, &mut all)?;
    let want: Vec<i64> = (0..w).flat_map(|q| (0..n).map(move |i| v(q, i))).collect();
    assert_eq!(all, want, "all_gather");
    // broadcast from the last rank
    let root = w - 1;
    let mut buf: Vec<i64> = if r == root {
        (0..n).map(|i| v(root, i)).collect()
    } else {
        vec![0; n]
    };
    comm.broadcast(&mut buf, root)?;
    assert_eq!(buf, (0..n).map(|i| v(root, i)).collect::<Vec<_>>(), "broadcast");
    // gather to rank 0
    let mut g = if r == 0 { vec![0i64; n * w] } else { Vec::new() };
    comm.gather(&mine, &mut g, 0)?;
    if r == 0 {
        assert_eq!(g, want, "gather");
    }
    // scatter from the last rank
    let src: Vec<i64> = if r == root {
        (0..n * w).map(|k| k as i64 * 3).collect()
    } else {
        Vec::new()
    };
    let mut part = vec![0i64; n];
    comm.scatter(&src, &mut part, root)?;
    assert_eq!(
        part,
        (0..n).map(|i| ((r * n + i) * 3) as i64).collect::<Vec<_>>(),
        "scatter"
    );
    // all_to_all: block j of rank q holds 100 q + 10 j + i
    let send: Vec<i64> = (0..w * n).map(|k| (100 * r + 10 * (k / n) + k % n) as i64).collect();
    let mut recv = vec![0i64; w * n];
    comm.all_to_all(&send, &mut recv)?;
    let want: Vec<i64> = (0..w * n).map(|k| (100 * (k / n) + 10 * r + k % n) as i64).collect();
    assert_eq!(recv, want, "all_to_all");
    // all_to_allv: rank q sends q + j + 1 elements (value 1000 q + j) to rank j
    let send_counts: Vec<usize> = (0..w).map(|j| r + j + 1).collect();
    let recv_counts: Vec<usize> = (0..w).map(|q| q + r + 1).collect();
    let send: Vec<i32> = (0..w)
        .flat_map(|j| std::iter::repeat_n((1000 * r + j) as i32, r + j + 1))
        .collect();
    let mut recv = vec![0i32; recv_counts.iter().sum()];
    comm.all_to_allv(&send, &send_counts, &mut recv, &recv_counts)?;
    let want: Vec<i32> = (0..w)
        .flat_map(|q| std::iter::repeat_n((1000 * q + r) as i32, q + r + 1))
        .collect();
    assert_eq!(recv, want, "all_to_allv");
    comm.barrier()?;
    Ok(())
}

fn device_buffers_without_staging(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let mine: Vec<f32> = (0..6).map(|i| (r * 10 + i) as f32).collect();
    let send = DeviceBuffer::from_host(comm, &mine)?;
    assert_eq!(send.len(), 6);
    assert_eq!(send.to_host()?, mine);
    let mut recv = DeviceBuffer::<f32>::zeros(comm, 6)?;
    comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
    let want: Vec<f32> = (0..6).map(|i| (0..w).map(|q| (q * 10 + i) as f32).sum()).collect();
    assert_eq!(recv.to_host()?, want, "device all_reduce");
    comm.all_reduce_in_place(&mut recv, ReduceOp::Max)?;
    assert_eq!(recv.to_host()?, want, "device all_reduce_in_place");
    let mut all = DeviceBuffer::<f32>::zeros(comm, 6 * w)?;
    comm.all_gather(&send, &mut all)?;
    let want: Vec<f32> = (0..w).flat_map(|q| (0..6).map(move |i| (q * 10 + i) as f32)).collect();
    assert_eq!(all.to_host()?, want, "device all_gather");
    // mixed: device send, host receive; host send, device receive
    let mut host = vec![0f32; 6];
    comm.all_reduce(&send, &mut host, ReduceOp::Min)?;
    assert_eq!(host, (0..6).map(|i| i as f32).collect::<Vec<_>>(), "device to host");
    let mut dev = DeviceBuffer::<f32>::zeros(comm, 6)?;
    comm.all_reduce(&mine, &mut dev, ReduceOp::Max)?;
    assert_eq!(
        dev.to_host()?,
        (0..6).map(|i| ((w - 1) * 10 + i) as f32).collect::<Vec<_>>(),
        "host to device"
    );
    let mut b = DeviceBuffer::from_host(comm, &[r as f64; 3])?;
    comm.broadcast(&mut b, w - 1)?;
    assert_eq!(b.to_host()?, vec![(w - 1) as f64; 3], "device broadcast");
    let counts = vec![1usize; w];
    let s = DeviceBuffer::from_host(comm, &(0..w).map(|j| (r * 100 + j) as u64).collect::<Vec<_>>())?;
    let mut d = DeviceBuffer::<u64>::zeros(comm, w)?;
    comm.all_to_allv(&s, &counts, &mut d, &counts)?;
    assert_eq!(d.to_host()?, (0..w).map(|q| (q * 100 + r) as u64).collect::<Vec<_>>());
    // copies in both directions, length-checked
    let mut small = DeviceBuffer::<i32>::zeros(comm, 2)?;
    small.copy_from_host(&[7, 8])?;
    let mut back = [0; 2];
    small.copy_to_host(&mut back)?;
    assert_eq!(back, [7, 8]);
    Ok(())
}

fn point_to_point(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let (right, left) = ((r + 1) % w, (r + w - 1) % w);
    // send_recv around the ring (to itself at world 1), host and device
    let mut got = [0i32; 4];
    comm.send_recv(&[r as i32; 4], right, &mut got, left)?;
    assert_eq!(got, [left as i32; 4], "send_recv");
    let mut dgot = DeviceBuffer::<f64>::zeros(comm, 3)?;
    let dsend = DeviceBuffer::from_host(comm, &[r as f64 + 0.25; 3])?;
    comm.send_recv(&dsend, right, &mut dgot, left)?;
    assert_eq!(dgot.to_host()?, vec![left as f64 + 0.25; 3], "device send_recv");
    // one batch: two sends to the right (two library calls), a message to
    // itself, receives from the left, a receive-and-combine
    let (a, b) = ([r as i64; 2], [10 * r as i64; 3]);
    let (mut ga, mut gb) = ([0i64; 2], [0i64; 3]);
    let me = [r as u8 + 1; 5];
    let mut me_back = [0u8; 5];
    comm.batch(|bt| {
        // (at world 1 left and right are this rank: messages to one peer
        // match in posting order, so the receives list them in send order)
        bt.recv(&mut ga, left)?;
        bt.send(&a, right)?;
        bt.recv(&mut gb, left)?;
        bt.send(&b, right)?;
        bt.recv(&mut me_back, r)?;
        bt.send(&me, r)
    })?;
    assert_eq!((ga, gb), ([left as i64; 2], [10 * left as i64; 3]), "batch");
    assert_eq!(me_back, me, "message to itself");
    let mut acc = [1i64, 2, 3];
    let contribution = [r as i64; 3];
    comm.batch(|bt| {
        bt.send(&contribution, right)?;
        bt.recv_reduce(&mut acc, left, 0, ReduceOp::Sum)
    })?;
    assert_eq!(acc, [1 + left as i64, 2 + left as i64, 3 + left as i64], "recv_reduce");
    let mut dacc = DeviceBuffer::from_host(comm, &[5i64, 5, 5])?;
    let mine = DeviceBuffer::from_host(comm, &[r as i64 + 3; 3])?;
    comm.batch(|bt| {
        bt.send(&mine, right)?;
        bt.recv_reduce(&mut dacc, left, 0, ReduceOp::Max)
    })?;
    assert_eq!(dacc.to_host()?, vec![5.max(left as i64 + 3); 3], "device recv_reduce");
    // non-blocking, waited out of order; test() drives progress
    let mine = [r as u32; 8];
    let mut from_left = [0u32; 8];
    hcomm::scope(|s| {
        let mut rq = comm.irecv(s, &mut from_left, left)?;
        let sq = comm.isend(s, &mine, right)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match rq.test()? {
                hcomm::Progress::Done => break,
                hcomm::Progress::Pending(again) => rq = again,
            }
            assert!(Instant::now() < deadline, "irecv never completed");
        }
        sq.wait()
    })?;
    assert_eq!(from_left, [left as u32; 8], "isend/irecv");
    // a receive in flight across a collective
    let mut early = [0u8; 3];
    let token = [7u8 + r as u8; 3];
    hcomm::scope(|s| {
        let rq = comm.irecv(s, &mut early, right)?;
        let sq = comm.isend(s, &token, left)?;
        let mut x = [1i32];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        assert_eq!(x, [w as i32]);
        hcomm::wait_all([rq, sq])
    })?;
    assert_eq!(early, [7 + right as u8; 3], "irecv across all_reduce");
    Ok(())
}

fn schedules_through_plans(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let input: Vec<i32> = (0..3).map(|i| (r * 10 + i) as i32).collect();
    let want: Vec<i32> = (0..w).flat_map(|q| (0..3).map(move |i| (q * 10 + i) as i32)).collect();
    let mut output = vec![0i32; 3 * w];
    ring_all_gather(comm, &input, &mut output)?;
    assert_eq!(output, want, "ring_all_gather, host slices");
    let dinput = DeviceBuffer::from_host(comm, &input)?;
    let mut doutput = DeviceBuffer::<i32>::zeros(comm, 3 * w)?;
    ring_all_gather(comm, &dinput, &mut doutput)?;
    assert_eq!(doutput.to_host()?, want, "ring_all_gather, device buffers");
    let a: Vec<f32> = (0..6).map(|i| (r * 10 + i) as f32).collect();
    let mut b = vec![0f32; 6];
    let mut x = [r as f32 + 1.0; 2];
    crossed_with_all_reduce(comm, &a, &mut b, &mut x)?;
    let prev = (r + w - 1) % w;
    assert_eq!(
        b,
        (0..6).map(|i| (prev * 10 + i) as f32).collect::<Vec<_>>(),
        "crossed receives"
    );
    assert_eq!(x, [(w * (w + 1) / 2) as f32; 2], "all_reduce inside the schedule");
    Ok(())
}

fn staging_many_sizes_and_repeats(comm: &Comm) -> hcomm::Result<()> {
    let w = comm.world();
    // sizes across the pool's size classes, each twice (reuse)
    for &n in &[1usize, 3, 1000, 4097, 65_536, 1 << 20] {
        for round in 0..2 {
            let mut x: Vec<f32> = (0..n).map(|i| ((i + round) % 13) as f32).collect();
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            assert!(
                x.iter().enumerate().all(|(i, &v)| v == (((i + round) % 13) * w) as f32),
                "staged all_reduce of {n} elements, round {round}"
            );
        }
    }
    // many small staged operations back to back, host and device mixed
    let d = DeviceBuffer::from_host(comm, &[2u64; 16])?;
    for k in 0..200u64 {
        let mut out = [0u64; 16];
        comm.all_reduce(&d, &mut out, ReduceOp::Sum)?;
        assert_eq!(out, [2 * w as u64; 16], "iteration {k}");
        let mut y = [k; 4];
        comm.all_reduce_in_place(&mut y, ReduceOp::Max)?;
        assert_eq!(y, [k; 4], "iteration {k}");
    }
    Ok(())
}

fn sub_communicators(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let sub = comm
        .split(Some((r % 2) as u32), -(r as i64))?
        .ok_or_else(|| Error::Precondition {
            message: "every rank has a color".into(),
        })?;
    let size = (0..w).filter(|q| q % 2 == r % 2).count();
    assert_eq!(sub.world(), size);
    let mut y = [1i32, r as i32];
    sub.all_reduce_in_place(&mut y, ReduceOp::Sum)?;
    let members_sum: i32 = (0..w).filter(|q| q % 2 == r % 2).map(|q| q as i32).sum();
    assert_eq!(y, [size as i32, members_sum], "sub-communicator all_reduce");
    let buf = DeviceBuffer::from_host(&sub, &[r as i64])?;
    let mut all = vec![0i64; size];
    sub.all_gather(&buf, &mut all)?;
    // new ranks in decreasing old rank (key -r)
    let mut members: Vec<i64> = (0..w).filter(|q| q % 2 == r % 2).map(|q| q as i64).collect();
    members.reverse();
    assert_eq!(all, members, "sub-communicator all_gather of device buffers");
    sub.barrier()?;
    Ok(())
}

fn errors_name_their_cause(comm: &Comm) -> hcomm::Result<()> {
    let w = comm.world();
    let backend = comm.backend_name();
    // lengths that do not fit
    let mut out = [0f32; 3];
    let err = comm.all_reduce(&[1.0f32; 4], &mut out, ReduceOp::Sum).unwrap_err();
    assert!(matches!(err, Error::BufferLength { .. }), "{err}");
    let mut all = vec![0i32; w + 1];
    let err = comm.all_gather(&[1i32], &mut all).unwrap_err();
    assert!(matches!(err, Error::BufferLength { .. }), "{err}");
    // roots and peers out of range are caught before the library sees them
    let err = comm.broadcast(&mut [0u8; 2], w).unwrap_err();
    assert!(matches!(err, Error::Precondition { .. }), "{err}");
    let err = comm.send(&[1u8], w + 3).unwrap_err();
    assert!(matches!(err, Error::Precondition { .. }), "{err}");
    // device buffer copies are length-checked
    let mut d = DeviceBuffer::<f32>::zeros(comm, 2)?;
    let err = d.copy_from_host(&[1.0; 3]).unwrap_err();
    assert!(matches!(err, Error::BufferLength { .. }), "{err}");
    // the host backend takes no device buffers
    let host = &hcomm::host::comms(1, &CommOptions::default())?[0];
    let err = host.all_reduce(&d, &mut [0f32; 2], ReduceOp::Sum).unwrap_err();
    assert!(matches!(err, Error::Precondition { .. }), "{err}");
    // the communicator still works after every rejection
    comm.all_reduce_in_place(&mut d, ReduceOp::Sum)?;
    assert_eq!(d.to_host()?, vec![0.0; 2], "{backend} after rejections");
    Ok(())
}

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(30))
}

/// Runs every case on `world` ranks of `run`, printing one line per case.
fn run_cases(label: &str, world: usize, run: impl Fn(usize, &(dyn Fn(&Comm) -> hcomm::Result<()> + Sync))) {
    for &(name, case) in CASES {
        let start = Instant::now();
        run(world, &|comm: &Comm| case(comm));
        eprintln!(
            "device-check case {label} {name} world {world}: ok in {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
}

fn stand_in() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn the_cases_hold_on_the_hccl_standin() {
    for world in [1usize, 3] {
        run_cases("hccl-standin", world, |w, f| {
            stand_in()
                .run(w, &options(), f)
                .unwrap_or_else(|e| panic!("world {w}: {e}"));
        });
    }
}

/// NCCL and the number of ranks one process can drive (one per GPU, at most
/// 4), or why not.
fn nccl_setup() -> Result<(Nccl, usize), String> {
    let nccl = Nccl::load().map_err(|e| e.to_string())?;
    let gpus = nccl.device_count().map_err(|e| e.to_string())?;
    if gpus == 0 {
        return Err("cudaGetDeviceCount found no device".into());
    }
    Ok((nccl, gpus.min(4)))
}

fn device_check_required() -> bool {
    std::env::var("HCOMM_DEVICE_CHECK").is_ok_and(|v| v == "1")
}

#[test]
fn every_case_on_nccl() {
    let (nccl, world) = match nccl_setup() {
        Ok(x) => x,
        Err(why) if !device_check_required() => {
            eprintln!("nccl_device skipped: {why}");
            return;
        }
        Err(why) => panic!("HCOMM_DEVICE_CHECK=1 but NCCL cannot run: {why}"),
    };
    let versions = nccl.versions();
    eprintln!("device-check nccl: {world} rank(s), {versions}, {nccl:?}");
    assert!(versions.nccl.is_some_and(|v| v >= 20_000), "{versions}");
    assert!(
        versions.cuda_driver.unwrap_or(0) >= versions.cuda_runtime.unwrap_or(0),
        "{versions}"
    );
    // world 1 always; the full width too where several GPUs exist
    let mut worlds = vec![1];
    if world > 1 {
        worlds.push(world);
    }
    for w in worlds {
        run_cases("nccl", w, |w, f| {
            nccl.run(w, &options(), f).unwrap_or_else(|e| panic!("world {w}: {e}"));
        });
    }
}

/// A receive nobody sends (from itself, posted non-blocking) waits out the
/// communicator's timeout and fails with `Error::Timeout`, in bounded time.
fn timeout_case(run: impl Fn(&CommOptions, &(dyn Fn(&Comm) -> hcomm::Result<()> + Sync)) -> hcomm::Error) {
    let short = CommOptions::default().with_timeout(Duration::from_millis(1500));
    let start = Instant::now();
    let err = run(&short, &|comm: &Comm| {
        let mut x = [0u8; 4];
        hcomm::scope(|s| comm.irecv(s, &mut x, comm.rank())?.wait())
    });
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    eprintln!(
        "device-check case timeout world 1: ok in {:.2} s ({err})",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn a_timeout_on_the_hccl_standin() {
    timeout_case(|o, f| stand_in().run(1, o, f).unwrap_err());
}

#[test]
fn nccl_timeout_leaves_a_clear_error() {
    let Ok((nccl, _)) = nccl_setup() else {
        assert!(!device_check_required(), "HCOMM_DEVICE_CHECK=1 but NCCL cannot run");
        eprintln!("nccl_device timeout case skipped: no NCCL device");
        return;
    };
    timeout_case(|o, f| nccl.run(1, o, f).unwrap_err());
}

#[test]
fn nccl_reports_its_libraries_and_versions() {
    match nccl_setup() {
        Ok((nccl, world)) => {
            let v = nccl.versions();
            assert!(v.nccl.is_some(), "{v}");
            eprintln!("device-check nccl found: {nccl:?}; {v}; {world} rank(s)");
        }
        Err(why) => {
            assert!(
                !device_check_required(),
                "HCOMM_DEVICE_CHECK=1 but NCCL cannot run: {why}"
            );
            eprintln!("nccl_device skipped: {why}");
        }
    }
}
