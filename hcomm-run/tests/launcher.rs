//! What `hcomm-run` guarantees about the processes it starts, with ranks
//! that are small shell scripts: the rank that failed first is named (not
//! the ranks that failed because of it), no rank outlives hcomm-run even
//! when it is killed with SIGKILL, what the ranks start dies with the job,
//! and every job gets a secret of its own.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

mod common;

use common::text;

/// A directory of its own for one test, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("hcomm-run-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `hcomm-run -n N --grace 1 -- sh -c SCRIPT`, with `DIR` set to `dir`.
fn launcher(n: usize, dir: &Path, script: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcomm-run"));
    cmd.args(["-n", &n.to_string(), "--grace", "1", "--", "sh", "-c", script])
        .env("DIR", dir)
        .env_remove("HCOMM_JOB_SECRET")
        .stdin(Stdio::null());
    cmd
}

/// The process ids in `file`, one a line, once there are `n` of them
/// (within 10 s).
fn pids(file: &Path, n: usize) -> Vec<Pid> {
    let start = Instant::now();
    loop {
        let found: Vec<Pid> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .map(Pid::from_raw)
            .collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} has {found:?}, expected {n} process ids",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is gone: no such process (ESRCH), or, with
/// `zombie_counts`, a zombie (dead, its entry waiting for a reaper that
/// is not hcomm-run).
fn gone(pid: Pid, zombie_counts: bool) -> bool {
    match kill(pid, None) {
        Err(Errno::ESRCH) => true,
        _ if zombie_counts => std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
            .unwrap_or(true),
        _ => false,
    }
}

/// Rank 3 kills itself with SIGKILL once ranks 0 to 2 are reading a pipe it
/// holds open; they see its end within microseconds, exit with code 1, and
/// are mostly reaped before it (the kernel closes a dying process's files
/// before it reports it dead). The old launcher, polling ranks in index
/// order, named rank 0 in 6 of 6 runs of this.
#[test]
fn the_killed_rank_is_named_not_the_ranks_that_failed_because_of_it() {
    let dir = Scratch::new("first-failure");
    let fifo = dir.path("fifo");
    let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let script = r#"
        if [ "$HCOMM_RANK" = 3 ]; then exec 3>"$DIR/fifo"; sleep 0.3; kill -KILL $$; fi
        cat "$DIR/fifo" >/dev/null
        exit 1"#;
    for run in 0..6 {
        let start = Instant::now();
        let o = launcher(4, &dir.0, script).output().unwrap();
        let all = text(&o);
        assert_eq!(o.status.code(), Some(1), "run {run}: {all}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr).trim_end(),
            "hcomm-run: rank 3 was killed by signal SIGKILL; the other ranks were stopped",
            "run {run}: {all}"
        );
        assert!(start.elapsed() < Duration::from_secs(5), "run {run}: {all}");
    }
}

/// A rank that exits with a code is named with it; a second failure right
/// after it (another code) is not.
#[test]
fn the_first_exit_code_is_named() {
    let dir = Scratch::new("first-code");
    let script = r#"
        case "$HCOMM_RANK" in
            1) exit 7 ;;
            0) sleep 0.05; exit 2 ;;
            *) exec sleep 30 ;;
        esac"#;
    let o = launcher(3, &dir.0, script).output().unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        "hcomm-run: rank 1 exited with code 7; the other ranks were stopped",
        "{all}"
    );
}

