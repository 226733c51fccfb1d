//! The matching engine of one process of a multi-process world: the slots
//! of this rank's posted operations, per-channel queues of offered sends
//! and posted receives, per-group collective entries, and what each message
//! from a peer does to them.
//!
//! A send to another process is a rendezvous: the sender offers it (`Rts`
//! with the buffer's address) and the receiver, once a matching receive is
//! posted, reads the data straight from the sender's memory (one copy, by
//! cross-memory attach) and answers `Done`. Where that is impossible
//! (another host, or reads forbidden) the receiver asks for the data (`Cts`)
//! and the sender's writer thread streams it, which the receiver's reader
//! thread reads straight into the receive buffer. Either way the sender's
//! operation stays pending, its buffer in use, until `Done` (or the copy)
//! completes it, and a receive being filled is `Claimed`: releasing it
//! waits until the filling stopped, so no buffer is touched after its
//! operation is released. Slots and queues are reused: after warm-up the
//! hot path allocates nothing.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::link::{read_remote, read_remote_pair, Bytes, Link, Msg, Out, Received, WireOp};
use crate::backend::entries::{neighbours, EntryBook, EntryMsg, EntryNote, Found};
use crate::backend::host::slab::Slab;
use crate::backend::host::wait::{self, Ops, Progress, RankThreads, Signal};
use crate::backend::liveness::{lock, unmatched, Liveness, RankState, Watcher};
use crate::backend::{Context, Dir, OpId, OpIds, P2pOp};
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::header::CollHeader;

/// How long releasing operations waits, all together, for a peer to
/// confirm that it will not read an offered send and for copies in
/// progress to end, before it withdraws them by force: a withdrawn send's
/// lease is revoked (a peer that reads the buffer later fails that
/// receive), and a connection that streams a buffer is cut (the thread
/// blocked on it returns at once; the peer counts as failed).
const RELEASE_GRACE: Duration = Duration::from_millis(500);
/// Receives that combine read the data in pieces of this many bytes.
const SCRATCH_BYTES: usize = 256 << 10;
/// Sends to a peer of this host of up to this many bytes travel inside
/// their offer in the shared ring (`Msg::Eager`): the receiver copies them
/// out of the message instead of reading the sender's memory, which costs
/// a system call. Past this size the single copy wins, since an eager
/// message is copied once by the sender and three times by the receiver
/// (out of the ring, out of the message, into the receive) (the
/// crossover, measured with `sendrecv` on 2 processes, is in
/// BENCHMARKS.md's sections on the shared board and the single copy, and
/// rechecked in "Eager sends copied once by the sender").
pub(super) const EAGER_BYTES: usize = 8 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ChannelKey {
    group: u64,
    context: Context,
    src: u32,
    dst: u32,
    tag: i64,
}

#[derive(Clone, Copy, Debug)]
enum Origin {
    /// A send of this process (to itself).
    Local(u32),
    /// A send offered by the peer `src` of the channel.
    Remote(WireOp),
}

/// A send waiting for its receive.
#[derive(Debug)]
struct Offer {
    origin: Origin,
    /// The data of a send that came with its offer (`Msg::Eager`).
    eager: Option<Vec<u8>>,
    addr: u64,
    count: usize,
    dtype: DataType,
    header: Option<CollHeader>,
    /// For a send offered by a peer: its withdrawal counter's address and
    /// expected value.
    lease: (u64, u64),
}

#[derive(Default)]
struct Queues {
    sends: VecDeque<Offer>,
    recvs: VecDeque<u32>,
}

#[derive(Clone, Debug)]
enum SlotState {
    Free,
    /// In a channel queue of this process.
    Queued,
    /// A send offered to another process.
    Advertised,
    /// An offered send being withdrawn.
    Cancelling,
    /// Data is being copied (by a thread of this process, or streamed out).
    Claimed,
    /// A receive whose data the peer streams.
    AwaitingData,
    Done,
    Failed(Error),
}

struct Slot {
    state: SlotState,
    dir: Dir,
    key: ChannelKey,
    /// The peer's rank in the operation's group, and this rank's.
    peer_rank: usize,
    my_rank: usize,
    ptr: *mut u8,
    count: usize,
    dtype: DataType,
    reduce: Option<ReduceOp>,
    header: Option<CollHeader>,
}

#[derive(Default)]
struct Group {
    /// Global rank of each member (known once this process joined it).
    members: Vec<usize>,
    /// The last collective each global rank entered.
    entries: HashMap<usize, CollHeader>,
    coll_failure: Option<Error>,
    aborted: Option<String>,
}

/// What an engine keeps under its lock.
pub(crate) struct State {
    /// Hashed with the Fx hash: the key is a few integers chosen by this
    /// process, and `SipHash` cost a quarter of a small message's time.
    channels: FxHashMap<ChannelKey, Queues>,
    slots: Slab<Slot>,
    groups: HashMap<u64, Group>,
}

// SAFETY: the raw pointers in `Slot` are buffers that the `Backend::post`
// contract keeps valid and otherwise untouched until their operations are
// released; they are dereferenced only by the thread that claimed the
// operation.
unsafe impl Send for State {}

/// A copy to do outside the lock.
enum Copy {
    /// Between two operations of this process.
    Local { send: u32, recv: u32 },
    /// From a peer's memory into receive `recv`; then `Done` to the peer.
    Pull {
        link: Arc<Link>,
        addr: u64,
        lease: (u64, u64),
        send: WireOp,
        recv: u32,
    },
    /// From the data that came with the offer into receive `recv`; then
    /// `Done` to the peer.
    Eager {
        link: Arc<Link>,
        data: Vec<u8>,
        send: WireOp,
        recv: u32,
    },
}

/// The engine of this process's rank.
pub(crate) struct Engine {
    /// The engine itself, for what outlives a call (a stream's completion).
    this: Weak<Engine>,
    /// This process's global rank.
    pub(super) me: usize,
    pub(super) liveness: Arc<Liveness>,
    state: Mutex<State>,
    /// What this rank's threads wait on.
    signal: Signal,
    /// This rank counted among the ranks of this host.
    _threads: RankThreads,
    /// The connection to each other rank (`None` at `me`).
    pub(super) links: Vec<Option<Arc<Link>>>,
    pub(super) closing: AtomicBool,
    /// The notes of `comm_schedule!` calls, for their entry check.
    pub(super) entries: EntryBook,
    /// Whether a link may hold notes not yet written.
    holding: AtomicBool,
    /// Threads of this rank in a wait of the engine (they read the links
    /// that carry no data themselves).
    waiting: AtomicUsize,
    /// How many offered sends were withdrawn without the receiver's
    /// confirmation. Peers read it (cross-memory) after reading a send's
    /// buffer: its address and value travel in every `Rts`, so it must stay
    /// at one address while the engine lives (it does: the engine is
    /// behind an `Arc`).
    revoked: AtomicU64,
    /// Whether small sends to peers of this host carry their data
    /// (`EAGER_BYTES`; not with `HCOMM_TRANSPORT=cma`).
    eager: bool,
}

