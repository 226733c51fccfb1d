//! The matching engine of one in-process group: per-channel queues of posted
//! operations, a slab of operation slots, and one condition variable per rank.
//!
//! A message is copied exactly once, from the sender's buffer into the
//! receiver's. Whichever of the two posts second makes the match; it copies
//! a small message itself, and leaves a large one whose receiver is blocked
//! in `wait` to the receiver (`Matched`, in the receiver's pull list, which
//! the receiver empties first when it wakes), so that ranks exchanging large
//! messages copy their incoming data in parallel instead of one rank copying
//! both ways. Either party takes a pending pull over when it releases its
//! operation first. The copy runs outside the lock; both operations are
//! marked `Claimed` meanwhile, and cancelling a claimed operation waits for
//! the copy to finish, so no buffer is touched after its operation is
//! released. Queues and slots are reused: after warm-up
//! the hot path allocates nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::board::{Board, Exchange};
use super::slab::Slab;
use super::wait::{self, Ops, Signal};
use super::world::HostWorld;
use crate::backend::liveness::{unmatched, RankState, Watcher};
use crate::backend::{Context, Dir, OpId, OpIds, P2pOp};
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::header::CollHeader;

static NEXT_FABRIC_ID: AtomicU64 = AtomicU64::new(1);

/// Messages from this size on are copied by their receiver (see the module
/// documentation); smaller ones cost less to copy than to hand over.
const PULL_MIN_BYTES: usize = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ChannelKey {
    context: Context,
    src: u32,
    dst: u32,
    tag: i64,
}

/// A posted, not yet matched operation waiting in a channel queue.
#[derive(Clone, Copy)]
struct Posted {
    slot: u32,
    ptr: *mut u8,
    count: usize,
    dtype: DataType,
    reduce: Option<ReduceOp>,
    header: Option<CollHeader>,
}

#[derive(Default)]
struct Queues {
    sends: VecDeque<Posted>,
    recvs: VecDeque<Posted>,
}

#[derive(Clone, Debug)]
enum SlotState {
    Free,
    Queued,
    /// Matched, waiting in the receiver's pull list.
    Matched,
    Claimed,
    Done,
    Failed(Error),
}

struct Slot {
    state: SlotState,
    owner: u32,
    peer: u32,
    dir: Dir,
    key: ChannelKey,
}

/// A matched pair whose data is being copied.
struct Transfer {
    send: Posted,
    recv: Posted,
}

// SAFETY: the raw pointers in `Posted` are only dereferenced by the thread
// that claimed both operations, while their owners are guaranteed (by the
// `Backend::post` contract) to keep the buffers valid and untouched.
unsafe impl Send for Posted {}

/// What a fabric keeps under its lock.
pub(crate) struct State {
    /// Hashed with the Fx hash: the key is a few integers chosen by this
    /// process, and `SipHash` cost a quarter of a small message's time.
    channels: FxHashMap<ChannelKey, Queues>,
    slots: Slab<Slot>,
    aborted: Option<String>,
    /// Set when ranks called different collectives: the group is unusable for
    /// collectives from then on.
    coll_failure: Option<Error>,
    /// The last collective each rank entered.
    coll_entry: Vec<Option<CollHeader>>,
    /// Matched transfers each rank is to copy into its receive buffers;
    /// only a rank blocked in `wait` (`waiting`) is given any.
    pulls: Vec<SmallVec<[Transfer; 2]>>,
    /// Whether each rank is blocked in `wait`.
    waiting: Vec<bool>,
    /// Whether each rank waits in `confirm_collective`.
    confirming: Vec<bool>,
}

/// The shared state of one group of in-process ranks.
pub(crate) struct Fabric {
    pub(crate) id: u64,
    pub(crate) world: Arc<HostWorld>,
    /// Global rank of each member, indexed by rank in this group.
    pub(crate) members: Vec<usize>,
    state: Mutex<State>,
    /// What each rank waits on.
    signals: Box<[Signal]>,
    /// The pages of the one-shot collectives, made on their first use.
    board: OnceLock<Board>,
}

