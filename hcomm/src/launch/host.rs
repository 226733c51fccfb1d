//! The host backend's entry points: ranks as threads of this process.

use std::sync::Arc;

use crate::backend::host::{self as backend, HostWorld};
use crate::backend::liveness::Presence;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::launch::ranks::{guard_rank, run_rank_threads};
use crate::options::CommOptions;
use crate::topology::Placement;

/// Runs `f` on `world` in-process ranks (one thread each) with options from
/// the environment ([`CommOptions::from_env`]) and returns the ranks'
/// results in rank order.
///
/// When a rank's `f` returns `Err` or panics, the operations other ranks are
/// waiting on it fail with [`Error::PeerFailed`] instead of hanging, and
/// `run` returns the root cause: the first error that is not itself a
/// consequence of another rank's failure.
///
/// ```
/// let sums = hcomm::host::run(4, |comm| {
///     let mut x = [comm.rank() as f32 + 1.0];
///     comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
///     Ok(x[0])
/// })
/// .unwrap();
/// assert_eq!(sums, vec![10.0; 4]);
/// ```
pub fn run<R, F>(world: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    run_with(world, &CommOptions::from_env()?, f)
}

/// [`run`] with explicit options.
pub fn run_with<R, F>(world: usize, options: &CommOptions, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    let (host_world, ranks) = rank_handles(world, options)?;
    run_rank_threads(ranks, |rank, (comm, presence)| {
        guard_rank(rank, |e| presence.fail(e), || f(&comm))
    })
    // The failure recorded first in time that is a root cause.
    .map_err(|e| host_world.liveness.first_failure().map_or(e, |(_, root)| root))
}

/// Communicators for `world` in-process ranks, to be driven by threads of
/// the caller's own (one communicator per thread). A rank counts as finished
/// when the last handle of its communicator (and of communicators split from
/// it) is dropped.
pub fn comms(world: usize, options: &CommOptions) -> Result<Vec<Comm>> {
    Ok(rank_handles(world, options)?.1.into_iter().map(|(c, _)| c).collect())
}

type RankHandles = (Arc<HostWorld>, Vec<(Comm, Arc<Presence>)>);

fn rank_handles(world: usize, options: &CommOptions) -> Result<RankHandles> {
    if world == 0 {
        return Err(Error::precondition("a world needs at least one rank"));
    }
    let topology = options.topology.clone().detected(Placement::Threads, world);
    let (host_world, ranks) = backend::world(world, &topology);
    let ranks = ranks
        .into_iter()
        .map(|(b, presence)| (Comm::from_backend(b, options), presence))
        .collect();
    Ok((host_world, ranks))
}
