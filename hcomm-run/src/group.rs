//! The job's process group: every rank, and whatever the ranks start, runs
//! in a process group of its own, so that one `killpg` reaches all of it.
//!
//! The group is led by a *keeper*, a process hcomm-run forks that does
//! nothing but wait. It holds the group's id for as long as hcomm-run runs
//! (a group id is not reused while a process of the group exists, so
//! signalling the group never reaches a stranger, even after every rank has
//! been reaped), ignores `SIGTERM` (it leaves only with the final `SIGKILL`)
//! and kills the whole group when hcomm-run dies, even by `SIGKILL`: the
//! ranks' grandchildren have no parent-death signal of their own.
//!
//! Each rank gets `SIGKILL` as its parent-death signal, so no rank outlives
//! hcomm-run.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::{killpg, signal, SigHandler, Signal};
use nix::unistd::{fork, getppid, pause, setpgid, ForkResult, Pid};

/// The signal the keeper gets when hcomm-run's main thread dies.
const KEEPER_DEATH_SIGNAL: Signal = Signal::SIGUSR2;

/// hcomm-run's process id, as the keeper knows it (for its signal handler).
static LAUNCHER: AtomicI32 = AtomicI32::new(0);

/// The process group of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    /// The group id: the keeper's process id.
    pub(crate) id: Pid,
}

impl Group {
    /// Forks the keeper, which leads a new process group.
    ///
    /// Call it from the thread that will also start the ranks and that lives
    /// until the job ends: parent-death signals follow the thread that forked.
    pub(crate) fn start() -> Result<Group, String> {
        let launcher = Pid::this();
        LAUNCHER.store(launcher.as_raw(), Ordering::SeqCst);
        // SAFETY: the child runs only `keeper`, which calls nothing but
        // async-signal-safe functions (setpgid, signal, prctl, getppid,
        // kill, pause) and never returns, so it touches no lock or
        // allocator state that another thread of this process may have held
        // at the fork.
        match unsafe { fork() } {
            Ok(ForkResult::Child) => keeper(launcher),
            Ok(ForkResult::Parent { child }) => {
                // Both sides set the group, so it exists before the first rank
                // asks to join it, whichever runs first. EACCES: the keeper
                // has already done it itself.
                match setpgid(child, child) {
                    Ok(()) | Err(nix::errno::Errno::EACCES) => Ok(Group { id: child }),
                    Err(e) => {
                        let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                        let _ = nix::sys::wait::waitpid(child, None);
                        Err(format!("cannot make a process group for the job: {e}"))
                    }
                }
            }
            Err(e) => Err(format!("cannot start the job's process group (fork failed): {e}")),
        }
    }

    /// Prepares `cmd` to run as a rank: in this group, and killed with
    /// `SIGKILL` when the calling thread (hcomm-run's main thread) dies.
    pub(crate) fn adopt(self, cmd: &mut Command) {
        let launcher = Pid::this();
        cmd.process_group(self.id.as_raw());
        // SAFETY: the closure runs in the forked child before `exec`; it calls
        // only prctl(PR_SET_PDEATHSIG) and getppid, both async-signal-safe
        // system calls, and builds its error from a raw errno without
        // allocating.
        unsafe {
            cmd.pre_exec(move || {
                set_pdeathsig(Signal::SIGKILL).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
                // The classic race: hcomm-run may have died between the fork
                // and the prctl, and then no signal will ever come. The
                // parent is then no longer hcomm-run: do not start the rank.
                if getppid() != launcher {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }

    /// Sends `sig` to every process of the group.
    pub(crate) fn signal(self, sig: Signal) {
        // ESRCH (nobody left) is the only failure possible for our own group.
        let _ = killpg(self.id, sig);
    }
}

/// The keeper's life: lead the group, ignore the signals that ask
/// processes to stop, and kill the group when hcomm-run is gone.
fn keeper(launcher: Pid) -> ! {
    // Every call here is async-signal-safe (see `Group::start`).
    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGUSR1,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ] {
        // SAFETY: ignoring a signal installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    // SAFETY: `on_launcher_death` calls only getppid and kill, both
    // async-signal-safe, and reads an atomic.
    let _ = unsafe { signal(KEEPER_DEATH_SIGNAL, SigHandler::Handler(on_launcher_death)) };
    let _ = set_pdeathsig(KEEPER_DEATH_SIGNAL);
    if getppid() != launcher {
        // hcomm-run died before the parent-death signal was armed.
        kill_own_group();
    }
    loop {
        pause();
    }
}

/// The keeper's handler of its parent-death signal: when hcomm-run is no
/// longer its parent, kill the group (itself included). The signal sent by
/// anyone else is ignored.
extern "C" fn on_launcher_death(_: libc::c_int) {
    if getppid().as_raw() != LAUNCHER.load(Ordering::SeqCst) {
        kill_own_group();
    }
}

/// `SIGKILL` to the caller's process group.
fn kill_own_group() {
    // SAFETY: kill(0, SIGKILL) takes no pointers; it signals the caller's
    // own process group and is async-signal-safe.
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
}
