//! Starting, watching and stopping the ranks' processes.
//!
//! The ranks run in the job's process group ([`Group`]); a reaping thread
//! reports them as they end ([`reap`]), a signal thread reports `SIGINT`
//! and `SIGTERM` sent to hcomm-run, and this thread decides: it names the
//! first rank that failed, and stops the group (`SIGTERM`, the grace
//! period, `SIGKILL`) on a failure or a signal. When the ranks have all
//! ended, whatever is left of the group is killed, and hcomm-run (the
//! reaper of orphans under it) waits for it to be gone.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::group::Group;
use crate::output::{prefix_lines, Log};
use crate::reap::{self, first_failure, Ending, Reaped};
use crate::secret::SECRET_VAR;

/// How long the ranks still running get after `SIGKILL` before hcomm-run
/// gives up on them (a process in uninterruptible sleep).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// How long hcomm-run watches the ranks after it saw the first one fail,
/// before it names the failure and stops the others. A rank killed by a
/// signal closes its files (its sockets, its pipes) before its parent can
/// see it dead, and its peers, woken by that, may exit before it does (on
/// a loaded host, 4 of 6 times when the peers only had to read to the end
/// of a pipe): a death by signal seen within this time is named before
/// an exit code seen before it.
const SETTLE: Duration = Duration::from_millis(200);

/// How long hcomm-run waits, after the ranks ended, for what is left of the
/// group to be gone and for the ranks' output to be copied.
const CLEANUP: Duration = Duration::from_secs(2);

/// One job.
#[derive(Debug)]
pub(crate) struct Job<'a> {
    /// The number of ranks.
    pub(crate) n: usize,
    /// The port of the rendezvous store.
    pub(crate) port: u16,
    /// The socket listening on `port`, handed to rank 0 (then closed
    /// here).
    pub(crate) store: Option<TcpListener>,
    /// The program and its arguments.
    pub(crate) command: &'a [String],
    /// How long the ranks get between `SIGTERM` and `SIGKILL`.
    pub(crate) grace: Duration,
    /// The secret to give the ranks (`None`: they inherit the caller's).
    pub(crate) secret: Option<String>,
    /// Where each rank's output is written too.
    pub(crate) log_dir: Option<&'a Path>,
}

/// The variable by which rank 0 gets the store's listening socket.
const STORE_FD_VAR: &str = "HCOMM_STORE_FD";

/// What the watching thread hears about.
enum Event {
    /// Processes that ended together.
    Round(Vec<Reaped>),
    /// This process has no child left.
    NoChildLeft,
    /// A signal sent to hcomm-run.
    Signal(i32),
}

/// Runs the job; the exit code for this process, or why the job failed (a
/// message naming the rank and the cause).
pub(crate) fn run(job: &mut Job<'_>) -> Result<u8, String> {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!(
            "hcomm-run: cannot become the reaper of the ranks' orphans ({e}); processes the ranks start are killed but \
             not waited for"
        );
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|e| format!("cannot handle SIGINT and SIGTERM: {e}"))?;
    let group = Group::start()?;
    let (events, heard) = mpsc::channel();
    let mut pids = Vec::with_capacity(job.n);
    let mut printers = Vec::with_capacity(2 * job.n);
    let mut cause = None;
    for rank in 0..job.n {
        let log = match job.log_dir.map(|dir| open_log(dir, rank)).transpose() {
            Ok(log) => log,
            Err(e) => {
                cause = Some(e);
                break;
            }
        };
        match spawn(job, rank, group) {
            Ok(mut child) => {
                pids.push(Some(child.id() as i32));
                if let Some(out) = child.stdout.take() {
                    printers.push(prefix_lines(rank, out, false, log.clone()));
                }
                if let Some(err) = child.stderr.take() {
                    printers.push(prefix_lines(rank, err, true, log));
                }
                // Dropping a `Child` neither waits for nor kills it; the
                // reaping thread waits for it.
            }
            Err(e) => {
                cause = Some(format!("cannot start rank {rank} (`{}`): {e}", job.command[0]));
                break;
            }
        }
    }
    // Rank 0 holds the store's port now.
    drop(job.store.take());
    let listener = {
        let events = events.clone();
        let handle = signals.handle();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for sig in signals.forever() {
                if events.send(Event::Signal(sig)).is_err() {
                    return;
                }
            }
        });
        thread.map(|t| (t, handle))
    };
    let reaper = reap::start(move |round| {
        let event = round.map_or(Event::NoChildLeft, Event::Round);
        events.send(event).is_ok()
    });
    let outcome = match (reaper, listener) {
        (Ok(reaper), Ok((listener, handle))) => {
            let outcome = Watch::new(pids, group, job.grace, cause).run(&heard);
            group.signal(Signal::SIGKILL);
            finish(reaper, &heard);
            handle.close();
            let _ = listener.join();
            outcome
        }
        (reaper, listener) => {
            group.signal(Signal::SIGKILL);
            let why: Vec<String> = [reaper.err(), listener.err()]
                .into_iter()
                .flatten()
                .map(|e| e.to_string())
                .collect();
            Err(format!(
                "cannot start the threads that watch the ranks: {}",
                why.join("; ")
            ))
        }
    };
    let deadline = Instant::now() + CLEANUP;
    for p in printers {
        while !p.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if p.is_finished() {
            let _ = p.join();
        }
    }
    outcome
}

