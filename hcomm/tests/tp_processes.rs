//! The tensor-parallel cases (shapes, Megatron-LM's mappings, the mean) on
//! ranks that are processes: each test starts four processes of this test
//! binary on 127.0.0.1 (the ignored test `tp_rank` is the body of a rank),
//! which join through `init_from_env` and assert their exact data against
//! serial references; the test waits for all of them, bounded, and kills
//! what is left at the deadline.

mod parallel_cases;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WORLD: usize = 4;
/// The longest the test waits for the ranks.
const WATCHDOG: Duration = Duration::from_secs(60);

/// The body of a rank: every case, then exit status 0.
#[test]
#[ignore = "the body of a rank process of the test below"]
fn tp_rank() {
    if std::env::var_os("HCOMM_RANK").is_none() {
        return;
    }
    let comm = hcomm::init_from_env().unwrap();
    parallel_cases::tensor_parallel(&comm).unwrap();
    parallel_cases::megatron_mappings(&comm).unwrap();
    parallel_cases::averages(&comm).unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

fn spawn_rank(rank: usize, port: u16) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "tp_rank", "--test-threads=1"])
        .env("HCOMM_TIMEOUT", "20")
        .env("HCOMM_RANK", rank.to_string())
        .env("HCOMM_WORLD_SIZE", WORLD.to_string())
        .env("HCOMM_MASTER_ADDR", "127.0.0.1")
        .env("HCOMM_MASTER_PORT", port.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("HCOMM_BIND", "none")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for k in [
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "HCOMM_BACKEND",
        "HCOMM_TRANSPORT",
    ] {
        cmd.env_remove(k);
    }
    cmd.spawn().unwrap()
}

#[test]
fn tensor_parallel_cases_hold_on_four_processes() {
    let port = free_port();
    let mut ranks: Vec<Child> = (0..WORLD).map(|r| spawn_rank(r, port)).collect();
    let start = Instant::now();
    let mut status = [None; WORLD];
    while status.iter().any(Option::is_none) && start.elapsed() < WATCHDOG {
        for (r, child) in ranks.iter_mut().enumerate() {
            if status[r].is_none() {
                status[r] = child.try_wait().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for child in &mut ranks {
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    for (r, (s, child)) in status.iter().zip(&mut ranks).enumerate() {
        let mut err = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        }
        match s {
            Some(s) if s.success() => {}
            Some(s) => panic!("rank {r} failed ({s}): {err}"),
            None => panic!("rank {r} did not finish within {WATCHDOG:?}: {err}"),
        }
    }
}
