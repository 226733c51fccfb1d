//! How Python calls run: a blocking call on a communicator whose executor
//! (of [`crate::executor`]) has nothing queued runs on the caller's own
//! thread with the GIL released (no hand-over: see [`run`]); every other
//! call on a communicator runs on its executor thread, which owns raw
//! views of the lent arrays, while the calling thread waits with the GIL
//! released, in slices of at most 100 ms between which it checks for
//! signals. The runtime's blocking waits cannot be interrupted, so on
//! Ctrl-C the caller aborts the communicator (the helper's call then fails
//! promptly) and raises `KeyboardInterrupt`; a call on the caller's thread
//! is aborted by [`crate::interrupt`]'s watcher instead.
//!
//! Soundness of lent memory: an operation holds a reference to each array
//! it uses until it has finished (even when the Python request object is
//! dropped first: see [`Orphans`]), and the registry of in-flight ranges
//! refuses to lend memory that an unfinished operation writes, or to lend
//! for writing memory an unfinished operation uses, so the helper threads
//! never hold overlapping Rust borrows.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::{internal, precondition, to_py};
use crate::executor::Lane;
use crate::lent::{Lent, Raw};

/// The communicator a call runs on, and its group's lane.
pub(crate) type On<'a> = (&'a hcomm::Comm, &'a Arc<Lane>);

/// How long a waiting caller keeps the GIL released before it checks for
/// signals.
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// How long an interrupted caller waits for the aborted operation to end.
const ABORT_GRACE: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The outcome of one operation, filled in by the thread that ran it.
pub(crate) struct Slot {
    done: Mutex<Option<hcomm::Result<()>>>,
    cv: Condvar,
    /// Set once `done` is filled: what the waiter spins on.
    finished: std::sync::atomic::AtomicBool,
}

/// How long a waiter spins (yielding) before it sleeps: short calls then
/// cost no wake-up.
const SPIN: Duration = Duration::from_micros(50);

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            done: Mutex::new(None),
            cv: Condvar::new(),
            finished: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn finish(&self, result: hcomm::Result<()>) {
        *lock(&self.done) = Some(result);
        self.finished.store(true, std::sync::atomic::Ordering::Release);
        self.cv.notify_all();
    }

    /// The outcome, once there is one.
    pub(crate) fn outcome(&self) -> Option<hcomm::Result<()>> {
        lock(&self.done).clone()
    }

    /// Waits up to `limit` for the outcome.
    fn wait_for(&self, limit: Duration) -> Option<hcomm::Result<()>> {
        let begun = Instant::now();
        while begun.elapsed() < SPIN.min(limit) {
            if self.finished.load(std::sync::atomic::Ordering::Acquire) {
                return self.outcome();
            }
            std::thread::yield_now();
        }
        let guard = lock(&self.done);
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, limit, |d| d.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        guard.clone()
    }
}