/// Counts a thread in [`Engine::waiting`] while alive.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Engine {
    pub(super) fn new(me: usize, liveness: Arc<Liveness>, links: Vec<Option<Arc<Link>>>, eager: bool) -> Arc<Engine> {
        // The ranks that share this host's cores (those whose memory this
        // process reads directly, and itself).
        let ranks_here = 1 + links.iter().flatten().filter(|l| l.cma).count();
        let engine = Arc::new_cyclic(|this| Engine {
            this: this.clone(),
            me,
            liveness,
            state: Mutex::new(State {
                channels: FxHashMap::default(),
                slots: Slab::default(),
                groups: HashMap::new(),
            }),
            signal: Signal::with_doorbell(),
            _threads: RankThreads::new(ranks_here),
            links,
            closing: AtomicBool::new(false),
            entries: EntryBook::default(),
            holding: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            revoked: AtomicU64::new(0),
            eager,
        });
        let watcher: std::sync::Weak<dyn Watcher> = Arc::downgrade(&(Arc::clone(&engine) as Arc<dyn Watcher>));
        engine.liveness.watch(watcher);
        engine
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn link(&self, global: usize) -> Option<&Arc<Link>> {
        self.links.get(global).and_then(Option::as_ref)
    }

    /// Records the members of `group` (global ranks, in group order).
    pub(super) fn join_group(&self, group: u64, members: &[usize]) {
        let mut st = self.lock();
        st.groups.entry(group).or_default().members = members.to_vec();
    }

    /// Posts `ops` of group `group` (`members`: global rank of each group
    /// rank; `rank`: this rank in it).
    ///
    /// # Safety
    ///
    /// As [`crate::backend::Backend::post`].
    pub(super) unsafe fn post(
        self: &Arc<Self>,
        group: u64,
        members: &[usize],
        rank: usize,
        ops: &[P2pOp],
        ids: &mut OpIds,
    ) -> Result<()> {
        for op in ops {
            if op.peer >= members.len() {
                return Err(Error::precondition(format!(
                    "peer rank {} is out of range for a communicator of {} ranks",
                    op.peer,
                    members.len()
                )));
            }
        }
        let mut copies: SmallVec<[Copy; 4]> = SmallVec::new();
        {
            let mut st = self.lock();
            if let Some(reason) = st.groups.get(&group).and_then(|g| g.aborted.clone()) {
                return Err(Error::Aborted { reason });
            }
            for op in ops {
                let peer = members[op.peer];
                let (src, dst) = match op.dir {
                    Dir::Send => (self.me, peer),
                    Dir::Recv => (peer, self.me),
                };
                let key = ChannelKey {
                    group,
                    context: op.context,
                    src: src as u32,
                    dst: dst as u32,
                    tag: op.tag,
                };
                let id = st.slots.insert(Slot {
                    state: SlotState::Queued,
                    dir: op.dir,
                    key,
                    peer_rank: op.peer,
                    my_rank: rank,
                    ptr: op.ptr,
                    count: op.count,
                    dtype: op.dtype,
                    reduce: op.reduce,
                    header: op.header,
                });
                ids.push(id);
                let OpId { slot, generation } = id;
                match op.dir {
                    Dir::Send if peer != self.me => {
                        st.slots[slot].state = SlotState::Advertised;
                        let bytes = op.count * op.dtype.size();
                        let link = self.link(peer);
                        if let Some(link) =
                            link.filter(|l| self.eager && l.cma && bytes <= EAGER_BYTES && l.ring_has_room(bytes + 128))
                        {
                            // SAFETY: the `Backend::post` contract keeps the
                            // send's `count` elements valid until released.
                            let data = unsafe { std::slice::from_raw_parts(op.ptr.cast_const(), bytes) };
                            let head = Msg::Eager {
                                group,
                                context: op.context,
                                tag: op.tag,
                                send: WireOp { slot, generation },
                                count: op.count as u64,
                                dtype: op.dtype,
                                header: op.header,
                                data: Bytes(Vec::new()),
                            };
                            link.send_eager(head, data);
                        } else if let Some(link) = link {
                            link.send(Msg::Rts {
                                group,
                                context: op.context,
                                tag: op.tag,
                                send: WireOp { slot, generation },
                                addr: op.ptr as u64,
                                count: op.count as u64,
                                dtype: op.dtype,
                                header: op.header,
                                lease: std::ptr::from_ref(&self.revoked) as u64,
                                epoch: self.revoked.load(Ordering::SeqCst),
                            });
                        }
                    }
                    Dir::Send => {
                        let offer = Offer {
                            origin: Origin::Local(slot),
                            eager: None,
                            addr: op.ptr as u64,
                            count: op.count,
                            dtype: op.dtype,
                            header: op.header,
                            lease: (0, 0),
                        };
                        copies.extend(self.offer(&mut st, key, offer));
                    }
                    Dir::Recv => {
                        let queues = st.channels.entry(key).or_default();
                        match queues.sends.pop_front() {
                            Some(offer) => copies.extend(self.pair(&mut st, key, offer, slot)),
                            None => queues.recvs.push_back(slot),
                        }
                    }
                }
            }
        }
        for c in copies {
            self.run_copy(c);
        }
        Ok(())
    }

    /// A send arrives on channel `key`: matches the first posted receive or
    /// waits in the queue.
    fn offer(&self, st: &mut State, key: ChannelKey, offer: Offer) -> Option<Copy> {
        let queues = st.channels.entry(key).or_default();
        if let Some(recv) = queues.recvs.pop_front() {
            self.pair(st, key, offer, recv)
        } else {
            queues.sends.push_back(offer);
            None
        }
    }

    /// Matches `offer` with receive `recv`: checks that they agree, then
    /// claims both and returns the copy to run (or asks for the data).
    fn pair(&self, st: &mut State, key: ChannelKey, offer: Offer, recv: u32) -> Option<Copy> {
        let r = &st.slots[recv];
        let (src_rank, dst_rank) = (r.peer_rank, r.my_rank);
        let mismatch = match (offer.header, r.header) {
            (Some(s), Some(h)) if !s.agrees(&h) || s.seq != h.seq => {
                Some(format!("rank {src_rank} called {s} while rank {dst_rank} called {h}"))
            }
            _ if offer.count != r.count || offer.dtype != r.dtype => Some(format!(
                "rank {src_rank} sends {} elements of {} to rank {dst_rank} (tag {}), which receives {} elements of {}",
                offer.count, offer.dtype, key.tag, r.count, r.dtype
            )),
            _ => None,
        };
        if let Some(message) = mismatch {
            let e = Error::mismatch(message.clone());
            let coll = key.context == Context::Coll;
            if coll {
                st.groups.entry(key.group).or_default().coll_failure = Some(e.clone());
            }
            st.finish(recv, Some(&e));
            match offer.origin {
                Origin::Local(s) => st.finish(s, Some(&e)),
                Origin::Remote(send) => {
                    if let Some(link) = self.link(key.src as usize) {
                        link.send(Msg::Reject {
                            send,
                            message,
                            group: key.group,
                            coll,
                        });
                    }
                }
            }
            self.signal.notify();
            return None;
        }
        match offer.origin {
            Origin::Local(send) => {
                st.slots[send].state = SlotState::Claimed;
                st.slots[recv].state = SlotState::Claimed;
                Some(Copy::Local { send, recv })
            }
            Origin::Remote(send) => {
                let link = Arc::clone(self.link(key.src as usize)?);
                if let Some(data) = offer.eager {
                    st.slots[recv].state = SlotState::Claimed;
                    Some(Copy::Eager { link, data, send, recv })
                } else if link.cma {
                    st.slots[recv].state = SlotState::Claimed;
                    Some(Copy::Pull {
                        link,
                        addr: offer.addr,
                        lease: offer.lease,
                        send,
                        recv,
                    })
                } else {
                    st.slots[recv].state = SlotState::AwaitingData;
                    let OpId { slot, generation } = st.slots.id(recv);
                    link.send(Msg::Cts {
                        send,
                        recv: WireOp { slot, generation },
                    });
                    None
                }
            }
        }
    }

    /// Runs a claimed copy and completes its operations.
    fn run_copy(&self, c: Copy) {
        match c {
            Copy::Local { send, recv } => {
                let (src, dst, count, dtype, reduce) = {
                    let st = self.lock();
                    let (s, r) = (&st.slots[send], &st.slots[recv]);
                    (s.ptr.cast_const(), r.ptr, r.count, r.dtype, r.reduce)
                };
                if !std::ptr::eq(src, dst) {
                    let bytes = count * dtype.size();
                    // SAFETY: both operations are claimed by this thread;
                    // their owners keep the buffers valid and untouched until
                    // released; `pair` checked equal counts and types.
                    unsafe {
                        match reduce {
                            None => crate::memcopy::copy_nonoverlapping(src, dst, bytes),
                            Some(op) => dtype.reduce_raw(op, dst, src, count),
                        }
                    }
                }
                let mut st = self.lock();
                st.finish(send, None);
                st.finish(recv, None);
                self.signal.notify();
            }
            Copy::Pull {
                link,
                addr,
                lease,
                send,
                recv,
            } => {
                let (dst, count, dtype, reduce) = {
                    let st = self.lock();
                    let r = &st.slots[recv];
                    (r.ptr, r.count, r.dtype, r.reduce)
                };
                let result = if reduce.is_none() && count > 0 {
                    // SAFETY: the receive is claimed by this thread; its
                    // owner keeps its `count` elements (at least one: the
                    // pointer is not dangling) valid and untouched until
                    // released.
                    let out = unsafe { std::slice::from_raw_parts_mut(dst, count * dtype.size()) };
                    read_leased(link.pid, addr, out, lease)
                } else {
                    // SAFETY: as above.
                    unsafe {
                        fill(dst, count, dtype, reduce, |chunk, offset| {
                            read_remote(link.pid, addr + offset as u64, chunk)
                        })
                    }
                    .and_then(|()| lease_held(link.pid, lease))
                };
                self.pulled(recv, send, &link, result);
            }
            Copy::Eager { link, data, send, recv } => {
                let (dst, count, dtype, reduce) = {
                    let st = self.lock();
                    let r = &st.slots[recv];
                    (r.ptr, r.count, r.dtype, r.reduce)
                };
                let result = if data.len() == count * dtype.size() {
                    // SAFETY: the receive is claimed by this thread; its
                    // owner keeps the buffer valid and untouched until
                    // released; `data` holds exactly its bytes.
                    unsafe {
                        fill(dst, count, dtype, reduce, |chunk, offset| {
                            chunk.copy_from_slice(&data[offset..offset + chunk.len()]);
                            Ok(())
                        })
                    }
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("its message holds {} bytes for {count} elements of {dtype}", data.len()),
                    ))
                };
                self.pulled(recv, send, &link, result);
            }
        }
    }

    /// Completes receive `recv` of the peer's `send` (on `link`) once its
    /// data was copied (`result`): `Done` to the peer, or the receive fails
    /// and the peer's send is rejected.
    fn pulled(&self, recv: u32, send: WireOp, link: &Link, result: io::Result<()>) {
        let mut st = self.lock();
        let mut dead = None;
        match result {
            Ok(()) => {
                st.finish(recv, None);
                link.send(Msg::Done { send });
            }
            Err(e) => {
                let (peer_rank, peer) = (st.slots[recv].peer_rank, st.slots[recv].key.src as usize);
                let gone = e.raw_os_error() == Some(nix::libc::ESRCH);
                let reason = if gone {
                    format!("its process exited or was killed (reading its memory: {e})")
                } else {
                    format!("cannot read its send buffer: {e}")
                };
                let e = Error::PeerFailed {
                    rank: peer_rank,
                    reason: reason.clone(),
                };
                st.finish(recv, Some(&e));
                link.send(Msg::Reject {
                    send,
                    message: e.to_string(),
                    group: u64::MAX,
                    coll: false,
                });
                if gone {
                    dead = Some((peer, reason));
                }
            }
        }
        self.signal.notify();
        drop(st);
        // The sender's process is gone: its link may not know yet.
        if let Some((peer, reason)) = dead {
            if self.liveness.state(peer) == RankState::Running {
                self.liveness.set_failed(peer, reason, false);
            }
        }
    }

    /// Handles one message from global rank `from`; `r` is the connection,
    /// for the bytes that follow a `Data` frame.
    pub(super) fn handle(&self, from: usize, msg: Msg, r: &mut impl Read) -> io::Result<()> {
        let mut copy = None;
        {
            let mut st = self.lock();
            match msg {
                Msg::Hello { .. } | Msg::Ready { .. } | Msg::Board { .. } | Msg::Wake => {}
                Msg::Rts {
                    group,
                    context,
                    tag,
                    send,
                    addr,
                    count,
                    dtype,
                    header,
                    lease,
                    epoch,
                } => {
                    let key = ChannelKey {
                        group,
                        context,
                        src: from as u32,
                        dst: self.me as u32,
                        tag,
                    };
                    let offer = Offer {
                        origin: Origin::Remote(send),
                        eager: None,
                        addr,
                        count: count as usize,
                        dtype,
                        header,
                        lease: (lease, epoch),
                    };
                    copy = self.offer(&mut st, key, offer);
                }
                Msg::Eager {
                    group,
                    context,
                    tag,
                    send,
                    count,
                    dtype,
                    header,
                    data,
                } => {
                    let key = ChannelKey {
                        group,
                        context,
                        src: from as u32,
                        dst: self.me as u32,
                        tag,
                    };
                    let offer = Offer {
                        origin: Origin::Remote(send),
                        eager: Some(data.0),
                        addr: 0,
                        count: count as usize,
                        dtype,
                        header,
                        lease: (0, 0),
                    };
                    copy = self.offer(&mut st, key, offer);
                }
                Msg::Done { send } => {
                    if st.live(send).is_some() {
                        st.finish(send.slot, None);
                    }
                }
                Msg::Reject {
                    send,
                    message,
                    group,
                    coll,
                } => {
                    let e = Error::mismatch(message);
                    if coll {
                        st.groups.entry(group).or_default().coll_failure = Some(e.clone());
                    }
                    if st.live(send).is_some() {
                        st.finish(send.slot, Some(&e));
                    }
                }
                Msg::Cts { send, recv } => {
                    let link = self.link(from).map(Arc::clone);
                    match (st.live(send), link, self.this.upgrade()) {
                        (Some(SlotState::Advertised | SlotState::Cancelling), Some(link), Some(engine)) => {
                            st.slots[send.slot].state = SlotState::Claimed;
                            let s = &st.slots[send.slot];
                            link.push(Out::Stream {
                                recv,
                                ptr: s.ptr.cast_const(),
                                len: s.count * s.dtype.size(),
                                done: Box::new(move |result: io::Result<()>| {
                                    let mut st = engine.lock();
                                    let e = result.err().map(|e| Error::PeerFailed {
                                        rank: st.slots[send.slot].peer_rank,
                                        reason: format!("the connection to it failed: {e}"),
                                    });
                                    st.finish(send.slot, e.as_ref());
                                    engine.signal.notify();
                                }),
                            });
                        }
                        (_, Some(link), _) => link.send(Msg::Gone { recv }),
                        (_, None, _) => {}
                    }
                }
                Msg::Data { recv, len } => {
                    let target = match st.live(recv) {
                        Some(SlotState::AwaitingData) => {
                            let s = &mut st.slots[recv.slot];
                            let fits = s.count * s.dtype.size() == len as usize;
                            if fits {
                                // Being filled: a release waits for the end
                                // of the fill (or cuts the connection).
                                s.state = SlotState::Claimed;
                            }
                            fits.then_some((s.ptr, s.count, s.dtype, s.reduce))
                        }
                        _ => None,
                    };
                    drop(st);
                    let result = match target {
                        // SAFETY: the receive awaits exactly this data and
                        // stays claimed (its owner cannot release it) until
                        // it is finished below.
                        Some((ptr, count, dtype, reduce)) => unsafe {
                            fill(ptr, count, dtype, reduce, |chunk, _| r.read_exact(chunk))
                        },
                        None => io::copy(&mut r.by_ref().take(len), &mut io::sink()).map(drop),
                    };
                    let mut st = self.lock();
                    if target.is_some() {
                        let e = result.as_ref().err().map(|e| Error::PeerFailed {
                            rank: st.slots[recv.slot].peer_rank,
                            reason: format!("the connection to it failed: {e}"),
                        });
                        st.finish(recv.slot, e.as_ref());
                    }
                    self.signal.notify();
                    return result;
                }
                Msg::Gone { recv } => {
                    if let Some(SlotState::AwaitingData) = st.live(recv) {
                        let rank = st.slots[recv.slot].peer_rank;
                        let e = Error::PeerFailed {
                            rank,
                            reason: "it withdrew the message this receive matched".into(),
                        };
                        st.finish(recv.slot, Some(&e));
                    }
                }
                Msg::Cancel { send } => {
                    let mut found = false;
                    for (key, q) in &mut st.channels {
                        if key.src as usize != from {
                            continue;
                        }
                        let before = q.sends.len();
                        q.sends
                            .retain(|o| !matches!(o.origin, Origin::Remote(op) if op == send));
                        if q.sends.len() != before {
                            found = true;
                            break;
                        }
                    }
                    if found {
                        if let Some(link) = self.link(from) {
                            link.send(Msg::Cancelled { send });
                        }
                    }
                }
                Msg::Cancelled { send } => {
                    if let Some(SlotState::Cancelling) = st.live(send) {
                        st.slots[send.slot].state = SlotState::Done;
                    }
                }
                Msg::Enter { group, header } => {
                    // A disagreement is recorded in the group; this rank's
                    // collectives see it.
                    let _ = enter(&mut st, group, from, header);
                }
                Msg::Abort { group, reason } => {
                    st.groups.entry(group).or_default().aborted.get_or_insert(reason);
                }
                Msg::Entry { group, entry } => {
                    drop(st);
                    self.entry_msg(group, from, entry);
                    return Ok(());
                }
                Msg::Failed {
                    reason,
                    secondary,
                    known,
                } => {
                    drop(st);
                    self.learn(known);
                    self.liveness.set_failed(from, reason, secondary);
                    return Ok(());
                }
                Msg::Finished { known } => {
                    drop(st);
                    self.learn(known);
                    self.liveness.finish(from);
                    return Ok(());
                }
                Msg::Learned { known } => {
                    drop(st);
                    self.learn(known);
                    return Ok(());
                }
            }
            self.signal.notify();
        }
        if let Some(c) = copy {
            self.run_copy(c);
        }
        Ok(())
    }

    /// Handles the messages that arrived from global rank `from` on `link`
    /// (one that carries no data); with `wait_turn`, after any other thread
    /// reading it. False once the connection ended.
    pub(super) fn receive_from(&self, from: usize, link: &Link, wait_turn: bool) -> bool {
        match link.receive(wait_turn, |msg| self.handle(from, msg, &mut io::empty())) {
            Received::Busy | Received::Handled => true,
            Received::Closed => false,
            Received::Ended(why) => {
                self.link_lost(from, &why);
                link.shutdown();
                false
            }
        }
    }

    /// Whether a thread of this rank waits in the engine (and reads the
    /// connections that carry no data).
    pub(super) fn progressing(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Handles what arrived on every connection that carries no data and
    /// that no other thread is reading.
    fn poll_links(&self) {
        for (peer, link) in self.links.iter().enumerate() {
            if let Some(link) = link.as_ref().filter(|l| l.cma) {
                self.receive_from(peer, link, false);
            }
        }
    }

    /// Records root-cause failures a peer reports.
    fn learn(&self, known: Vec<(u32, String)>) {
        for (rank, reason) in known {
            let rank = rank as usize;
            if rank != self.me && self.liveness.state(rank) == RankState::Running {
                self.liveness.set_failed(rank, reason, false);
            }
        }
    }

    /// The connection to `from` ended: unless this process is closing, the
    /// peer's process is gone, and everything waiting on it fails.
    pub(super) fn link_lost(&self, from: usize, why: &str) {
        if let Some(link) = self.link(from) {
            link.drain_failed();
        }
        if self.closing.load(Ordering::SeqCst) {
            return;
        }
        let reason = if why.contains("integrity check failed") {
            format!("{why}; hint: something between the two processes changes their traffic")
        } else {
            format!("its process exited or was killed ({why})")
        };
        if self.liveness.state(from) == RankState::Running {
            self.liveness.set_failed(from, reason.clone(), false);
        }
        // Receives whose data was to come over the connection can never be
        // filled; everything else that waits on the peer sees its state.
        let mut st = self.lock();
        let st = &mut *st;
        for (_, s) in st.slots.iter_mut() {
            if s.key.src as usize == from && matches!(s.state, SlotState::AwaitingData) {
                let members = st.groups.get(&s.key.group).map_or(&[][..], |g| &g.members[..]);
                let e = self
                    .liveness
                    .root_failure(members)
                    .unwrap_or_else(|| Error::PeerFailed {
                        rank: s.peer_rank,
                        reason: reason.clone(),
                    });
                s.state = SlotState::Failed(e);
            }
        }
        self.signal.notify();
    }

    /// Waits for `ids` until `deadline`; see [`crate::backend::Backend::wait`].
    pub(super) fn wait(&self, me: usize, ids: &[OpId], deadline: Instant, what: &str, limit: Duration) -> Result<()> {
        let _waiting = Waiting::new(&self.waiting);
        self.flush_held();
        wait::wait(self, me, ids, deadline, what, limit)
    }

    /// See [`crate::backend::Backend::test`].
    pub(super) fn test(&self, id: OpId) -> Result<bool> {
        self.flush_held();
        self.poll_links();
        wait::test(self, id)
    }

    pub(super) fn cancel(&self, ids: &[OpId]) {
        let _waiting = Waiting::new(&self.waiting);
        wait::cancel(self, ids);
    }

    /// Releases the slots of `ids`: removes queued ones, withdraws offered
    /// sends, waits out claimed ones, frees all; within [`RELEASE_GRACE`]
    /// plus the time a cut connection's thread needs to return.
    ///
    /// What makes giving the buffers back sound when a peer does not answer
    /// (frozen, unreachable):
    /// * an offered send a peer may read from this process's memory: the
    ///   withdrawal counter moves before the slot is freed, and a peer
    ///   checks it after each read (`lease_held`), so a read that may have
    ///   seen the buffer after its release fails instead of completing;
    /// * a buffer the writer thread streams, or a receive the reader thread
    ///   fills: the connection is cut (`shutdown`), which makes the blocked
    ///   `write`/`read` return at once; the slot is freed only after that
    ///   thread finished it, so no thread touches a released buffer;
    /// * a receive whose data has not started: freed at once (data that
    ///   arrives later names a stale generation and is skipped).
    fn release<'a>(&'a self, mut st: MutexGuard<'a, State>, ids: &[OpId]) -> MutexGuard<'a, State> {
        let grace = Instant::now() + RELEASE_GRACE;
        for id in ids {
            let mut cut = false;
            loop {
                match st.slot_state(*id) {
                    None | Some(SlotState::Free) => break,
                    Some(SlotState::Claimed) => {
                        let now = Instant::now();
                        if now >= grace && !cut {
                            cut = true;
                            let s = &st.slots[id.slot];
                            let (peer, peer_rank) = (Self::peer_of(s), s.peer_rank);
                            drop(st);
                            self.cut(peer, peer_rank);
                            st = self.lock();
                            continue;
                        }
                        // Before the cut, until the grace ends; after it,
                        // the thread returns at once (looked at every 10 ms).
                        let until = if cut { now + Duration::from_millis(10) } else { grace };
                        st = self.signal.sleep_with(&self.state, st, Some(until), Some(self));
                    }
                    Some(SlotState::Advertised) => {
                        let peer = st.slots[id.slot].key.dst as usize;
                        st.slots[id.slot].state = SlotState::Cancelling;
                        match self.link(peer) {
                            Some(link) if self.liveness.state(peer) != RankState::Finished => {
                                link.send(Msg::Cancel {
                                    send: WireOp {
                                        slot: id.slot,
                                        generation: id.generation,
                                    },
                                });
                            }
                            // Nobody will read it any more.
                            _ => st.slots[id.slot].state = SlotState::Done,
                        }
                    }
                    Some(SlotState::Cancelling) => {
                        let now = Instant::now();
                        let peer = st.slots[id.slot].key.dst as usize;
                        if now >= grace || self.liveness.state(peer) != RankState::Running {
                            // The peer may still hold the offer (and, over
                            // cross-memory, read the buffer): revoke the
                            // lease before the buffer goes back. The fence
                            // orders the count before the caller's next
                            // writes to the buffer.
                            self.revoked.fetch_add(1, Ordering::SeqCst);
                            fence(Ordering::SeqCst);
                            st.free_slot(id.slot);
                            break;
                        }
                        st = self.signal.sleep_with(&self.state, st, Some(grace), Some(self));
                    }
                    Some(SlotState::Queued) => {
                        let (key, dir) = {
                            let s = &st.slots[id.slot];
                            (s.key, s.dir)
                        };
                        if let Some(q) = st.channels.get_mut(&key) {
                            match dir {
                                Dir::Send => q
                                    .sends
                                    .retain(|o| !matches!(o.origin, Origin::Local(s) if s == id.slot)),
                                Dir::Recv => q.recvs.retain(|&r| r != id.slot),
                            }
                        }
                        st.free_slot(id.slot);
                        break;
                    }
                    Some(SlotState::AwaitingData | SlotState::Done | SlotState::Failed(_)) => {
                        st.free_slot(id.slot);
                        break;
                    }
                }
            }
        }
        st
    }

    /// The global rank of the other end of an operation.
    fn peer_of(s: &Slot) -> usize {
        match s.dir {
            Dir::Send => s.key.dst as usize,
            Dir::Recv => s.key.src as usize,
        }
    }

    /// Gives up on global rank `peer` (`peer_rank` in the operation's
    /// group), which let a copy in progress stand still past the grace:
    /// it counts as failed, and its connection is cut so that the thread
    /// blocked reading or writing it returns.
    fn cut(&self, peer: usize, peer_rank: usize) {
        if peer == self.me {
            return;
        }
        let reason = format!(
            "it sent or took no bytes of a transfer in progress until the timeout ran out (stopped, frozen or \
             unreachable; rank {peer_rank} of the communicator)"
        );
        tracing::warn!(
            peer,
            "cutting the connection to a peer that stalled a transfer past the timeout"
        );
        if self.liveness.state(peer) == RankState::Running {
            self.liveness.set_failed(peer, reason, false);
        }
        if let Some(link) = self.link(peer) {
            link.shutdown();
        }
    }

    /// Why a pending operation can never complete, if that is already known.
    fn blocking_failure(&self, st: &State, id: OpId) -> Option<Error> {
        let slot = &st.slots[id.slot];
        let group = st.groups.get(&slot.key.group);
        if let Some(reason) = group.and_then(|g| g.aborted.clone()) {
            return Some(Error::Aborted { reason });
        }
        if slot.key.context == Context::Coll {
            if let Some(e) = group.and_then(|g| g.coll_failure.clone()) {
                return Some(e);
            }
            // A member that failed never takes its part, and the members
            // that saw it leave the collective: a step waiting on one of
            // them (alive, but gone from this collective) would wait until
            // the timeout. Every collective step of the group fails at
            // once, naming the member that failed.
            if let Some(root) = group.and_then(|g| self.liveness.root_failure(&g.members)) {
                return Some(root);
            }
        }
        if !matches!(
            slot.state,
            SlotState::Queued | SlotState::Advertised | SlotState::AwaitingData
        ) {
            return None;
        }
        let peer = if slot.dir == Dir::Send {
            slot.key.dst
        } else {
            slot.key.src
        } as usize;
        if peer == self.me {
            return None;
        }
        let state = self.liveness.state(peer);
        if state == RankState::Running {
            return None;
        }
        // The peer stopped; where that is the consequence of another
        // member's failure, name the member that failed first.
        if let Some(root) = group.and_then(|g| self.liveness.root_failure(&g.members)) {
            return Some(root);
        }
        state.blocking_error(slot.peer_rank, || unmatched(slot.dir, slot.key.tag))
    }

    /// Why this rank cannot complete the one-shot collective `header` of
    /// `group` waiting on the shared board for member `peer`: the group
    /// failed or aborted, or the peer is gone. Before it answers, writes
    /// the held messages (peers compare this rank's entries) and handles
    /// what arrived (an abort, a peer's entry that disagrees).
    pub(super) fn board_failure(
        &self,
        group: u64,
        members: &[usize],
        peer: usize,
        header: &CollHeader,
    ) -> Option<Error> {
        self.flush_held();
        self.poll_links();
        {
            let st = self.lock();
            if let Some(g) = st.groups.get(&group) {
                if let Some(e) = &g.coll_failure {
                    return Some(e.clone());
                }
                if let Some(reason) = &g.aborted {
                    return Some(Error::Aborted { reason: reason.clone() });
                }
            }
        }
        // A failed member ends the group's collectives, even where the
        // member waited for is alive (see `blocking_failure`).
        if let Some(root) = self.liveness.root_failure(members) {
            return Some(root);
        }
        self.liveness.state(members[peer]).blocking_error(peer, || {
            format!("it finished without calling collective #{} ({header})", header.seq)
        })
    }

    /// Fails the later collectives of `group` with `e` (found on the board).
    pub(super) fn fail_collectives(&self, group: u64, e: &Error) {
        let mut st = self.lock();
        st.groups
            .entry(group)
            .or_default()
            .coll_failure
            .get_or_insert_with(|| e.clone());
        drop(st);
        self.signal.notify();
    }

    /// Records that this rank (`rank` of `group`) enters collective
    /// `header` and tells the other members: at once, or with `hold` (a
    /// group with a shared board, whose one-shot collectives compare the
    /// headers themselves) with this rank's next message to each or before
    /// it next waits.
    pub(super) fn enter_collective(
        &self,
        group: u64,
        members: &[usize],
        header: &CollHeader,
        hold: bool,
    ) -> Result<()> {
        let mut st = self.lock();
        let g = st.groups.entry(group).or_default();
        if let Some(e) = &g.coll_failure {
            return Err(e.clone());
        }
        if let Some(reason) = &g.aborted {
            return Err(Error::Aborted { reason: reason.clone() });
        }
        for &m in members {
            if m != self.me {
                if let Some(link) = self.link(m) {
                    let msg = Msg::Enter { group, header: *header };
                    if hold {
                        link.hold(msg);
                    } else {
                        link.send(msg);
                    }
                }
            }
        }
        if hold {
            self.holding.store(true, Ordering::SeqCst);
        }
        let result = enter(&mut st, group, self.me, *header);
        self.signal.notify();
        result
    }

    /// Waits until every member of `group` entered collective `header.seq`
    /// (or a later one); see [`crate::backend::Backend::confirm_collective`].
    pub(super) fn confirm_collective(
        &self,
        group: u64,
        members: &[usize],
        rank: usize,
        header: &CollHeader,
        timeout: Duration,
    ) -> Result<()> {
        let start = Instant::now();
        let _waiting = Waiting::new(&self.waiting);
        self.flush_held();
        let deadline = start.checked_add(timeout);
        let mut st = self.lock();
        loop {
            let g = st.groups.entry(group).or_default();
            if let Some(e) = &g.coll_failure {
                return Err(e.clone());
            }
            if let Some(reason) = &g.aborted {
                return Err(Error::Aborted { reason: reason.clone() });
            }
            let missing = members
                .iter()
                .position(|m| g.entries.get(m).is_none_or(|h| h.seq < header.seq));
            let Some(missing) = missing else {
                return Ok(());
            };
            let state = self.liveness.state(members[missing]);
            if let Some(e) = state.blocking_error(missing, || {
                format!("it finished without calling collective #{} ({header})", header.seq)
            }) {
                // Name the member whose failure the missing one followed.
                return Err(self.liveness.root_failure(members).unwrap_or(e));
            }
            let now = Instant::now();
            let left = deadline.map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(now));
            if left.is_zero() {
                return Err(Error::Timeout {
                    operation: format!("{header} waiting for rank {missing} to enter it"),
                    rank,
                    waited: now - start,
                    limit: timeout,
                });
            }
            st = self.signal.sleep_with(&self.state, st, Some(now + left), Some(self));
        }
    }

    /// Fails every pending and future operation of `group`, here and in the
    /// other members' processes.
    pub(super) fn abort(&self, group: u64, members: &[usize], reason: &str) {
        let mut st = self.lock();
        st.groups
            .entry(group)
            .or_default()
            .aborted
            .get_or_insert_with(|| reason.to_owned());
        for &m in members {
            if let Some(link) = self.link(m) {
                link.send(Msg::Abort {
                    group,
                    reason: reason.to_owned(),
                });
            }
        }
        self.signal.notify();
    }
}

