//! One connection to a peer process: the messages on it, a writer thread
//! that alone writes to the socket (so no thread that reads ever blocks on a
//! write, and two processes streaming to each other cannot deadlock), the
//! inbox from which any thread of this process may take the messages that
//! arrived on a connection that carries no data, and the single-copy read
//! of a peer's memory (cross-memory attach).
//!
//! Between two processes that read each other's memory, the control
//! messages travel in shared-memory rings (`ring.rs`) where both could map
//! them: the connection then carries only `Wake` for a receiver that sleeps,
//! and its end still tells that the peer's process is gone.

use std::collections::VecDeque;
use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};

use serde::{Deserialize, Serialize};

use crate::auth::Key;
use crate::backend::entries::EntryMsg;
use crate::backend::liveness::lock;
use crate::backend::Context;
use crate::element::DataType;
use crate::header::CollHeader;
use crate::wire::write_frame;

use super::ring::Ring;

/// An operation as its owner's process names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct WireOp {
    pub(super) slot: u32,
    pub(super) generation: u32,
}

/// What two processes tell each other.
/// Bytes encoded as one length and the bytes themselves (serde's bytes),
/// not as a sequence of numbers: a message's data in and out at the speed
/// of a copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Bytes(pub(super) Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        d.deserialize_byte_buf(Visitor)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) enum Msg {
    /// First message on a connection, answered by a proof that the sender
    /// knows the job's secret (`mod.rs`, `handshake`).
    Hello {
        rank: u32,
        world: u32,
        /// The job's id (`JobSecret::job_id`): another job's is refused.
        job: u64,
        /// The sender's challenge, fresh for this connection.
        nonce: [u8; 32],
        pid: i32,
        host: String,
        /// Address and value of a word the peer may read to test whether
        /// it can read this process's memory directly.
        probe_addr: u64,
        probe: u64,
        /// The cores the sender's process may run on, so that the
        /// processes of one host can take cores of their own.
        cores: Vec<u32>,
    },
    /// Second message on a connection: whether the sender can read the
    /// receiver's memory (data moves that way only when both can), and the
    /// descriptor of the ring (in the sender's process) the receiver may
    /// map to send it control messages, and of its board region (`shm.rs`)
    /// when it offers one.
    Ready {
        can_read: bool,
        ring: Option<i32>,
        board: Option<i32>,
    },
    /// Last message of the handshake: whether the sender holds a board
    /// region and mapped every peer's (the board is used when all did).
    Board { ok: bool },
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
        /// Address of the sender's withdrawal counter and its value when
        /// the send was offered: a receiver that reads the buffer from the
        /// sender's memory reads the counter after the data, and fails the
        /// receive if it moved (the sender may have given the buffer back).
        lease: u64,
        epoch: u64,
    },
    /// A send of `count` elements of `dtype` whose bytes are `data`
    /// (`EAGER_BYTES` at most; on a link with a shared ring).
    Eager {
        group: u64,
        context: Context,
        tag: i64,
        send: WireOp,
        count: u64,
        dtype: DataType,
        header: Option<CollHeader>,
        data: Bytes,
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
    /// The sender learned that these ranks failed as root causes (it is
    /// running): a rank that never talks to them learns it too, so its
    /// collectives with them fail at once rather than wait on a member
    /// that left the collective when it saw the failure.
    Learned { known: Vec<(u32, String)> },
    /// Messages wait in the ring (for a receiver that may sleep).
    Wake,
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
    /// What arrived on a connection that carries no data (`cma`) and is
    /// not yet handled; whoever holds it reads the connection.
    inbox: Mutex<Inbox>,
    /// Set once reading the connection found its end.
    ended: AtomicBool,
    /// The ring this process reads the peer's control messages from.
    rx: Option<Ring>,
    /// The ring this process writes its control messages to.
    tx: Option<Ring>,
    /// Whether the connection may hold something to read (the waiting
    /// thread saw it readable).
    kicked: AtomicBool,
    /// The keys of the integrity tags of what this process writes and what
    /// it reads (links whose data travels on the connection).
    tx_key: Key,
    rx_key: Key,
}

