//! The board of an in-process group: a page per rank in memory every rank
//! reads, through which small collectives run without a message, a lock or
//! a matching queue (the one-shot algorithms of `collective/one_shot.rs`).
//!
//! A rank's `k`-th exchange copies what it contributes into its page `k % 2`
//! with the call's header, then publishes `k` (a release store of one
//! counter). Every rank then reads, in rank order, the page of every rank
//! that has published `k` (an acquire load), checks that its header is the
//! same collective, and takes from it what it needs. Nothing else is
//! exchanged: a call costs one copy in, one read of each peer's page and
//! one counter store, where a message costs a lock, a queue entry and a
//! hand-over per peer.
//!
//! Why no page is written while it is read: a rank writes page `k % 2` only
//! after every peer has published `k - 1`, and a peer publishes `k - 1`
//! only after it finished reading the pages of call `k - 2`, the last that
//! used that page. A peer that reads page `k % 2` for call `k` saw the
//! writer publish `k`, and the writer cannot reach call `k + 2` (the next
//! write of that page) before that peer published `k + 1`, which it does
//! only after it finished reading. Each rank's calls are serialized by a
//! lock of its own, so two threads of one rank cannot write one page at
//! once. The release store of a publication and the acquire load of a
//! reader order every copy in and out.
//!
//! A waiting rank spins on the counter it waits for, not on a notification,
//! so a publication wakes nobody unless a peer went to sleep: the publisher
//! looks at its peers' sleepers once right after the store and once, after
//! a sequentially consistent fence, when it leaves the call (on every
//! path), which is the look no sleeper can slip past (`Signal::wait_until`
//! in `wait.rs`). The store itself stays a plain release store: a fence
//! or a locked instruction right after the copy in would stall the core
//! until the copy's stores had drained (about three quarters of the
//! exchange's samples under `perf` when the store was sequentially
//! consistent), where this way the core goes on to read its peers' pages.
//!
//! Nothing of the caller's is lent to another thread: every byte is copied
//! in and out within the call, so an error, a panic or a forgotten future
//! cannot leave a peer touching the caller's buffers.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::wait::Signal;
use crate::backend::liveness::lock;
use crate::error::{Error, Result};
use crate::header::CollHeader;

/// Bytes a rank may contribute to one exchange. Between 2 processes the
/// board beats the message algorithms up to this size for the reductions,
/// but all-gather and all-to-all, which reduce nothing, leave it earlier
/// (`select.rs`'s pair limits); 4 processes on 2 cores are faster on the
/// board at every size up to this one (BENCHMARKS.md, "the crossovers of
/// the shared board").
pub(crate) const BOARD_BYTES: usize = 64 << 10;

/// A counter on a cache line of its own: peers spin on it.
#[repr(align(128))]
#[derive(Default)]
struct Published(AtomicU64);

/// One of a rank's two pages.
struct Page {
    header: UnsafeCell<Option<CollHeader>>,
    len: UnsafeCell<usize>,
    /// `BOARD_BYTES` bytes, 8-aligned for every element type.
    data: Box<[UnsafeCell<u64>]>,
}

impl Page {
    fn new() -> Page {
        Page {
            header: UnsafeCell::new(None),
            len: UnsafeCell::new(0),
            data: (0..BOARD_BYTES / 8).map(|_| UnsafeCell::new(0)).collect(),
        }
    }

    fn bytes(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.data.as_ptr()).cast()
    }
}

/// What one rank owns on the board.
struct Side {
    published: Published,
    /// Serializes this rank's exchanges; the number it started.
    calls: Mutex<u64>,
    pages: [Page; 2],
    /// What this rank's waits spin and sleep on.
    signal: Signal,
}

/// The board of one group; see the module documentation.
pub(crate) struct Board {
    sides: Box<[Side]>,
    /// What sleepers wait on (nothing else is guarded by it).
    sleep: Mutex<()>,
}

