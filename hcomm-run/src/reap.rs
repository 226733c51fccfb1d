//! Reaping: a thread blocks in `waitpid(-1)` and reports every process
//! that ends, in the order the kernel hands them over, one *round* at a
//! time: the process the blocking wait returned, followed by every other
//! that had already ended by then.
//!
//! Within one round the kernel lists children in the order they were
//! started, not in the order they died, so a round says only that its
//! processes ended close together: [`first_failure`] prefers a death by
//! signal in it, as a rank that fails because a peer was killed exits
//! with a code.

use nix::sys::signal::Signal;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl Ending {
    /// Whether this is a clean exit.
    pub(crate) fn success(self) -> bool {
        self == Ending::Code(0)
    }

    /// The exit code hcomm-run passes on for it.
    pub(crate) fn shell_code(self) -> u8 {
        match self {
            Ending::Code(c) => (c & 0xff) as u8,
            Ending::Signal(s) => (128 + s).clamp(0, 255) as u8,
        }
    }
}

impl std::fmt::Display for Ending {
    /// "exited with code 3" or "was killed by signal SIGKILL".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Ending::Code(code) => write!(f, "exited with code {code}"),
            Ending::Signal(sig) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "was killed by signal {}", s.as_str()),
                Err(_) => write!(f, "was killed by signal {sig}"),
            },
        }
    }
}

/// One process that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reaped {
    /// Its process id.
    pub(crate) pid: i32,
    /// How.
    pub(crate) ending: Ending,
}

/// Starts the reaping thread: it passes each round to `report`, and `None`
/// when this process has no child left, then ends; it ends too when
/// `report` returns `false`.
pub(crate) fn start(
    mut report: impl FnMut(Option<Vec<Reaped>>) -> bool + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("reaper".into()).spawn(move || loop {
        let Some(first) = wait(true) else {
            report(None);
            return;
        };
        let mut round = vec![first];
        while let Some(more) = wait(false) {
            round.push(more);
        }
        if !report(Some(round)) {
            return;
        }
    })
}

/// `waitpid(-1)`: the next child that ended; `None` when there is none
/// left (or, with `block == false`, none ended yet).
fn wait(block: bool) -> Option<Reaped> {
    loop {
        let mut status: libc::c_int = 0;
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: `status` is a valid, writable int for the call's duration.
        let pid = unsafe { libc::waitpid(-1, &raw mut status, flags) };
        let errno = nix::errno::Errno::last();
        if pid > 0 {
            let ending = if libc::WIFEXITED(status) {
                Ending::Code(libc::WEXITSTATUS(status))
            } else if libc::WIFSIGNALED(status) {
                Ending::Signal(libc::WTERMSIG(status))
            } else {
                // Stopped or continued: not reported without WUNTRACED or
                // WCONTINUED; wait again.
                continue;
            };
            return Some(Reaped { pid, ending });
        }
        if pid == 0 {
            return None;
        }
        match errno {
            nix::errno::Errno::EINTR => {}
            // ECHILD: no child left.
            _ => return None,
        }
    }
}

/// The index in `round` of the failure to name first: the earliest death by
/// signal, else the earliest non-zero exit; `None` if all succeeded.
pub(crate) fn first_failure(round: &[(usize, Ending)]) -> Option<usize> {
    let signalled = round.iter().position(|(_, e)| matches!(e, Ending::Signal(_)));
    signalled.or_else(|| round.iter().position(|(_, e)| !e.success()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_death_by_signal_is_named_before_exits_of_the_same_round() {
        let kill = Ending::Signal(libc::SIGKILL);
        // Rank 3 was killed; ranks 0 and 1 failed because of it and are
        // listed first, as the kernel lists children in the order started.
        let round = [(0, Ending::Code(1)), (1, Ending::Code(1)), (3, kill)];
        assert_eq!(first_failure(&round), Some(2));
        assert_eq!(kill.to_string(), "was killed by signal SIGKILL");
        // Without a signal, the first non-zero exit reaped.
        let round = [(0, Ending::Code(0)), (2, Ending::Code(3)), (1, Ending::Code(1))];
        assert_eq!(first_failure(&round), Some(1));
        assert_eq!(Ending::Code(3).to_string(), "exited with code 3");
        assert_eq!(first_failure(&[(0, Ending::Code(0))]), None);
        assert_eq!(Ending::Signal(45).to_string(), "was killed by signal 45");
        assert_eq!(Ending::Signal(libc::SIGTERM).shell_code(), 143);
        assert_eq!(Ending::Code(3).shell_code(), 3);
    }
}