impl Engine {
    /// Sends this rank's schedule call `note` (place `rank` among the
    /// global `members` of `group`) to its ring neighbours and compares it
    /// with theirs; see [`crate::backend::entries`].
    pub(super) fn announce_entry(&self, group: u64, members: &[usize], rank: usize, note: &EntryNote) -> Result<()> {
        if let Some(e) = self.entries.failure(group, note.seq) {
            return Err(e);
        }
        // The note travels with the next message to the neighbour (in front
        // of the call's first data), or when this rank next waits.
        for q in neighbours(members, rank) {
            if let Some(link) = self.link(q) {
                link.hold(Msg::Entry {
                    group,
                    entry: EntryMsg::Call(note.clone()),
                });
            }
        }
        self.holding.store(true, Ordering::SeqCst);
        match self.entries.mine(group, members, rank, note) {
            Some(found) => Err(self.disagree(group, found)),
            None => Ok(()),
        }
    }

    /// Writes the entry notes held back on every link: before this rank
    /// blocks, its neighbours must be able to compare its calls.
    fn flush_held(&self) {
        if self.holding.swap(false, Ordering::SeqCst) {
            for link in self.links.iter().flatten() {
                link.flush_held();
            }
        }
    }

    /// Handles an entry message of global rank `from` about `group`.
    fn entry_msg(&self, group: u64, from: usize, entry: EntryMsg) {
        match entry {
            EntryMsg::Call(note) => {
                if let Some(found) = self.entries.theirs(group, from, note) {
                    self.disagree(group, found);
                }
            }
            EntryMsg::Disagreement { seq, message } => self.entries.told(group, seq, message),
        }
    }

