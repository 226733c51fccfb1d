//! Waiting on and releasing posted operations, shared by the in-process
//! fabric and the process engine: a [`Signal`] per waiting rank that spins
//! while spinning can pay off and sleeps on a condition variable otherwise,
//! and the wait, test and cancel of operations over any matching engine
//! that implements [`Ops`].
//!
//! Sleeping costs the futex wake-up latency (microseconds on a quiet bare
//! machine; tens of microseconds on a virtual machine whose idle cores the
//! hypervisor parks, or on a loaded one) on every wait that is not already
//! satisfied; spinning costs a core. A waiter spins for at most the measured
//! wake-up latency (beyond that, sleeping is cheaper), halved after a spin
//! in vain and doubled back after one that paid off, down to a quarter of
//! it: enough for a busy machine to lose little, while two ranks that spin
//! in vain once (one of them was descheduled) do not talk each other into
//! sleeping for good. A rank bound to a core of its own spins
//! up to a millisecond without yielding: it takes the core from no other
//! rank, and a 1 MiB copy by its peer outlasts a shorter spin, after which
//! the waiter would pay a sleep and a wake-up.
//! Where the ranks sharing this host's cores
//! (threads of this process, or processes of one job) are no more than the
//! cores, a spinner yields the core on every round after a microsecond, so
//! that a runnable thread on the same core goes first; where they are more,
//! it yields on every round, so that the spin hands the core to the rank
//! the waiter waits for when that rank is runnable on it (as Open MPI's
//! `mpi_yield_when_idle` does), instead of a sleep and a wake-up per step,
//! and it spins for a millisecond before it sleeps: yielding, the spin
//! costs the ranks that share its core little, while a sleep costs a
//! wake-up that waits behind them. A signal made by
//! [`Signal::oversubscribed_spin`] spins less there: the shared board of
//! processes, whose sleepers a futex wakes at once (`proc/shm.rs`). `BENCHMARKS.md` ("Copies and waits")
//! has the measurements behind these rules.
//!
//! A waiter may bring the change about itself ([`Progress`]): it then does
//! that work on every round of its spin (such as reading the messages of
//! peer processes) and sleeps where that work arrives (in `poll` on the
//! connections, with a [`Doorbell`] that notifications ring), so that a
//! message wakes the waiter itself rather than another thread that hands
//! it over.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::backend::liveness::lock;
use crate::backend::OpId;
use crate::error::{Error, Result};

/// Ranks sharing this host's cores, as this process knows them
/// (registered by [`RankThreads`]).
static RANK_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The longest spin of a rank that is neither bound to a core of its own
/// nor outnumbers the cores, whatever the measured wake-up latency.
const MAX_SPIN_NS: u64 = 50_000;
/// The spin of ranks that outnumber the cores (yielding on every round).
const OVERSUBSCRIBED_SPIN_NS: u64 = 1_000_000;
/// The spin of a rank bound to cores of its own.
const OWN_CORE_SPIN_NS: u64 = 1_000_000;
/// The wake-up latency assumed before any was measured.
const INITIAL_WAKE_NS: u64 = 10_000;
/// A spin that was in vain this many times in a row spins 2^-this of the
/// wake-up latency.
const MAX_BACKOFF: u32 = 2;
/// Attempts of [`lock_spinning`] before it sleeps on the lock.
const LOCK_SPINS: u32 = 2000;
/// Spinning yields the core on every round after this long (when the ranks
/// are no more than the cores).
const YIELD_AFTER: Duration = Duration::from_micros(1);