/// Byte ranges lent to unfinished operations: `(operation, range, written)`.
static IN_FLIGHT: Mutex<Vec<(u64, std::ops::Range<usize>, bool)>> = Mutex::new(Vec::new());
static NEXT_OP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn overlaps(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Registers the lends of operation `op`, or says which conflicts.
fn register(op: u64, lends: &[(Raw, bool)]) -> PyResult<()> {
    let mut table = lock(&IN_FLIGHT);
    for (i, (raw, write)) in lends.iter().enumerate() {
        let range = raw.bytes();
        let clash_in_flight = table.iter().any(|(_, r, w)| (*w || *write) && overlaps(r, &range));
        let clash_here = lends[..i]
            .iter()
            .any(|(other, w)| (*w || *write) && overlaps(&other.bytes(), &range));
        if clash_in_flight || clash_here {
            return Err(precondition(format!(
                "an array of {} elements at {:#x} is {} by {}; hint: wait for the request that uses it first, \
                 or pass distinct arrays",
                raw.len,
                raw.addr,
                if *write { "to be written" } else { "read" },
                if clash_here {
                    "another argument of this call"
                } else {
                    "a pending operation that writes it (or reads what this call writes)"
                }
            )));
        }
    }
    table.extend(lends.iter().map(|(raw, w)| (op, raw.bytes(), *w)));
    Ok(())
}

fn unregister(op: u64) {
    lock(&IN_FLIGHT).retain(|(o, _, _)| *o != op);
}

/// Operations whose Python request was dropped before they finished: their
/// arrays stay referenced here until they have, and are released (which
/// needs the GIL) by the next call that starts an operation.
static ORPHANS: Mutex<Vec<Orphan>> = Mutex::new(Vec::new());

/// An unfinished operation and the arrays it uses.
type Orphan = (Arc<Slot>, Vec<Py<PyAny>>);

pub(crate) fn orphan(slot: Arc<Slot>, keep: Vec<Py<PyAny>>) {
    lock(&ORPHANS).push((slot, keep));
}

fn sweep_orphans() {
    let finished: Vec<_> = {
        let mut orphans = lock(&ORPHANS);
        let (done, pending): (Vec<_>, Vec<_>) = orphans.drain(..).partition(|(s, _)| s.outcome().is_some());
        *orphans = pending;
        done
    };
    drop(finished);
}

/// An operation started on an executor thread.
pub(crate) struct Started {
    pub(crate) slot: Arc<Slot>,
    /// The arrays the operation uses, kept alive until it has finished.
    pub(crate) keep: Vec<Py<PyAny>>,
    /// The communicator to abort if the caller is interrupted.
    pub(crate) comm: hcomm::Comm,
}

/// Registers `lends` for a new operation: its number, the raw views in the
/// order of `lends`, and its outcome's slot.
fn lend_all(lends: &[(Lent, bool)]) -> PyResult<(u64, Vec<Raw>, Arc<Slot>)> {
    sweep_orphans();
    let raws: Vec<(Raw, bool)> = lends.iter().map(|(l, w)| (l.raw, *w)).collect();
    let op = NEXT_OP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    register(op, &raws)?;
    Ok((op, raws.iter().map(|(r, _)| *r).collect(), Slot::new()))
}

/// Completes operation `op` with `result`: its lends end, then its slot is
/// filled.
fn complete(op: u64, slot: &Slot, result: hcomm::Result<()>) {
    unregister(op);
    slot.finish(result);
}

fn started(slot: Arc<Slot>, lends: Vec<(Lent, bool)>, comm: &hcomm::Comm) -> Started {
    Started {
        slot,
        keep: lends.into_iter().map(|(l, _)| l.owner).collect(),
        comm: comm.clone(),
    }
}

/// Starts `job` with the arrays `lends` (`true`: written) on the
/// communicator's executor (see [`crate::executor`]).
///
/// `job` receives the raw views in the order of `lends`; it may turn them into
/// slices (the registry guarantees no overlap with a written range).
pub(crate) fn start<F>(on: On<'_>, lends: Vec<(Lent, bool)>, job: F) -> PyResult<Started>
where
    F: FnOnce(&[Raw]) -> hcomm::Result<()> + Send + 'static,
{
    let (op, views, slot) = lend_all(&lends)?;
    let done = Arc::clone(&slot);
    let work: crate::executor::Blocking = Box::new(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&views)))
            .unwrap_or_else(|p| Err(crate::errors::panicked(&*p)));
        complete(op, &done, result);
    });
    let (comm, lane) = on;
    if let Err(e) = crate::executor::submit(comm, lane, crate::executor::Command::Run(work)) {
        unregister(op);
        return Err(internal(&format!("cannot start a thread: {e}")));
    }
    Ok(started(slot, lends, comm))
}

/// Fixes the higher-ranked signature of a posting closure.
fn posting<F>(f: F) -> F
where
    F: for<'s> FnOnce(&'s hcomm::Scope<'s, 'static>) -> hcomm::Result<crate::executor::Req<'s>>,
{
    f
}

/// Posts a non-blocking operation on `comm`'s executor with the arrays
/// `lends` (`true`: written): `post` receives the executor's scope and the
/// raw views in the order of `lends` (it may turn them into slices, as for
/// [`start`]) and returns the request, which the executor completes.
pub(crate) fn start_request<F>(
    comm: &hcomm::Comm,
    lane: &Arc<Lane>,
    lends: Vec<(Lent, bool)>,
    post: F,
) -> PyResult<Started>
where
    F: for<'s> FnOnce(&'s hcomm::Scope<'s, 'static>, &[Raw]) -> hcomm::Result<crate::executor::Req<'s>>
        + Send
        + 'static,
{
    let (op, views, slot) = lend_all(&lends)?;
    let done = Arc::clone(&slot);
    let command = crate::executor::Command::Post(
        Box::new(posting(move |s| post(s, &views))),
        Box::new(move |result| complete(op, &done, result)),
    );
    if let Err(e) = crate::executor::submit(comm, lane, command) {
        unregister(op);
        return Err(internal(&format!("cannot start a thread: {e}")));
    }
    Ok(started(slot, lends, comm))
}

