//! Fault injection on every backend that runs in this process: threads (the
//! host backend) and HCCL through the stand-in library. Each seeded case runs
//! a random program (collectives of several kinds and algorithms, on the
//! whole communicator and on one made by `split`, blocking point-to-point,
//! batches, non-blocking requests in a scope, a schedule, then a barrier) in
//! which one rank, at a random point of a random operation, panics, returns
//! an error, or stalls past the timeout. Checked for every case:
//!
//! * every other rank returns an `Err` naming the failed rank
//!   ([`Error::PeerFailed`] for it; after a stall, the timeout itself or a
//!   peer that failed by it) within the timeout plus a margin;
//! * nothing hangs: a watchdog bounds every case;
//! * every operation that completed, on any rank, holds exactly what a
//!   serial reference computes;
//! * no thread outlives the cases, and no device memory is freed while an
//!   operation the library still runs uses it.
//!
//! As a control, some cases have a rank that is only slow (well within the
//! timeout): there every rank must complete every operation, exactly.
//!
//! `cargo test -p hcomm --test fault_injection` runs a fixed seed; a longer
//! run: `HCOMM_FAULT_CASES=3000 HCOMM_FAULT_SEED=7 cargo test -p hcomm
//! --test fault_injection -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hcomm::hccl::Hccl;
use hcomm::schedules::ring_all_gather;
use hcomm::{Algorithm, Collective, Comm, CommOptions, DeviceBuffer, Error, ReduceOp};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Every communicator's timeout.
const LIMIT: Duration = Duration::from_secs(1);
/// How long a stalled rank sleeps: well past the timeout of the ranks that
/// wait on it.
const STALL: Duration = Duration::from_millis(2200);
/// How long a slow rank sleeps.
const SLOW: Duration = Duration::from_millis(200);
/// How much later than the timeout a survivor may report (a loaded machine).
const MARGIN: Duration = Duration::from_secs(3);
/// A case running longer than this hangs.
const WATCHDOG: Duration = Duration::from_secs(40);
/// Cases running at once (most of a stall is sleeping).
const PARALLEL: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Backend {
    Threads,
    Hccl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Panic,
    Error,
    Stall,
    /// Not a fault: slow, but well within the timeout.
    Slow,
}

/// Where in its operation the failing rank fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Point {
    /// Before calling it.
    Before,
    /// Part-way: after posting its sends (ring, batch, scope).
    Inside,
}