/// The log file of rank `rank` in `dir`, made empty.
fn open_log(dir: &Path, rank: usize) -> Result<Log, String> {
    let path = dir.join(format!("rank_{rank}.log"));
    std::fs::File::create(&path)
        .map(|f| Log::new(f.into()))
        .map_err(|e| format!("cannot write the log of rank {rank} to {}: {e}", path.display()))
}

/// Starts rank `rank`, with our variables and torchrun's; rank 0 also gets
/// the store's listening socket.
fn spawn(job: &Job<'_>, rank: usize, group: Group) -> std::io::Result<std::process::Child> {
    let mut cmd = Command::new(&job.command[0]);
    let (rank_s, world_s, port_s) = (rank.to_string(), job.n.to_string(), job.port.to_string());
    cmd.args(&job.command[1..])
        .env("HCOMM_RANK", &rank_s)
        .env("HCOMM_WORLD_SIZE", &world_s)
        .env("HCOMM_MASTER_ADDR", "127.0.0.1")
        .env("HCOMM_MASTER_PORT", &port_s)
        .env("RANK", &rank_s)
        .env("WORLD_SIZE", &world_s)
        .env("LOCAL_RANK", &rank_s)
        .env("LOCAL_WORLD_SIZE", &world_s)
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", &port_s)
        .env_remove(STORE_FD_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(secret) = &job.secret {
        cmd.env(SECRET_VAR, secret);
    }
    if let (0, Some(store)) = (rank, &job.store) {
        let fd = store.as_raw_fd();
        cmd.env(STORE_FD_VAR, fd.to_string());
        // SAFETY: the closure runs in the forked child before `exec`; it
        // only clears the close-on-exec flag of `fd` (open in the child,
        // inherited from this process) with fcntl, an async-signal-safe
        // system call, and builds its error from the errno without
        // allocating.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }
    group.adopt(&mut cmd);
    cmd.spawn()
}

/// Waits, up to [`CLEANUP`], for the reaping thread to run out of children
/// (the keeper, the ranks' orphans), dropping what it reports.
fn finish(reaper: JoinHandle<()>, heard: &Receiver<Event>) {
    let deadline = Instant::now() + CLEANUP;
    while !reaper.is_finished() && Instant::now() < deadline {
        let _ = heard.recv_timeout(Duration::from_millis(5));
    }
    if reaper.is_finished() {
        let _ = reaper.join();
    }
}

/// The state of a job while its ranks run.
struct Watch {
    /// The process id of each rank still running.
    pids: Vec<Option<i32>>,
    /// How many of them.
    running: usize,
    /// The job's process group.
    group: Group,
    /// Time between `SIGTERM` and `SIGKILL`.
    grace: Duration,
    /// Why the job failed, once known.
    cause: Option<String>,
    /// The ranks that ended since the first failure was seen, in the order
    /// reaped, while the job settles (see [`SETTLE`]).
    settling: Vec<(usize, Ending)>,
    /// When the job has settled.
    settled_at: Option<Instant>,
    /// The signal last forwarded to the ranks.
    forwarded: Option<i32>,
    /// When the group gets the next, harder signal.
    deadline: Option<Instant>,
    /// Whether the group got `SIGKILL`.
    killed: bool,
}

impl Watch {
    /// Watches the ranks `pids`; with a `cause`, the job has already failed
    /// (a rank could not start) and the ranks started are stopped.
    fn new(pids: Vec<Option<i32>>, group: Group, grace: Duration, cause: Option<String>) -> Watch {
        let running = pids.iter().flatten().count();
        let mut w = Watch {
            pids,
            running,
            group,
            grace,
            cause: None,
            settling: Vec::new(),
            settled_at: None,
            forwarded: None,
            deadline: None,
            killed: false,
        };
        if let Some(c) = cause {
            w.fail(c);
        }
        w
    }

    /// Records the job's failure and starts stopping the group.
    fn fail(&mut self, cause: String) {
        self.cause = Some(cause);
        self.group.signal(Signal::SIGTERM);
        self.deadline.get_or_insert(Instant::now() + self.grace);
    }

    /// Runs until every rank ended; the exit code or the failure.
    fn run(mut self, heard: &Receiver<Event>) -> Result<u8, String> {
        while self.running > 0 {
            let event = match self.settled_at.or(self.deadline) {
                Some(d) => heard.recv_timeout(d.saturating_duration_since(Instant::now())),
                None => heard.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match event {
                Ok(Event::Round(round)) => self.ended(&round),
                Ok(Event::NoChildLeft) => {
                    let left: Vec<String> = self.still_running().map(|r| r.to_string()).collect();
                    return Err(format!(
                        "lost track of ranks {}: the kernel reports no child process left",
                        left.join(", ")
                    ));
                }
                Ok(Event::Signal(sig)) => {
                    self.forwarded = Some(sig);
                    if let Ok(s) = Signal::try_from(sig) {
                        self.group.signal(s);
                    }
                    self.deadline.get_or_insert(Instant::now() + self.grace);
                }
                Err(RecvTimeoutError::Timeout) if self.settled_at.is_some() => self.settle(),
                Err(RecvTimeoutError::Timeout) if !self.killed => {
                    self.group.signal(Signal::SIGKILL);
                    self.killed = true;
                    self.deadline = Some(Instant::now() + AFTER_KILL);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let left: Vec<String> = self.still_running().map(|r| r.to_string()).collect();
                    return Err(format!(
                        "{}; ranks {} did not end within {AFTER_KILL:?} of SIGKILL",
                        self.cause.unwrap_or_else(|| "the job was stopped".into()),
                        left.join(", ")
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("lost track of the ranks: the threads that watch them ended".into());
                }
            }
        }
        if self.settled_at.is_some() {
            self.settle();
        }
        match (self.cause, self.forwarded) {
            (Some(cause), _) => Err(cause),
            (None, Some(sig)) => Ok(Ending::Signal(sig).shell_code()),
            (None, None) => Ok(0),
        }
    }

    /// The ranks still running.
    fn still_running(&self) -> impl Iterator<Item = usize> + '_ {
        self.pids
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_some())
            .map(|(r, _)| r)
    }

    /// Takes note of the ranks in `round`; the first failure of the job
    /// starts the settling time.
    fn ended(&mut self, round: &[Reaped]) {
        let mut ranks = Vec::with_capacity(round.len());
        for reaped in round {
            // Other processes (the keeper, the ranks' orphans) are not ranks.
            if let Some(rank) = self.pids.iter().position(|&p| p == Some(reaped.pid)) {
                self.pids[rank] = None;
                self.running -= 1;
                ranks.push((rank, reaped.ending));
            }
        }
        if self.settled_at.is_some() {
            self.settling.extend(ranks);
        } else if self.cause.is_none() && self.forwarded.is_none() && first_failure(&ranks).is_some() {
            self.settling = ranks;
            self.settled_at = Some(Instant::now() + SETTLE);
        }
    }

    /// Names the first failure among the ranks that ended while the job
    /// settled, and stops the others.
    fn settle(&mut self) {
        self.settled_at = None;
        if let Some(i) = first_failure(&self.settling) {
            let (rank, ending) = self.settling[i];
            let others = if self.pids.len() > 1 {
                "; the other ranks were stopped"
            } else {
                ""
            };
            self.fail(format!("rank {rank} {ending}{others}"));
        }
    }
}