impl Fabric {
    pub(crate) fn new(world: &Arc<HostWorld>, members: Vec<usize>) -> Arc<Fabric> {
        let size = members.len();
        let fabric = Arc::new(Fabric {
            id: NEXT_FABRIC_ID.fetch_add(1, Ordering::Relaxed),
            world: Arc::clone(world),
            members,
            state: Mutex::new(State {
                channels: FxHashMap::default(),
                slots: Slab::default(),
                aborted: None,
                coll_failure: None,
                coll_entry: vec![None; size],
                pulls: (0..size).map(|_| SmallVec::new()).collect(),
                waiting: vec![false; size],
                confirming: vec![false; size],
            }),
            signals: (0..size).map(|_| Signal::default()).collect(),
            board: OnceLock::new(),
        });
        world.register(&fabric);
        fabric
    }

    pub(crate) fn size(&self) -> usize {
        self.members.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        wait::lock_spinning(&self.state)
    }

    pub(crate) fn wake_all(&self) {
        let _guard = self.lock();
        self.notify_all();
    }

    /// Wakes every rank (the lock held).
    fn notify_all(&self) {
        for s in &*self.signals {
            s.notify();
        }
        if let Some(board) = self.board.get() {
            board.wake_all();
        }
    }

    pub(crate) fn abort(&self, reason: &str) {
        let mut st = self.lock();
        if st.aborted.is_none() {
            st.aborted = Some(reason.to_owned());
        }
        self.notify_all();
    }

    /// Posts `ops` for rank `me`; see [`crate::backend::Backend::post`].
    ///
    /// # Safety
    ///
    /// The contract of [`crate::backend::Backend::post`]: every op's buffer
    /// valid for `count` elements of `dtype` (receive buffers writable and
    /// used by nothing else) until the op is released by `wait`, `test` or
    /// `cancel` on this fabric. A peer that matches the op copies into or out
    /// of it from its own thread until then.
    ///
    /// `to_wait`: the caller waits for the ops next, so it counts as waiting
    /// from now on (a large message matched meanwhile is left for it to
    /// copy, as if it were waiting already). Without it, a peer posting in
    /// the moment between this post and the wait copied both directions of
    /// an exchange, the caller none: half of the 1 MiB send-receives of two
    /// ranks leaving a barrier together took twice as long.
    pub(crate) unsafe fn post(&self, me: usize, ops: &[P2pOp], ids: &mut OpIds, to_wait: bool) -> Result<()> {
        let size = self.size();
        for op in ops {
            if op.peer >= size {
                return Err(Error::precondition(format!(
                    "peer rank {} is out of range for a communicator of {} ranks",
                    op.peer, size
                )));
            }
        }
        let mut transfers: SmallVec<[Transfer; 4]> = SmallVec::new();
        let first_new = ids.len();
        {
            let mut st = self.lock();
            if let Some(reason) = &st.aborted {
                return Err(Error::Aborted { reason: reason.clone() });
            }
            if to_wait {
                self.set_waiting(&mut st, me, true);
            }
            for op in ops {
                let key = match op.dir {
                    Dir::Send => ChannelKey {
                        context: op.context,
                        src: me as u32,
                        dst: op.peer as u32,
                        tag: op.tag,
                    },
                    Dir::Recv => ChannelKey {
                        context: op.context,
                        src: op.peer as u32,
                        dst: me as u32,
                        tag: op.tag,
                    },
                };
                let id = st.slots.insert(Slot {
                    state: SlotState::Queued,
                    owner: me as u32,
                    peer: op.peer as u32,
                    dir: op.dir,
                    key,
                });
                ids.push(id);
                let slot = id.slot;
                let posted = Posted {
                    slot,
                    ptr: op.ptr,
                    count: op.count,
                    dtype: op.dtype,
                    reduce: op.reduce,
                    header: op.header,
                };
                let queues = st.channels.entry(key).or_default();
                let partner = match op.dir {
                    Dir::Send => queues.recvs.pop_front(),
                    Dir::Recv => queues.sends.pop_front(),
                };
                match partner {
                    None => match op.dir {
                        Dir::Send => queues.sends.push_back(posted),
                        Dir::Recv => queues.recvs.push_back(posted),
                    },
                    Some(partner) => {
                        let (send, recv) = match op.dir {
                            Dir::Send => (posted, partner),
                            Dir::Recv => (partner, posted),
                        };
                        match st.check_pair(&send, &recv, key) {
                            Ok(())
                                if st.waiting[key.dst as usize] && send.count * send.dtype.size() >= PULL_MIN_BYTES =>
                            {
                                st.slots[send.slot].state = SlotState::Matched;
                                st.slots[recv.slot].state = SlotState::Matched;
                                st.pulls[key.dst as usize].push(Transfer { send, recv });
                                self.signals[key.dst as usize].notify();
                            }
                            Ok(()) => {
                                st.slots[send.slot].state = SlotState::Claimed;
                                st.slots[recv.slot].state = SlotState::Claimed;
                                transfers.push(Transfer { send, recv });
                            }
                            Err(e) => {
                                st.complete(send.slot, Some(&e), &self.signals);
                                st.complete(recv.slot, Some(&e), &self.signals);
                            }
                        }
                    }
                }
            }
        }
        if transfers.is_empty() {
            return Ok(());
        }
        for t in &transfers {
            // SAFETY: both operations are claimed by this thread; their owners
            // keep the buffers valid and untouched until released, and
            // `check_pair` verified equal counts and types.
            unsafe { copy_transfer(t) };
        }
        let mut st = self.lock();
        for t in &transfers {
            st.complete(t.send.slot, None, &self.signals);
            st.complete(t.recv.slot, None, &self.signals);
        }
        drop(st);
        debug_assert!(ids.len() >= first_new);
        Ok(())
    }

