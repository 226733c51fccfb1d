//! The board of a job's processes on one host: the one-shot board of
//! `board.rs` in memory the processes share, so that a small collective
//! between processes costs what it costs between threads (a copy in, a
//! read of each peer's page, one counter store) and no message, lock or
//! system call while every rank keeps up.
//!
//! Each rank creates its own region, a sealed memory file (`memfd.rs`), and
//! tells its peers the descriptor in the authenticated handshake
//! (`Msg::Ready`); a peer maps it through `/proc/<pid>/fd`. Nothing has a
//! name, and a survivor's mapping stays valid after its owner died.
//!
//! A region holds the rank's publication counter, the count of peers asleep
//! on it, and its two pages; the protocol is that of `board.rs` (page
//! `k % 2` is written for call `k` only once every peer published `k - 1`).
//! A page carries the call's header as bytes: a reader compares them with
//! its own header's, so two ranks in different collectives get a
//! `Mismatch`, and a length or header written out of range by a buggy peer
//! is an error, never a read outside the mapping.
//!
//! A rank waiting for a peer spins (yielding when the ranks outnumber the
//! cores), then sleeps on the peer's counter with a futex, counted in the
//! peer's region so that the peer wakes it after publishing; each sleep is
//! at most [`NAP`], after which the waiter looks at the peer's liveness,
//! the group's failures and the deadline, so a dead peer is `PeerFailed`
//! within a few milliseconds of its connection's end.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::engine::Engine;
use super::memfd::MemFile;
use crate::backend::host::board::{wait_published, Exchange, BOARD_BYTES};
use crate::backend::host::wait::Signal;
use crate::backend::liveness::lock;
use crate::error::{Error, Result};
use crate::header::CollHeader;

/// Offset of the publication counter (a cache line of its own).
const PUBLISHED: usize = 0;
/// Offset of the count of peers asleep on the counter.
const SLEEPERS: usize = 128;
/// Offset of the first page.
const PAGES: usize = 256;
/// Bytes of a page's header area: the header's length and bytes, then the
/// data's length.
const PAGE_HEAD: usize = 128;
/// The longest encoded header that fits a page's header area.
const HEADER_BYTES: usize = PAGE_HEAD - 16;
/// Bytes from one page to the next.
const PAGE_STRIDE: usize = PAGE_HEAD + BOARD_BYTES;
/// Bytes of a region.
const LEN: usize = PAGES + 2 * PAGE_STRIDE;
/// The longest single sleep of a waiter before it looks at failures.
const NAP: Duration = Duration::from_millis(2);
/// How long a waiter spins, yielding, before it sleeps on the futex when
/// the ranks of this host outnumber its cores: a rank that sleeps is woken
/// by the publisher's futex call and runs at once, while one that yields
/// hands its core to any other runnable process for a whole time slice
/// (BENCHMARKS.md, "Four processes on two cores": this spin against a
/// millisecond's).
const OVERSUBSCRIBED_SPIN: Duration = Duration::from_micros(100);

/// One rank's region, mapped into this process. Its counters are only
/// accessed atomically, and its pages only in the phases the protocol of
/// `board.rs` gives to one side at a time; a rank's writes are serialized
/// by its board's `calls` lock.
pub(super) struct Region {
    file: MemFile,
}

impl Region {
    /// A new region of this process, zeroed, its size sealed.
    pub(super) fn create() -> io::Result<Region> {
        Ok(Region {
            file: MemFile::create(c"hcomm-board", LEN)?,
        })
    }

    /// Maps the region that process `pid` holds as its descriptor `fd`,
    /// once its size is right and sealed.
    pub(super) fn open(pid: i32, fd: i32) -> io::Result<Region> {
        Ok(Region {
            file: MemFile::open(pid, fd, LEN, "board region")?,
        })
    }

    /// The descriptor of the region's memory file in this process.
    pub(super) fn fd(&self) -> RawFd {
        self.file.fd()
    }

    /// The start of the mapping (`LEN` bytes, page-aligned).
    fn base(&self) -> *mut u8 {
        self.file.base()
    }