// SAFETY: the pages' `UnsafeCell`s are written only by their owner rank,
// and only while no peer reads them, and read by peers only after the
// owner published them (the protocol of the module documentation, with
// the owner's writes ordered before its release store and the readers'
// reads after their acquire load); everything else is atomic or locked.
unsafe impl Sync for Board {}

/// Why a wait on a peer cannot complete, if that is known: the group
/// aborted, its collectives failed, or the peer `rank` is gone. Called
/// before each sleep.
pub(crate) type Failure<'a> = &'a dyn Fn(usize) -> Option<Error>;

/// One exchange: what the caller contributes and what it takes.
pub(crate) struct Exchange<'a> {
    pub(crate) me: usize,
    pub(crate) header: &'a CollHeader,
    /// Bytes this rank contributes (at most [`BOARD_BYTES`]).
    pub(crate) len: usize,
    pub(crate) timeout: Duration,
    pub(crate) failure: Failure<'a>,
}

impl Board {
    pub(crate) fn new(size: usize) -> Board {
        Board {
            sides: (0..size)
                .map(|_| Side {
                    published: Published::default(),
                    calls: Mutex::new(0),
                    pages: [Page::new(), Page::new()],
                    signal: Signal::default(),
                })
                .collect(),
            sleep: Mutex::new(()),
        }
    }

    /// Wakes every rank waiting on the board (to look at a failure).
    pub(crate) fn wake_all(&self) {
        for side in &*self.sides {
            side.signal.notify_unlocked(&self.sleep);
        }
    }

    /// Runs one exchange for rank `x.me`: `fill` writes its contribution
    /// (`x.len` bytes), then `take(rank, bytes)` is called for every rank
    /// in rank order, this one included, with what that rank contributed.
    pub(crate) fn exchange(
        &self,
        x: &Exchange<'_>,
        fill: impl FnOnce(&mut [u8]),
        take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        if x.len > BOARD_BYTES {
            return Err(Error::precondition(format!(
                "{}: {} bytes do not fit the board's {BOARD_BYTES}",
                x.header, x.len
            )));
        }
        // When this call first waited: its deadline runs from there (read
        // the clock only when a wait is needed).
        let mut first_wait = None;
        let side = &self.sides[x.me];
        let mut calls = lock(&side.calls);
        let k = *calls + 1;
        let page = (k % 2) as usize;
        // Every peer finished reading this page's last contents (call k - 2).
        for peer in 0..self.sides.len() {
            if peer != x.me {
                self.wait_published(x, &calls, peer, k - 1, &mut first_wait)?;
            }
        }
        let own = &side.pages[page];
        // SAFETY: this rank's page, which no peer reads now (see above and
        // the module documentation), and which this thread alone writes
        // (`calls` is held); `x.len <= BOARD_BYTES`, its size.
        unsafe {
            fill(std::slice::from_raw_parts_mut(own.bytes(), x.len));
            *own.header.get() = Some(*x.header);
            *own.len.get() = x.len;
        }
        *calls = k;
        // A release store: the copy in is ordered before it without
        // stalling this core until the copy's stores have drained, and this
        // rank goes on to read its peers' pages meanwhile. Peers that spin
        // read the counter itself and need no notification; a peer asleep
        // is woken by `wake_sleepers` (a first look now, the certain one
        // after the reads).
        side.published.0.store(k, Ordering::Release);
        self.wake_sleepers(x.me);
        let taken = self.take_all(x, &calls, k, &mut first_wait, take);
        // Orders the publication before the look at who sleeps, as a
        // sleeping waiter's last look (`Signal::wait_until`) is ordered after
        // it counted itself asleep: a peer either sees `k` there or is seen
        // asleep here. On every path out of the call, so no peer is left
        // asleep on a publication it missed.
        std::sync::atomic::fence(Ordering::SeqCst);
        self.wake_sleepers(x.me);
        taken
    }

    /// Wakes the peers of rank `me` asleep on the board.
    fn wake_sleepers(&self, me: usize) {
        for (peer, s) in self.sides.iter().enumerate() {
            if peer != me {
                s.signal.wake_unlocked(&self.sleep);
            }
        }
    }

