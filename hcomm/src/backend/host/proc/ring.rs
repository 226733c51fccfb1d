//! A one-way ring of control messages in memory that two processes of one
//! host share: the receiving process creates it (a sealed memory file of
//! `memfd.rs`) and the sending one maps it through `/proc/<pid>/fd`. The sender appends
//! whole frames and publishes them by advancing `tail`; the receiver takes
//! everything up to `tail` and frees it by advancing `head`. Neither makes a
//! system call, so a rank that spins sees a message as soon as it is
//! written; a receiver about to sleep counts itself in `asleep`, and a
//! sender that sees it there wakes it through the connection.
//!
//! The positions are free-running byte counts; the other process is
//! trusted no further than to be buggy: a position it wrote that is out of
//! range is an error, never an access outside the mapping.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::memfd::MemFile;

/// Bytes of messages a ring holds.
const CAPACITY: usize = 1 << 20;
/// Where the messages start in the mapping (the positions come first, on
/// cache lines of their own).
const DATA: usize = 4096;
const HEAD: usize = 0;
const TAIL: usize = 64;
const ASLEEP: usize = 128;
const LEN: usize = DATA + CAPACITY;

/// One ring, mapped into this process. Callers serialize pushes (one
/// writer) and takes (one reader) themselves; the positions are only
/// accessed atomically, and the message bytes only in the ranges the
/// protocol gives to one side at a time (see `push` and `take`).
pub(super) struct Ring {
    file: MemFile,
}

impl Ring {
    /// A new, empty ring in a memory file of this process.
    pub(super) fn create() -> io::Result<Ring> {
        Ok(Ring {
            file: MemFile::create(c"hcomm-ring", LEN)?,
        })
    }

    /// Maps the ring that process `pid` holds as its descriptor `fd`.
    pub(super) fn open(pid: i32, fd: i32) -> io::Result<Ring> {
        Ok(Ring {
            file: MemFile::open(pid, fd, LEN, "message ring")?,
        })
    }

    /// The descriptor of the ring's memory file in this process.
    pub(super) fn fd(&self) -> RawFd {
        self.file.fd()
    }

    /// The start of the mapping (`LEN` bytes, page-aligned).
    fn base(&self) -> *mut u8 {
        self.file.base()
    }