thread_local! {
    /// Whether this thread runs on cores no other rank runs on.
    static OWN_CORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notes that the calling thread, a rank, is bound to cores of its own:
/// its waits spin up to a millisecond without yielding, since no rank it
/// waits for can be waiting for these cores.
pub(crate) fn note_own_core() {
    OWN_CORE.with(|c| c.set(true));
}

fn own_core() -> bool {
    OWN_CORE.with(std::cell::Cell::get)
}

/// The ranks sharing this host's cores, as this process knows them.
pub(crate) fn rank_threads() -> usize {
    RANK_THREADS.load(Ordering::Relaxed)
}

/// Counts `n` ranks that share this host's cores while alive.
pub(crate) struct RankThreads(usize);

impl RankThreads {
    pub(crate) fn new(n: usize) -> RankThreads {
        RANK_THREADS.fetch_add(n, Ordering::Relaxed);
        RankThreads(n)
    }
}

impl Drop for RankThreads {
    fn drop(&mut self) {
        RANK_THREADS.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// The cores this process may use, as counted the first time this is
/// called: before any rank thread is bound to one core (`launch/ranks.rs`
/// calls it first), whose own count would be 1.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// Whether the ranks sharing this host's cores outnumber them.
fn oversubscribed() -> bool {
    RANK_THREADS.load(Ordering::Relaxed) > cores()
}

/// Nanoseconds since the first call in this process.
fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    u64::try_from(BASE.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Locks `m`, spinning on `try_lock` for a while before sleeping on it:
/// the state of a matching engine is held for a few hundred nanoseconds at
/// a time, far less than the wake-up of a thread that slept on the lock.
pub(crate) fn lock_spinning<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    for _ in 0..LOCK_SPINS {
        match m.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
        }
    }
    lock(m)
}

/// Work a waiter can do to bring about what it waits for.
pub(crate) trait Progress {
    /// Does the work there is now, without waiting (called without the
    /// waiter's mutex).
    fn poll(&self);

    /// Waits until there may be work, `doorbell` becomes readable (a
    /// notification) or `until` passes (called without the mutex).
    fn block(&self, doorbell: RawFd, until: Instant);
}

/// An event counter a sleeper in `poll` sees become readable when a
/// notification rings it.
pub(crate) struct Doorbell(OwnedFd);

impl Doorbell {
    pub(crate) fn new() -> std::io::Result<Doorbell> {
        // SAFETY: `eventfd` takes no pointers; a non-negative result is a
        // new descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nothing else.
        Ok(Doorbell(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local array to the eventfd this
        // value owns. It fails only when the counter would overflow, and it
        // is then readable already.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Resets the counter (rings before this are forgotten).
    fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local array from the
        // eventfd this value owns (non-blocking: fails when not rung).
        unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }
}

/// What one or more threads wait for: every change is counted in an epoch
/// that waiters spin on, and wakes those asleep.
///
/// [`Signal::notify`] and [`Signal::sleep`] are called with the same mutex
/// held (the one guarding the state the waiters look at), which is what
/// makes a notification between a waiter's look and its sleep impossible
/// to miss.
pub(crate) struct Signal {
    epoch: AtomicU64,
    /// Waiters asleep on `cv` (changed under the mutex).
    asleep: AtomicUsize,
    cv: Condvar,
    /// When the last notification that woke a sleeper was sent.
    notified_at: AtomicU64,
    /// Measured wake-up latency (moving average), in nanoseconds.
    wake_ns: AtomicU64,
    /// How many times the spin budget is halved.
    backoff: AtomicU32,
    /// Rung by notifications while waiters sleep in [`Progress::block`].
    doorbell: Option<Doorbell>,
    /// The spin of waiters whose ranks outnumber the cores.
    oversubscribed_spin: Duration,
}

impl Default for Signal {
    fn default() -> Self {
        Signal {
            epoch: AtomicU64::new(0),
            asleep: AtomicUsize::new(0),
            cv: Condvar::new(),
            notified_at: AtomicU64::new(0),
            wake_ns: AtomicU64::new(INITIAL_WAKE_NS),
            backoff: AtomicU32::new(0),
            doorbell: None,
            oversubscribed_spin: Duration::from_nanos(OVERSUBSCRIBED_SPIN_NS),
        }
    }
}

impl Signal {
    /// A signal whose waiters may sleep in [`Progress::block`]; without an
    /// event counter (none could be made) they sleep on the condition
    /// variable.
    pub(crate) fn with_doorbell() -> Signal {
        Signal {
            doorbell: Doorbell::new().ok(),
            ..Signal::default()
        }
    }

    /// A signal whose waiters, where the ranks outnumber the cores, spin
    /// (yielding) for `spin` before they sleep, instead of a millisecond.
    pub(crate) fn oversubscribed_spin(spin: Duration) -> Signal {
        Signal {
            oversubscribed_spin: spin,
            ..Signal::default()
        }
    }

    /// Wakes the waiters asleep (the mutex held).
    fn wake_sleepers(&self) {
        self.notified_at.store(now_ns(), Ordering::Relaxed);
        self.cv.notify_all();
        if let Some(bell) = &self.doorbell {
            bell.ring();
        }
    }

    /// Tells the waiters that something changed (the mutex held).
    pub(crate) fn notify(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) > 0 {
            self.wake_sleepers();
        }
    }

    /// Waits, with `guard` of `mutex` held on entry and on return, until
    /// [`Signal::notify`] is called or `deadline` passes (or spuriously).
    pub(crate) fn sleep<'a, S>(
        &self,
        mutex: &'a Mutex<S>,
        guard: MutexGuard<'a, S>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, S> {
        self.sleep_with(mutex, guard, deadline, None)
    }

    /// As [`Signal::sleep`], doing the work of `progress` on every round of
    /// the spin and sleeping in its [`Progress::block`] (where this signal
    /// has a doorbell), which may also end early when work arrives.
    pub(crate) fn sleep_with<'a, S>(
        &self,
        mutex: &'a Mutex<S>,
        guard: MutexGuard<'a, S>,
        deadline: Option<Instant>,
        progress: Option<&dyn Progress>,
    ) -> MutexGuard<'a, S> {
        let seen = self.epoch.load(Ordering::Relaxed);
        drop(guard);
        self.wait_from_with(seen, mutex, deadline, progress)
    }

    /// The count of notifications so far: a waiter reads it before it
    /// looks at the state it waits on, then passes it to
    /// [`Signal::wait_until`].
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Waits until `done()` holds, a notification after `seen` (see
    /// [`Signal::epoch`]) arrives, or `deadline` passes (or spuriously), for
    /// state that waiters read without a mutex (atomics). The waiter spins
    /// on `done` itself, so the thread that makes it true only has to wake
    /// waiters that went to sleep: it stores what `done` reads, then, after
    /// a sequentially consistent fence (which orders the store before its
    /// look at the sleepers, as this waiter's look at `done` is ordered
    /// after it counted itself asleep), calls [`Signal::wake_unlocked`]
    /// with the same `mutex`. Returns without holding `mutex`.
    pub(crate) fn wait_until<S>(
        &self,
        seen: u64,
        done: impl Fn() -> bool,
        mutex: &Mutex<S>,
        deadline: Option<Instant>,
    ) {
        if !self.spin_until(seen, &done, deadline) {
            drop(self.sleep_after_spin(seen, &done, mutex, lock_spinning(mutex), deadline, None));
        }
    }

    /// The spin of [`Signal::wait_until`] alone: whether `done()` held or
    /// a notification after `seen` arrived before the spin budget or
    /// `deadline` ran out.
    pub(crate) fn spin_until(&self, seen: u64, done: &impl Fn() -> bool, deadline: Option<Instant>) -> bool {
        self.spin(seen, done, self.spin_budget(), deadline, None)
    }

    /// As [`Signal::sleep`] from the epoch `seen`, with the work of
    /// `progress` (see [`Signal::sleep_with`]); returns with `mutex` held.
    fn wait_from_with<'a, S>(
        &self,
        seen: u64,
        mutex: &'a Mutex<S>,
        deadline: Option<Instant>,
        progress: Option<&dyn Progress>,
    ) -> MutexGuard<'a, S> {
        let notified = self.spin(seen, &|| false, self.spin_budget(), deadline, progress);
        let guard = lock_spinning(mutex);
        if notified {
            return guard;
        }
        self.sleep_after_spin(seen, &|| false, mutex, guard, deadline, progress)
    }

    /// Sleeps, `guard` of `mutex` held on entry and on return, unless the
    /// epoch moved past `seen` or `done()` holds once this waiter is
    /// counted asleep; until a notification or `deadline`.
    fn sleep_after_spin<'a, S>(
        &self,
        seen: u64,
        done: &dyn Fn() -> bool,
        mutex: &'a Mutex<S>,
        guard: MutexGuard<'a, S>,
        deadline: Option<Instant>,
        progress: Option<&dyn Progress>,
    ) -> MutexGuard<'a, S> {
        let left = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        if left.is_zero() {
            return guard;
        }
        // Counted asleep before the last look at the epoch and at `done`,
        // all sequentially consistent: a `notify_unlocked` that bumps the
        // epoch, or a store that makes `done` true followed by
        // `wake_unlocked`, after this look sees the count and notifies
        // under the mutex, which this thread holds until it waits on the
        // condition variable.
        if let Some(bell) = self.doorbell.as_ref().filter(|_| progress.is_some()) {
            // Under the mutex, before the count: every notification that
            // sees this waiter counted rings after this.
            bell.drain();
        }
        self.asleep.fetch_add(1, Ordering::SeqCst);
        if self.epoch.load(Ordering::SeqCst) != seen || done() {
            self.asleep.fetch_sub(1, Ordering::SeqCst);
            return guard;
        }
        let slept_at = now_ns();
        let guard = if let (Some(progress), Some(bell)) = (progress, &self.doorbell) {
            drop(guard);
            progress.block(bell.0.as_raw_fd(), crate::options::deadline_after(left));
            lock_spinning(mutex)
        } else {
            self.cv
                .wait_timeout(guard, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0
        };
        self.asleep.fetch_sub(1, Ordering::SeqCst);
        if self.epoch.load(Ordering::Relaxed) == seen {
            // The deadline passed (or a spurious wake-up).
            return guard;
        }
        let notified_at = self.notified_at.load(Ordering::Relaxed);
        if notified_at >= slept_at {
            let latency = now_ns().saturating_sub(notified_at);
            let old = self.wake_ns.load(Ordering::Relaxed);
            self.wake_ns.store((old * 7 + latency) / 8, Ordering::Relaxed);
        }
        guard
    }

    /// Wakes the waiters of [`Signal::wait_until`] that went to sleep; see
    /// there. Costs one load when none sleeps.
    pub(crate) fn wake_unlocked<S>(&self, mutex: &Mutex<S>) {
        if self.asleep.load(Ordering::SeqCst) > 0 {
            let _guard = lock(mutex);
            self.wake_sleepers();
        }
    }

    /// [`Signal::notify`] for state that waiters read without `mutex`
    /// (atomics): takes `mutex` only to wake a waiter that is asleep.
    pub(crate) fn notify_unlocked<S>(&self, mutex: &Mutex<S>) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) > 0 {
            let _guard = lock(mutex);
            self.wake_sleepers();
        }
    }

    /// How long to spin now.
    fn spin_budget(&self) -> Duration {
        if oversubscribed() {
            return self.oversubscribed_spin;
        }
        if own_core() {
            return Duration::from_nanos(OWN_CORE_SPIN_NS);
        }
        let wake = self.wake_ns.load(Ordering::Relaxed).min(MAX_SPIN_NS);
        Duration::from_nanos(wake >> self.backoff.load(Ordering::Relaxed))
    }

    /// Spins, doing the work of `progress` on every round, until the epoch
    /// moves past `seen` or `done()` holds (true) or `budget` or `deadline`
    /// runs out (false);
    /// adapts the next budget.
    fn spin(
        &self,
        seen: u64,
        done: &(impl Fn() -> bool + ?Sized),
        budget: Duration,
        deadline: Option<Instant>,
        progress: Option<&dyn Progress>,
    ) -> bool {
        // The clock is read from the end of the first round on: most waits
        // of a collective end within it, and a read of the clock costs as
        // much as a round of looks.
        let mut clock: Option<(Instant, Duration)> = None;
        let yield_after = if oversubscribed() {
            Duration::ZERO
        } else if own_core() {
            Duration::MAX
        } else {
            YIELD_AFTER
        };
        loop {
            if let Some(p) = progress {
                p.poll();
            }
            for _ in 0..32 {
                if self.epoch.load(Ordering::Acquire) != seen || done() {
                    // Written only when it changes: peers read the cache
                    // line of this signal (`asleep`) on every publication.
                    let b = self.backoff.load(Ordering::Relaxed);
                    if b > 0 {
                        self.backoff.store(b - 1, Ordering::Relaxed);
                    }
                    return true;
                }
                std::hint::spin_loop();
            }
            let (start, limit) = *clock.get_or_insert_with(|| {
                let now = Instant::now();
                (
                    now,
                    deadline.map_or(budget, |d| budget.min(d.saturating_duration_since(now))),
                )
            });
            let spun = start.elapsed();
            if spun >= limit {
                let b = self.backoff.load(Ordering::Relaxed);
                if b < MAX_BACKOFF {
                    self.backoff.store(b + 1, Ordering::Relaxed);
                }
                return false;
            }
            if spun >= yield_after {
                std::thread::yield_now();
            }
        }
    }
}

