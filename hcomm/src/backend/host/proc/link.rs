//! One connection to a peer process: the messages on it, a writer thread
//! that alone writes to the socket (so no thread that reads ever blocks on a
//! write, and two processes streaming to each other cannot deadlock), and
//! the single-copy read of a peer's memory (cross-memory attach).

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use serde::{Deserialize, Serialize};

use crate::backend::entries::EntryMsg;
use crate::backend::liveness::lock;
use crate::backend::Context;
use crate::collective::CollHeader;
use crate::element::DataType;
use crate::wire::write_frame;

/// An operation as its owner's process names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct WireOp {
    pub(super) slot: u32,
    pub(super) generation: u32,
}

/// What two processes tell each other.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Msg {
    /// First message on a connection.
    Hello {
        rank: u32,
        world: u32,
        pid: i32,
        host: String,
        /// Address and value of a word the peer may read to test whether
        /// it can read this process's memory directly.
        probe_addr: u64,
        probe: u64,
    },
    /// Second message on a connection: whether the sender can read the
    /// receiver's memory (data moves that way only when both can).
    Ready { can_read: bool },
    /// A send is ready: `count` elements of `dtype` at `addr` in the
    /// sender's memory.
    Rts {
        group: u64,
        context: Context,
        tag: i64,
        send: WireOp,
        addr: u64,
        count: u64,
        dtype: DataType,
        header: Option<CollHeader>,
    },
    /// The receiver has the data of `send`.
    Done { send: WireOp },
    /// The receiver refuses `send` (the two ends disagree).
    Reject {
        send: WireOp,
        message: String,
        group: u64,
        coll: bool,
    },
    /// The receiver asks for the data of `send` on the connection.
    Cts { send: WireOp, recv: WireOp },
    /// `len` bytes of data for `recv` follow this frame.
    Data { recv: WireOp, len: u64 },
    /// The sender withdrew the send a `Cts` asked for.
    Gone { recv: WireOp },
    /// The sender withdraws `send` unless it already matched.
    Cancel { send: WireOp },
    /// `send` was withdrawn before it matched.
    Cancelled { send: WireOp },
    /// The sender's rank entered a collective of `group`.
    Enter { group: u64, header: CollHeader },
    /// `group` was aborted.
    Abort { group: u64, reason: String },
    /// About the sender's `comm_schedule!` calls in `group`.
    Entry { group: u64, entry: EntryMsg },
    /// The sender's rank failed; `known` are the ranks it knows failed as
    /// root causes (so a rank that stopped because of another's failure
    /// never hides that failure).
    Failed {
        reason: String,
        secondary: bool,
        known: Vec<(u32, String)>,
    },
    /// The sender's rank finished (its communicators are gone); `known` as
    /// for `Failed`.
    Finished { known: Vec<(u32, String)> },
}

/// How long a direct write may wait for the peer to drain the connection.
const DIRECT_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What the writer thread writes next.
pub(super) enum Out {
    Msg(Msg),
    /// A `Data` frame and `len` bytes from `ptr`; then `done` runs.
    Stream {
        recv: WireOp,
        ptr: *const u8,
        len: usize,
        done: Box<dyn FnOnce(io::Result<()>) + Send>,
    },
}

// SAFETY: the pointer of `Out::Stream` is the buffer of a send its owner
// keeps valid and unreleased until `done` has run (the send stays claimed).
unsafe impl Send for Out {}

#[derive(Default)]
struct Queue {
    items: VecDeque<Out>,
    closed: bool,
}

/// The sending half of one connection.
///
/// When the two processes read each other's memory (`cma`), only small
/// control messages travel on the connection and every thread writes them
/// itself (`direct`, under a lock; a write the peer does not drain within
/// [`DIRECT_WRITE_LIMIT`] fails the connection). Otherwise data streams too,
/// and one writer thread does all writing, so no thread that reads ever
/// blocks on a write.
pub(super) struct Link {
    pub(super) pid: i32,
    /// Whether the two processes read each other's memory.
    pub(super) cma: bool,
    /// The frame buffer of direct writes.
    direct: Mutex<Vec<u8>>,
    queue: Mutex<Queue>,
    ready: Condvar,
    stream: TcpStream,
    /// Set when the writer thread has stopped.
    stopped: Mutex<bool>,
    stopped_cv: Condvar,
    /// Messages held back to share the write of the next message on the
    /// connection (schedule-entry notes), written before it; `has_held`
    /// says whether there are any.
    held: Mutex<Vec<Msg>>,
    has_held: AtomicBool,
}