    /// Waits for `ids` of rank `me`; see [`crate::backend::Backend::wait`].
    pub(crate) fn wait(&self, me: usize, ids: &[OpId], deadline: Instant, what: &str, limit: Duration) -> Result<()> {
        wait::wait(self, me, ids, deadline, what, limit)
    }

    /// See [`crate::backend::Backend::test`].
    pub(crate) fn test(&self, id: OpId) -> Result<bool> {
        wait::test(self, id)
    }

    pub(crate) fn cancel(&self, ids: &[OpId]) {
        wait::cancel(self, ids);
    }

    /// Releases the slots of `ids`: removes queued ones from their channel,
    /// waits out claimed ones, frees all.
    fn release<'a>(&'a self, mut st: MutexGuard<'a, State>, ids: &[OpId]) -> MutexGuard<'a, State> {
        for id in ids {
            loop {
                match st.slot_state(*id) {
                    None | Some(SlotState::Free) => break,
                    Some(SlotState::Matched) => {
                        let receiver = st.slots[id.slot].key.dst as usize;
                        st = self.pull(st, receiver, Some(id.slot));
                    }
                    Some(SlotState::Claimed) => {
                        let owner = st.slots[id.slot].owner as usize;
                        st = self.signals[owner].sleep(&self.state, st, None);
                    }
                    Some(SlotState::Queued) => {
                        let (key, dir) = {
                            let s = &st.slots[id.slot];
                            (s.key, s.dir)
                        };
                        if let Some(q) = st.channels.get_mut(&key) {
                            let queue = match dir {
                                Dir::Send => &mut q.sends,
                                Dir::Recv => &mut q.recvs,
                            };
                            queue.retain(|p| p.slot != id.slot);
                        }
                        st.free_slot(id.slot);
                        break;
                    }
                    Some(SlotState::Done | SlotState::Failed(_)) => {
                        st.free_slot(id.slot);
                        break;
                    }
                }
            }
        }
        st
    }

    /// Copies the pending pulls of `receiver` (only the one holding `slot`,
    /// when given) outside the lock and completes them.
    fn pull<'a>(&'a self, mut st: MutexGuard<'a, State>, receiver: usize, slot: Option<u32>) -> MutexGuard<'a, State> {
        let taken: SmallVec<[Transfer; 2]> = match slot {
            None => std::mem::take(&mut st.pulls[receiver]),
            Some(slot) => {
                let list = &mut st.pulls[receiver];
                list.iter()
                    .position(|t| t.send.slot == slot || t.recv.slot == slot)
                    .map(|i| list.remove(i))
                    .into_iter()
                    .collect()
            }
        };
        for t in &taken {
            st.slots[t.send.slot].state = SlotState::Claimed;
            st.slots[t.recv.slot].state = SlotState::Claimed;
        }
        drop(st);
        for t in &taken {
            // SAFETY: both operations were matched and are now claimed by this
            // thread; their owners keep the buffers valid and untouched until
            // released (releasing a claimed operation waits for this copy),
            // and `check_pair` verified equal counts and types.
            unsafe { copy_transfer(t) };
        }
        let mut st = self.lock();
        for t in &taken {
            st.complete(t.send.slot, None, &self.signals);
            st.complete(t.recv.slot, None, &self.signals);
        }
        st
    }