    /// Tells every member of `group` of a disagreement this process found,
    /// then aborts the group so that no rank keeps waiting in the call.
    fn disagree(&self, group: u64, found: Found) -> Error {
        let message = match &found.error {
            Error::Mismatch { message } => message.clone(),
            other => other.to_string(),
        };
        for &m in &found.members {
            if let Some(link) = self.link(m) {
                link.send(Msg::Entry {
                    group,
                    entry: EntryMsg::Disagreement {
                        seq: found.seq,
                        message: message.clone(),
                    },
                });
            }
        }
        self.abort(group, &found.members, &found.error.to_string());
        found.error
    }
}

/// Records that global rank `who` entered `header` in `group`; a
/// disagreement with another member's entry of the same collective fails
/// the group's collectives.
fn enter(st: &mut State, group: u64, who: usize, header: CollHeader) -> Result<()> {
    let g = st.groups.entry(group).or_default();
    g.entries.insert(who, header);
    let rank_of = |global: usize| g.members.iter().position(|&m| m == global).unwrap_or(global);
    let clash = g
        .entries
        .iter()
        .find(|(&other, theirs)| other != who && theirs.seq == header.seq && !theirs.agrees(&header));
    if let Some((&other, theirs)) = clash {
        let e = Error::mismatch(format!(
            "collective #{}: rank {} called {} while rank {} called {}",
            header.seq,
            rank_of(other),
            theirs,
            rank_of(who),
            header
        ));
        g.coll_failure.get_or_insert(e.clone());
        return Err(e);
    }
    Ok(())
}

