//! Where ranks run: `HCOMM_BIND=core` (the
//! default) splits the cores this process may use into one block of
//! consecutive cores per rank and binds each rank's thread to its block,
//! when the ranks are no more than the cores and no other in-process world
//! runs (as Open MPI binds its ranks by default). On a 2-core machine with 2
//! ranks that is one core each; on 64 cores, 32 each, so threads a rank
//! starts for its own compute (which inherit its binding) still have cores
//! to run on. The processes of one job on one host (`process.rs`) are
//! split the same way, in rank order, when all of them may run on the same
//! cores (a launcher that placed them already is left alone); the thread
//! that joined the job is bound. `HCOMM_BIND=none` leaves placement to the
//! scheduler.
//!
//! Binding matters because a waiting rank spins: two ranks that the
//! scheduler puts on one core spin in turn while the peer each waits for
//! cannot run, and a small collective then costs a sleep and a wake-up per
//! step. A rank bound to cores of its own is never on its peer's core, so
//! its waits spin without handing the core over (see
//! `backend/host/wait.rs`).

use crate::backend::host::proc::HostPeers;
use crate::error::{Error, Result};

/// How rank threads are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// One core per rank, where there are enough.
    Core,
    /// Wherever the scheduler puts them.
    None,
}

impl Binding {
    /// `HCOMM_BIND`, `core` when unset.
    pub(crate) fn from_env() -> Result<Binding> {
        match std::env::var("HCOMM_BIND") {
            Err(std::env::VarError::NotPresent) => Ok(Binding::Core),
            Ok(v) => Binding::parse(&v),
            Err(e) => Err(Error::Config {
                message: format!("`HCOMM_BIND` cannot be read: {e}"),
            }),
        }
    }

    fn parse(v: &str) -> Result<Binding> {
        match v.trim().to_ascii_lowercase().as_str() {
            "core" | "" => Ok(Binding::Core),
            "none" => Ok(Binding::None),
            _ => Err(Error::Config {
                message: format!("`HCOMM_BIND={v}`: expected `core` or `none`"),
            }),
        }
    }

    /// The cores of each of `ranks` rank threads, in rank order, when
    /// `others` rank threads of this process run already, or `None` where
    /// they are not bound (by choice, too few cores, or other ranks running).
    pub(crate) fn cores(self, ranks: usize, others: usize) -> Option<Vec<Vec<usize>>> {
        if self == Binding::None || ranks < 2 || others > 0 {
            return None;
        }
        split(&allowed_cores()?, ranks)
    }
}

impl Binding {
    /// The cores of process `here.index` of the `here.count` processes of
    /// a job on this host, which may run on `cores`, or `None` where it is
    /// not bound: by choice, alone on the host, placed already (the
    /// processes' cores differ: a launcher bound them), or with fewer cores
    /// than processes.
    pub(crate) fn process_cores(self, cores: &[usize], here: HostPeers) -> Option<Vec<usize>> {
        if self == Binding::None || here.count < 2 || !here.same_cores {
            return None;
        }
        split(cores, here.count)?.into_iter().nth(here.index)
    }
}

/// `cores` split into `parts` blocks of consecutive cores, as even as they
/// can be; `None` with fewer cores than parts.
fn split(cores: &[usize], parts: usize) -> Option<Vec<Vec<usize>>> {
    (parts <= cores.len()).then(|| {
        (0..parts)
            .map(|r| cores[r * cores.len() / parts..(r + 1) * cores.len() / parts].to_vec())
            .collect()
    })
}

/// The cores this process may run on.
pub(crate) fn allowed_cores() -> Option<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) };
    if rc != 0 {
        return None;
    }
    let max = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    // SAFETY: `set` was filled in by the kernel; `c < CPU_SETSIZE`.
    Some((0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Binds the calling thread to `cores`; whether it worked.
pub(crate) fn bind_current_thread(cores: &[usize]) -> bool {
    // SAFETY: as in `allowed_cores`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores {
        // SAFETY: `set` is a valid `cpu_set_t`; `CPU_SET` ignores cores
        // past its size.
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is the
    // calling thread.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hcomm_bind_parses_and_rejects_with_a_reason() {
        assert_eq!(Binding::parse("core").unwrap(), Binding::Core);
        assert_eq!(Binding::parse(" None ").unwrap(), Binding::None);
        let e = Binding::parse("socket").unwrap_err().to_string();
        assert!(e.contains("`HCOMM_BIND=socket`: expected `core` or `none`"), "{e}");
    }

    #[test]
    fn the_cores_are_split_into_one_block_per_rank() {
        assert_eq!(split(&[0, 1], 2), Some(vec![vec![0], vec![1]]));
        assert_eq!(split(&[0, 1, 2, 3, 4], 2), Some(vec![vec![0, 1], vec![2, 3, 4]]));
        assert_eq!(
            split(&[4, 5, 6, 7, 8, 9], 3),
            Some(vec![vec![4, 5], vec![6, 7], vec![8, 9]])
        );
        assert_eq!(split(&[0, 1], 3), None);
        let cores = allowed_cores().expect("the affinity of this process");
        assert!(!cores.is_empty());
        assert_eq!(Binding::None.cores(2, 0), None);
        assert_eq!(Binding::Core.cores(1, 0), None);
        assert_eq!(Binding::Core.cores(cores.len() + 1, 0), None);
        assert_eq!(Binding::Core.cores(2, 2), None);
        if cores.len() >= 2 {
            let blocks = Binding::Core.cores(2, 0).unwrap();
            assert_eq!(blocks.concat(), cores);
        }
    }

    #[test]
    fn processes_of_one_host_take_one_block_each_unless_placed_already() {
        let here = |index, count, same_cores| HostPeers {
            index,
            count,
            same_cores,
        };
        let cores = [0, 1, 2, 3, 4];
        assert_eq!(Binding::Core.process_cores(&cores, here(0, 2, true)), Some(vec![0, 1]));
        assert_eq!(
            Binding::Core.process_cores(&cores, here(1, 2, true)),
            Some(vec![2, 3, 4])
        );
        assert_eq!(Binding::Core.process_cores(&cores, here(4, 5, true)), Some(vec![4]));
        assert_eq!(Binding::Core.process_cores(&cores, here(0, 6, true)), None);
        assert_eq!(Binding::Core.process_cores(&cores, here(1, 2, false)), None);
        assert_eq!(Binding::Core.process_cores(&cores, here(0, 1, true)), None);
        assert_eq!(Binding::None.process_cores(&cores, here(1, 2, true)), None);
    }
}