/// Waits for `started` with the GIL released, up to `limit` (`None`: until
/// it finishes), checking for signals every [`SIGNAL_SLICE`]. `Ok(None)`:
/// the limit passed first.
pub(crate) fn wait(py: Python<'_>, started: &Started, limit: Option<Duration>) -> PyResult<Option<hcomm::Result<()>>> {
    let deadline = limit.map(|l| Instant::now() + l);
    loop {
        let slice = deadline.map_or(SIGNAL_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE)
        });
        let slot = &started.slot;
        if let Some(outcome) = py.detach(|| slot.wait_for(slice)) {
            return Ok(Some(outcome));
        }
        if let Err(interrupt) = py.check_signals() {
            let comm = &started.comm;
            comm.abort(&crate::errors::interrupted_reason(comm.rank()));
            // The aborted call fails promptly; its arrays stay referenced
            // by the orphan list should it not.
            let _ = py.detach(|| slot.wait_for(ABORT_GRACE));
            return Err(interrupt);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
    }
}

/// Runs `job` to completion and raises its error: on the caller's thread
/// when the communicator's lane is free (see [`inline`]), else [`start`],
/// then [`wait`] without a limit.
pub(crate) fn run<R, F>(py: Python<'_>, on: On<'_>, lends: Vec<(Lent, bool)>, job: F) -> PyResult<R>
where
    R: Send + 'static,
    F: FnOnce(&[Raw]) -> hcomm::Result<R> + Send + 'static,
{
    let (comm, lane) = on;
    if crate::interrupt::installed() {
        if let Some(turn) = lane.try_enter() {
            let result = inline(py, comm, &lends, job);
            drop(turn);
            return result;
        }
    }
    let out = Arc::new(Mutex::new(None));
    let put = Arc::clone(&out);
    let started = start(on, lends, move |raws| {
        let value = job(raws)?;
        *lock(&put) = Some(value);
        Ok(())
    })?;
    let outcome = wait(py, &started, None);
    finish(started, outcome)?;
    let value = lock(&out).take();
    value.ok_or_else(|| internal("an operation finished without its result"))
}

/// Runs `job` on the caller's thread with the GIL released, the lane's turn
/// held by the caller: no hand-over to another thread, so a short call costs
/// what the runtime's call costs plus the GIL's release. The arrays are
/// registered in flight as for [`start`] and referenced by `lends` until it
/// returns. Ctrl-C meanwhile: [`crate::interrupt`]'s watcher aborts `comm`,
/// the call fails promptly, and Python's pending `KeyboardInterrupt` is
/// raised instead of its error.
fn inline<R, F>(py: Python<'_>, comm: &hcomm::Comm, lends: &[(Lent, bool)], job: F) -> PyResult<R>
where
    R: Send,
    F: FnOnce(&[Raw]) -> hcomm::Result<R> + Send,
{
    let raws: Vec<(Raw, bool)> = lends.iter().map(|(l, w)| (l.raw, *w)).collect();
    let op = NEXT_OP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    register(op, &raws)?;
    let views: Vec<Raw> = raws.iter().map(|(r, _)| *r).collect();
    let watch = crate::interrupt::Watch::new(comm);
    let result = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&views)))
            .unwrap_or_else(|p| Err(crate::errors::panicked(&*p)))
    });
    drop(watch);
    unregister(op);
    match result {
        Ok(value) => Ok(value),
        Err(e) => {
            py.check_signals()?;
            Err(to_py(&e))
        }
    }
}

/// Releases `started`'s arrays once it has finished (else hands them to the
/// orphan list) and turns its outcome into a Python result.
fn finish(started: Started, outcome: PyResult<Option<hcomm::Result<()>>>) -> PyResult<()> {
    if started.slot.outcome().is_none() {
        orphan(Arc::clone(&started.slot), started.keep);
    }
    match outcome? {
        Some(Ok(())) => Ok(()),
        Some(Err(e)) => Err(to_py(&e)),
        None => Err(internal("an unlimited wait returned without an outcome")),
    }
}