impl Ops for Engine {
    type State = State;

    fn state(&self) -> &Mutex<State> {
        &self.state
    }

    fn signal(&self, _me: usize) -> &Signal {
        &self.signal
    }

    fn progress(&self, _me: usize) -> Option<&dyn Progress> {
        Some(self)
    }

    fn status(&self, st: &State, id: OpId) -> Option<Result<()>> {
        match &st.slots.get(id)?.state {
            SlotState::Done | SlotState::Free => Some(Ok(())),
            SlotState::Failed(e) => Some(Err(e.clone())),
            _ => self.blocking_failure(st, id).map(Err),
        }
    }

    fn waiting_on(&self, st: &State, id: OpId) -> Option<usize> {
        let slot = st.slots.get(id)?;
        matches!(
            slot.state,
            SlotState::Queued | SlotState::Advertised | SlotState::AwaitingData
        )
        .then_some(slot.peer_rank)
    }

    fn release<'a>(&'a self, st: MutexGuard<'a, State>, ids: &[OpId]) -> MutexGuard<'a, State> {
        Engine::release(self, st, ids)
    }
}

impl Progress for Engine {
    fn poll(&self) {
        self.poll_links();
    }

    fn block(&self, doorbell: RawFd, until: Instant) {
        let event = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds: SmallVec<[libc::pollfd; 8]> = SmallVec::new();
        let mut asleep: SmallVec<[&Link; 8]> = SmallVec::new();
        fds.push(event(doorbell));
        for link in self.links.iter().flatten() {
            let Some(fd) = link.control_fd() else { continue };
            if !link.sleep_begin() {
                // A message waits in its ring already.
                asleep.iter().for_each(|l| l.sleep_end());
                return;
            }
            asleep.push(link);
            fds.push(event(fd));
        }
        let left = until.saturating_duration_since(Instant::now());
        let timeout = libc::timespec {
            tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(left.subsec_nanos()),
        };
        // SAFETY: `fds` holds `fds.len()` valid `pollfd`s and `timeout` is a
        // valid `timespec`, both alive for the call; no signal mask is
        // passed. Its outcome is not needed: the caller looks again.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &raw const timeout,
                std::ptr::null(),
            )
        };
        for (link, fd) in asleep.iter().zip(&fds[1..]) {
            link.sleep_end();
            if fd.revents != 0 {
                link.mark_kicked();
            }
        }
    }
}