/// hcomm-run killed with SIGKILL while its ranks run: the ranks (by their
/// parent-death signal) and what they started (by the group's keeper) are
/// gone within a second.
#[test]
fn no_rank_outlives_a_launcher_killed_with_sigkill() {
    let dir = Scratch::new("sigkill");
    let script = r#"
        sleep 30 &
        echo $! >> "$DIR/grandchildren"
        echo $$ >> "$DIR/ranks"
        wait"#;
    let mut job = launcher(3, &dir.0, script)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ranks = pids(&dir.path("ranks"), 3);
    let grandchildren = pids(&dir.path("grandchildren"), 3);
    assert!(ranks.iter().chain(&grandchildren).all(|&p| !gone(p, true)));
    job.kill().unwrap();
    job.wait().unwrap();
    let killed = Instant::now();
    let everyone: Vec<Pid> = ranks.iter().chain(&grandchildren).copied().collect();
    while !everyone.iter().all(|&p| gone(p, true)) {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "still running 1 s after hcomm-run was killed: {:?}",
            everyone.iter().filter(|&&p| !gone(p, true)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A failed job: what the ranks started in the background is gone (reaped,
/// no zombie) when hcomm-run returns; so after a job that succeeded.
#[test]
fn what_the_ranks_start_is_gone_when_the_launcher_returns() {
    let dir = Scratch::new("grandchildren");
    // Rank 1 fails once both ranks started their background process.
    let script = r#"
        sleep 30 &
        echo $! >> "$DIR/grandchildren"
        if [ "$HCOMM_RANK" = 1 ]; then
            while [ "$(wc -l < "$DIR/grandchildren")" -lt 2 ]; do sleep 0.01; done
            exit 5
        fi
        wait"#;
    let start = Instant::now();
    let o = launcher(2, &dir.0, script).output().unwrap();
    let all = text(&o);
    assert!(
        all.contains("hcomm-run: rank 1 exited with code 5; the other ranks were stopped"),
        "{all}"
    );
    for p in pids(&dir.path("grandchildren"), 2) {
        assert!(gone(p, false), "{p} is still there\n{all}");
    }
    assert!(start.elapsed() < Duration::from_secs(5), "{all}");

    // Success, leaving a process that ignores SIGTERM behind.
    let script = r#"
        sh -c 'trap "" TERM; exec sleep 30' &
        echo $! >> "$DIR/left"
        echo done"#;
    let start = Instant::now();
    let o = launcher(2, &dir.0, script).output().unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("[1] done"), "{all}");
    for p in pids(&dir.path("left"), 2) {
        assert!(gone(p, false), "{p} is still there\n{all}");
    }
    assert!(start.elapsed() < Duration::from_secs(5), "{all}");
}

/// SIGTERM to hcomm-run reaches the whole group, and it exits 128 + 15.
#[test]
fn sigterm_to_the_launcher_stops_the_ranks_and_what_they_started() {
    let dir = Scratch::new("sigterm");
    let script = r#"
        sleep 30 &
        echo $! >> "$DIR/grandchildren"
        echo $$ >> "$DIR/ranks"
        wait"#;
    let job = launcher(2, &dir.0, script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ranks = pids(&dir.path("ranks"), 2);
    let grandchildren = pids(&dir.path("grandchildren"), 2);
    kill(Pid::from_raw(job.id() as i32), Signal::SIGTERM).unwrap();
    let o = job.wait_with_output().unwrap();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(143), "{all}");
    for p in ranks.iter().chain(&grandchildren) {
        assert!(gone(*p, false), "{p} is still there\n{all}");
    }
}

/// The ranks of a job run in one process group, not hcomm-run's and not
/// led by a rank.
#[test]
fn the_ranks_share_a_process_group_of_their_own() {
    let dir = Scratch::new("group");
    // Field 5 of /proc/PID/stat is the process group ("sh" has no space).
    let o = launcher(2, &dir.0, r#"echo "pid $$ group $(cut -d' ' -f5 /proc/$$/stat)""#)
        .output()
        .unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    let mut seen = Vec::new();
    for r in 0..2 {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("[{r}] pid ")))
            .unwrap_or_else(|| panic!("rank {r} did not say\n{all}"));
        let (pid, group) = line.split_once(" group ").unwrap();
        let (pid, group): (i32, i32) = (pid.parse().unwrap(), group.parse().unwrap());
        assert_ne!(pid, group, "{all}");
        seen.push(group);
    }
    assert_eq!(seen[0], seen[1], "{all}");
    let mine = nix::unistd::getpgrp().as_raw();
    assert_ne!(seen[0], mine, "{all}");
}

/// The secret each rank of a job sees.
fn secrets(dir: &Path, caller: Option<&str>) -> (Vec<String>, Output) {
    let mut cmd = launcher(2, dir, r#"echo "secret=$HCOMM_JOB_SECRET""#);
    if let Some(s) = caller {
        cmd.env("HCOMM_JOB_SECRET", s);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let seen = (0..2)
        .map(|r| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("[{r}] secret=")))
                .unwrap_or_else(|| panic!("rank {r} did not say\n{}", text(&o)))
                .to_owned()
        })
        .collect();
    (seen, o)
}

#[test]
fn every_job_has_a_fresh_secret_that_all_its_ranks_share() {
    let dir = Scratch::new("secret");
    let (a, oa) = secrets(&dir.0, None);
    let (b, _) = secrets(&dir.0, None);
    for s in [&a[0], &b[0]] {
        assert_eq!(s.len(), 64, "{s}");
        assert!(s.bytes().all(|d| d.is_ascii_hexdigit()), "{s}");
    }
    assert_eq!(a[0], a[1]);
    assert_eq!(b[0], b[1]);
    assert_ne!(a[0], b[0]);
    // hcomm-run itself never prints it.
    assert!(!String::from_utf8_lossy(&oa.stderr).contains(&a[0]), "{}", text(&oa));
    // A secret of the caller's own is passed on unchanged; a blank one is
    // replaced.
    let given = "0123456789abcdef0123456789abcdef-the-caller's";
    let (c, _) = secrets(&dir.0, Some(given));
    assert_eq!(c, vec![given.to_owned(); 2]);
    let (d, _) = secrets(&dir.0, Some(""));
    assert_eq!(d[0].len(), 64, "{d:?}");
    assert_eq!(d[0], d[1]);
}
