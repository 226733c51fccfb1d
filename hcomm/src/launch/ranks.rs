//! Ranks as threads of this process: the runner behind [`crate::host::run`]
//! and the device backends' `run` functions.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::bind::{bind_current_thread, Binding};
use crate::error::{Error, Result};

/// Runs `rank_main(rank, input)` for every input, each on a thread of its
/// own (`hcomm-rank-{rank}`), and returns the values in rank order, or the
/// first error in rank order (the caller may prefer a root cause). Each
/// thread runs on cores of its own where `HCOMM_BIND` allows and there are
/// enough (see `bind.rs`). With `HCOMM_TRACE` set, the threads record into the process's trace, written
/// when they are done (see [`crate::trace`]).
pub(crate) fn run_rank_threads<T, R>(
    inputs: impl IntoIterator<Item = T>,
    rank_main: impl Fn(usize, T) -> Result<R> + Sync,
) -> Result<Vec<R>>
where
    T: Send,
    R: Send,
{
    let rank_main = &rank_main;
    let trace = crate::trace::EnvTrace::get();
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
                        match trace {
                            Some(t) => t.record(|| rank_main(rank, input)),
                            None => rank_main(rank, input),
                        }
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
    let mut values = Vec::with_capacity(results.len());
    let mut first_error = None;
    for r in results {
        match r {
            Ok(v) => values.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // the trace is written even when the run failed; the run's error wins
    let written = trace.map_or(Ok(()), crate::trace::EnvTrace::write);
    match first_error {
        None => written.map(|()| values),
        Some(e) => Err(e),
    }
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
