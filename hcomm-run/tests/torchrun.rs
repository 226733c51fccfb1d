//! The environment torchrun gives its workers, with torchrun's own store
//! listening on `MASTER_PORT` (as its agent store does, with the default
//! rendezvous and with `--standalone`): two processes of this test binary
//! join with `init_from_env` and no other variable, and end with exactly
//! the serial all-reduce and all-gather. Two such jobs on neighbouring
//! ports, with the same run id, run at once without mixing. Where torch is
//! installed (`python3 -c 'import torch'`), torchrun itself runs the ranks.
//!
//! Also `hcomm-run`'s conventions: torchrun's variables, `--nproc-per-node`,
//! `--log-dir`, and the port it holds for rank 0.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hcomm::ReduceOp;

const BODY_VAR: &str = "HCOMM_TORCHRUN_TEST";
/// The longest a test waits for its ranks.
const WATCHDOG: Duration = Duration::from_secs(30);

/// The body of a rank: what a quickstart does, with exact checks; prints
/// one line with the results.
#[test]
#[ignore = "the body of a rank process of the tests below"]
fn torchrun_rank() {
    if std::env::var_os(BODY_VAR).is_none() {
        return;
    }
    let comm = hcomm::init_from_env().unwrap_or_else(|e| panic!("init_from_env: {e}"));
    let (r, w) = (comm.rank(), comm.world());
    let mut x: Vec<f32> = (0..8).map(|i| (r * 100 + i) as f32).collect();
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    let mut all = vec![0u64; w];
    comm.all_gather(&[r as u64 * 7 + 1], &mut all).unwrap();
    println!("RESULT {r} {w} {x:?} {all:?}");
}

/// The serial results of a job of `w` ranks, as [`torchrun_rank`] prints
/// them.
fn expected(r: usize, w: usize) -> String {
    let x: Vec<f32> = (0..8).map(|i| (0..w).map(|q| (q * 100 + i) as f32).sum()).collect();
    let all: Vec<u64> = (0..w).map(|q| q as u64 * 7 + 1).collect();
    format!("RESULT {r} {w} {x:?} {all:?}")
}