/// A matching engine whose posted operations [`wait`], [`test`] and
/// [`cancel`] wait on and release.
pub(crate) trait Ops {
    /// What the engine keeps under its lock.
    type State;

    /// The lock of the engine's state.
    fn state(&self) -> &Mutex<Self::State>;

    /// The signal rank `me` sleeps on.
    fn signal(&self, me: usize) -> &Signal;

    /// Where operation `id` stands: `None` pending; `Some(Ok(()))`
    /// complete (or already released); `Some(Err)` failed, or pending but
    /// known never to complete.
    fn status(&self, st: &Self::State, id: OpId) -> Option<Result<()>>;

    /// Work waiting rank `me` does before each look at its operations.
    fn before_look<'a>(&'a self, st: MutexGuard<'a, Self::State>, _me: usize) -> MutexGuard<'a, Self::State> {
        st
    }

    /// Work rank `me` can do while it waits.
    fn progress(&self, _me: usize) -> Option<&dyn Progress> {
        None
    }

    /// The peer a pending operation waits for (its rank in the operation's
    /// group), where known: named by a timeout.
    fn waiting_on(&self, _st: &Self::State, _id: OpId) -> Option<usize> {
        None
    }

    /// Called before rank `me` waits (`true`) and when it stops (`false`).
    fn set_waiting(&self, _st: &mut Self::State, _me: usize, _waiting: bool) {}

