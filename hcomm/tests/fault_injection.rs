//! Fault injection on every backend that runs here: threads (the host
//! backend), HCCL through the stand-in library, and one process per rank
//! (the host transport between processes). Each seeded case runs
//! a random program (collectives of several kinds and algorithms, on the
//! whole communicator and on one made by `split`, blocking point-to-point,
//! batches, non-blocking requests in a scope, a schedule, then a barrier) in
//! which one rank, at a random point of a random operation, panics, returns
//! an error, stalls past the timeout, or (a process) is killed with
//! SIGKILL. Checked for every case:
//!
//! * every other rank returns an `Err` naming the failed rank
//!   ([`Error::PeerFailed`] for it; after a stall, the timeout itself, a
//!   peer that failed by it, or the abort of a rank that timed out) within
//!   the timeout plus a margin;
//! * nothing hangs: a watchdog bounds every case;
//! * every operation that completed, on any rank, holds exactly what a
//!   serial reference computes;
//! * no thread or process outlives the cases, and no device memory is freed
//!   while an operation the library still runs uses it.
//!
//! As a control, some cases have a rank that is only slow (well within the
//! timeout): there every rank must complete every operation, exactly.
//!
//! `cargo test -p hcomm --test fault_injection` runs a fixed seed; a longer
//! run: `HCOMM_FAULT_CASES=3000 HCOMM_FAULT_SEED=7 cargo test -p hcomm
//! --test fault_injection many_seeded_faults -- --ignored --nocapture`.

#[path = "fault_injection/procs.rs"]
mod procs;
#[path = "fault_injection/program.rs"]
mod program;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hcomm::hccl::Hccl;
use hcomm::{Comm, CommOptions, Error};
use program::{case, rank_program, rank_verdict, strike_in_process, Backend, Case, Fault, Log, Point, LIMIT};

/// How much later than the timeout a survivor may report (a loaded machine).
const MARGIN: Duration = Duration::from_secs(3);
/// A case running longer than this hangs.
const WATCHDOG: Duration = Duration::from_secs(40);
/// Cases running at once (most of a stall is sleeping).
const PARALLEL: usize = 12;
/// Process cases running at once.
const PARALLEL_PROCESSES: usize = 4;

// --- in-process cases ------------------------------------------------------------

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

/// Runs an in-process case (threads or HCCL).
fn execute(c: &Case) -> Outcome {
    let logs: Vec<Mutex<Log>> = (0..c.world).map(|_| Mutex::default()).collect();
    let struck: Mutex<Option<Instant>> = Mutex::new(None);
    let strike = || {
        *struck.lock().unwrap() = Some(Instant::now());
        strike_in_process(c)
    };
    let program = |comm: &Comm| rank_program(comm, c, &logs[comm.rank()], &strike);
    let options = CommOptions::default().with_timeout(LIMIT);
    let result = match c.backend {
        Backend::Hccl => hccl().run(c.world, &options, program),
        _ => hcomm::host::run_with(c.world, &options, program),
    };
    Outcome {
        result,
        logs: logs.into_iter().map(|l| l.into_inner().unwrap()).collect(),
        struck: struck.into_inner().unwrap(),
    }
}

/// Everything wrong with the outcome of in-process case `c`; the slowest
/// survivor's report after the fault.
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
        wrong.extend(rank_verdict(c, r, log));
        if let (true, Some((Err(e), at))) = (r != c.victim, &log.end) {
            let late = at.saturating_duration_since(struck);
            slowest = slowest.max(late);
            if late > LIMIT + MARGIN {
                wrong.push(format!("survivor {r} reported {late:?} after the fault: {e}"));
            }
        }
    }
    (wrong, slowest)
}

// --- the driver ---------------------------------------------------------------------

/// The test functions of this file: the harness runs each on a thread of
/// its name (cut to 15 bytes), which may start while another one counts.
const TESTS: [&str; 4] = [
    "hundreds_of_seeded_faults_on_threads_and_hccl",
    "seeded_faults_on_processes",
    "many_seeded_faults",
    "fault_rank",
];