/// Held messages beyond this many are written at once.
const HOLD_LIMIT: usize = 32;

impl Link {
    pub(super) fn new(pid: i32, cma: bool, stream: TcpStream) -> io::Result<Arc<Link>> {
        if cma {
            stream.set_write_timeout(Some(DIRECT_WRITE_LIMIT))?;
        }
        Ok(Arc::new(Link {
            pid,
            cma,
            direct: Mutex::new(Vec::with_capacity(256)),
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            stream,
            stopped: Mutex::new(cma),
            stopped_cv: Condvar::new(),
            held: Mutex::new(Vec::new()),
            has_held: AtomicBool::new(false),
        }))
    }

    /// Holds `msg` back until the next message on this connection, which
    /// carries it in front of its own (one write, one wake-up of the peer),
    /// or until [`Link::flush_held`].
    pub(super) fn hold(&self, msg: Msg) {
        let mut held = lock(&self.held);
        held.push(msg);
        self.has_held.store(true, Ordering::SeqCst);
        if held.len() >= HOLD_LIMIT {
            drop(held);
            self.flush_held();
        }
    }

    /// Writes the held messages now.
    pub(super) fn flush_held(&self) {
        if self.has_held.load(Ordering::SeqCst) {
            self.write(None);
        }
    }

    /// The held messages, taken.
    fn take_held(&self) -> Vec<Msg> {
        if !self.has_held.swap(false, Ordering::SeqCst) {
            return Vec::new();
        }
        std::mem::take(&mut *lock(&self.held))
    }

    /// Queues `out` for the writer thread; dropped once the link closed
    /// (a stream's `done` then runs with an error).
    pub(super) fn push(&self, out: Out) {
        self.write(Some(out));
    }

    /// Writes (or queues) the held messages, then `out`.
    fn write(&self, out: Option<Out>) {
        if self.cma {
            return self.write_direct(out);
        }
        let mut q = lock(&self.queue);
        if q.closed {
            drop(q);
            if let Some(Out::Stream { done, .. }) = out {
                done(Err(io::Error::new(io::ErrorKind::BrokenPipe, "connection closed")));
            }
            return;
        }
        q.items.extend(self.take_held().into_iter().map(Out::Msg));
        q.items.extend(out);
        self.ready.notify_one();
    }

    pub(super) fn send(&self, msg: Msg) {
        self.push(Out::Msg(msg));
    }