impl Watcher for Engine {
    fn rank_changed(&self, rank: usize, state: &RankState) {
        if rank == self.me {
            let known = || {
                self.liveness
                    .root_failures()
                    .into_iter()
                    .filter(|&(r, _)| r != self.me)
                    .map(|(r, why)| (r as u32, why))
                    .collect()
            };
            let msg = match state {
                RankState::Running => None,
                RankState::Finished => Some(Msg::Finished { known: known() }),
                RankState::Failed { reason, secondary } => Some(Msg::Failed {
                    reason: reason.clone(),
                    secondary: *secondary,
                    known: known(),
                }),
            };
            if let Some(msg) = msg {
                for link in self.links.iter().flatten() {
                    link.send(msg.clone());
                }
            }
        } else if let RankState::Failed {
            reason,
            secondary: false,
        } = state
        {
            // Pass a root-cause failure on once (a rank's state leaves
            // `Running` once), to every peer but the failed one.
            let msg = Msg::Learned {
                known: vec![(rank as u32, reason.clone())],
            };
            for (peer, link) in self.links.iter().enumerate() {
                if let Some(link) = link.as_ref().filter(|_| peer != rank) {
                    link.send(msg.clone());
                }
            }
        }
        let _guard = self.lock();
        self.signal.notify();
    }
}