#[derive(Clone, Copy, Debug)]
enum Op {
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
struct Case {
    backend: Backend,
    world: usize,
    /// Elements per block.
    len: usize,
    ops: Vec<Op>,
    victim: usize,
    fault: Fault,
    /// Index of the operation the victim fails in.
    at: usize,
    point: Point,
}

fn pick<T: Copy>(rng: &mut TestRng, from: &[T]) -> T {
    from[rng.random_range(0..from.len())]
}

/// A forced algorithm for `c` (or the policy's choice) on the host backend;
/// device backends always use the library's.
fn algorithm(rng: &mut TestRng, backend: Backend, c: Collective, world: usize) -> Option<Algorithm> {
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

fn random_op(rng: &mut TestRng, backend: Backend, world: usize) -> Op {
    let root = rng.random_range(0..world);
    let which = rng.random_range(0..17);
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
        _ if backend == Backend::Hccl => Op::Device,
        _ => Op::AllReduce(algo(Collective::AllReduce)),
    }
}

fn case(seed: u64, id: usize) -> Case {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&(id as u64).to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let backend = if id.is_multiple_of(2) {
        Backend::Threads
    } else {
        Backend::Hccl
    };
    let world = rng.random_range(2..=5);
    let n = rng.random_range(1..=5);
    let mut ops: Vec<Op> = (0..n).map(|_| random_op(&mut rng, backend, world)).collect();
    // Every survivor waits on the victim at least here.
    ops.push(Op::Barrier);
    let at = rng.random_range(0..ops.len());
    let point = match ops[at] {
        Op::Ring | Op::Batch | Op::Scope => pick(&mut rng, &[Point::Before, Point::Inside, Point::Inside]),
        _ => Point::Before,
    };
    Case {
        backend,
        world,
        len: rng.random_range(1..=6),
        ops,
        victim: rng.random_range(0..world),
        fault: pick(
            &mut rng,
            &[
                Fault::Panic,
                Fault::Panic,
                Fault::Error,
                Fault::Error,
                Fault::Stall,
                Fault::Slow,
            ],
        ),
        at,
        point,
    }
}

// --- the program and its serial reference -----------------------------------

/// What rank `r` contributes at index `i` of operation `k`.
fn val(r: usize, k: usize, i: usize) -> i64 {
    (r * 1_000_000 + k * 10_000 + i) as i64
}

fn vals(r: usize, k: usize, count: usize) -> Vec<i64> {
    (0..count).map(|i| val(r, k, i)).collect()
}

/// Elements rank `src` sends rank `dst` in the all-to-all-v.
fn v_count(src: usize, dst: usize) -> usize {
    (src + dst) % 3 + 1
}

/// What rank `src` sends rank `dst` in the all-to-all-v.
fn v_block(src: usize, dst: usize, k: usize) -> Vec<i64> {
    (0..v_count(src, dst)).map(|i| val(src, k, 100 * dst + i)).collect()
}

/// The reduction (sum) over all ranks of element `i` of operation `k`.
fn sum(w: usize, k: usize, i: usize) -> i64 {
    (0..w).map(|q| val(q, k, i)).sum()
}

/// Elements rank `q` contributes to the all-gather-v.
fn gv_count(q: usize) -> usize {
    q % 3 + 1
}

/// What rank `r` holds after operation `k` of a case.
fn expected(c: &Case, k: usize, r: usize) -> Vec<i64> {
    let (w, n) = (c.world, c.len);
    let others = || (0..w).filter(move |&p| p != r);
    match c.ops[k] {
        Op::AllReduce(_) | Op::Device => (0..n).map(|i| sum(w, k, i)).collect(),
        Op::AllGather(_) | Op::Schedule => (0..w).flat_map(|q| vals(q, k, n)).collect(),
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

fn force(comm: &Comm, c: Collective, a: Option<Algorithm>) -> hcomm::Result<()> {
    if comm.backend_name() == "host" {
        comm.set_algorithm(c, a)?;
    }
    Ok(())
}

/// Runs operation `k` of the case on `comm`; `inside` runs part-way through
/// (after the sends were posted) where the operation has such a point.
fn run_op(comm: &Comm, c: &Case, k: usize, inside: &dyn Fn() -> hcomm::Result<()>) -> hcomm::Result<Vec<i64>> {
    let (w, n, r) = (c.world, c.len, comm.rank());
    let mine = vals(r, k, n);
    let root_len = |root: usize, len: usize| if r == root { len } else { 0 };
    let mut others: Vec<Vec<i64>> = (0..w).map(|p| vec![0; if p == r { 0 } else { n }]).collect();
    let out = match c.ops[k] {
        Op::AllReduce(a) => {
            force(comm, Collective::AllReduce, a)?;
            let mut out = vec![0; n];
            comm.all_reduce(&mine, &mut out, ReduceOp::Sum)?;
            out
        }
        Op::AllGather(a) => {
            force(comm, Collective::AllGather, a)?;
            let mut out = vec![0; n * w];
            comm.all_gather(&mine, &mut out)?;
            out
        }
        Op::ReduceScatter(a) => {
            force(comm, Collective::ReduceScatter, a)?;
            let mut out = vec![0; n];
            comm.reduce_scatter(&vals(r, k, n * w), &mut out, ReduceOp::Sum)?;
            out
        }
        Op::AllToAll(a) => {
            force(comm, Collective::AllToAll, a)?;
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
            force(comm, Collective::Broadcast, a)?;
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
    };
    Ok(out)
}

// --- running a case ---------------------------------------------------------------

/// What one rank did.
#[derive(Default)]
struct Log {
    /// (operation, what it returned) for every operation that completed.
    done: Vec<(usize, Vec<i64>)>,
    /// How the rank's program ended, and when (survivors and an erring victim).
    end: Option<(hcomm::Result<()>, Instant)>,
}

struct Outcome {
    result: hcomm::Result<Vec<()>>,
    logs: Vec<Log>,
    struck: Option<Instant>,
}

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// How many times the stand-in saw memory freed under a pending operation
/// (on hardware: the device writing freed memory).
fn freed_in_use() -> u64 {
    static LIB: OnceLock<libloading::Library> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        // SAFETY: loading the stand-in runs no initialisers with preconditions.
        unsafe { libloading::Library::new(path) }.unwrap()
    });
    // SAFETY: the stand-in's documented hook: `uint64_t(void)`.
    unsafe {
        lib.get::<extern "C" fn() -> u64>(b"hcomm_standin_freed_in_use\0")
            .unwrap()()
    }
}

fn execute(c: &Case) -> Outcome {
    let logs: Vec<Mutex<Log>> = (0..c.world).map(|_| Mutex::default()).collect();
    let struck: Mutex<Option<Instant>> = Mutex::new(None);
    let strike = || -> hcomm::Result<()> {
        *struck.lock().unwrap() = Some(Instant::now());
        match c.fault {
            Fault::Panic => panic!("injected panic on rank {}", c.victim),
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
    };
    let program = |comm: &Comm| -> hcomm::Result<()> {
        let r = comm.rank();
        let log = &logs[r];
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
    };
    let options = CommOptions::default().with_timeout(LIMIT);
    let result = match c.backend {
        Backend::Threads => hcomm::host::run_with(c.world, &options, program),
        Backend::Hccl => hccl().run(c.world, &options, program),
    };
    Outcome {
        result,
        logs: logs.into_iter().map(|l| l.into_inner().unwrap()).collect(),
        struck: struck.into_inner().unwrap(),
    }
}

/// Whether `e`, returned by a survivor, names the fault of case `c`: the
/// victim as the failed peer, or a peer that failed because of it (whose
/// reason carries the victim's own error); after a stall, the timeout.
fn names_the_fault(c: &Case, e: &Error) -> bool {
    let injected = format!(
        "injected {} on rank {}",
        if c.fault == Fault::Panic { "panic" } else { "error" },
        c.victim
    );
    match (c.fault, e) {
        (Fault::Panic | Fault::Error, Error::PeerFailed { rank, reason }) => {
            *rank == c.victim || reason.contains(&injected)
        }
        (Fault::Stall, Error::Timeout { .. } | Error::PeerFailed { .. }) => true,
        _ => false,
    }
}

/// Everything wrong with the outcome of case `c`; the slowest survivor's
/// report after the fault.
fn check(c: &Case, o: &Outcome) -> (Vec<String>, Duration) {
    let mut wrong = Vec::new();
    let mut slowest = Duration::ZERO;
    let root_cause_ok = match (&o.result, c.fault) {
        (Err(Error::Panicked { rank, message }), Fault::Panic) => *rank == c.victim && message.contains("injected"),
        (Err(Error::Config { message }), Fault::Error) => message.contains("injected"),
        (Err(_), Fault::Stall) | (Ok(_), Fault::Slow) => true,
        _ => false,
    };
    if !root_cause_ok {
        wrong.push(format!("run returned {:?}", o.result.as_ref().map(|_| ())));
    }
    let Some(struck) = o.struck else {
        wrong.push("the fault never struck".into());
        return (wrong, slowest);
    };
    for (r, log) in o.logs.iter().enumerate() {
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
            continue;
        }
        match &log.end {
            None => wrong.push(format!("survivor {r} never returned")),
            Some((Ok(()), _)) if c.fault == Fault::Slow => {}
            Some((Ok(()), _)) => wrong.push(format!("survivor {r} returned Ok")),
            Some((Err(e), _)) if c.fault == Fault::Slow => {
                wrong.push(format!("rank {r} failed next to a slow rank: {e}"));
            }
            Some((Err(e), at)) => {
                let late = at.saturating_duration_since(struck);
                slowest = slowest.max(late);
                if !names_the_fault(c, e) {
                    wrong.push(format!("survivor {r}: {e}"));
                }
                if late > LIMIT + MARGIN {
                    wrong.push(format!("survivor {r} reported {late:?} after the fault: {e}"));
                }
            }
        }
    }
    (wrong, slowest)
}

// --- the driver ---------------------------------------------------------------------

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}

fn thread_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Figures of a run.
#[derive(Default)]
struct Figures {
    cases: usize,
    by_backend: BTreeMap<Backend, usize>,
    by_fault: BTreeMap<(Fault, Point), usize>,
    ops_checked: usize,
    slowest: BTreeMap<Fault, Duration>,
    failures: Vec<String>,
}

/// Silences the injected panics (every other panic is reported as usual).
fn quiet_injected_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<String>().map_or("", String::as_str);
            if !message.starts_with("injected panic") {
                previous(info);
            }
        }));
    });
}

