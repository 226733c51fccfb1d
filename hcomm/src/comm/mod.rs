//! The communicator handle.

mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub(crate) use self::worker::{Task, Worker};
use crate::backend::{Backend, OpId, OpIds, P2pOp};
use crate::element::{DataType, ReduceOp};
use crate::entry::{EntryCheck, Site};
use crate::error::{Error, Result};
use crate::header::{CollHeader, Collective, Exchange, ShapeNote};
use crate::options::CommOptions;
use crate::select::{policy as policy_for, Algorithm, AlgorithmTable, Crossovers};
use crate::topology::Topology;

/// A communicator: one rank's handle on a group of ranks.
///
/// Cheap to clone (clones share the group); `Send + Sync`. The group's
/// backend resources are released when the last handle and the last
/// in-flight operation that uses them are gone.
///
/// # One call at a time
///
/// A communicator runs one call at a time: a call (a collective,
/// `send`/`recv`, `batch`, `split`, posting `isend`/`irecv`, waiting a
/// request, a `tp`/`moe` function, a `comm_schedule!` call) made while
/// another thread is in a call on the same communicator, through this
/// handle or a clone, returns [`Error::Precondition`] ("another thread is in
/// a call on it") at once and does nothing. Calls from the thread in the
/// call (a collective running its schedule) go through. Requests in flight
/// are not calls: another thread may call while they are pending. Which
/// calls pair up across ranks is the order each rank makes them in; a
/// program that calls from several threads must order them the same way on
/// every rank (one thread per communicator, or a subgroup per thread).
///
/// # A timeout ends the communicator
///
/// A call that times out aborts the group (as [`Comm::abort`] does) with a
/// reason naming this rank and the operation: every later call on the
/// communicator, on every rank, fails with [`Error::Aborted`], so a rank
/// that arrives after its peers gave up gets an error, never a result its
/// peers did not compute with it.
#[derive(Clone)]
pub struct Comm {
    pub(crate) inner: Arc<Inner>,
    /// Whose messages this handle's point-to-point calls carry: the user's,
    /// or (for a handle a built-in collective passes to its schedule) that
    /// collective's, which never match user messages.
    pub(crate) traffic: Option<CollHeader>,
    /// The array shape this handle's collectives add to their header (see
    /// [`Comm::shaped`]); `None` for the user's handles.
    shape: Option<ShapeNote>,
}

/// What the last call of one collective chose and ran.
#[derive(Default)]
struct LastCall {
    chosen: Option<Algorithm>,
    ran: crate::select::Ran,
}

pub(crate) struct Inner {
    pub(crate) backend: Arc<dyn Backend>,
    /// The backend's rank and group size, which never change: read on every
    /// call, so kept here instead of asked of the backend each time.
    rank: usize,
    world: usize,
    timeout_nanos: AtomicU64,
    /// The algorithm forced for each collective (as [`encode`] writes
    /// it): read on every call without a lock.
    forced: [AtomicU8; Collective::ALL.len()],
    /// What the last call of each collective chose and ran (see
    /// `last_algorithm` and `last_algorithms`).
    last: Mutex<[LastCall; Collective::ALL.len()]>,
    /// The topology algorithm choice sees: the backend's, or the one its
    /// launcher detected ([`Comm::from_backend_on`]).
    topology: Topology,
    /// The cost model's crossovers for the topology, computed at the first
    /// collective (`None` inside: the topology has no model).
    crossovers: OnceLock<Option<Crossovers>>,
    segment_bytes: usize,
    coll_seq: AtomicU64,
    split_seq: AtomicU64,
    /// `comm_schedule!` calls so far (their entry check's sequence).
    schedule_seq: AtomicU64,
    /// The entry check of `comm_schedule!` calls.
    pub(crate) entries: EntryCheck,
    /// Subgroups created by `comm_schedule!` `over` clauses, by key.
    groups: Mutex<HashMap<String, Comm>>,
    /// The helper thread of non-blocking collectives, once started.
    pub(crate) nonblocking: Mutex<Option<Worker>>,
    /// The token of the thread in a call on this communicator (0: none);
    /// see `Comm::call`.
    owner: AtomicU64,
    /// Whether a call timed out and aborted the group.
    timed_out: std::sync::atomic::AtomicBool,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Comm>();
};