/// Bytes received on a connection, not yet handled.
#[derive(Default)]
struct Inbox {
    bytes: Vec<u8>,
    /// How many of `bytes` were received.
    have: usize,
    /// Messages taken from the ring.
    ring_bytes: Vec<u8>,
    /// Looks at the ring since the connection was last read.
    looks: u32,
    /// Set once the connection ended: nobody reads it any more.
    ended: bool,
}

/// What [`Link::receive`] did.
pub(super) enum Received {
    /// Another thread is reading the connection.
    Busy,
    /// It handled the messages that had arrived (if any).
    Handled,
    /// The connection ended, for this reason (said once).
    Ended(String),
    /// The connection had ended before.
    Closed,
}

/// The longest control message accepted on a connection that carries no
/// data; anything longer is a corrupt stream.
const MAX_CONTROL_FRAME: usize = 1 << 20;
/// How much room a read from the connection gets at least.
const READ_ROOM: usize = 16 << 10;
/// Where messages come in a ring, a look at it reads the connection too
/// (for its end) once in this many looks: a spinning waiter looks about
/// once a microsecond, so a peer's end is seen within a quarter of a
/// millisecond, and a 64 KiB send-receive of 2 processes makes about one
/// empty `recvfrom` every 25 calls instead of one every other call (with
/// 16; a sleeping waiter's `ppoll` sees the end at once either way).
const SOCKET_EVERY: u32 = 256;

/// How long a sender waits before it looks again whether a full ring has
/// room.
const RING_FULL_PAUSE: std::time::Duration = std::time::Duration::from_micros(50);

/// Held messages beyond this many are written at once.
const HOLD_LIMIT: usize = 32;