fn run_cases(seed: u64, count: usize) {
    // One run at a time: thread counts are per process.
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    quiet_injected_panics();
    let baseline = threads();
    let freed_before = freed_in_use();
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let running: Mutex<BTreeMap<usize, Instant>> = Mutex::new(BTreeMap::new());
    let figures = Mutex::new(Figures::default());
    let workers = PARALLEL.min(count.max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let id = next.fetch_add(1, Ordering::SeqCst);
                if id >= count {
                    return;
                }
                let c = case(seed, id);
                running.lock().unwrap().insert(id, Instant::now());
                let outcome = execute(&c);
                running.lock().unwrap().remove(&id);
                let (wrong, slowest) = check(&c, &outcome);
                let mut f = figures.lock().unwrap();
                f.cases += 1;
                *f.by_backend.entry(c.backend).or_default() += 1;
                *f.by_fault.entry((c.fault, c.point)).or_default() += 1;
                f.ops_checked += outcome.logs.iter().map(|l| l.done.len()).sum::<usize>();
                let s = f.slowest.entry(c.fault).or_default();
                *s = (*s).max(slowest);
                if !wrong.is_empty() {
                    f.failures
                        .push(format!("seed {seed} case {id} {c:?}:\n    {}", wrong.join("\n    ")));
                }
            });
        }
        // The watchdog: a case that runs too long hangs.
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = Instant::now();
            let hung = running
                .lock()
                .unwrap()
                .iter()
                .find(|(_, t)| now.duration_since(**t) > WATCHDOG)
                .map(|(id, _)| *id);
            if let Some(id) = hung {
                eprintln!("hung: seed {seed} case {id}: {:?}", case(seed, id));
                // The hung ranks cannot be stopped; end the process.
                std::process::exit(101);
            }
            if next.load(Ordering::SeqCst) >= count && running.lock().unwrap().is_empty() {
                break;
            }
        }
    });
    // Abandoned device work is released in the background, within the
    // library's own execution timeout.
    let deadline = Instant::now() + 2 * LIMIT + MARGIN + Duration::from_secs(5);
    while threads() > baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let f = figures.into_inner().unwrap();
    println!(
        "fault injection, seed {seed}: {} cases in {:?} ({:?}); faults {:?}; {} completed operations checked; \
         slowest survivor report after the fault {:?}; {} failures",
        f.cases,
        started.elapsed(),
        f.by_backend,
        f.by_fault,
        f.ops_checked,
        f.slowest,
        f.failures.len()
    );
    let freed = freed_in_use() - freed_before;
    assert_eq!(freed, 0, "device memory freed under {freed} pending operations");
    let left = threads();
    assert!(
        left <= baseline,
        "threads leaked: {baseline} before, {left} after: {:?}",
        thread_names()
    );
    assert!(
        f.failures.is_empty(),
        "{} of {} cases failed:\n{}",
        f.failures.len(),
        f.cases,
        f.failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn hundreds_of_seeded_faults_on_threads_and_hccl() {
    run_cases(0x5eed_fa17, 300);
}

#[test]
#[ignore = "long: HCOMM_FAULT_CASES (default 3000) cases of HCOMM_FAULT_SEED"]
fn many_seeded_faults() {
    run_cases(
        env_or("HCOMM_FAULT_SEED", 1),
        env_or("HCOMM_FAULT_CASES", 3000) as usize,
    );
}
