//! The programs of the fault-injection cases: random operations on every
//! rank, one rank failing at a random point, and the serial reference of
//! what every operation returns.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hcomm::schedules::ring_all_gather;
use hcomm::{Algorithm, Collective, Comm, DeviceBuffer, Error, ReduceOp};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Every communicator's timeout.
pub(crate) const LIMIT: Duration = Duration::from_secs(1);
/// How long a stalled rank sleeps: well past the timeout of the ranks that
/// wait on it.
pub(crate) const STALL: Duration = Duration::from_millis(2200);
/// How long a slow rank sleeps.
pub(crate) const SLOW: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Backend {
    Threads,
    Hccl,
    /// One process per rank, on the host transport between processes.
    Processes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    Panic,
    Error,
    Stall,
    /// Not a fault: slow, but well within the timeout.
    Slow,
    /// Killed with SIGKILL (processes only).
    Kill,
}

/// Where in its operation the failing rank fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Point {
    /// Before calling it.
    Before,
    /// Part-way: after posting its sends or starting its non-blocking
    /// collectives (ring, batch, scope, non-blocking).
    Inside,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    AllReduce(Option<Algorithm>),
    AllGather(Option<Algorithm>),
    ReduceScatter(Option<Algorithm>),
    AllToAll(Option<Algorithm>),
    AllToAllV,
    AllGatherV,
    Broadcast(Option<Algorithm>, usize),
    Reduce(usize),
    Gather(usize),
    Scatter(usize),
    Barrier,
    /// `send_recv` to the next rank from the previous one.
    Ring,
    /// One batch: a send to and a receive from every other rank.
    Batch,
    /// The same as non-blocking requests in a scope.
    Scope,
    /// A non-blocking all-reduce and all-gather in flight together.
    NonBlocking,
    /// The built-in ring all-gather schedule.
    Schedule,
    /// An all-reduce on the communicator of the ranks of one parity, made
    /// by `split`.
    Split,
    /// An all-reduce of device buffers (HCCL only): no staging, so the
    /// library works on memory the program owns and frees.
    Device,
}

#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) backend: Backend,
    pub(crate) world: usize,
    /// Elements per block.
    pub(crate) len: usize,
    pub(crate) ops: Vec<Op>,
    pub(crate) victim: usize,
    pub(crate) fault: Fault,
    /// Index of the operation the victim fails in.
    pub(crate) at: usize,
    pub(crate) point: Point,
}

pub(crate) fn pick<T: Copy>(rng: &mut TestRng, from: &[T]) -> T {
    from[rng.random_range(0..from.len())]
}

/// A forced algorithm for `c` (or the policy's choice) on the host backend;
/// device backends always use the library's.
pub(crate) fn algorithm(rng: &mut TestRng, backend: Backend, c: Collective, world: usize) -> Option<Algorithm> {
    if backend == Backend::Hccl {
        return None;
    }
    let mut choices: Vec<Option<Algorithm>> = Algorithm::for_collective(c)
        .iter()
        .filter(|a| a.supports_world(world))
        .map(|&a| Some(a))
        .collect();
    choices.push(None);
    pick(rng, &choices)
}

pub(crate) fn random_op(rng: &mut TestRng, backend: Backend, world: usize) -> Op {
    let root = rng.random_range(0..world);
    let which = rng.random_range(0..18);
    let mut algo = |c| algorithm(rng, backend, c, world);
    match which {
        0 => Op::AllReduce(algo(Collective::AllReduce)),
        1 => Op::AllGather(algo(Collective::AllGather)),
        2 => Op::ReduceScatter(algo(Collective::ReduceScatter)),
        3 => Op::AllToAll(algo(Collective::AllToAll)),
        4 => Op::AllToAllV,
        5 => Op::Broadcast(algo(Collective::Broadcast), root),
        6 => Op::Reduce(root),
        7 => Op::Gather(root),
        8 => Op::Scatter(root),
        9 => Op::Barrier,
        10 => Op::Ring,
        11 => Op::Batch,
        12 => Op::Scope,
        13 => Op::AllGatherV,
        14 => Op::Split,
        15 => Op::Schedule,
        16 => Op::NonBlocking,
        _ if backend == Backend::Hccl => Op::Device,
        _ => Op::AllReduce(algo(Collective::AllReduce)),
    }
}

