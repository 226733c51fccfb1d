//! Where ranks run: `HCOMM_BIND=core` (the
//! default) splits the cores this process may use into one block of
//! consecutive cores per rank and binds each rank's thread to its block,
//! when no other in-process world runs (as Open MPI binds its ranks by
//! default). On a 2-core machine with 2 ranks that is one core each; on 64
//! cores, 32 each, so threads a rank starts for its own compute (which
//! inherit its binding) still have cores to run on. Ranks that outnumber
//! the cores share them, consecutive ranks on one core, each core running
//! as many ranks as the next or one more (4 ranks on 2 cores: ranks 0 and 1
//! on the first, 2 and 3 on the second); their waits still yield the core
//! on every round. The processes of one job on one host (`process.rs`) are
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

    /// Where each of `ranks` rank threads runs, in rank order, when
    /// `others` rank threads of this process run already, or `None` where
    /// they are not bound (by choice, or other ranks running).
    pub(crate) fn cores(self, ranks: usize, others: usize) -> Option<Placement> {
        if self == Binding::None || ranks < 2 || others > 0 {
            return None;
        }
        split(&allowed_cores()?, ranks)
    }
}

/// Where the ranks of one host run: a block of cores per rank, in rank
/// order, and whether ranks share cores (more ranks than cores: each core
/// then runs the ranks of one consecutive run of ranks, as evenly as they
/// go).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The cores of each rank.
    pub(crate) blocks: Vec<Vec<usize>>,
    /// Whether a core runs more than one rank.
    pub(crate) shared: bool,
}

impl Binding {
    /// The cores of process `here.index` of the `here.count` processes of
    /// a job on this host, which may run on `cores`, and whether it shares
    /// them with another process of the job; `None` where it is not bound:
    /// by choice, alone on the host, or placed already (the processes'
    /// cores differ: a launcher bound them).
    pub(crate) fn process_cores(self, cores: &[usize], here: HostPeers) -> Option<(Vec<usize>, bool)> {
        if self == Binding::None || here.count < 2 || !here.same_cores {
            return None;
        }
        let Placement { blocks, shared } = split(cores, here.count)?;
        blocks.into_iter().nth(here.index).map(|block| (block, shared))
    }
}

/// `cores` split into `parts` blocks of consecutive cores, as even as they
/// can be; with fewer cores than parts, part `r` runs on core
/// `r * cores / parts` (consecutive parts share a core, and the cores' loads
/// differ by at most one part). `None` without cores or parts.
///
/// Ranks that share cores are bound too: left to the scheduler, their times
/// move with where it puts them from one run to the next (BENCHMARKS.md,
/// "Latency and processes").
fn split(cores: &[usize], parts: usize) -> Option<Placement> {
    let n = cores.len();
    if n == 0 || parts == 0 {
        return None;
    }
    let shared = parts > n;
    let blocks = (0..parts)
        .map(|r| {
            if shared {
                vec![cores[r * n / parts]]
            } else {
                cores[r * n / parts..(r + 1) * n / parts].to_vec()
            }
        })
        .collect();
    Some(Placement { blocks, shared })
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
        let own = |blocks: Vec<Vec<usize>>| Some(Placement { blocks, shared: false });
        assert_eq!(split(&[0, 1], 2), own(vec![vec![0], vec![1]]));
        assert_eq!(split(&[0, 1, 2, 3, 4], 2), own(vec![vec![0, 1], vec![2, 3, 4]]));
        assert_eq!(
            split(&[4, 5, 6, 7, 8, 9], 3),
            own(vec![vec![4, 5], vec![6, 7], vec![8, 9]])
        );
        assert_eq!(split(&[], 2), None);
        assert_eq!(split(&[0, 1], 0), None);
        let cores = allowed_cores().expect("the affinity of this process");
        assert!(!cores.is_empty());
        assert_eq!(Binding::None.cores(2, 0), None);
        assert_eq!(Binding::Core.cores(1, 0), None);
        assert_eq!(Binding::Core.cores(2, 2), None);
        if cores.len() >= 2 {
            let p = Binding::Core.cores(2, 0).unwrap();
            assert_eq!(p.blocks.concat(), cores);
            assert!(!p.shared);
        }
        let p = Binding::Core.cores(cores.len() + 1, 0).unwrap();
        assert!(p.shared);
        assert_eq!(p.blocks.len(), cores.len() + 1);
        assert!(p.blocks.iter().all(|b| b.len() == 1 && cores.contains(&b[0])));
    }

    #[test]
    fn ranks_that_outnumber_the_cores_share_them_evenly_in_runs() {
        let shared = |blocks: Vec<Vec<usize>>| Some(Placement { blocks, shared: true });
        assert_eq!(split(&[0, 1], 4), shared(vec![vec![0], vec![0], vec![1], vec![1]]));
        assert_eq!(split(&[0, 1], 3), shared(vec![vec![0], vec![0], vec![1]]));
        assert_eq!(
            split(&[2, 5], 5),
            shared(vec![vec![2], vec![2], vec![2], vec![5], vec![5]])
        );
        assert_eq!(split(&[7], 3), shared(vec![vec![7], vec![7], vec![7]]));
        // No core runs more than one rank above another.
        for n in 1..6 {
            for parts in n + 1..20 {
                let cores: Vec<usize> = (0..n).collect();
                let p = split(&cores, parts).unwrap();
                let load = |c: usize| p.blocks.iter().filter(|b| b[0] == c).count();
                let (lo, hi) = (0..n)
                    .map(load)
                    .fold((usize::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
                assert!(hi - lo <= 1 && lo >= 1, "{n} cores, {parts} ranks: {:?}", p.blocks);
                assert!(
                    p.blocks.windows(2).all(|w| w[0][0] <= w[1][0]),
                    "runs of ranks: {:?}",
                    p.blocks
                );
            }
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
        // Process index of count: its block, and whether it is shared.
        let placed = [
            (0, 2, &[0, 1][..], false),
            (1, 2, &[2, 3, 4], false),
            (4, 5, &[4], false),
            (0, 6, &[0], true),
            (1, 6, &[0], true),
            (5, 6, &[4], true),
        ];
        for (index, count, block, shared) in placed {
            assert_eq!(
                Binding::Core.process_cores(&cores, here(index, count, true)),
                Some((block.to_vec(), shared)),
                "process {index} of {count}"
            );
        }
        assert_eq!(Binding::Core.process_cores(&cores, here(1, 2, false)), None);
        assert_eq!(Binding::Core.process_cores(&cores, here(0, 1, true)), None);
        assert_eq!(Binding::None.process_cores(&cores, here(1, 2, true)), None);
    }
}