impl Drop for Comm {
    fn drop(&mut self) {
        // A thread that panics holding a handle makes the rank fail (not
        // finish) when its last handle goes, whichever thread drops it.
        if std::thread::panicking() {
            if let Some(presence) = self.inner.backend.capabilities().presence {
                presence.note_panic();
            }
        }
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("backend", &self.backend_name())
            .field("rank", &self.rank())
            .field("world", &self.world())
            .finish_non_exhaustive()
    }
}

impl Comm {
    /// A handle whose point-to-point calls are messages of collective
    /// `header`, for built-in collectives written as schedules.
    pub(crate) fn for_collective(&self, header: &CollHeader) -> Comm {
        Comm {
            inner: Arc::clone(&self.inner),
            traffic: Some(*header),
            shape: None,
        }
    }

    /// A handle whose collectives carry `shape` in their header, so ranks
    /// that pass arrays of different shapes (of equal element counts
    /// included) get [`Error::Mismatch`] naming both shapes, without an
    /// exchange of their own. Backends that compare no headers (the device
    /// libraries check counts themselves) get `None`: the caller compares
    /// shapes another way.
    #[cfg_attr(
        not(feature = "ndarray"),
        allow(dead_code, reason = "tp's ndarray operations are its callers")
    )]
    pub(crate) fn shaped(&self, shape: &[usize]) -> Option<Comm> {
        if self.inner.backend.native_collectives() {
            return None;
        }
        Some(Comm {
            inner: Arc::clone(&self.inner),
            traffic: self.traffic,
            shape: Some(ShapeNote::new(shape)),
        })
    }

    pub(crate) fn from_backend(backend: Arc<dyn Backend>, options: &CommOptions) -> Comm {
        let topology = backend.topology();
        Comm::from_backend_on(backend, options, topology)
    }

    /// [`Comm::from_backend`] choosing algorithms for `topology` rather than
    /// the backend's (a topology its launcher detected after connecting).
    pub(crate) fn from_backend_on(backend: Arc<dyn Backend>, options: &CommOptions, topology: Topology) -> Comm {
        Comm {
            traffic: None,
            shape: None,
            inner: Arc::new(Inner {
                rank: backend.rank(),
                world: backend.world(),
                backend,
                timeout_nanos: AtomicU64::new(duration_nanos(options.timeout)),
                forced: std::array::from_fn(|i| AtomicU8::new(encode(options.algorithms.get(Collective::ALL[i])))),
                last: Mutex::new(Default::default()),
                topology,
                crossovers: OnceLock::new(),
                segment_bytes: options.segment_bytes,
                coll_seq: AtomicU64::new(0),
                split_seq: AtomicU64::new(0),
                schedule_seq: AtomicU64::new(0),
                entries: EntryCheck::default(),
                groups: Mutex::new(HashMap::new()),
                nonblocking: Mutex::new(None),
                owner: AtomicU64::new(0),
                timed_out: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    fn options(&self) -> CommOptions {
        CommOptions {
            timeout: self.timeout(),
            algorithms: {
                let mut table = AlgorithmTable::default();
                for c in Collective::ALL {
                    table.set(c, self.forced(c));
                }
                table
            },
            topology: self.topology(),
            segment_bytes: self.inner.segment_bytes,
        }
    }

    /// Whether two handles refer to the same communicator.
    pub fn same_group(&self, other: &Comm) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// This rank, in `0..world()`.
    #[inline]
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of ranks in the group.
    #[inline]
    pub fn world(&self) -> usize {
        self.inner.world
    }

    /// The backend's name: `host`, `hccl` or `nccl`.
    pub fn backend_name(&self) -> &'static str {
        self.inner.backend.name()
    }

    /// The group's topology as used for algorithm selection.
    pub fn topology(&self) -> Topology {
        self.inner.topology.clone()
    }

    /// How long any wait on this communicator may block.
    #[inline]
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.inner.timeout_nanos.load(Ordering::Relaxed))
    }

    /// Changes the wait limit for this communicator (every handle of it),
    /// at most [`crate::options::MAX_TIMEOUT`] (longer limits are capped).
    pub fn set_timeout(&self, timeout: Duration) {
        self.inner
            .timeout_nanos
            .store(duration_nanos(timeout), Ordering::Relaxed);
    }

    /// The algorithm forced for `collective`, if any.
    fn forced(&self, collective: Collective) -> Option<Algorithm> {
        decode(self.inner.forced[collective.index()].load(Ordering::Relaxed))
    }

    /// Forces `algorithm` for `collective` on this communicator, or with
    /// `None` returns the choice to the selection policy.
    ///
    /// Every rank must make the same choice. An algorithm that does not
    /// serve `collective` is an [`Error::Config`].
    pub fn set_algorithm(&self, collective: Collective, algorithm: Option<Algorithm>) -> Result<()> {
        if let Some(a) = algorithm {
            if !Algorithm::for_collective(collective).contains(&a) {
                return Err(Error::Config {
                    message: format!("`{a}` is not an algorithm of `{collective}`"),
                });
            }
        }
        self.inner.forced[collective.index()].store(encode(algorithm), Ordering::Relaxed);
        Ok(())
    }

    /// The algorithm this communicator uses for `collective` on messages of
    /// `bytes` bytes per rank ([`Algorithm::Library`] on device backends,
    /// whose library chooses).
    pub fn algorithm(&self, collective: Collective, bytes: usize) -> Algorithm {
        if self.inner.backend.native_collectives() {
            return Algorithm::Library;
        }
        let forced = self.forced(collective);
        let world = self.world();
        let board = self
            .inner
            .backend
            .capabilities()
            .board
            .map(crate::backend::Board::capacity);
        let topology = self.topology();
        let model = self
            .inner
            .crossovers
            .get_or_init(|| topology.machine().and_then(|m| Crossovers::new(&m, world)));
        let chosen = || policy_for(collective, &topology, world, bytes, board, model.as_ref());
        match forced {
            Some(a) if a.runs(world, bytes, board) => a,
            Some(a) => {
                let chosen = chosen();
                tracing::warn!(
                    collective = collective.name(),
                    forced = a.name(),
                    chosen = chosen.name(),
                    world,
                    bytes,
                    "forced algorithm cannot run this call (world size, or no board of that size); using the policy's choice"
                );
                chosen
            }
            None => chosen(),
        }
    }

    /// The algorithm the last call of `collective` on this communicator used.
    pub fn last_algorithm(&self, collective: Collective) -> Option<Algorithm> {
        self.inner.last.lock().ok().and_then(|l| l[collective.index()].chosen)
    }

    /// The algorithms the last call of `collective` on this communicator
    /// ran, in order. Usually the one [`Comm::last_algorithm`] names; where
    /// an algorithm hands part of the work to another, both: a ring
    /// all-reduce whose tail (fewer elements than ranks) goes through
    /// halving-doubling is `[Ring, HalvingDoubling]`, a halving-doubling
    /// all-reduce of a message small enough to combine whole vectors is
    /// `[RecursiveDoubling]`. Empty before the first call.
    pub fn last_algorithms(&self, collective: Collective) -> Vec<Algorithm> {
        self.inner
            .last
            .lock()
            .map(|l| l[collective.index()].ran.to_vec())
            .unwrap_or_default()
    }

    /// Records the algorithm a call of `collective` chose and, where it
    /// completed, what it ran (a failed call leaves the last completed
    /// call's).
    pub(crate) fn record_call(&self, collective: Collective, chosen: Algorithm, ran: Option<crate::select::Ran>) {
        if let Ok(mut l) = self.inner.last.lock() {
            let last = &mut l[collective.index()];
            last.chosen = Some(chosen);
            if let Some(ran) = ran {
                last.ran = ran;
            }
        }
    }

    pub(crate) fn segment_bytes(&self) -> usize {
        self.inner.segment_bytes
    }

    /// Runs `f` as the one call in flight on this communicator (see "One
    /// call at a time" above): `Err(Precondition)` at once when another
    /// thread is in a call on it; a call from the thread already in one
    /// (a collective running its schedule, a library call made of several)
    /// goes through. A timeout out of `f` aborts the group (see "A timeout
    /// ends the communicator").
    pub(crate) fn call<R>(&self, what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let me = thread_token();
        let owner = &self.inner.owner;
        let release = match owner.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(Release(owner)),
            Err(current) if current == me => None,
            Err(_) => {
                return Err(Error::precondition(format!(
                    "{what} on rank {} of a {}-rank `{}` communicator: another thread is in a call on it; \
                     hint: a communicator runs one call at a time, use it from one thread or give each thread a \
                     subgroup of its own",
                    self.rank(),
                    self.world(),
                    self.backend_name()
                )))
            }
        };
        let result = f();
        drop(release);
        if let Err(Error::Timeout { operation, limit, .. }) = &result {
            self.poison(operation, *limit);
        }
        result
    }

    /// Aborts the group after this rank's call `operation` timed out, once.
    fn poison(&self, operation: &str, limit: Duration) {
        if self.inner.timed_out.swap(true, Ordering::AcqRel) {
            return;
        }
        let reason = format!(
            "rank {} timed out in {operation} (limit {limit:?}); the communicator is unusable from now on",
            self.rank()
        );
        tracing::warn!(comm.rank = self.rank(), operation, "timeout aborts the communicator");
        self.inner.backend.abort(&reason);
    }

    /// Fails every pending and future operation of the group on every rank
    /// with [`Error::Aborted`].
    pub fn abort(&self, reason: &str) {
        tracing::debug!(comm.rank = self.rank(), reason, "abort");
        self.inner.backend.abort(reason);
    }

    /// This rank as the entry check of `comm_schedule!` calls sees it.
    #[inline]
    pub(crate) fn entry_site(&self) -> Site<'_> {
        Site {
            check: &self.inner.entries,
            backend: &*self.inner.backend,
            rank: self.inner.rank,
            world: self.inner.world,
            timeout: self.timeout(),
        }
    }

    /// The place of a `comm_schedule!` call among this communicator's.
    pub(crate) fn next_schedule_call(&self) -> u64 {
        self.inner.schedule_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// The header of this rank's next collective, after checking that every
    /// rank that already entered it called the same thing.
    pub(crate) fn enter_collective(
        &self,
        kind: Collective,
        dtype: DataType,
        count: Option<usize>,
        op: Option<ReduceOp>,
        root: Option<usize>,
        exchange: Option<Exchange>,
    ) -> Result<CollHeader> {
        let header = CollHeader {
            seq: self.inner.coll_seq.fetch_add(1, Ordering::Relaxed),
            kind,
            dtype,
            count: count.map(|c| c as u64),
            op,
            root: root.map(|r| r as u32),
            exchange,
            shape: self.shape,
        };
        self.inner.backend.enter_collective(&header)?;
        Ok(header)
    }

    /// Posts `ops` together and waits for all of them.
    ///
    /// # Safety
    ///
    /// The buffer contract of [`Backend::post`] until this returns.
    pub(crate) unsafe fn run_ops(&self, ops: &[P2pOp], what: &str) -> Result<()> {
        // SAFETY: forwarded from the caller.
        self.call(what, || unsafe { self.run_ops_now(ops, what) })
    }

    /// [`Comm::run_ops`] inside the call already taken.
    ///
    /// # Safety
    ///
    /// As [`Comm::run_ops`].
    unsafe fn run_ops_now(&self, ops: &[P2pOp], what: &str) -> Result<()> {
        let mut ids = OpIds::new();
        #[cfg(test)]
        crate::collective::conformance::note(ops);
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.backend.post_to_wait(ops, &mut ids)? };
        let posted = Posted { comm: self, ids: &ids };
        let result = self.inner.backend.wait(posted.ids, self.timeout(), what);
        // `wait` released every op; only a panic out of it needs the guard.
        std::mem::forget(posted);
        result
    }

    /// Posts `ops` and returns their ids; they must be waited or cancelled.
    ///
    /// # Safety
    ///
    /// The buffer contract of [`Backend::post`].
    pub(crate) unsafe fn post_ops(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        self.call("posting a request", || {
            #[cfg(test)]
            crate::collective::conformance::note(ops);
            // SAFETY: forwarded from the caller.
            unsafe { self.inner.backend.post(ops, ids) }
        })
    }

    /// Waits for posted ops; on any error (another thread in a call
    /// included) every op in `ids` is released.
    pub(crate) fn wait_ids(&self, ids: &[OpId], what: &str) -> Result<()> {
        let mut waited = false;
        let result = self.call(what, || {
            waited = true;
            self.inner.backend.wait(ids, self.timeout(), what)
        });
        if !waited {
            // The guard refused before `wait` ran: release the ops as `wait`
            // would have, so no buffer stays lent past this error.
            self.cancel_ids(ids);
        }
        result
    }

    pub(crate) fn test_id(&self, id: OpId) -> Result<bool> {
        self.inner.backend.test(id)
    }

    pub(crate) fn cancel_ids(&self, ids: &[OpId]) {
        self.inner.backend.cancel(ids);
    }

    /// Splits the group: ranks passing the same `color` form one new
    /// communicator, ordered by `key` then by rank. A rank passing `None`
    /// joins none and gets `Ok(None)`. Collective over this communicator.
    /// Where this communicator's processes share a board in memory (one
    /// host), each new communicator gets a board of its own: its members
    /// exchange a few messages, each waiting at most the timeout.
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Comm>> {
        self.call("split", || self.split_now(color, key))
    }

    fn split_now(&self, color: Option<u32>, key: i64) -> Result<Option<Comm>> {
        let span = tracing::debug_span!("split", comm.rank = self.rank(), color, key);
        let _e = span.enter();
        let mine = [color.map_or(-1, i64::from), key];
        let mut all = vec![0i64; 2 * self.world()];
        self.exchange(Exchange::Split, &mine, &mut all)?;
        let n = self.inner.split_seq.fetch_add(1, Ordering::Relaxed);
        let Some(color) = color else {
            return Ok(None);
        };
        let mut members: Vec<(i64, usize)> = (0..self.world())
            .filter(|&r| all[2 * r] == i64::from(color))
            .map(|r| (all[2 * r + 1], r))
            .collect();
        members.sort_unstable();
        let members: Vec<usize> = members.into_iter().map(|(_, r)| r).collect();
        let backend = self
            .inner
            .backend
            .split(&format!("split#{n}/{color}"), &members, self.timeout())?;
        Ok(Some(Comm::from_backend(backend, &self.options())))
    }

    /// The subgroup `members` (ranks of this communicator; index = new rank),
    /// created on first use under `key` and then reused. Every member must
    /// call it with the same `key` and `members`; no message is exchanged.
    /// A subgroup is a communicator of its own (its own collective order and
    /// message channels), even when it holds every rank.
    ///
    /// A member out of range, a repeated member, or a calling rank that is
    /// not a member is an [`Error::Precondition`] naming it, at once, on
    /// every backend.
    pub fn subgroup(&self, key: &str, members: &[usize]) -> Result<Comm> {
        crate::backend::check_members(self.rank(), self.world(), members)?;
        let cache_key = format!("{key}{members:?}");
        let mut groups = self
            .inner
            .groups
            .lock()
            .map_err(|_| Error::precondition("subgroup cache poisoned"))?;
        if let Some(c) = groups.get(&cache_key) {
            return Ok(c.clone());
        }
        let backend = self.inner.backend.subgroup(&cache_key, members)?;
        let comm = Comm::from_backend(backend, &self.options());
        groups.insert(cache_key, comm.clone());
        Ok(comm)
    }

    /// Checks that `peer` is a rank of this communicator.
    pub(crate) fn check_peer(&self, peer: usize, what: &str) -> Result<()> {
        if peer >= self.world() {
            return Err(Error::precondition(format!(
                "{what}: rank {peer} is out of range for a communicator of {} ranks",
                self.world()
            )));
        }
        Ok(())
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(crate::options::cap_timeout(d).as_nanos()).unwrap_or(u64::MAX)
}

