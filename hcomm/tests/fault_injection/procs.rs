//! The process cases: one process per rank (this test binary, running the
//! ignored test `fault_rank`), joined through the variables `hcomm-run`
//! sets. Each rank checks its own data and how it ended, and prints its
//! verdict; the driver checks that every survivor reported, in time, and
//! that no process outlives its case.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::program::{case, rank_program, rank_verdict, strike_in_process, Backend, Case, Fault, Log, LIMIT};

/// Names the case a rank process runs: `<seed>:<id>`.
const CASE_VAR: &str = "HCOMM_FAULT_CASE";

/// A process case running longer than this hangs.
const WATCHDOG: Duration = Duration::from_secs(30);

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FAULT {line}");
    let _ = out.flush();
}

/// The body of a rank process (nothing when not started by [`run_case`]).
pub(crate) fn rank_main() {
    let Ok(spec) = std::env::var(CASE_VAR) else {
        return;
    };
    let (seed, id) = spec.split_once(':').expect("`<seed>:<id>`");
    let c = case(seed.parse().unwrap(), id.parse().unwrap(), &[Backend::Processes]);
    let comm = match hcomm::init_from_env() {
        Ok(comm) => comm,
        Err(e) => return say(&format!("wrong init: {e}")),
    };
    let r = comm.rank();
    let log = Mutex::new(Log::default());
    let strike = || {
        say(&format!("struck {}", now_ms()));
        if c.fault == Fault::Kill {
            let _ = Command::new("kill")
                .args(["-9", &std::process::id().to_string()])
                .status();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        strike_in_process(&c)
    };
    let ended = rank_program(&comm, &c, &log, &strike);
    let at = now_ms();
    let log = log.into_inner().unwrap();
    say(&format!("checked {}", log.done.len()));
    for w in rank_verdict(&c, r, &log) {
        say(&format!("wrong {w}"));
    }
    if let (Fault::Panic, Err(hcomm::Error::PeerFailed { rank, reason })) = (c.fault, &ended) {
        if *rank == c.victim && reason.contains("finished") {
            say("panicking rank reported finished");
        }
    }
    let named = match &ended {
        Ok(()) => "ok".to_owned(),
        Err(hcomm::Error::PeerFailed { rank, .. }) => format!("named {rank}"),
        Err(_) => "err".to_owned(),
    };
    say(&format!("end {r} {at} {named}"));
    if ended.is_err() {
        // As a program whose communication failed: exit at once, non-zero.
        std::process::exit(1);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

fn spawn_rank(spec: &str, rank: usize, world: usize, port: u16) -> std::io::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--ignored", "--exact", "fault_rank", "--nocapture", "--test-threads=1"])
        .env(CASE_VAR, spec)
        .env("HCOMM_TIMEOUT", LIMIT.as_secs().to_string())
        .env("HCOMM_RANK", rank.to_string())
        .env("HCOMM_WORLD_SIZE", world.to_string())
        .env("HCOMM_MASTER_ADDR", "127.0.0.1")
        .env("HCOMM_MASTER_PORT", port.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // A backtrace takes long to print, and is printed before the panicking
    // rank's communicator is dropped.
    for k in [
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "HCOMM_BACKEND",
        "RUST_BACKTRACE",
    ] {
        cmd.env_remove(k);
    }
    cmd.spawn()
}

/// What a process case found.
#[derive(Default)]
pub(crate) struct Found {
    pub(crate) wrong: Vec<String>,
    /// The slowest survivor's report after the fault.
    pub(crate) slowest: Duration,
    /// Completed operations the ranks checked.
    pub(crate) checked: usize,
    /// Survivors told that the panicking victim finished (its last handle
    /// dropped by a thread that was not panicking).
    pub(crate) panic_as_finished: usize,
}

/// Runs process case `id` of `seed`.
pub(crate) fn run_case(seed: u64, id: usize, c: &Case) -> Found {
    let spec = format!("{seed}:{id}");
    let port = free_port();
    let mut wrong = Vec::new();
    let mut children: Vec<Child> = Vec::new();
    for r in 0..c.world {
        match spawn_rank(&spec, r, c.world, port) {
            Ok(child) => children.push(child),
            Err(e) => wrong.push(format!("cannot start rank {r}: {e}")),
        }
    }
    let readers: Vec<_> = children
        .iter_mut()
        .map(|ch| {
            let mut out = ch.stdout.take();
            std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(o) = out.as_mut() {
                    let _ = o.read_to_string(&mut s);
                }
                s
            })
        })
        .collect();
    let deadline = Instant::now() + WATCHDOG;
    while children.iter_mut().any(|ch| matches!(ch.try_wait(), Ok(None))) {
        if Instant::now() > deadline {
            wrong.push(format!("hung: killed after {WATCHDOG:?}"));
            for ch in &mut children {
                let _ = ch.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for ch in &mut children {
        let _ = ch.wait();
    }
    let text: String = readers.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    // The test harness may print on the same line first.
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| Some(&l[l.find("FAULT ")? + "FAULT ".len()..]))
        .collect();
    let struck: Option<u128> = lines.iter().find_map(|l| l.strip_prefix("struck ")?.parse().ok());
    // Per rank: when it ended, and how ("ok", "err", or "named <rank>").
    let mut ends: Vec<Option<(u128, String)>> = vec![None; c.world];
    for l in &lines {
        if let Some(w) = l.strip_prefix("wrong ") {
            wrong.push(w.to_owned());
        } else if let Some(e) = l.strip_prefix("end ") {
            let mut f = e.splitn(3, ' ');
            let r = f.next().and_then(|r| r.parse::<usize>().ok());
            let at = f.next().and_then(|at| at.parse::<u128>().ok());
            if let (Some(r), Some(at), Some(how)) = (r, at, f.next()) {
                if r < c.world {
                    ends[r] = Some((at, how.to_owned()));
                }
            }
        }
    }
    // A survivor may name the victim, or a rank that failed because of it.
    let failed = |q: usize| q == c.victim || ends[q].as_ref().is_some_and(|(_, how)| how != "ok");
    for (r, end) in ends.iter().enumerate() {
        if let Some((_, how)) = end {
            let named = how.strip_prefix("named ").and_then(|q| q.parse::<usize>().ok());
            if let Some(q) = named.filter(|&q| q >= c.world || !failed(q)) {
                wrong.push(format!("rank {r} names rank {q}, which did not fail"));
            }
        }
    }
    let checked = lines
        .iter()
        .filter_map(|l| l.strip_prefix("checked ")?.parse::<usize>().ok())
        .sum();
    let panic_as_finished = lines
        .iter()
        .filter(|l| l.starts_with("panicking rank reported finished"))
        .count();
    let Some(struck) = struck else {
        wrong.push("the fault never struck".into());
        return Found {
            wrong,
            checked,
            panic_as_finished,
            ..Found::default()
        };
    };
    let mut slowest = Duration::ZERO;
    for (r, end) in ends.iter().enumerate() {
        match end {
            None if r != c.victim || c.fault == Fault::Slow => wrong.push(format!("rank {r} never reported")),
            Some((at, _)) if r != c.victim => {
                let late = Duration::from_millis(at.saturating_sub(struck) as u64);
                slowest = slowest.max(late);
                if c.fault != Fault::Slow && late > LIMIT + crate::MARGIN {
                    wrong.push(format!("survivor {r} reported {late:?} after the fault"));
                }
            }
            // The victim: checked by itself where it survives.
            _ => {}
        }
    }
    Found {
        wrong,
        slowest,
        checked,
        panic_as_finished,
    }
}