/// Case `id` of `seed`, on one of `backends` (in turn).
pub(crate) fn case(seed: u64, id: usize, backends: &[Backend]) -> Case {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&(id as u64).to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let backend = backends[id % backends.len()];
    let world = rng.random_range(2..=5);
    let n = rng.random_range(1..=5);
    let mut ops: Vec<Op> = (0..n).map(|_| random_op(&mut rng, backend, world)).collect();
    // Every survivor waits on the victim at least here.
    ops.push(Op::Barrier);
    let at = rng.random_range(0..ops.len());
    let point = match ops[at] {
        Op::Ring | Op::Batch | Op::Scope | Op::NonBlocking => {
            pick(&mut rng, &[Point::Before, Point::Inside, Point::Inside])
        }
        _ => Point::Before,
    };
    Case {
        backend,
        world,
        len: rng.random_range(1..=6),
        ops,
        victim: rng.random_range(0..world),
        fault: if backend == Backend::Processes {
            pick(
                &mut rng,
                &[
                    Fault::Kill,
                    Fault::Kill,
                    Fault::Panic,
                    Fault::Error,
                    Fault::Stall,
                    Fault::Slow,
                ],
            )
        } else {
            pick(
                &mut rng,
                &[
                    Fault::Panic,
                    Fault::Panic,
                    Fault::Error,
                    Fault::Error,
                    Fault::Stall,
                    Fault::Slow,
                ],
            )
        },
        at,
        point,
    }
}

// --- the program and its serial reference -----------------------------------

/// What rank `r` contributes at index `i` of operation `k`.
pub(crate) fn val(r: usize, k: usize, i: usize) -> i64 {
    (r * 1_000_000 + k * 10_000 + i) as i64
}

pub(crate) fn vals(r: usize, k: usize, count: usize) -> Vec<i64> {
    (0..count).map(|i| val(r, k, i)).collect()
}

/// Elements rank `src` sends rank `dst` in the all-to-all-v.
pub(crate) fn v_count(src: usize, dst: usize) -> usize {
    (src + dst) % 3 + 1
}

/// What rank `src` sends rank `dst` in the all-to-all-v.
pub(crate) fn v_block(src: usize, dst: usize, k: usize) -> Vec<i64> {
    (0..v_count(src, dst)).map(|i| val(src, k, 100 * dst + i)).collect()
}

/// The reduction (sum) over all ranks of element `i` of operation `k`.
pub(crate) fn sum(w: usize, k: usize, i: usize) -> i64 {
    (0..w).map(|q| val(q, k, i)).sum()
}

/// Elements rank `q` contributes to the all-gather-v.
pub(crate) fn gv_count(q: usize) -> usize {
    q % 3 + 1
}