    /// Why a pending operation can never complete, if that is already known.
    fn blocking_failure(&self, st: &State, id: OpId) -> Option<Error> {
        if let Some(reason) = &st.aborted {
            return Some(Error::Aborted { reason: reason.clone() });
        }
        let slot = &st.slots[id.slot];
        if slot.key.context == Context::Coll {
            if let Some(e) = &st.coll_failure {
                return Some(e.clone());
            }
        }
        if !matches!(slot.state, SlotState::Queued) {
            return None;
        }
        let peer = slot.peer as usize;
        self.world
            .liveness
            .state(self.members[peer])
            .blocking_error(peer, || unmatched(slot.dir, slot.key.tag))
    }

    /// Records that rank `me` enters the collective `header`; fails every
    /// rank's collectives when two ranks disagree.
    pub(crate) fn enter_collective(&self, me: usize, header: &CollHeader) -> Result<()> {
        let mut st = self.lock();
        if let Some(e) = st.collectives_failed() {
            return Err(e);
        }
        st.coll_entry[me] = Some(*header);
        let mut failure = None;
        for (other, entry) in st.coll_entry.iter().enumerate() {
            if let Some(theirs) = entry {
                if other != me && theirs.seq == header.seq && !theirs.agrees(header) {
                    failure = Some(Error::mismatch(format!(
                        "collective #{}: rank {} called {} while rank {} called {}",
                        header.seq, other, theirs, me, header
                    )));
                    break;
                }
            }
        }
        if let Some(e) = failure {
            st.coll_failure = Some(e.clone());
            self.notify_all();
            return Err(e);
        }
        // Only the ranks confirming a collective wait for entries.
        for (signal, _) in self.signals.iter().zip(&st.confirming).filter(|(_, &c)| c) {
            signal.notify();
        }
        Ok(())
    }

    /// Rank `me`'s part of a one-shot collective on the group's board (see
    /// `board.rs`): `fill` writes its `len` bytes, `take(rank, bytes)` reads
    /// every rank's in rank order. Ranks that called different collectives
    /// fail every rank's collectives, as [`Fabric::enter_collective`] does.
    pub(crate) fn board_exchange(
        &self,
        me: usize,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: impl FnOnce(&mut [u8]),
        take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let board = self.board.get_or_init(|| Board::new(self.size()));
        let failure = |peer: usize| {
            let group = self.lock().collectives_failed();
            group.or_else(|| self.gone_before(peer, header))
        };
        let exchange = Exchange {
            me,
            header,
            len,
            timeout,
            failure: &failure,
        };
        let result = board.exchange(&exchange, fill, take);
        if let Err(e @ Error::Mismatch { .. }) = &result {
            let mut st = self.lock();
            if st.coll_failure.is_none() {
                st.coll_failure = Some(e.clone());
            }
            self.notify_all();
        }
        result
    }

    /// Why rank `peer` will never enter the collective `header`: it failed,
    /// or finished without calling it.
    fn gone_before(&self, peer: usize, header: &CollHeader) -> Option<Error> {
        self.world.liveness.state(self.members[peer]).blocking_error(peer, || {
            format!("it finished without calling collective #{} ({header})", header.seq)
        })
    }

    /// Waits until every rank entered collective `header.seq` (or a later
    /// one); see [`crate::backend::Backend::confirm_collective`].
    pub(crate) fn confirm_collective(&self, me: usize, header: &CollHeader, timeout: Duration) -> Result<()> {
        let mut start = None;
        let mut st = self.lock();
        let result = loop {
            if let Some(e) = st.collectives_failed() {
                break Err(e);
            }
            let missing = st.coll_entry.iter().position(|e| e.is_none_or(|h| h.seq < header.seq));
            let Some(missing) = missing else {
                break Ok(());
            };
            if let Some(e) = self.gone_before(missing, header) {
                break Err(e);
            }
            let now = Instant::now();
            let start = *start.get_or_insert(now);
            let left = start
                .checked_add(timeout)
                .map_or(Duration::from_secs(3600), |d| d.saturating_duration_since(now));
            if left.is_zero() {
                break Err(Error::Timeout {
                    operation: format!("{header} waiting for rank {missing} to enter it"),
                    rank: me,
                    waited: now - start,
                    limit: timeout,
                });
            }
            st.confirming[me] = true;
            st = self.signals[me].sleep(&self.state, st, Some(now + left));
        };
        st.confirming[me] = false;
        result
    }
}