impl State {
    fn free_slot(&mut self, i: u32) {
        self.slots[i].state = SlotState::Free;
        self.slots.release(i);
    }

    fn slot_state(&self, id: OpId) -> Option<SlotState> {
        self.slots.get(id).map(|s| s.state.clone())
    }

    /// The state of an operation a peer names, while it is live.
    fn live(&self, op: WireOp) -> Option<SlotState> {
        self.slot_state(OpId {
            slot: op.slot,
            generation: op.generation,
        })
        .filter(|s| !matches!(s, SlotState::Free))
    }

    fn finish(&mut self, slot: u32, error: Option<&Error>) {
        self.slots[slot].state = match error {
            None => SlotState::Done,
            Some(e) => SlotState::Failed(e.clone()),
        };
    }
}

/// Whether the sender's withdrawal counter (`lease`: its address and the
/// value it had when the send was offered) still holds, read after the
/// send's buffer was read: if it moved, the sender may have given the
/// buffer back while it was read, and the data cannot be trusted.
fn lease_held(pid: i32, lease: (u64, u64)) -> io::Result<()> {
    // Orders the reads of the buffer before the read of the counter.
    fence(Ordering::SeqCst);
    let mut word = [0u8; 8];
    read_remote(pid, lease.0, &mut word)?;
    lease_word(word, lease.1)
}