impl Link {
    /// A link on `stream`; `mac_key` is the key both ends share, `lower`
    /// whether this process has the lower rank of the two (each direction
    /// gets a key of its own, derived from `mac_key`).
    pub(super) fn new(
        pid: i32,
        cma: bool,
        stream: TcpStream,
        rings: (Option<Ring>, Option<Ring>),
        mac_key: Key,
        lower: bool,
    ) -> io::Result<Arc<Link>> {
        let (rx, tx) = rings;
        if cma {
            stream.set_write_timeout(Some(DIRECT_WRITE_LIMIT))?;
        }
        let up = direction_key(&mac_key, b"lower to higher");
        let down = direction_key(&mac_key, b"higher to lower");
        let (tx_key, rx_key) = if lower { (up, down) } else { (down, up) };
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
            inbox: Mutex::new(Inbox::default()),
            ended: AtomicBool::new(false),
            rx,
            tx,
            kicked: AtomicBool::new(false),
            tx_key,
            rx_key,
        }))
    }

    /// The reader of the connection's frames and data, checking their
    /// integrity tags (links whose data travels on the connection).
    pub(super) fn reader<R: Read>(&self, inner: R) -> TagReader<R> {
        TagReader {
            inner,
            key: self.rx_key,
            seq: 0,
            data_left: 0,
            block_left: 0,
            hasher: blake3::Hasher::new_keyed(&self.rx_key),
        }
    }

    /// Handles, in order, the messages that arrived on this connection (one
    /// that carries no data) by `handle`, without waiting for more. With
    /// `wait_turn`, waits while another thread reads the connection; else
    /// returns [`Received::Busy`] then.
    pub(super) fn receive(&self, wait_turn: bool, mut handle: impl FnMut(Msg) -> io::Result<()>) -> Received {
        let mut inbox = match self.inbox.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) if wait_turn => lock(&self.inbox),
            Err(TryLockError::WouldBlock) => return Received::Busy,
        };
        if inbox.ended {
            return Received::Closed;
        }
        let inbox = &mut *inbox;
        let why = if let Err(why) = self.take_ring(inbox, &mut handle) {
            why
        } else {
            inbox.looks += 1;
            let look = self.rx.is_none()
                || wait_turn
                || self.kicked.swap(false, Ordering::AcqRel)
                || inbox.looks % SOCKET_EVERY == 0;
            if !look {
                return Received::Handled;
            }
            match self.read_socket(inbox, &mut handle) {
                Ok(()) => return Received::Handled,
                // What the peer put in the ring before it closed the
                // connection still counts.
                Err(why) => self.take_ring(inbox, &mut handle).err().unwrap_or(why),
            }
        };
        inbox.ended = true;
        self.ended.store(true, Ordering::Release);
        Received::Ended(why)
    }

    /// Handles the messages in the ring, if this link has one.
    fn take_ring(&self, inbox: &mut Inbox, handle: &mut impl FnMut(Msg) -> io::Result<()>) -> Result<(), String> {
        let Some(ring) = &self.rx else { return Ok(()) };
        inbox.ring_bytes.clear();
        if ring.take(&mut inbox.ring_bytes).map_err(|e| e.to_string())? == 0 {
            return Ok(());
        }
        let used = handle_frames(&inbox.ring_bytes, handle)?;
        if used != inbox.ring_bytes.len() {
            return Err("a message in the ring was cut short".to_owned());
        }
        Ok(())
    }

    /// Handles the messages the connection holds, without waiting; the
    /// reason it ended, if it did.
    fn read_socket(&self, inbox: &mut Inbox, handle: &mut impl FnMut(Msg) -> io::Result<()>) -> Result<(), String> {
        loop {
            let Inbox { bytes, have, .. } = &mut *inbox;
            if bytes.len() - *have < READ_ROOM {
                bytes.resize(*have + 2 * READ_ROOM, 0);
            }
            let n = match self.recv_now(&mut bytes[*have..]) {
                Ok(0) => return Err("connection closed".to_owned()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            };
            *have += n;
            let at = handle_frames(&bytes[..*have], handle)?;
            bytes.copy_within(at..*have, 0);
            *have -= at;
        }
    }

    /// Reads what the connection holds into `buf`, without waiting.
    fn recv_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid and writable for `buf.len()` bytes; the
        // descriptor is the socket `self.stream` owns, open while `self`
        // lives.
        let n = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Whether a message of about `bytes` may go in the peer's shared ring
    /// with its data (`Msg::Eager`): the link has one, and it stays at
    /// most a quarter full, so that a peer that takes nothing for a while
    /// (stopped, busy) never fills it with data.
    pub(super) fn ring_has_room(&self, bytes: usize) -> bool {
        self.tx.as_ref().is_some_and(|r| r.has_room_for(bytes))
    }

    /// Counts the caller among the ring's sleepers before it sleeps: false
    /// (nothing counted) when messages wait in the ring already.
    pub(super) fn sleep_begin(&self) -> bool {
        self.rx.as_ref().is_none_or(Ring::sleep_begin)
    }

    /// The caller of a successful [`Link::sleep_begin`] woke up.
    pub(super) fn sleep_end(&self) {
        if let Some(r) = &self.rx {
            r.sleep_end();
        }
    }

    /// Notes that the connection may hold something to read.
    pub(super) fn mark_kicked(&self) {
        self.kicked.store(true, Ordering::Release);
    }

    /// Whether the ring or the connection has something to read (or the
    /// connection ended), waiting for that at most `timeout`.
    pub(super) fn wait_readable(&self, timeout: std::time::Duration) -> io::Result<bool> {
        if !self.sleep_begin() {
            return Ok(true);
        }
        let result = self.poll_socket(timeout);
        self.sleep_end();
        result
    }

    /// Whether the connection has something to read (or ended), waiting
    /// for that at most `timeout`.
    fn poll_socket(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut fd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `fd` is one valid `pollfd` for the duration of the call;
        // its descriptor is the socket `self.stream` owns.
        let r = unsafe { libc::poll(&raw mut fd, 1, ms) };
        match r {
            0 => Ok(false),
            1.. => Ok(true),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The socket to wait on for messages, while the connection has not
    /// ended (links that carry no data).
    pub(super) fn control_fd(&self) -> Option<std::os::fd::RawFd> {
        (self.cma && !self.ended.load(Ordering::Acquire)).then(|| self.stream.as_raw_fd())
    }

    /// Whether the connection was seen to end.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
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
        let written = if let Some(ring) = &self.tx {
            held.iter().chain(&msg).try_for_each(|m| {
                write_frame(&mut io::sink(), m, &mut buf)?;
                self.push_ring(ring, &[&buf])
            })
        } else if held.is_empty() {
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

    /// Sends `head`, a `Msg::Eager` whose data is empty, with `data` as its
    /// data: through the peer's ring, after the held messages, the data
    /// copied once, from where it is into the ring (else as one message).
    pub(super) fn send_eager(&self, head: Msg, data: &[u8]) {
        let Some(ring) = self.tx.as_ref().filter(|_| self.cma) else {
            let mut msg = head;
            if let Msg::Eager { data: d, .. } = &mut msg {
                d.0 = data.to_vec();
            }
            return self.send(msg);
        };
        if lock(&self.queue).closed {
            return;
        }
        let mut buf = lock(&self.direct);
        let held = self.take_held();
        let written = held
            .iter()
            .try_for_each(|m| {
                write_frame(&mut io::sink(), m, &mut buf)?;
                self.push_ring(ring, &[&buf])
            })
            .and_then(|()| {
                eager_head(&head, data.len(), &mut buf)?;
                self.push_ring(ring, &[&buf, data])
            });
        if written.is_err() {
            drop(buf);
            self.shutdown();
        }
    }

    /// Appends the frame made of `parts` to the peer's ring, waiting for
    /// room (at most [`DIRECT_WRITE_LIMIT`]), and wakes the peer if it may
    /// sleep.
    fn push_ring(&self, ring: &Ring, parts: &[&[u8]]) -> io::Result<()> {
        let mut full_since = None;
        while !ring.push(parts)? {
            let since = *full_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > DIRECT_WRITE_LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer took no control messages for a minute",
                ));
            }
            if ring.receiver_asleep() {
                self.wake()?;
            }
            std::thread::sleep(RING_FULL_PAUSE);
        }
        if ring.receiver_asleep() {
            self.wake()?;
        }
        Ok(())
    }

    /// Wakes a peer that sleeps waiting for its ring.
    fn wake(&self) -> io::Result<()> {
        let mut buf = Vec::with_capacity(8);
        write_frame(&mut &self.stream, &Msg::Wake, &mut buf)
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
        let mut seq = 0u64;
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
                Out::Msg(m) => {
                    write_frame(&mut io::sink(), &m, &mut buf)?;
                    write_tagged(&mut w, &self.tx_key, &mut seq, &buf)?;
                }
                Out::Stream { recv, ptr, len, done } => {
                    let result = (|| {
                        write_frame(&mut io::sink(), &Msg::Data { recv, len: len as u64 }, &mut buf)?;
                        write_tagged(&mut w, &self.tx_key, &mut seq, &buf)?;
                        if len > 0 {
                            // SAFETY: the send this stream belongs to stays
                            // claimed, its buffer valid and unchanged, until
                            // `done` runs below.
                            let data = unsafe { std::slice::from_raw_parts(ptr, len) };
                            for block in data.chunks(TAG_BLOCK) {
                                write_tagged(&mut w, &self.tx_key, &mut seq, block)?;
                            }
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

/// Streamed data carries an integrity tag after every this many bytes.
const TAG_BLOCK: usize = 256 << 10;
/// The bytes of an integrity tag.
const TAG_BYTES: usize = 32;
/// The longest frame a connection that carries data accepts.
const MAX_DATA_LINK_FRAME: usize = 1 << 24;

/// The key of one direction of a connection.
fn direction_key(key: &Key, direction: &[u8]) -> Key {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"hcomm link direction\0");
    h.update(direction);
    *h.finalize().as_bytes()
}

/// The integrity tag of the `seq`-th unit (frame or data block) of one
/// direction: keyed BLAKE3 over the sequence number and the bytes, so
/// that an altered, dropped, reordered or replayed unit fails the check.
fn tag(key: &Key, seq: u64, bytes: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(&seq.to_le_bytes());
    h.update(bytes);
    h.finalize()
}

/// Writes `bytes` and their tag as the `seq`-th unit, and counts it.
fn write_tagged(w: &mut impl Write, key: &Key, seq: &mut u64, bytes: &[u8]) -> io::Result<()> {
    let t = tag(key, *seq, bytes);
    *seq += 1;
    w.write_all(bytes)?;
    w.write_all(t.as_bytes())
}

/// The error of a unit whose tag does not match.
fn integrity_error(seq: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "integrity check failed on {what} {seq} of the connection (altered, dropped, reordered or replayed bytes)"
        ),
    )
}

/// Reads the frames of a connection that carries data, and the data after
/// each `Data` frame (through its `Read`), checking every unit's tag.
pub(super) struct TagReader<R> {
    inner: R,
    key: Key,
    /// The sequence number of the next unit.
    seq: u64,
    /// Data bytes of the current `Data` frame not yet read.
    data_left: u64,
    /// Bytes of the current data block not yet read.
    block_left: usize,
    /// The tag of the current data block so far.
    hasher: blake3::Hasher,
}

impl<R: Read> TagReader<R> {
    /// The next frame, decoded, once its tag checked; after a `Data` frame
    /// its data must be read (through `Read`) before the next frame.
    pub(super) fn next_msg(&mut self, buf: &mut Vec<u8>) -> io::Result<Msg> {
        if self.data_left > 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the data of the last frame was not read",
            ));
        }
        buf.clear();
        buf.resize(4, 0);
        self.inner.read_exact(&mut buf[..4])?;
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > MAX_DATA_LINK_FRAME {
            // Checked before the tag, so a corrupt length cannot make this
            // process wait for bytes that never come: still an integrity
            // failure (nothing this process writes is that long).
            return Err(integrity_error(self.seq, "frame"));
        }
        buf.resize(4 + len + TAG_BYTES, 0);
        self.inner.read_exact(&mut buf[4..])?;
        let (frame, got) = buf.split_at(4 + len);
        let mut want = [0u8; TAG_BYTES];
        want.copy_from_slice(got);
        if tag(&self.key, self.seq, frame) != blake3::Hash::from_bytes(want) {
            return Err(integrity_error(self.seq, "frame"));
        }
        self.seq += 1;
        let msg = postcard::from_bytes::<Msg>(&frame[4..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a corrupt message: {e}")))?;
        if let Msg::Data { len, .. } = &msg {
            self.data_left = *len;
        }
        Ok(msg)
    }
}

impl<R: Read> Read for TagReader<R> {
    /// Reads data of the current `Data` frame; each block's tag is checked
    /// once the block is read (a failed check fails the read: the receive
    /// it was for fails, whatever it holds).
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.data_left == 0 || out.is_empty() {
            return Ok(0);
        }
        if self.block_left == 0 {
            self.block_left = usize::try_from(self.data_left).map_or(TAG_BLOCK, |l| l.min(TAG_BLOCK));
            self.hasher = blake3::Hasher::new_keyed(&self.key);
            self.hasher.update(&self.seq.to_le_bytes());
        }
        let want = out.len().min(self.block_left);
        let n = self.inner.read(&mut out[..want])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        self.hasher.update(&out[..n]);
        self.block_left -= n;
        self.data_left -= n as u64;
        if self.block_left == 0 {
            let mut got = [0u8; TAG_BYTES];
            self.inner.read_exact(&mut got)?;
            if self.hasher.finalize() != blake3::Hash::from_bytes(got) {
                return Err(integrity_error(self.seq, "data block"));
            }
            self.seq += 1;
        }
        Ok(n)
    }
}

/// The frame of `head`, a `Msg::Eager` whose data is empty, into `buf`,
/// as the first part of that message's frame with `len` bytes of data:
/// the data, which comes last in the message, is encoded as its length
/// (a varint) and its bytes, so the frame of the empty data minus its
/// length of 0, plus the length `len`, is followed by exactly the bytes.
fn eager_head(head: &Msg, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    if !matches!(head, Msg::Eager { data, .. } if data.0.is_empty()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the head of an eager message holds data",
        ));
    }
    write_frame(&mut io::sink(), head, buf)?;
    if buf.pop() != Some(0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "an eager message does not end with its data",
        ));
    }
    let mut n = len;
    while n >= 0x80 {
        buf.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
    let frame = u32::try_from(buf.len() - 4 + len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    buf[..4].copy_from_slice(&frame.to_le_bytes());
    Ok(())
}

/// Handles the whole frames at the start of `bytes` (decoded) by `handle`;
/// how many bytes they took, or why the stream is corrupt or handling
/// failed.
fn handle_frames(bytes: &[u8], handle: &mut impl FnMut(Msg) -> io::Result<()>) -> Result<usize, String> {
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + 4) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > MAX_CONTROL_FRAME {
            return Err(format!(
                "a control message of {len} bytes exceeds the limit of {MAX_CONTROL_FRAME}"
            ));
        }
        let Some(frame) = bytes.get(at + 4..at + 4 + len) else {
            break;
        };
        let msg = postcard::from_bytes::<Msg>(frame).map_err(|e| format!("a corrupt message: {e}"))?;
        at += 4 + len;
        handle(msg).map_err(|e| e.to_string())?;
    }
    Ok(at)
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

