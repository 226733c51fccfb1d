//! Ranks as threads of this process: the runner behind [`crate::host::run`]
//! and the device backends' `run` functions.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::bind::{bind_current_thread, Binding};
use crate::error::{Error, Result};

/// Runs `rank_main(rank, input)` for every input, each on a thread of its
/// own (`hcomm-rank-{rank}`), and returns the values in rank order, or the
/// first error in rank order (the caller may prefer a root cause). Each
/// thread runs on cores of its own where `HCOMM_BIND` allows and there are
/// enough (see `bind.rs`). Each thread reports its `tracing` spans and
/// events to the subscriber of the calling thread (its own default, else the
/// global one): the library installs none.
pub(crate) fn run_rank_threads<T, R>(
    inputs: impl IntoIterator<Item = T>,
    rank_main: impl Fn(usize, T) -> Result<R> + Sync,
) -> Result<Vec<R>>
where
    T: Send,
    R: Send,
{
    let rank_main = &rank_main;
    let dispatch = tracing::dispatcher::get_default(tracing::Dispatch::clone);
    let dispatch = &dispatch;
    let inputs: Vec<T> = inputs.into_iter().collect();
    // Rank threads of other worlds of this process (those of this one are
    // counted already, where it is a host world).
    let others = crate::backend::host::wait::rank_threads().saturating_sub(inputs.len());
    // Counted now, while this thread still has the process's cores.
    crate::backend::host::wait::cores();
    let placement = Binding::from_env()?.cores(inputs.len(), others);
    let placement = placement.as_ref();
    let results: Vec<Result<R>> = std::thread::scope(|s| {
        let threads: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(rank, input)| {
                std::thread::Builder::new()
                    .name(format!("hcomm-rank-{rank}"))
                    .spawn_scoped(s, move || {
                        if let Some(p) = placement {
                            if bind_current_thread(&p.blocks[rank]) && !p.shared {
                                crate::backend::host::wait::note_own_core();
                            }
                        }
                        tracing::dispatcher::with_default(dispatch, || rank_main(rank, input))
                    })
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
    results.into_iter().collect()
}

/// Runs `body` as rank `rank`: a panic becomes [`Error::Panicked`], and an
/// error (or panic) is handed to `report`, which tells the rank's peers to
/// stop waiting on it.
pub(crate) fn guard_rank<R>(rank: usize, report: impl FnOnce(&Error), body: impl FnOnce() -> Result<R>) -> Result<R> {
    let result = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".to_owned());
        Err(Error::Panicked { rank, message })
    });
    if let Err(e) = &result {
        report(e);
    }
    result
}