    fn published(&self) -> &AtomicU64 {
        // SAFETY: `PUBLISHED` is inside the mapping and 8-aligned (the
        // mapping is page-aligned); both processes access it only
        // atomically; the reference lives no longer than `self`.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the offset of a page-aligned mapping is 8-aligned"
        )]
        unsafe {
            &*self.base().add(PUBLISHED).cast::<AtomicU64>()
        }
    }

    /// The low half of the counter, what a futex waits on (the mapping is
    /// little-endian on every target this builds for, checked below).
    fn published_word(&self) -> *const AtomicU32 {
        const { assert!(cfg!(target_endian = "little")) };
        // SAFETY: as in `published`: the first 4 bytes of the counter.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the offset of a page-aligned mapping is 4-aligned"
        )]
        unsafe {
            self.base().add(PUBLISHED).cast::<AtomicU32>()
        }
    }

    fn sleepers(&self) -> &AtomicU32 {
        // SAFETY: as in `published`, for the 4-byte counter at `SLEEPERS`.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the offset of a page-aligned mapping is 4-aligned"
        )]
        unsafe {
            &*self.base().add(SLEEPERS).cast::<AtomicU32>()
        }
    }

    /// The start of page `page` (0 or 1).
    fn page(&self, page: usize) -> *mut u8 {
        // SAFETY: `PAGES + page * PAGE_STRIDE + PAGE_STRIDE <= LEN` for
        // `page < 2`.
        unsafe { self.base().add(PAGES + page * PAGE_STRIDE) }
    }

    /// Wakes every process asleep on this region's counter.
    fn wake(&self) {
        // SAFETY: a futex wake on a 4-byte aligned word of a shared mapping
        // (no `FUTEX_PRIVATE_FLAG`: the sleepers are other processes); the
        // kernel only reads the address.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.published_word(),
                libc::FUTEX_WAKE,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0,
            );
        }
    }

    /// Sleeps while the low half of the counter is `seen`, at most `nap`.
    fn sleep(&self, seen: u32, nap: Duration) {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(nap.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(nap.subsec_nanos().min(999_999_999) as i32),
        };
        // SAFETY: a futex wait on a 4-byte aligned word of a shared
        // mapping, with a relative timeout `ts` valid for the call; the
        // kernel returns at once when the word is no longer `seen`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.published_word(),
                libc::FUTEX_WAIT,
                seen,
                &raw const ts,
                std::ptr::null::<u32>(),
                0,
            );
        }
    }
}

/// A header as bytes on a page: `seq` first, then the rest, so that two
/// headers are the same call exactly when their bytes are equal.
fn encode(header: &CollHeader, out: &mut [u8; HEADER_BYTES]) -> Result<usize> {
    postcard::to_slice(header, out)
        .map(|used| used.len())
        .map_err(|e| Error::precondition(format!("{header}: its header does not fit the board ({e})")))
}

/// A rank's handle on the board of its group of processes.
pub(crate) struct ProcBoard<'a> {
    pub(super) board: &'a ShmBoard,
    pub(super) engine: &'a Engine,
    pub(super) group: u64,
    /// Global rank of each member, in group order.
    pub(super) members: &'a [usize],
}

impl ProcBoard<'_> {
    /// One exchange of the collective `header` (see [`ShmBoard::exchange`]);
    /// a disagreement fails the group's later collectives too.
    pub(crate) fn exchange(
        &self,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: impl FnOnce(&mut [u8]),
        take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let failure = |peer: usize| self.engine.board_failure(self.group, self.members, peer, header);
        let x = Exchange {
            me: self.board.me,
            header,
            len,
            timeout,
            failure: &failure,
        };
        let result = self.board.exchange(&x, fill, take);
        if let Err(e @ Error::Mismatch { .. }) = &result {
            self.engine.fail_collectives(self.group, e);
        }
        result
    }
}

/// The board of a group of a job's processes on one host (the world or a split).
pub(crate) struct ShmBoard {
    me: usize,
    /// Every rank's region, in rank order (this rank's own included).
    regions: Vec<Region>,
    /// Serializes this rank's exchanges; the number it started.
    calls: Mutex<u64>,
    /// Adapts the spin of this rank's waits (its budget and backoff).
    signal: Signal,
}

impl ShmBoard {
    /// The board of rank `me`, whose region is `regions[me]`.
    pub(super) fn new(me: usize, regions: Vec<Region>) -> ShmBoard {
        ShmBoard {
            me,
            regions,
            calls: Mutex::new(0),
            signal: Signal::oversubscribed_spin(OVERSUBSCRIBED_SPIN),
        }
    }