    /// Writes `out` on the calling thread (links whose data never travels
    /// on the connection).
    fn write_direct(&self, out: Option<Out>) {
        let msg = match out {
            Some(Out::Msg(m)) => Some(m),
            // Never asked for: the peer reads the data itself.
            Some(Out::Stream { done, .. }) => {
                return done(Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "this connection carries no data",
                )))
            }
            None => None,
        };
        if lock(&self.queue).closed {
            return;
        }
        let mut buf = lock(&self.direct);
        let held = self.take_held();
        let written = if held.is_empty() {
            match &msg {
                Some(m) => write_frame(&mut &self.stream, m, &mut buf),
                None => Ok(()),
            }
        } else {
            // one write for the held messages and this one
            let mut frames = Vec::with_capacity(128 * (held.len() + 1));
            held.iter()
                .chain(&msg)
                .try_for_each(|m| write_frame(&mut frames, m, &mut buf))
                .and_then(|()| (&self.stream).write_all(&frames))
        };
        if written.is_err() {
            // The reader sees the connection end and fails what waits on it.
            drop(buf);
            self.shutdown();
        }
    }

    /// Stops the writer after what is queued and closes the connection.
    pub(super) fn close(&self) {
        self.flush_held();
        lock(&self.queue).closed = true;
        self.ready.notify_all();
        if self.cma {
            // Everything was written already; the peer sees the end.
            let _d = lock(&self.direct);
            let _ = self.stream.shutdown(Shutdown::Write);
        }
    }

    /// Records that the writer thread stopped.
    pub(super) fn mark_stopped(&self) {
        *lock(&self.stopped) = true;
        self.stopped_cv.notify_all();
    }

    /// Waits until the writer thread stopped (it wrote what was queued), at
    /// most until `deadline`.
    pub(super) fn wait_stopped(&self, deadline: std::time::Instant) {
        let mut stopped = lock(&self.stopped);
        while !*stopped {
            let now = std::time::Instant::now();
            if now >= deadline {
                return;
            }
            stopped = self
                .stopped_cv
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Cuts the connection at once (the reader sees its end).
    pub(super) fn shutdown(&self) {
        self.close();
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// The writer thread's loop: writes queued items until closed; returns
    /// the error that ended it, if any.
    pub(super) fn write_loop(&self) -> io::Result<()> {
        let mut w = BufWriter::with_capacity(64 << 10, self.stream.try_clone()?);
        let mut buf = Vec::with_capacity(256);
        loop {
            let item = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(item) = q.items.pop_front() {
                        break Some(item);
                    }
                    if q.closed {
                        break None;
                    }
                    // Nothing queued: flush what was written, then sleep.
                    drop(q);
                    w.flush()?;
                    q = lock(&self.queue);
                    if q.items.is_empty() && !q.closed {
                        q = self.ready.wait(q).unwrap_or_else(std::sync::PoisonError::into_inner);
                    }
                }
            };
            let Some(item) = item else {
                w.flush()?;
                return Ok(());
            };
            match item {
                Out::Msg(m) => write_frame(&mut w, &m, &mut buf)?,
                Out::Stream { recv, ptr, len, done } => {
                    let result = (|| {
                        write_frame(&mut w, &Msg::Data { recv, len: len as u64 }, &mut buf)?;
                        if len > 0 {
                            // SAFETY: the send this stream belongs to stays
                            // claimed, its buffer valid and unchanged, until
                            // `done` runs below.
                            let data = unsafe { std::slice::from_raw_parts(ptr, len) };
                            w.write_all(data)?;
                        }
                        w.flush()
                    })();
                    let failed = result.as_ref().err().map(|e| io::Error::new(e.kind(), e.to_string()));
                    done(result);
                    if let Some(e) = failed {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Fails every queued stream (the connection is gone).
    pub(super) fn drain_failed(&self) {
        let items: Vec<Out> = {
            let mut q = lock(&self.queue);
            q.closed = true;
            q.items.drain(..).collect()
        };
        for item in items {
            if let Out::Stream { done, .. } = item {
                done(Err(io::Error::new(io::ErrorKind::BrokenPipe, "connection closed")));
            }
        }
    }
}

/// Reads `dst.len()` bytes at `addr` in process `pid` into `dst`.
pub(super) fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    use nix::sys::uio::{process_vm_readv, RemoteIoVec};
    use nix::unistd::Pid;
    let mut done = 0;
    while done < dst.len() {
        let remote = [RemoteIoVec {
            base: addr as usize + done,
            len: dst.len() - done,
        }];
        let mut local = [io::IoSliceMut::new(&mut dst[done..])];
        let n = process_vm_readv(Pid::from_raw(pid), &mut local, &remote).map_err(io::Error::from)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer memory read returned nothing",
            ));
        }
        done += n;
    }
    Ok(())
}

/// Lets any process of this user read this process's memory even where the
/// Yama security module restricts it to ancestors (what cross-memory attach
/// needs between sibling ranks); a no-op elsewhere.
pub(super) fn allow_peer_reads() {
    // SAFETY: `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)` takes no pointers
    // and only changes this process's ptrace policy; failure (no Yama) is
    // harmless and ignored.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}