/// What rank `r` holds after operation `k` of a case.
pub(crate) fn expected(c: &Case, k: usize, r: usize) -> Vec<i64> {
    let (w, n) = (c.world, c.len);
    let others = || (0..w).filter(move |&p| p != r);
    match c.ops[k] {
        Op::AllReduce(_) | Op::Device => (0..n).map(|i| sum(w, k, i)).collect(),
        Op::AllGather(_) | Op::Schedule => (0..w).flat_map(|q| vals(q, k, n)).collect(),
        Op::NonBlocking => (0..n)
            .map(|i| sum(w, k, i))
            .chain((0..w).flat_map(|q| vals(q, k, n)))
            .collect(),
        Op::ReduceScatter(_) => (0..n).map(|i| sum(w, k, r * n + i)).collect(),
        Op::AllToAll(_) => (0..w).flat_map(|q| (0..n).map(move |i| val(q, k, r * n + i))).collect(),
        Op::AllToAllV => (0..w).flat_map(|q| v_block(q, r, k)).collect(),
        Op::AllGatherV => (0..w).flat_map(|q| vals(q, k, gv_count(q))).collect(),
        Op::Split => (0..n)
            .map(|i| (0..w).filter(|q| q % 2 == r % 2).map(|q| val(q, k, i)).sum())
            .collect(),
        Op::Broadcast(_, root) => vals(root, k, n),
        Op::Reduce(root) if r == root => (0..n).map(|i| sum(w, k, i)).collect(),
        Op::Gather(root) if r == root => (0..w).flat_map(|q| vals(q, k, n)).collect(),
        Op::Scatter(root) => (0..n).map(|i| val(root, k, r * n + i)).collect(),
        Op::Ring => vals((r + w - 1) % w, k, n),
        Op::Batch | Op::Scope => others().flat_map(|p| vals(p, k, n)).collect(),
        Op::Reduce(_) | Op::Gather(_) | Op::Barrier => Vec::new(),
    }
}

/// Forces algorithm `a` for `c` (`None`: the policy's) where the case's
/// backend runs hcomm's own algorithms.
fn force(case: &Case, comm: &Comm, c: Collective, a: Option<Algorithm>) -> hcomm::Result<()> {
    if case.backend != Backend::Hccl {
        comm.set_algorithm(c, a)?;
    }
    Ok(())
}