    /// Runs one exchange for this rank, as [`crate::backend::host::board`]'s
    /// `Board::exchange` does for a rank thread: `fill` writes its
    /// contribution (`x.len` bytes), then `take(rank, bytes)` is called for
    /// every rank in rank order, this one included. `x.failure` is asked
    /// before every sleep.
    pub(crate) fn exchange(
        &self,
        x: &Exchange<'_>,
        fill: impl FnOnce(&mut [u8]),
        mut take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        if x.len > BOARD_BYTES {
            return Err(Error::precondition(format!(
                "{}: {} bytes do not fit the board's {BOARD_BYTES}",
                x.header, x.len
            )));
        }
        let mut mine = [0u8; HEADER_BYTES];
        let mine_len = encode(x.header, &mut mine)?;
        let mut first_wait = None;
        let own = &self.regions[self.me];
        let mut calls = lock(&self.calls);
        let k = *calls + 1;
        let page = (k % 2) as usize;
        for peer in 0..self.regions.len() {
            if peer != self.me {
                self.wait_published(x, peer, k - 1, &mut first_wait)?;
            }
        }
        let at = own.page(page);
        // SAFETY: this rank's page `k % 2`, which no peer reads now (every
        // peer published `k - 1`, after its last read of the page) and
        // which this thread alone writes (`calls` is held). The header
        // area holds the 4-byte length, `HEADER_BYTES` of header and the
        // 8-byte data length; the data area `BOARD_BYTES >= x.len` bytes.
        unsafe {
            fill(std::slice::from_raw_parts_mut(at.add(PAGE_HEAD), x.len));
            at.cast::<u32>().write_unaligned(mine_len as u32);
            std::ptr::copy_nonoverlapping(mine.as_ptr(), at.add(4), mine_len);
            at.add(4 + HEADER_BYTES).cast::<u64>().write_unaligned(x.len as u64);
        }
        *calls = k;
        // A release store: the copy in is ordered before it. A peer asleep
        // is woken now if seen at once, and certainly after the fence below.
        own.published().store(k, Ordering::Release);
        if own.sleepers().load(Ordering::Relaxed) > 0 {
            own.wake();
        }
        let taken = (0..self.regions.len()).try_for_each(|peer| {
            if peer != self.me {
                self.wait_published(x, peer, k, &mut first_wait)?;
            }
            self.read_page(x, peer, page, &mine[..mine_len], &mut take)
        });
        // Orders the publication before the look at who sleeps, as a
        // sleeper's last look is ordered after it counted itself: a peer
        // either sees `k` there or is seen asleep here. On every path out.
        fence(Ordering::SeqCst);
        if own.sleepers().load(Ordering::SeqCst) > 0 {
            own.wake();
        }
        drop(calls);
        taken
    }