/// Threads that are not hcomm's: the HCCL stand-in's hub, which serves the
/// worlds of this process's root infos to other processes for the rest of
/// the process (a test library's listener, started by the first root info).
const NOT_HCOMMS: [&str; 1] = ["standin-hub"];

/// The names of this process's threads, but the harness's test threads
/// and the stand-in's.
fn thread_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .filter(|name| !TESTS.iter().any(|t| t.starts_with(name.as_str())) && !NOT_HCOMMS.contains(&name.as_str()))
        .collect()
}

fn threads() -> usize {
    thread_names().len()
}

/// Figures of a run.
#[derive(Default)]
struct Figures {
    cases: usize,
    by_backend: BTreeMap<Backend, usize>,
    by_fault: BTreeMap<(Fault, Point), usize>,
    ops_checked: usize,
    panic_as_finished: usize,
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

/// Runs `count` cases of `seed` on `backends` (in turn), prints the figures
/// and fails on anything wrong.
fn run_cases(seed: u64, count: usize, backends: &[Backend]) {
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
    let parallel = if backends == [Backend::Processes] {
        PARALLEL_PROCESSES
    } else {
        PARALLEL
    };
    let workers = parallel.min(count.max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let id = next.fetch_add(1, Ordering::SeqCst);
                if id >= count {
                    return;
                }
                let c = case(seed, id, backends);
                running.lock().unwrap().insert(id, Instant::now());
                let found = if c.backend == Backend::Processes {
                    procs::run_case(seed, id, &c)
                } else {
                    let outcome = execute(&c);
                    let (wrong, slowest) = check(&c, &outcome);
                    let checked = outcome.logs.iter().map(|l| l.done.len()).sum();
                    procs::Found {
                        wrong,
                        slowest,
                        checked,
                        panic_as_finished: 0,
                    }
                };
                let procs::Found {
                    wrong,
                    slowest,
                    checked,
                    panic_as_finished,
                } = found;
                running.lock().unwrap().remove(&id);
                let mut f = figures.lock().unwrap();
                f.cases += 1;
                *f.by_backend.entry(c.backend).or_default() += 1;
                *f.by_fault.entry((c.fault, c.point)).or_default() += 1;
                f.ops_checked += checked;
                f.panic_as_finished += panic_as_finished;
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
                eprintln!("hung: seed {seed} case {id}: {:?}", case(seed, id, backends));
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
         slowest survivor report after the fault {:?}; {} survivors told a panicking process finished; {} failures",
        f.cases,
        started.elapsed(),
        f.by_backend,
        f.by_fault,
        f.ops_checked,
        f.slowest,
        f.panic_as_finished,
        f.failures.len()
    );
    assert_eq!(
        f.panic_as_finished, 0,
        "survivors were told a panicking rank finished instead of failed"
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

/// The seed of `cargo test`.
const SEED: u64 = 0x5eed_fa17;

#[test]
fn hundreds_of_seeded_faults_on_threads_and_hccl() {
    run_cases(SEED, 300, &[Backend::Threads, Backend::Hccl]);
}

#[test]
fn seeded_faults_on_processes() {
    run_cases(SEED, 40, &[Backend::Processes]);
}

#[test]
#[ignore = "long: HCOMM_FAULT_CASES (default 3000) cases of HCOMM_FAULT_SEED"]
fn many_seeded_faults() {
    let backends = [Backend::Threads, Backend::Hccl, Backend::Processes];
    run_cases(
        env_or("HCOMM_FAULT_SEED", 1),
        env_or("HCOMM_FAULT_CASES", 3000) as usize,
        &backends,
    );
}

#[test]
#[ignore = "a rank of a process case, started by `seeded_faults_on_processes`"]
fn fault_rank() {
    procs::rank_main();
}