/// Runs operation `k` of the case on `comm`; `inside` runs part-way through
/// (after the sends were posted) where the operation has such a point.
pub(crate) fn run_op(
    comm: &Comm,
    c: &Case,
    k: usize,
    inside: &dyn Fn() -> hcomm::Result<()>,
) -> hcomm::Result<Vec<i64>> {
    let (w, n, r) = (c.world, c.len, comm.rank());
    let mine = vals(r, k, n);
    let root_len = |root: usize, len: usize| if r == root { len } else { 0 };
    let mut others: Vec<Vec<i64>> = (0..w).map(|p| vec![0; if p == r { 0 } else { n }]).collect();
    let out = match c.ops[k] {
        Op::AllReduce(a) => {
            force(c, comm, Collective::AllReduce, a)?;
            let mut out = vec![0; n];
            comm.all_reduce(&mine, &mut out, ReduceOp::Sum)?;
            out
        }
        Op::AllGather(a) => {
            force(c, comm, Collective::AllGather, a)?;
            let mut out = vec![0; n * w];
            comm.all_gather(&mine, &mut out)?;
            out
        }
        Op::ReduceScatter(a) => {
            force(c, comm, Collective::ReduceScatter, a)?;
            let mut out = vec![0; n];
            comm.reduce_scatter(&vals(r, k, n * w), &mut out, ReduceOp::Sum)?;
            out
        }
        Op::AllToAll(a) => {
            force(c, comm, Collective::AllToAll, a)?;
            let mut out = vec![0; n * w];
            comm.all_to_all(&vals(r, k, n * w), &mut out)?;
            out
        }
        Op::AllToAllV => {
            let send: Vec<i64> = (0..w).flat_map(|j| v_block(r, j, k)).collect();
            let send_counts: Vec<usize> = (0..w).map(|j| v_count(r, j)).collect();
            let recv_counts: Vec<usize> = (0..w).map(|q| v_count(q, r)).collect();
            let mut out = vec![0; recv_counts.iter().sum()];
            comm.all_to_allv(&send, &send_counts, &mut out, &recv_counts)?;
            out
        }
        Op::AllGatherV => {
            let counts: Vec<usize> = (0..w).map(gv_count).collect();
            let mut out = vec![0; counts.iter().sum()];
            comm.all_gatherv(&vals(r, k, counts[r]), &mut out, &counts)?;
            out
        }
        Op::Split => {
            let sub = comm
                .split(Some((r % 2) as u32), r as i64)?
                .expect("every rank passes a color");
            let mut out = vec![0; n];
            sub.all_reduce(&mine, &mut out, ReduceOp::Sum)?;
            out
        }
        Op::Device => {
            let send = DeviceBuffer::from_host(comm, &mine)?;
            let mut out = DeviceBuffer::<i64>::zeros(comm, n)?;
            comm.all_reduce(&send, &mut out, ReduceOp::Sum)?;
            out.to_host()?
        }
        Op::Broadcast(a, root) => {
            force(c, comm, Collective::Broadcast, a)?;
            let mut buf = if r == root { mine } else { vec![0; n] };
            comm.broadcast(&mut buf, root)?;
            buf
        }
        Op::Reduce(root) => {
            let mut out = vec![0; root_len(root, n)];
            comm.reduce(&mine, &mut out, ReduceOp::Sum, root)?;
            out
        }
        Op::Gather(root) => {
            let mut out = vec![0; root_len(root, n * w)];
            comm.gather(&mine, &mut out, root)?;
            out
        }
        Op::Scatter(root) => {
            let send = if r == root { vals(root, k, n * w) } else { Vec::new() };
            let mut out = vec![0; n];
            comm.scatter(&send, &mut out, root)?;
            out
        }
        Op::Barrier => {
            comm.barrier()?;
            Vec::new()
        }
        Op::Ring => {
            let (next, prev) = ((r + 1) % w, (r + w - 1) % w);
            let mut out = vec![0; n];
            if c.point == Point::Inside && r == c.victim && k == c.at {
                comm.send(&mine, next)?;
                inside()?;
                comm.recv(&mut out, prev)?;
            } else {
                comm.send_recv(&mine, next, &mut out, prev)?;
            }
            out
        }
        Op::Batch => {
            comm.batch(|b| {
                for (p, buf) in others.iter_mut().enumerate().filter(|(p, _)| *p != r) {
                    b.send(&mine, p)?;
                    b.recv(buf, p)?;
                }
                inside()
            })?;
            others.concat()
        }
        Op::Scope => {
            hcomm::scope(|s| {
                let mut requests = Vec::new();
                for (p, buf) in others.iter_mut().enumerate().filter(|(p, _)| *p != r) {
                    requests.push(comm.isend(s, &mine, p)?);
                    requests.push(comm.irecv(s, buf, p)?);
                }
                inside()?;
                hcomm::wait_all(requests)
            })?;
            others.concat()
        }
        Op::Schedule => {
            let mut out = vec![0; n * w];
            ring_all_gather(comm, &mine, &mut out)?;
            out
        }
        Op::NonBlocking => {
            let (mut sum, mut all) = (vec![0; n], vec![0; n * w]);
            hcomm::scope(|s| {
                let a = comm.iall_reduce(s, &mine, &mut sum, ReduceOp::Sum)?;
                let b = comm.iall_gather(s, &mine, &mut all)?;
                inside()?;
                hcomm::wait_all([a, b])
            })?;
            sum.extend(all);
            sum
        }
    };
    Ok(out)
}

// --- one rank's program ---------------------------------------------------------

/// What one rank did.
#[derive(Default)]
pub(crate) struct Log {
    /// (operation, what it returned) for every operation that completed.
    pub(crate) done: Vec<(usize, Vec<i64>)>,
    /// How the rank's program ended, and when (survivors and an erring victim).
    pub(crate) end: Option<(hcomm::Result<()>, Instant)>,
}