    /// Checks the header `peer` published on `page` against this rank's
    /// (`mine`, encoded) and hands its data to `take`.
    fn read_page(
        &self,
        x: &Exchange<'_>,
        peer: usize,
        page: usize,
        mine: &[u8],
        take: &mut impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let at = self.regions[peer].page(page);
        let mut theirs = [0u8; HEADER_BYTES];
        // SAFETY: the peer published this call (or this is this rank's own
        // page) and does not write the page again before this rank
        // publishes its next call; every read lies in the page's header
        // area (the lengths are checked before they are used).
        let (their_len, len) = unsafe {
            let their_len = at.cast::<u32>().read_unaligned() as usize;
            std::ptr::copy_nonoverlapping(at.add(4), theirs.as_mut_ptr(), HEADER_BYTES);
            (their_len, at.add(4 + HEADER_BYTES).cast::<u64>().read_unaligned())
        };
        if their_len > HEADER_BYTES || theirs[..their_len] != *mine {
            let called = postcard::from_bytes::<CollHeader>(&theirs[..their_len.min(HEADER_BYTES)])
                .map_or_else(|_| "nothing readable".to_owned(), |h| format!("#{} {h}", h.seq));
            return Err(Error::mismatch(format!(
                "collective #{}: rank {peer} called {called} while rank {} called {}",
                x.header.seq, x.me, x.header
            )));
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > BOARD_BYTES {
            return Err(Error::Backend {
                backend: "host",
                message: format!(
                    "rank {peer} published {len} bytes on its board page of {BOARD_BYTES}; hint: its process \
                     is corrupt"
                ),
            });
        }
        // SAFETY: as above; `len <= BOARD_BYTES`, the page's data area.
        take(peer, unsafe { std::slice::from_raw_parts(at.add(PAGE_HEAD), len) });
        Ok(())
    }

    /// Waits until `peer` published call `k` or a later one (see
    /// [`wait_published`]); a sleep is a futex wait on the peer's counter,
    /// at most [`NAP`], counted in its region so that the peer wakes it.
    fn wait_published(&self, x: &Exchange<'_>, peer: usize, k: u64, first_wait: &mut Option<Instant>) -> Result<()> {
        let region = &self.regions[peer];
        let published = region.published();
        let done = || published.load(Ordering::Acquire) >= k;
        wait_published(
            x,
            peer,
            first_wait,
            &self.signal,
            &done,
            || (),
            |(), deadline| {
                let nap = deadline.map_or(NAP, |d| NAP.min(d.saturating_duration_since(Instant::now())));
                // Counted asleep before the last look, both sequentially
                // consistent: the peer's fence after its store then sees the
                // count (and wakes this rank), or this look sees the store.
                region.sleepers().fetch_add(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                let seen = published.load(Ordering::SeqCst);
                if seen < k {
                    region.sleep(seen as u32, nap);
                }
                region.sleepers().fetch_sub(1, Ordering::SeqCst);
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DataType;
    use crate::header::Collective;

    fn header(seq: u64, count: u64) -> CollHeader {
        CollHeader {
            seq,
            kind: Collective::AllGather,
            dtype: DataType::U8,
            count: Some(count),
            op: None,
            root: None,
            exchange: None,
            shape: None,
        }
    }

    /// Two boards of one process over the same two regions, as two
    /// processes map them.
    fn pair() -> (ShmBoard, ShmBoard) {
        let (a, b) = (Region::create().unwrap(), Region::create().unwrap());
        let pid = std::process::id() as i32;
        let (a2, b2) = (Region::open(pid, a.fd()).unwrap(), Region::open(pid, b.fd()).unwrap());
        (ShmBoard::new(0, vec![a, b2]), ShmBoard::new(1, vec![a2, b]))
    }

    fn run(
        board: &ShmBoard,
        me: usize,
        h: &CollHeader,
        data: &[u8],
        failure: &dyn Fn(usize) -> Option<Error>,
    ) -> Result<Vec<Vec<u8>>> {
        let x = Exchange {
            me,
            header: h,
            len: data.len(),
            timeout: Duration::from_secs(5),
            failure,
        };
        let mut got = vec![Vec::new(); 2];
        board.exchange(&x, |page| page.copy_from_slice(data), |r, b| got[r] = b.to_vec())?;
        Ok(got)
    }

    #[test]
    fn two_boards_exchange_many_calls_with_exact_data() {
        let (b0, b1) = pair();
        let none = |_: usize| None;
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                for seq in 0..200u64 {
                    let n = (seq as usize * 331) % BOARD_BYTES;
                    let mine: Vec<u8> = (0..n).map(|i| (i as u64 + seq) as u8).collect();
                    let got = run(&b1, 1, &header(seq, n as u64), &mine, &none).unwrap();
                    let theirs: Vec<u8> = (0..n).map(|i| (i as u64 * 3 + seq) as u8).collect();
                    assert_eq!(got, [theirs, mine]);
                }
            });
            for seq in 0..200u64 {
                let n = (seq as usize * 331) % BOARD_BYTES;
                let mine: Vec<u8> = (0..n).map(|i| (i as u64 * 3 + seq) as u8).collect();
                let got = run(&b0, 0, &header(seq, n as u64), &mine, &none).unwrap();
                let theirs: Vec<u8> = (0..n).map(|i| (i as u64 + seq) as u8).collect();
                assert_eq!(got, [mine, theirs]);
            }
            t.join().unwrap();
        });
    }

    #[test]
    fn different_calls_are_a_mismatch_naming_both() {
        let (b0, b1) = pair();
        let none = |_: usize| None;
        std::thread::scope(|s| {
            let t = s.spawn(|| run(&b1, 1, &header(0, 8), &[1; 8], &none));
            let e = run(&b0, 0, &header(0, 4), &[0; 4], &none).unwrap_err();
            let theirs = t.join().unwrap().unwrap_err();
            for e in [e, theirs] {
                let Error::Mismatch { message } = e else {
                    panic!("not a mismatch: {e}")
                };
                assert!(message.contains("collective #0"), "{message}");
            }
        });
    }

    #[test]
    fn a_peer_that_never_comes_fails_with_its_error_after_a_nap() {
        let (b0, _b1) = pair();
        let start = Instant::now();
        let failed = |peer: usize| {
            (start.elapsed() > Duration::from_millis(20)).then(|| Error::PeerFailed {
                rank: peer,
                reason: "its process was killed".into(),
            })
        };
        let e = run(&b0, 0, &header(0, 4), &[0; 4], &failed).unwrap_err();
        assert!(matches!(e, Error::PeerFailed { rank: 1, .. }), "{e}");
        assert!(start.elapsed() < Duration::from_secs(1), "{:?}", start.elapsed());
    }
}