/// A rank with the variables torchrun's agent gives rank `rank` of
/// `world` workers on one node.
fn torchrun_worker(rank: usize, world: usize, master_port: u16, run_id: &str) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "torchrun_rank",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(BODY_VAR, "1")
    .env("HCOMM_TIMEOUT", "20")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for k in [
        "HCOMM_RANK",
        "HCOMM_WORLD_SIZE",
        "HCOMM_MASTER_ADDR",
        "HCOMM_MASTER_PORT",
        "HCOMM_JOB_SECRET",
        "HCOMM_JOB_ID",
        "HCOMM_STORE_FD",
    ] {
        cmd.env_remove(k);
    }
    let (rank, world) = (rank.to_string(), world.to_string());
    for (k, v) in [
        ("RANK", rank.as_str()),
        ("LOCAL_RANK", &rank),
        ("GROUP_RANK", "0"),
        ("ROLE_RANK", &rank),
        ("ROLE_NAME", "default"),
        ("WORLD_SIZE", &world),
        ("LOCAL_WORLD_SIZE", &world),
        ("GROUP_WORLD_SIZE", "1"),
        ("ROLE_WORLD_SIZE", &world),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", &master_port.to_string()),
        ("TORCHELASTIC_RUN_ID", run_id),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ("TORCHELASTIC_RESTART_COUNT", "0"),
        ("TORCHELASTIC_MAX_RESTARTS", "0"),
    ] {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child` (killed past the watchdog); its stdout and stderr.
fn finish(mut child: Child, start: Instant) -> (bool, String) {
    while child.try_wait().unwrap().is_none() && start.elapsed() < WATCHDOG {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let ok = child.wait().unwrap().success();
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    let _ = child.stderr.take().unwrap().read_to_string(&mut out);
    (ok, out)
}

/// A job of `world` torchrun workers next to a listener standing for
/// torchrun's store; each rank's output.
fn torchrun_job(world: usize, store: &TcpListener, run_id: &str) -> Vec<(bool, String)> {
    let port = store.local_addr().unwrap().port();
    let start = Instant::now();
    let ranks: Vec<Child> = (0..world).map(|r| torchrun_worker(r, world, port, run_id)).collect();
    ranks.into_iter().map(|c| finish(c, start)).collect()
}

fn assert_exact(outputs: &[(bool, String)]) {
    let w = outputs.len();
    for (r, (ok, out)) in outputs.iter().enumerate() {
        assert!(*ok, "rank {r} failed:\n{out}");
        assert!(
            out.contains(&expected(r, w)),
            "rank {r} must print {}:\n{out}",
            expected(r, w)
        );
    }
}

#[test]
fn torchrun_agent_store_environment_runs_with_no_other_variable() {
    let store = TcpListener::bind("127.0.0.1:0").unwrap();
    assert_exact(&torchrun_job(2, &store, "none"));
}

#[test]
fn torchrun_standalone_environment_runs_with_no_other_variable() {
    let store = TcpListener::bind("127.0.0.1:0").unwrap();
    assert_exact(&torchrun_job(2, &store, "3f6c2a9e-5d1b-4c8e-9a7f-0b2d4e6f8a1c"));
}

/// Two jobs with torchrun's default run id on neighbouring ports, at once:
/// the store of one is among the ports the other tries, and each still
/// ends with its own exact data.
#[test]
fn two_torchrun_jobs_on_neighbouring_ports_do_not_mix() {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = a.local_addr().unwrap().port();
    let Some(Ok(b)) = port.checked_add(1).map(|p| TcpListener::bind(("127.0.0.1", p))) else {
        // The next port is taken by someone else: nothing to test here.
        return;
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ja = s.spawn(|| torchrun_job(2, &a, "none"));
        let jb = s.spawn(|| torchrun_job(2, &b, "none"));
        (ja.join().unwrap(), jb.join().unwrap())
    });
    assert_exact(&ra);
    assert_exact(&rb);
}

/// Runs the ranks with torchrun itself where torch is installed: in the
/// Python of `HCOMM_TORCH_PYTHON` (CI points it at the environment of
/// `scripts/torch-env.sh`), else `python3`.
#[test]
fn torchrun_itself_where_torch_is_installed() {
    let python = std::env::var("HCOMM_TORCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_torch = Command::new(&python)
        .args(["-c", "import torch"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_torch {
        eprintln!("torch is not installed for {python}: skipped");
        return;
    }
    let me = std::env::current_exe().unwrap();
    for standalone in [false, true] {
        let mut cmd = Command::new(&python);
        cmd.args(["-m", "torch.distributed.run", "--nproc-per-node", "2"]);
        if standalone {
            cmd.arg("--standalone");
        } else {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            cmd.args(["--master-port", &port.to_string()]);
        }
        cmd.arg("--no-python")
            .arg(&me)
            .args(["--ignored", "--exact", "torchrun_rank", "--nocapture"])
            .env(BODY_VAR, "1")
            .env("HCOMM_TIMEOUT", "20")
            .env_remove("HCOMM_MASTER_PORT")
            .env_remove("HCOMM_JOB_SECRET");
        let o = cmd.output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "torchrun (standalone {standalone}): {o:?}");
        for r in 0..2 {
            assert!(out.contains(&expected(r, 2)), "rank {r}: {out}");
        }
    }
}

fn hcomm_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcomm-run"))
        .args(args)
        .env_remove("HCOMM_JOB_SECRET")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `--nproc-per-node` is `-n`; each rank has torchrun's variables with our
/// values; `--log-dir` gets one file per rank with its lines; rank 0 holds
/// the job's port as a listening socket from its start.
#[test]
fn hcomm_run_speaks_torchrun_conventions_and_holds_the_port() {
    let dir = std::env::temp_dir().join(format!("hcomm-run-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = r#"echo "vars $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $HCOMM_RANK $HCOMM_WORLD_SIZE";
        [ "$MASTER_PORT" = "$HCOMM_MASTER_PORT" ] && echo "same port";
        if [ "$RANK" = 0 ]; then
          python3 -c "import os, socket; s = socket.socket(fileno=int(os.environ['HCOMM_STORE_FD'])); print('held', s.getsockname()[1] == int(os.environ['MASTER_PORT']), s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))";
        else
          echo "no fd ${HCOMM_STORE_FD:-none}";
        fi"#;
    let o = hcomm_run(&[
        "--nproc-per-node",
        "2",
        "--log-dir",
        dir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{o:?}");
    for r in 0..2 {
        assert!(
            out.contains(&format!("[{r}] vars {r} 2 {r} 2 127.0.0.1 {r} 2")),
            "{out}"
        );
        assert!(out.contains(&format!("[{r}] same port")), "{out}");
        let log = std::fs::read_to_string(dir.join(format!("rank_{r}.log"))).unwrap();
        assert!(log.starts_with(&format!("vars {r} 2 {r} 2 127.0.0.1 {r} 2\n")), "{log}");
    }
    assert!(out.contains("[0] held True 1"), "rank 0 must hold the port: {out}");
    assert!(out.contains("[1] no fd none"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `--grace` the clock cannot hold is a clear error, not a panic.
#[test]
fn hcomm_run_rejects_a_grace_out_of_range() {
    let o = hcomm_run(&["-n", "1", "--grace", "1e19", "--", "true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(err.contains("1e19 seconds is out of range"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `--port` taken by another process: hcomm-run says so before starting
/// any rank.
#[test]
fn hcomm_run_names_a_taken_port() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = hcomm_run(&["-n", "2", "--port", &port, "--", "sh", "-c", "echo started"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(err.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("started"));
}
