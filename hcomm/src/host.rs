//! The host backend's entry points: ranks as threads of this process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::backend::host::{self as backend, HostWorld, Presence};
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::options::CommOptions;

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
    let f = &f;
    let results: Vec<Result<R>> = std::thread::scope(|s| {
        let threads: Vec<_> = ranks
            .into_iter()
            .enumerate()
            .map(|(rank, (comm, presence))| {
                std::thread::Builder::new()
                    .name(format!("hcomm-rank-{rank}"))
                    .spawn_scoped(s, move || run_rank(rank, &comm, &presence, f))
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .map(|(rank, t)| match t {
                Ok(handle) => handle.join().unwrap_or_else(|_| {
                    Err(Error::Panicked {
                        rank,
                        message: "the rank's thread could not be joined".into(),
                    })
                }),
                Err(e) => Err(Error::Backend {
                    backend: "host",
                    message: format!("cannot start the thread of rank {rank}: {e}"),
                }),
            })
            .collect()
    });
    let mut values = Vec::with_capacity(world);
    let mut first_error = None;
    for r in results {
        match r {
            Ok(v) => values.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(values),
        // The failure recorded first in time that is a root cause.
        Some(e) => Err(host_world.first_failure().map_or(e, |(_, root)| root)),
    }
}

fn run_rank<R>(
    rank: usize,
    comm: &Comm,
    presence: &Arc<Presence>,
    f: &(impl Fn(&Comm) -> Result<R> + Sync),
) -> Result<R> {
    let outcome = catch_unwind(AssertUnwindSafe(|| f(comm)));
    let result = match outcome {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".to_owned());
            Err(Error::Panicked { rank, message })
        }
    };
    if let Err(e) = &result {
        presence.fail(e);
    }
    result
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
    let (host_world, ranks) = backend::world(world, &options.topology);
    let ranks = ranks
        .into_iter()
        .map(|(b, presence)| (Comm::from_backend(b, options), presence))
        .collect();
    Ok((host_world, ranks))
}