    /// Releases `ids`: withdraws pending ones, waits out copies in
    /// progress, frees all.
    fn release<'a>(&'a self, st: MutexGuard<'a, Self::State>, ids: &[OpId]) -> MutexGuard<'a, Self::State>;
}

/// Waits until every operation of `ids` (of rank `me`) completed, one
/// failed or `deadline` passed; releases them all either way. A failure
/// that is a root cause is reported over one that is its consequence.
pub(crate) fn wait<O: Ops>(
    ops: &O,
    me: usize,
    ids: &[OpId],
    deadline: Instant,
    what: &str,
    limit: Duration,
) -> Result<()> {
    let mut start = None;
    let mut st = lock_spinning(ops.state());
    loop {
        st = ops.before_look(st, me);
        let mut pending = false;
        let mut failure: Option<Error> = None;
        for id in ids {
            match ops.status(&st, *id) {
                None => pending = true,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    if failure.as_ref().is_none_or(|f| f.is_secondary() && !e.is_secondary()) {
                        failure = Some(e);
                    }
                }
            }
        }
        let result = match failure {
            Some(e) => Some(Err(e)),
            None if !pending => Some(Ok(())),
            None => {
                let now = Instant::now();
                let start = *start.get_or_insert(now);
                (now >= deadline).then(|| {
                    Err(Error::Timeout {
                        operation: naming_peers(ops, &st, ids, what),
                        rank: me,
                        waited: now - start,
                        limit,
                    })
                })
            }
        };
        if let Some(result) = result {
            ops.set_waiting(&mut st, me, false);
            drop(ops.release(st, ids));
            return result;
        }
        ops.set_waiting(&mut st, me, true);
        st = ops
            .signal(me)
            .sleep_with(ops.state(), st, Some(deadline), ops.progress(me));
    }
}