impl Ops for Fabric {
    type State = State;

    fn state(&self) -> &Mutex<State> {
        &self.state
    }

    fn signal(&self, me: usize) -> &Signal {
        &self.signals[me]
    }

    fn status(&self, st: &State, id: OpId) -> Option<Result<()>> {
        match &st.slots.get(id)?.state {
            SlotState::Done | SlotState::Free => Some(Ok(())),
            SlotState::Failed(e) => Some(Err(e.clone())),
            SlotState::Queued | SlotState::Matched | SlotState::Claimed => self.blocking_failure(st, id).map(Err),
        }
    }

    /// Copies the data of the large messages matched to `me` meanwhile.
    fn before_look<'a>(&'a self, mut st: MutexGuard<'a, State>, me: usize) -> MutexGuard<'a, State> {
        while !st.pulls[me].is_empty() {
            st = self.pull(st, me, None);
        }
        st
    }

    fn set_waiting(&self, st: &mut State, me: usize, waiting: bool) {
        st.waiting[me] = waiting;
    }

    fn release<'a>(&'a self, st: MutexGuard<'a, State>, ids: &[OpId]) -> MutexGuard<'a, State> {
        Fabric::release(self, st, ids)
    }
}

impl Watcher for Fabric {
    fn rank_changed(&self, _rank: usize, _state: &RankState) {
        self.wake_all();
    }
}

impl State {
    /// Why no collective of the group can complete: ranks disagreed on
    /// one, or the group was aborted.
    fn collectives_failed(&self) -> Option<Error> {
        if let Some(e) = &self.coll_failure {
            return Some(e.clone());
        }
        self.aborted
            .as_ref()
            .map(|reason| Error::Aborted { reason: reason.clone() })
    }

    fn free_slot(&mut self, i: u32) {
        self.slots[i].state = SlotState::Free;
        self.slots.release(i);
    }

    fn slot_state(&self, id: OpId) -> Option<SlotState> {
        self.slots.get(id).map(|s| s.state.clone())
    }

    fn complete(&mut self, slot: u32, error: Option<&Error>, signals: &[Signal]) {
        let s = &mut self.slots[slot];
        s.state = match error {
            None => SlotState::Done,
            Some(e) => SlotState::Failed(e.clone()),
        };
        signals[s.owner as usize].notify();
    }

    /// Checks that a matched send and receive agree; on a collective channel
    /// a disagreement also fails the group's collectives.
    fn check_pair(&mut self, send: &Posted, recv: &Posted, key: ChannelKey) -> Result<()> {
        if let (Some(s), Some(r)) = (send.header, recv.header) {
            if !s.agrees(&r) || s.seq != r.seq {
                let e = Error::mismatch(format!(
                    "rank {} called {} while rank {} called {}",
                    key.src, s, key.dst, r
                ));
                self.coll_failure = Some(e.clone());
                return Err(e);
            }
        }
        if send.count != recv.count || send.dtype != recv.dtype {
            let e = Error::mismatch(format!(
                "rank {} sends {} elements of {} to rank {} (tag {}), which receives {} elements of {}",
                key.src, send.count, send.dtype, key.dst, key.tag, recv.count, recv.dtype
            ));
            if key.context == Context::Coll {
                self.coll_failure = Some(e.clone());
            }
            return Err(e);
        }
        Ok(())
    }
}

/// Moves one message: a copy, or a combine for receives with `reduce`.
///
/// # Safety
///
/// Both buffers valid for `count` elements of the (equal) data type, the
/// receive buffer not accessed by anyone else, and the buffers either equal
/// or not overlapping.
unsafe fn copy_transfer(t: &Transfer) {
    let bytes = t.send.count * t.send.dtype.size();
    if bytes == 0 || std::ptr::eq(t.send.ptr, t.recv.ptr) {
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        match t.recv.reduce {
            None => crate::memcopy::copy_nonoverlapping(t.send.ptr, t.recv.ptr, bytes),
            Some(op) => t.recv.dtype.reduce_raw(op, t.recv.ptr, t.send.ptr, t.send.count),
        }
    }
}