/// Runs rank `comm.rank()`'s program of case `c`, recording into `log`;
/// the victim calls `strike` at the fault's point (it panics, returns the
/// error, or sleeps and returns `Ok`).
pub(crate) fn rank_program(
    comm: &Comm,
    c: &Case,
    log: &Mutex<Log>,
    strike: &dyn Fn() -> hcomm::Result<()>,
) -> hcomm::Result<()> {
    let r = comm.rank();
    let ended = (|| {
        for k in 0..c.ops.len() {
            let faulty = r == c.victim && k == c.at;
            if faulty && c.point == Point::Before {
                strike()?;
            }
            let inside = || {
                if faulty && c.point == Point::Inside {
                    strike()
                } else {
                    Ok(())
                }
            };
            let out = run_op(comm, c, k, &inside)?;
            log.lock().unwrap().done.push((k, out));
        }
        Ok(())
    })();
    log.lock().unwrap().end = Some((ended.clone(), Instant::now()));
    ended
}

/// What the victim does when it strikes, short of killing its process.
pub(crate) fn strike_in_process(c: &Case) -> hcomm::Result<()> {
    match c.fault {
        Fault::Panic | Fault::Kill => panic!("injected panic on rank {}", c.victim),
        Fault::Error => Err(Error::Config {
            message: format!("injected error on rank {}", c.victim),
        }),
        Fault::Stall => {
            std::thread::sleep(STALL);
            Ok(())
        }
        Fault::Slow => {
            std::thread::sleep(SLOW);
            Ok(())
        }
    }
}

/// What is wrong with the data rank `r` got and with how it ended (the
/// victim's end is checked only when it was merely slow).
pub(crate) fn rank_verdict(c: &Case, r: usize, log: &Log) -> Vec<String> {
    let mut wrong = Vec::new();
    for (k, got) in &log.done {
        let want = expected(c, *k, r);
        if *got != want {
            wrong.push(format!(
                "rank {r}, op {k} ({:?}): got {got:?}, want {want:?}",
                c.ops[*k]
            ));
        }
    }
    if c.fault == Fault::Slow && log.done.len() != c.ops.len() {
        wrong.push(format!(
            "rank {r} completed {} of {} operations next to a slow rank",
            log.done.len(),
            c.ops.len()
        ));
    }
    if r == c.victim {
        return wrong;
    }
    match &log.end {
        None => wrong.push(format!("survivor {r} never returned")),
        Some((Ok(()), _)) if c.fault == Fault::Slow => {}
        Some((Ok(()), _)) => wrong.push(format!("survivor {r} returned Ok")),
        Some((Err(e), _)) if c.fault == Fault::Slow => {
            wrong.push(format!("rank {r} failed next to a slow rank: {e}"));
        }
        Some((Err(e), _)) => {
            if !names_the_fault(c, e) {
                wrong.push(format!("survivor {r}: {e}"));
            }
        }
    }
    wrong
}

/// Whether `e`, returned by a survivor, names the fault of case `c`: the
/// victim as the failed peer, or a peer that failed because of it (whose
/// reason carries the victim's own error); after a stall, the timeout, or
/// the abort of a rank that timed out.
pub(crate) fn names_the_fault(c: &Case, e: &Error) -> bool {
    let injected = format!(
        "injected {} on rank {}",
        if c.fault == Fault::Panic { "panic" } else { "error" },
        c.victim
    );
    match (c.fault, e) {
        // A process's error does not travel: the driver checks that the rank
        // named is the victim or one that failed because of it.
        (_, Error::PeerFailed { .. }) if c.backend == Backend::Processes => true,
        // A panic leaving a scope stops the victim's running non-blocking
        // collective by aborting its communicator, and says so.
        (Fault::Panic, Error::Aborted { reason }) => reason.starts_with(&format!("rank {} cancelled", c.victim)),
        (Fault::Panic | Fault::Error | Fault::Kill, Error::PeerFailed { rank, reason }) => {
            *rank == c.victim || reason.contains(&injected)
        }
        (Fault::Stall, Error::Timeout { .. } | Error::PeerFailed { .. }) => true,
        // A rank that timed out waiting for the staller aborted the
        // communicator, naming itself and the operation.
        (Fault::Stall, Error::Aborted { reason }) => reason.contains(" timed out in "),
        _ => false,
    }
}