/// `what`, followed by the peers the pending operations of `ids` wait for.
fn naming_peers<O: Ops>(ops: &O, st: &O::State, ids: &[OpId], what: &str) -> String {
    let mut peers: Vec<usize> = ids
        .iter()
        .filter(|&&id| ops.status(st, id).is_none())
        .filter_map(|&id| ops.waiting_on(st, id))
        .collect();
    peers.sort_unstable();
    peers.dedup();
    match peers.as_slice() {
        [] => what.to_owned(),
        [one] => format!("{what} waiting for rank {one}"),
        many => {
            let list: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("{what} waiting for ranks {}", list.join(", "))
        }
    }
}

/// `Ok(true)` (and `id` released) once `id` completed, `Ok(false)` while
/// it is pending, `Err` (and `id` released) when it failed.
pub(crate) fn test<O: Ops>(ops: &O, id: OpId) -> Result<bool> {
    let st = lock_spinning(ops.state());
    match ops.status(&st, id) {
        None => Ok(false),
        Some(result) => {
            drop(ops.release(st, &[id]));
            result.map(|()| true)
        }
    }
}

/// Releases `ids` whatever their state.
pub(crate) fn cancel<O: Ops>(ops: &O, ids: &[OpId]) {
    let st = lock_spinning(ops.state());
    drop(ops.release(st, ids));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_sleeper_sees_every_notification() {
        let shared = Arc::new((Mutex::new(0u32), Signal::default()));
        let _ranks = RankThreads::new(2);
        let waiter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let (m, s) = &*shared;
                let mut seen = Vec::new();
                let mut g = lock(m);
                let deadline = Instant::now() + Duration::from_secs(10);
                while *g < 100 && Instant::now() < deadline {
                    seen.push(*g);
                    g = s.sleep(m, g, Some(deadline));
                }
                (*g, seen.windows(2).all(|w| w[0] <= w[1]))
            })
        };
        for _ in 0..100 {
            let (m, s) = &*shared;
            let mut g = lock(m);
            *g += 1;
            s.notify();
            drop(g);
            std::thread::yield_now();
        }
        assert_eq!(waiter.join().unwrap(), (100, true));
    }

    #[test]
    fn a_waiter_on_a_counter_is_woken_by_the_store_and_the_look_after_the_fence() {
        // The publisher of the board: a release store, then a fenced look at
        // the sleepers. Delays from none to well past the spin budget make
        // the waiter find the counter while spinning, and asleep.
        let shared = Arc::new((Mutex::new(()), Signal::default(), AtomicU64::new(0)));
        let _ranks = RankThreads::new(2);
        let rounds = 60u64;
        let waiter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let (m, s, counter) = &*shared;
                let start = Instant::now();
                let deadline = start + Duration::from_secs(20);
                for k in 1..=rounds {
                    while counter.load(Ordering::Acquire) < k && Instant::now() < deadline {
                        let seen = s.epoch();
                        s.wait_until(seen, || counter.load(Ordering::SeqCst) >= k, m, Some(deadline));
                    }
                }
                (counter.load(Ordering::Acquire), start.elapsed())
            })
        };
        let (m, s, counter) = &*shared;
        for k in 1..=rounds {
            std::thread::sleep(Duration::from_micros((k % 4) * 700));
            counter.store(k, Ordering::Release);
            std::sync::atomic::fence(Ordering::SeqCst);
            s.wake_unlocked(m);
        }
        let (seen, took) = waiter.join().unwrap();
        assert_eq!(seen, rounds);
        // About 60 ms of delays; a missed wake-up would cost the 20 s deadline.
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[test]
    fn sleep_without_notification_ends_at_the_deadline() {
        let m = Mutex::new(());
        let s = Signal::default();
        let start = Instant::now();
        let deadline = start + Duration::from_millis(30);
        let mut g = lock(&m);
        while Instant::now() < deadline {
            g = s.sleep(&m, g, Some(deadline));
        }
        drop(g);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