/// This thread's token for the one-call-at-a-time guard: never 0, unique
/// among the process's threads.
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Frees the communicator for other threads when the call that took it
/// ends, panics included.
struct Release<'a>(&'a AtomicU64);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Posted operations that a panic unwinding out of their wait would leave in
/// flight: dropping this cancels them (a transfer already copying finishes
/// first), so the caller's buffers are released on every path.
struct Posted<'a> {
    comm: &'a Comm,
    ids: &'a [OpId],
}

impl Drop for Posted<'_> {
    fn drop(&mut self) {
        self.comm.cancel_ids(self.ids);
    }
}

/// A forced algorithm as one byte: 0 for none, `i + 1` for
/// `Algorithm::ALL[i]`.
fn encode(algorithm: Option<Algorithm>) -> u8 {
    algorithm
        .and_then(|a| Algorithm::ALL.iter().position(|&b| b == a))
        .map_or(0, |i| u8::try_from(i + 1).unwrap_or(0))
}

/// The inverse of [`encode`].
fn decode(byte: u8) -> Option<Algorithm> {
    Algorithm::ALL.get(usize::from(byte).checked_sub(1)?).copied()
}

#[cfg(test)]
mod forced_tests {
    use super::*;

    #[test]
    fn every_forced_algorithm_survives_its_byte() {
        assert_eq!(decode(encode(None)), None);
        for a in Algorithm::ALL {
            assert_ne!(encode(Some(a)), 0);
            assert_eq!(decode(encode(Some(a))), Some(a));
        }
        assert_eq!(decode(u8::MAX), None);
    }
}