    fn position(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is `HEAD` or `TAIL`: inside the mapping, 8-aligned
        // (the mapping is page-aligned), and only ever accessed atomically
        // by either process; the reference lives no longer than `self`.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the offset of a page-aligned mapping is 8-aligned"
        )]
        unsafe {
            &*self.base().add(at).cast::<AtomicU64>()
        }
    }

    fn asleep(&self) -> &AtomicU32 {
        // SAFETY: as in `position`, for the 4-byte counter at `ASLEEP`.
        #[allow(
            clippy::cast_ptr_alignment,
            reason = "the offset of a page-aligned mapping is 4-aligned"
        )]
        unsafe {
            &*self.base().add(ASLEEP).cast::<AtomicU32>()
        }
    }

    /// Appends one frame made of `parts` end to end (the sending side; one
    /// thread at a time): false when the ring has no room for it now, an
    /// error when it never will.
    pub(super) fn push(&self, parts: &[&[u8]]) -> io::Result<bool> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a control message of {len} bytes exceeds the ring of {CAPACITY}"),
            ));
        }
        let head = self.position(HEAD).load(Ordering::Acquire);
        let tail = self.position(TAIL).load(Ordering::Relaxed);
        let used = usize::try_from(tail.wrapping_sub(head)).unwrap_or(usize::MAX);
        if used > CAPACITY {
            return Err(corrupt());
        }
        if CAPACITY - used < len {
            return Ok(false);
        }
        let mut start = (tail % CAPACITY as u64) as usize;
        for part in parts {
            let first = part.len().min(CAPACITY - start);
            // SAFETY: both ranges lie in the data area (`start + first <=
            // CAPACITY`, and the rest from its beginning); they are free
            // (the receiver read up to `head`, and `tail - head + len <=
            // CAPACITY`), so the receiver does not read them until `tail`
            // moves below.
            unsafe {
                let data = self.base().add(DATA);
                std::ptr::copy_nonoverlapping(part.as_ptr(), data.add(start), first);
                std::ptr::copy_nonoverlapping(part.as_ptr().add(first), data, part.len() - first);
            }
            start = (start + part.len()) % CAPACITY;
        }
        self.position(TAIL)
            .store(tail.wrapping_add(len as u64), Ordering::Release);
        Ok(true)
    }

    /// Whether `bytes` more fit while the ring stays at most a quarter
    /// full (the sending side): room left for the control messages.
    pub(super) fn has_room_for(&self, bytes: usize) -> bool {
        let head = self.position(HEAD).load(Ordering::Acquire);
        let tail = self.position(TAIL).load(Ordering::Relaxed);
        usize::try_from(tail.wrapping_sub(head)).is_ok_and(|used| used.saturating_add(bytes) <= CAPACITY / 4)
    }

    /// Whether the receiver may be asleep (and must be woken) after what
    /// was just pushed.
    pub(super) fn receiver_asleep(&self) -> bool {
        fence(Ordering::SeqCst);
        self.asleep().load(Ordering::SeqCst) > 0
    }

    /// Appends every message there is to `out` and frees it (the receiving
    /// side; one thread at a time); the number of bytes taken.
    pub(super) fn take(&self, out: &mut Vec<u8>) -> io::Result<usize> {
        let tail = self.position(TAIL).load(Ordering::Acquire);
        let head = self.position(HEAD).load(Ordering::Relaxed);
        let n = usize::try_from(tail.wrapping_sub(head)).unwrap_or(usize::MAX);
        if n == 0 {
            return Ok(0);
        }
        if n > CAPACITY {
            return Err(corrupt());
        }
        let start = (head % CAPACITY as u64) as usize;
        let first = n.min(CAPACITY - start);
        out.reserve(n);
        // SAFETY: both ranges lie in the data area and hold what the sender
        // published before `tail` (acquired above); it writes none of them
        // again until `head` moves past them below.
        unsafe {
            let data = self.base().add(DATA).cast_const();
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, n - first));
        }
        self.position(HEAD).store(tail, Ordering::Release);
        Ok(n)
    }

    /// The receiver is about to sleep: counts it among the sleepers, so a
    /// sender wakes it; false (and nothing counted) when a message arrived
    /// already.
    pub(super) fn sleep_begin(&self) -> bool {
        self.asleep().fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let tail = self.position(TAIL).load(Ordering::SeqCst);
        if tail != self.position(HEAD).load(Ordering::Relaxed) {
            self.sleep_end();
            return false;
        }
        true
    }

    /// The receiver woke up.
    pub(super) fn sleep_end(&self) {
        self.asleep().fetch_sub(1, Ordering::SeqCst);
    }
}

fn corrupt() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "the message ring's positions are corrupt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_pass_in_order_across_the_wrap_and_a_full_ring_refuses() {
        let rx = Ring::create().unwrap();
        let tx = Ring::open(std::process::id() as i32, rx.fd()).unwrap();
        let mut out = Vec::new();
        let frame: Vec<u8> = (0..=255u8).cycle().take(CAPACITY / 3 + 7).collect();
        let mut sent = Vec::new();
        for round in 0..10u8 {
            let f: Vec<u8> = frame.iter().map(|b| b.wrapping_add(round)).collect();
            assert!(tx.push(&[&f[..7], &f[7..]]).unwrap());
            sent.extend_from_slice(&f);
            if round % 2 == 1 {
                rx.take(&mut out).unwrap();
            }
        }
        rx.take(&mut out).unwrap();
        assert_eq!(out, sent);
        // Full: three quarters fit, the fourth waits until the receiver
        // takes.
        let quarter = vec![7u8; CAPACITY / 4 + 1];
        for _ in 0..3 {
            assert!(tx.push(&[&quarter]).unwrap());
        }
        assert!(!tx.push(&[&quarter]).unwrap());
        assert!(tx.push(&[&vec![0; CAPACITY + 1]]).is_err());
        out.clear();
        assert_eq!(rx.take(&mut out).unwrap(), 3 * quarter.len());
        assert_eq!(rx.take(&mut out).unwrap(), 0);
        assert!(out.iter().all(|&b| b == 7));
        assert!(tx.push(&[&quarter]).unwrap());
    }

    #[test]
    fn a_sleeper_is_seen_and_a_pending_message_keeps_it_awake() {
        let rx = Ring::create().unwrap();
        let tx = Ring::open(std::process::id() as i32, rx.fd()).unwrap();
        assert!(!tx.receiver_asleep());
        assert!(rx.sleep_begin());
        assert!(tx.receiver_asleep());
        rx.sleep_end();
        assert!(tx.push(&[b"x"]).unwrap());
        assert!(!rx.sleep_begin());
        assert!(!tx.receiver_asleep());
    }
}
