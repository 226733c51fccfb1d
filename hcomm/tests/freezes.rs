//! A rank frozen with SIGSTOP in the middle of a stream of all-reduces, on
//! both transports between processes (the default one, which reads peers'
//! memory, and `HCOMM_TRANSPORT=tcp`), for a large and a small message:
//! the surviving rank must return `Err(PeerFailed)` naming the frozen rank
//! or `Err(Timeout)` within the timeout plus one second of the freeze, and
//! every all-reduce that returned `Ok` before holds exactly the serial sum.
//!
//! Each test starts two processes of this test binary (the ignored test
//! `freeze_rank` is the body of a rank) on 127.0.0.1, freezes rank 1 once it
//! completed a few all-reduces, waits for rank 0's verdict (bounded), then
//! kills both.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hcomm::{Error, ReduceOp};

/// The communicator's timeout in the rank processes, in seconds.
const TIMEOUT_S: u64 = 2;
/// What the survivor may take beyond the timeout.
const SLACK: Duration = Duration::from_secs(1);
/// The longest a test waits for anything.
const WATCHDOG: Duration = Duration::from_secs(20);
/// All-reduces the ranks complete before the freeze.
const BEFORE: usize = 3;

const SIZE_VAR: &str = "HCOMM_FREEZE_ELEMENTS";

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FREEZE {line}");
    let _ = out.flush();
}

/// The value rank `r` contributes at `i` in round `k` (exact in f32).
fn value(r: usize, k: usize, i: usize) -> f32 {
    ((r * 7 + k * 3 + i) % 1000) as f32
}

/// The body of a rank: all-reduces until one fails; says how each ended.
#[test]
#[ignore = "the body of a rank process of the tests below"]
fn freeze_rank() {
    let Ok(n) = std::env::var(SIZE_VAR) else {
        return;
    };
    let n: usize = n.parse().unwrap();
    let comm = match hcomm::init_from_env() {
        Ok(c) => c,
        Err(e) => return say(&format!("init-failed {e}")),
    };
    let r = comm.rank();
    let w = comm.world();
    for k in 0.. {
        let send: Vec<f32> = (0..n).map(|i| value(r, k, i)).collect();
        let mut recv = vec![0f32; n];
        match comm.all_reduce(&send, &mut recv, ReduceOp::Sum) {
            Ok(()) => {
                let wrong = (0..n)
                    .filter(|&i| recv[i] != (0..w).map(|q| value(q, k, i)).sum::<f32>())
                    .count();
                say(&format!("ok {k} {wrong}"));
            }
            Err(e) => {
                let kind = match &e {
                    Error::PeerFailed { rank, .. } => format!("peer-failed {rank}"),
                    Error::Timeout { .. } => "timeout".to_owned(),
                    _ => "other".to_owned(),
                };
                say(&format!("err {} {kind} {e}", now_ms()));
                std::process::exit(1);
            }
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

fn spawn_rank(rank: usize, port: u16, elements: usize, tcp: bool) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "freeze_rank", "--nocapture", "--test-threads=1"])
        .env(SIZE_VAR, elements.to_string())
        .env("HCOMM_TIMEOUT", TIMEOUT_S.to_string())
        .env("HCOMM_RANK", rank.to_string())
        .env("HCOMM_WORLD_SIZE", "2")
        .env("HCOMM_MASTER_ADDR", "127.0.0.1")
        .env("HCOMM_MASTER_PORT", port.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("HCOMM_BIND", "none")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for k in ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HCOMM_BACKEND", "HCOMM_TRANSPORT"] {
        cmd.env_remove(k);
    }
    if tcp {
        cmd.env("HCOMM_TRANSPORT", "tcp");
    }
    cmd.spawn().unwrap()
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
}

/// Runs one freeze; returns rank 0's verdict line and the time from the
/// freeze to it.
fn freeze(elements: usize, tcp: bool) -> (String, Duration) {
    let port = free_port();
    let mut ranks: Vec<Child> = (0..2).map(|r| spawn_rank(r, port, elements, tcp)).collect();
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    for (r, child) in ranks.iter_mut().enumerate() {
        let out = BufReader::new(child.stdout.take().unwrap());
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("FREEZE ") {
                    let _ = tx.send((r, rest.to_owned()));
                }
            }
        });
    }
    let start = Instant::now();
    let mut done = [0usize; 2];
    let mut frozen_at = None;
    let mut verdict = None;
    while start.elapsed() < WATCHDOG {
        let Ok((r, line)) = rx.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("ok ") {
            let wrong: usize = rest.split(' ').nth(1).unwrap().parse().unwrap();
            assert_eq!(wrong, 0, "rank {r} returned Ok with {wrong} wrong elements: {line}");
            done[r] += 1;
            if frozen_at.is_none() && done[0] >= BEFORE && done[1] >= BEFORE {
                signal(&ranks[1], "-STOP");
                frozen_at = Some((Instant::now(), now_ms()));
            }
        } else if let Some(rest) = line.strip_prefix("err ") {
            if r == 0 {
                verdict = Some(rest.to_owned());
                break;
            }
        } else {
            panic!("rank {r}: {line}");
        }
    }
    for child in &mut ranks {
        signal(child, "-CONT");
        let _ = child.kill();
        let _ = child.wait();
    }
    let (_, stopped_ms) = frozen_at.expect("the ranks completed the all-reduces before the freeze");
    let verdict = verdict.expect("rank 0 returned an error within the watchdog (no hang)");
    let (at_ms, rest) = verdict.split_once(' ').unwrap();
    let at_ms: u128 = at_ms.parse().unwrap();
    let took = Duration::from_millis(u64::try_from(at_ms.saturating_sub(stopped_ms)).unwrap());
    (rest.to_owned(), took)
}

fn check(elements: usize, tcp: bool) {
    let (verdict, took) = freeze(elements, tcp);
    eprintln!("elements {elements} tcp {tcp}: error {took:?} after the freeze: {verdict}");
    assert!(
        verdict.starts_with("peer-failed 1 ") || verdict.starts_with("timeout "),
        "rank 0 must fail naming rank 1 or the timeout: {verdict}"
    );
    // The all-reduce in flight at the freeze began at most at the freeze.
    assert!(
        took <= Duration::from_secs(TIMEOUT_S) + SLACK,
        "rank 0 took {took:?} after the freeze, beyond the timeout of {TIMEOUT_S} s plus {SLACK:?}: {verdict}"
    );
}

/// 4 Mi f32 (16 MiB): data in flight when the rank freezes.
const LARGE: usize = 4 << 20;
const SMALL: usize = 16;

#[test]
fn frozen_rank_during_a_large_all_reduce_over_tcp() {
    check(LARGE, true);
}

#[test]
fn frozen_rank_during_a_small_all_reduce_over_tcp() {
    check(SMALL, true);
}

#[test]
fn frozen_rank_during_a_large_all_reduce_on_the_default_transport() {
    check(LARGE, false);
}

#[test]
fn frozen_rank_during_a_small_all_reduce_on_the_default_transport() {
    check(SMALL, false);
}