#[cfg(test)]
mod guard_tests {
    use std::time::Instant;

    use crate::error::Error;
    use crate::options::CommOptions;

    /// What the one-call-at-a-time guard costs per call: taking and
    /// releasing it around an empty call, and a nested call. `cargo test
    /// --release -p hcomm --lib guard_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn guard_cost() {
        let comm = crate::host::comms(1, &CommOptions::default()).unwrap().remove(0);
        let n: u32 = 10_000_000;
        let time = |f: &dyn Fn() -> u64| {
            let t = Instant::now();
            let mut acc = 0u64;
            for _ in 0..n {
                acc = acc.wrapping_add(f());
            }
            std::hint::black_box(acc);
            t.elapsed() / n
        };
        let bare = time(&|| std::hint::black_box(1));
        let guarded = time(&|| comm.call("bench", || Ok(std::hint::black_box(1))).unwrap_or(0));
        let nested = comm
            .call("bench", || {
                Ok(time(&|| {
                    comm.call("bench", || Ok(std::hint::black_box(1))).unwrap_or(0)
                }))
            })
            .unwrap();
        let mut x = [1.0f32; 1];
        let t = Instant::now();
        for _ in 0..100_000 {
            comm.all_reduce_in_place(&mut x, crate::ReduceOp::Sum).unwrap();
        }
        println!(
            "per call: bare closure {bare:?}, guarded {guarded:?}, nested {nested:?}; a 1-rank all_reduce of one f32 {:?}",
            t.elapsed() / 100_000
        );
    }

    #[test]
    fn the_guard_refuses_other_threads_and_lets_the_caller_nest() {
        let comm = crate::host::comms(1, &CommOptions::default()).unwrap().remove(0);
        let clone = comm.clone();
        let inner = comm.call("outer", || {
            let nested = comm.call("nested", || Ok(7));
            let other = std::thread::scope(|s| s.spawn(|| clone.call("other", || Ok(1))).join().unwrap());
            Ok((nested, other))
        });
        let (nested, other) = inner.unwrap();
        assert_eq!(nested, Ok(7));
        match other {
            Err(Error::Precondition { message }) => assert!(
                message
                    .starts_with("other on rank 0 of a 1-rank `host` communicator: another thread is in a call on it"),
                "{message}"
            ),
            o => panic!("expected the in-use error, got {o:?}"),
        }
        // Released after the call, also for another thread.
        let after = std::thread::scope(|s| s.spawn(|| clone.call("after", || Ok(2))).join().unwrap());
        assert_eq!(after, Ok(2));
    }
}