    /// The reads of [`Board::exchange`]: `take(rank, bytes)` for every rank
    /// in rank order once it published call `k`.
    fn take_all(
        &self,
        x: &Exchange<'_>,
        calls: &MutexGuard<'_, u64>,
        k: u64,
        first_wait: &mut Option<Instant>,
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let page = (k % 2) as usize;
        for (peer, s) in self.sides.iter().enumerate() {
            if peer != x.me {
                self.wait_published(x, calls, peer, k, first_wait)?;
            }
            let theirs = &s.pages[page];
            // SAFETY: the peer published call k (acquire load above, or this
            // rank's own page), and cannot write this page again before this
            // rank publishes k + 1; its header and length are read only.
            let (header, len) = unsafe { (*theirs.header.get(), *theirs.len.get()) };
            match header {
                Some(h) if h.seq == x.header.seq && h.agrees(x.header) => {}
                other => {
                    let called = other.map_or_else(|| "nothing".to_owned(), |h| format!("#{} {h}", h.seq));
                    return Err(Error::mismatch(format!(
                        "collective #{}: rank {peer} called {called} while rank {} called {}",
                        x.header.seq, x.me, x.header
                    )));
                }
            }
            // SAFETY: as above; `len <= BOARD_BYTES` as its writer checked.
            take(peer, unsafe { std::slice::from_raw_parts(theirs.bytes(), len) });
        }
        Ok(())
    }

    /// Waits until `peer` published call `k` or a later one (see
    /// [`wait_published`]); a sleep waits on this rank's signal, which a
    /// publishing peer wakes.
    fn wait_published(
        &self,
        x: &Exchange<'_>,
        _calls: &MutexGuard<'_, u64>,
        peer: usize,
        k: u64,
        first_wait: &mut Option<Instant>,
    ) -> Result<()> {
        let published = &self.sides[peer].published.0;
        let signal = &self.sides[x.me].signal;
        let done = || published.load(Ordering::SeqCst) >= k;
        wait_published(
            x,
            peer,
            first_wait,
            signal,
            &done,
            || signal.epoch(),
            |seen, deadline| {
                signal.wait_until(seen, done, &self.sleep, deadline);
            },
        )
    }
}

/// Waits for rank `x.me` until `done()` (its peer `peer` published the
/// call it waits for), on the board of threads and on the one of processes
/// (`proc/shm.rs`) alike: a spin first, before the look at failures (which
/// may take the group's lock) and before the clock is read for the deadline
/// (the spin is bounded by `signal`'s budget); then, until the deadline
/// that runs from `first_wait` (set by the first wait that spun in vain),
/// a look at `done`, at `x.failure` and at the clock before each `sleep`.
/// `mark()` is taken before that look and handed to `sleep`, which returns
/// at once when a publication came after the mark (a signal's epoch).
pub(crate) fn wait_published<M>(
    x: &Exchange<'_>,
    peer: usize,
    first_wait: &mut Option<Instant>,
    signal: &Signal,
    done: &impl Fn() -> bool,
    mark: impl Fn() -> M,
    sleep: impl Fn(M, Option<Instant>),
) -> Result<()> {
    // A peer that fails wakes this rank's signal (or, between processes,
    // ends its connection), and the look comes before any sleep.
    if done() || (signal.spin_until(signal.epoch(), done, None) && done()) {
        return Ok(());
    }
    let start = *first_wait.get_or_insert_with(Instant::now);
    let deadline = start.checked_add(x.timeout);
    loop {
        let seen = mark();
        if done() {
            return Ok(());
        }
        if let Some(e) = (x.failure)(peer) {
            // The peer may have published and finished since the look
            // above; what it published before finishing still counts (the
            // failure was seen after its publication, so this load sees
            // that publication).
            if done() {
                return Ok(());
            }
            return Err(e);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Err(Error::Timeout {
                operation: format!("{} waiting for rank {peer} to enter it", x.header),
                rank: x.me,
                waited: now - start,
                limit: x.timeout,
            });
        }
        sleep(seen, deadline);
    }
}