/// Whether the counter read as `word` still holds the value `expected`
/// the send was offered with.
fn lease_word(word: [u8; 8], expected: u64) -> io::Result<()> {
    if u64::from_ne_bytes(word) == expected {
        Ok(())
    } else {
        Err(io::Error::other(
            "it withdrew the send while this rank read it (it gave up waiting); the data read is not used",
        ))
    }
}

/// Reads the send at `addr` in process `pid` into `dst`, then checks its
/// lease (see [`lease_held`]). On x86-64 both in one system call: the
/// kernel copies a call's pieces in the order given, and loads are not
/// reordered with older loads there, so the counter is read after the
/// data, as `lease_held` reads it (elsewhere, two calls with a fence
/// between). A short read (the peer unmapped part of it) finishes piece
/// by piece.
fn read_leased(pid: i32, addr: u64, dst: &mut [u8], lease: (u64, u64)) -> io::Result<()> {
    if !cfg!(target_arch = "x86_64") {
        read_remote(pid, addr, dst)?;
        return lease_held(pid, lease);
    }
    let len = dst.len();
    let mut word = [0u8; 8];
    let got = read_remote_pair(pid, addr, dst, lease.0, &mut word)?;
    if got == len + word.len() {
        return lease_word(word, lease.1);
    }
    let done = got.min(len);
    read_remote(pid, addr + done as u64, &mut dst[done..])?;
    lease_held(pid, lease)
}

thread_local! {
    /// Scratch for receives that combine, reused by each thread.
    static SCRATCH: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Fills `count` elements at `dst` with data `read(chunk, offset)` produces:
/// straight into `dst`, or for a combining receive piecewise through a
/// scratch buffer, each piece combined into `dst`.
///
/// # Safety
///
/// `dst` valid and writable for `count` elements of `dtype`, properly
/// aligned, and not accessed by anyone else meanwhile.
unsafe fn fill(
    dst: *mut u8,
    count: usize,
    dtype: DataType,
    reduce: Option<ReduceOp>,
    mut read: impl FnMut(&mut [u8], usize) -> io::Result<()>,
) -> io::Result<()> {
    let bytes = count * dtype.size();
    if bytes == 0 {
        return Ok(());
    }
    match reduce {
        None => {
            // SAFETY: forwarded from the caller.
            let out = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
            read(out, 0)
        }
        Some(op) => SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            if scratch.len() < SCRATCH_BYTES / 8 {
                scratch.resize(SCRATCH_BYTES / 8, 0);
            }
            let size = dtype.size();
            let per_chunk = SCRATCH_BYTES / size;
            let mut done = 0;
            while done < count {
                let n = per_chunk.min(count - done);
                let buf: &mut [u8] = scratch_bytes(&mut scratch[..], n * size);
                read(buf, done * size)?;
                // SAFETY: `dst` holds `count` elements (caller); the scratch
                // holds `n` freshly read ones, 8-byte aligned, disjoint from
                // `dst`.
                unsafe { dtype.reduce_raw(op, dst.add(done * size), buf.as_ptr(), n) };
                done += n;
            }
            Ok(())
        }),
    }
}

/// The first `len` bytes of `words`.
fn scratch_bytes(words: &mut [u64], len: usize) -> &mut [u8] {
    let len = len.min(words.len() * 8);
    // SAFETY: `u64` has no padding and every byte pattern is a valid `u8`;
    // the slice covers `len <= 8 * words.len()` bytes of the borrowed words.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) }
}