/// Reads `first.len()` bytes at `first_addr` in process `pid` into
/// `first`, then `second.len()` at `second_addr` into `second`, in one
/// system call; the bytes read (fewer than both lengths when the read
/// stopped early).
pub(super) fn read_remote_pair(
    pid: i32,
    first_addr: u64,
    first: &mut [u8],
    second_addr: u64,
    second: &mut [u8],
) -> io::Result<usize> {
    use nix::sys::uio::{process_vm_readv, RemoteIoVec};
    use nix::unistd::Pid;
    let remote = [
        RemoteIoVec {
            base: first_addr as usize,
            len: first.len(),
        },
        RemoteIoVec {
            base: second_addr as usize,
            len: second.len(),
        },
    ];
    let mut local = [io::IoSliceMut::new(first), io::IoSliceMut::new(second)];
    process_vm_readv(Pid::from_raw(pid), &mut local, &remote).map_err(io::Error::from)
}

/// With `allow`, lets any process of this user read this process's memory
/// even where the Yama security module restricts it to ancestors (what
/// cross-memory attach needs between sibling ranks); without, restores the
/// restriction. A no-op where there is no Yama. The kernel still refuses
/// processes of other users.
pub(super) fn allow_peer_reads(allow: bool) {
    let tracer = if allow { libc::PR_SET_PTRACER_ANY } else { 0 };
    // SAFETY: `prctl(PR_SET_PTRACER, tracer)` takes no pointers and only
    // changes this process's ptrace policy; failure (no Yama) is harmless
    // and ignored.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, tracer, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: Key = [7; 32];

    /// The bytes one direction of a link writes: a `Wake`, a `Data` frame
    /// with `data`, then another `Wake`.
    fn stream(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut seq = 0;
        let mut frame = |m: &Msg, out: &mut Vec<u8>, seq: &mut u64| {
            write_frame(&mut io::sink(), m, &mut buf).unwrap();
            write_tagged(out, &KEY, seq, &buf).unwrap();
        };
        frame(&Msg::Wake, &mut out, &mut seq);
        let recv = WireOp { slot: 1, generation: 2 };
        frame(
            &Msg::Data {
                recv,
                len: data.len() as u64,
            },
            &mut out,
            &mut seq,
        );
        for block in data.chunks(TAG_BLOCK) {
            write_tagged(&mut out, &KEY, &mut seq, block).unwrap();
        }
        frame(&Msg::Wake, &mut out, &mut seq);
        out
    }

    fn reader(bytes: &[u8]) -> TagReader<&[u8]> {
        TagReader {
            inner: bytes,
            key: KEY,
            seq: 0,
            data_left: 0,
            block_left: 0,
            hasher: blake3::Hasher::new_keyed(&KEY),
        }
    }

    /// Reads the whole stream: the data, or the first error.
    fn read_all(bytes: &[u8], len: usize) -> io::Result<Vec<u8>> {
        let mut r = reader(bytes);
        let mut buf = Vec::new();
        assert!(matches!(r.next_msg(&mut buf)?, Msg::Wake));
        assert!(matches!(r.next_msg(&mut buf)?, Msg::Data { len: l, .. } if l == len as u64));
        let mut data = vec![0; len];
        r.read_exact(&mut data)?;
        assert!(matches!(r.next_msg(&mut buf)?, Msg::Wake));
        Ok(data)
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn an_eager_head_and_its_data_make_the_frame_of_the_whole_message() {
        for len in [0, 1, 127, 128, 4096, 8192, 16_383, 16_384, 1 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
            let msg = |data: Vec<u8>| Msg::Eager {
                group: 9,
                context: Context::Coll,
                tag: 4,
                send: WireOp { slot: 2, generation: 7 },
                count: len as u64,
                dtype: DataType::U8,
                header: None,
                data: Bytes(data),
            };
            let mut whole = Vec::new();
            write_frame(&mut io::sink(), &msg(data.clone()), &mut whole).unwrap();
            let mut head = Vec::new();
            eager_head(&msg(Vec::new()), len, &mut head).unwrap();
            head.extend_from_slice(&data);
            assert_eq!(head, whole, "{len} bytes");
        }
        let mut buf = Vec::new();
        let full = Msg::Eager {
            group: 0,
            context: Context::P2p,
            tag: 0,
            send: WireOp { slot: 0, generation: 0 },
            count: 1,
            dtype: DataType::U8,
            header: None,
            data: Bytes(vec![1]),
        };
        let e = eager_head(&full, 1, &mut buf).unwrap_err();
        assert!(e.to_string().contains("holds data"), "{e}");
    }

    #[test]
    fn eager_data_is_encoded_as_bytes_and_reads_back_exactly() {
        let data: Vec<u8> = (0..16_384u32).map(|i| (i * 7) as u8).collect();
        let msg = Msg::Eager {
            group: 3,
            context: Context::P2p,
            tag: -2,
            send: WireOp { slot: 5, generation: 1 },
            count: 4096,
            dtype: DataType::F32,
            header: None,
            data: Bytes(data.clone()),
        };
        let bytes = postcard::to_stdvec(&msg).unwrap();
        // One length and the bytes, not a number per byte.
        assert!(bytes.len() < data.len() + 32, "{}", bytes.len());
        let Msg::Eager { data: back, count, .. } = postcard::from_bytes(&bytes).unwrap() else {
            panic!("not an eager message")
        };
        assert_eq!((back.0, count), (data, 4096));
    }

    #[test]
    fn an_intact_stream_reads_back_exactly() {
        let d = data(2 * TAG_BLOCK + 1000);
        assert_eq!(read_all(&stream(&d), d.len()).unwrap(), d);
    }

    #[test]
    fn every_altered_byte_fails_the_check() {
        let d = data(TAG_BLOCK + 10);
        let s = stream(&d);
        // Every byte of the frames and tags, and a sample of the data.
        let positions = (0..s.len()).filter(|&i| i < 200 || i + 200 > s.len() || i % 4093 == 0);
        for at in positions {
            let mut bad = s.clone();
            bad[at] ^= 0x40;
            let e = read_all(&bad, d.len()).expect_err("an altered byte must fail the stream");
            assert!(
                e.to_string().contains("integrity check failed") || e.kind() == io::ErrorKind::UnexpectedEof,
                "byte {at}: {e}"
            );
        }
    }

    #[test]
    fn a_dropped_or_replayed_frame_fails_the_check() {
        let mut buf = Vec::new();
        let mut one = Vec::new();
        let mut seq = 0;
        write_frame(&mut io::sink(), &Msg::Wake, &mut buf).unwrap();
        write_tagged(&mut one, &KEY, &mut seq, &buf).unwrap();
        let mut two = one.clone();
        write_tagged(&mut two, &KEY, &mut seq, &buf).unwrap();
        // The first frame twice (a replay, or the second dropped and the
        // first sent again).
        let replay = [&one[..], &one[..]].concat();
        let mut r = reader(&replay);
        assert!(matches!(r.next_msg(&mut buf), Ok(Msg::Wake)));
        let e = r.next_msg(&mut buf).expect_err("a replayed frame must fail");
        assert!(e.to_string().contains("integrity check failed on frame 1"), "{e}");
        // The second frame alone (the first dropped).
        let mut r = reader(&two[one.len()..]);
        let e = r.next_msg(&mut buf).expect_err("a frame out of sequence must fail");
        assert!(e.to_string().contains("integrity check failed on frame 0"), "{e}");
        // Intact: both read.
        let mut r = reader(&two);
        assert!(matches!(r.next_msg(&mut buf), Ok(Msg::Wake)));
        assert!(matches!(r.next_msg(&mut buf), Ok(Msg::Wake)));
    }

    #[test]
    fn the_two_directions_have_different_keys() {
        let key = [3; 32];
        assert_ne!(
            direction_key(&key, b"lower to higher"),
            direction_key(&key, b"higher to lower")
        );
    }
}
