//! In-process worlds: rank rendezvous, collectives and point-to-point transfers.
//!
//! All ranks of a world are threads of this process, so a collective is a
//! rendezvous: every rank publishes its call (buffer addresses, counts), waits
//! until all have, computes its own result by reading the peers' buffers into a
//! scratch vector, waits until every rank has done so (no buffer is written while
//! a peer may still read it), and then writes its output. Point-to-point sends
//! are queued per (source, destination) and copied by the receiver while the
//! sender waits, like HCCL's synchronous send.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hcomm_sys::{HcclDataType, HcclReduceOp};

use crate::reduce::reduce_into;
use crate::runtime::lock;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh process-unique id (worlds, groups).
pub(crate) fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Why an operation failed while executing.
#[derive(Clone, Debug)]
pub(crate) enum ExecError {
    /// A peer did not arrive in time.
    Timeout(String),
    /// Ranks disagree, a peer failed, or sizes do not match.
    Failed(String),
}

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduce,
    Broadcast,
    Reduce,
    ReduceScatter,
    AllGather,
    Scatter,
    AlltoAll,
    AlltoAllV,
    AllGatherV,
    ReduceScatterV,
    Barrier,
}

impl Kind {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Kind::AllReduce => "HcclAllReduce",
            Kind::Broadcast => "HcclBroadcast",
            Kind::Reduce => "HcclReduce",
            Kind::ReduceScatter => "HcclReduceScatter",
            Kind::AllGather => "HcclAllGather",
            Kind::Scatter => "HcclScatter",
            Kind::AlltoAll => "HcclAlltoAll",
            Kind::AlltoAllV => "HcclAlltoAllV",
            Kind::AllGatherV => "HcclAllGatherV",
            Kind::ReduceScatterV => "HcclReduceScatterV",
            Kind::Barrier => "HcclBarrier",
        }
    }
}

/// One rank's collective call. Addresses are of registered buffers, validated
/// when the call was made; counts are in elements.
#[derive(Clone, Debug)]
pub(crate) struct Desc {
    pub(crate) kind: Kind,
    pub(crate) dtype: HcclDataType,
    pub(crate) op: HcclReduceOp,
    pub(crate) root: u32,
    /// The count that must agree across ranks (per-rank / per-peer count).
    pub(crate) count: u64,
    pub(crate) send: usize,
    pub(crate) recv: usize,
    /// V-ops: per-peer send counts and displacements.
    pub(crate) send_counts: Vec<u64>,
    pub(crate) send_displs: Vec<u64>,
    /// V-ops: per-peer receive counts and displacements.
    pub(crate) recv_counts: Vec<u64>,
    pub(crate) recv_displs: Vec<u64>,
}

impl Desc {
    pub(crate) fn new(kind: Kind, dtype: HcclDataType) -> Self {
        Desc {
            kind,
            dtype,
            op: HcclReduceOp::HCCL_REDUCE_RESERVED,
            root: 0,
            count: 0,
            send: 0,
            recv: 0,
            send_counts: Vec::new(),
            send_displs: Vec::new(),
            recv_counts: Vec::new(),
            recv_displs: Vec::new(),
        }
    }
}

struct Slot {
    descs: Vec<Option<Desc>>,
    arrived: usize,
    computed: usize,
    left: usize,
    poisoned: Option<String>,
}

#[derive(Default)]
struct CollState {
    next_seq: Vec<u64>,
    slots: HashMap<u64, Slot>,
}

struct SendEntry {
    id: u64,
    ptr: usize,
    count: u64,
    dtype: HcclDataType,
}

#[derive(Default)]
struct P2pState {
    next_id: u64,
    queues: HashMap<(usize, usize), VecDeque<SendEntry>>,
    done: HashMap<u64, Result<(), String>>,
}

/// (user sub-communicator id, member ranks).
type SubKey = (u64, Vec<u32>);

/// A group of ranks (a world or a sub-communicator).
pub(crate) struct Group {
    pub(crate) size: usize,
    pub(crate) is_sub: bool,
    coll: Mutex<CollState>,
    coll_cv: Condvar,
    p2p: Mutex<P2pState>,
    p2p_cv: Condvar,
    /// Sub-communicators being created: key → (group, members that took it).
    subs: Mutex<HashMap<SubKey, (Arc<Group>, usize)>>,
}

/// One rank's handle (what `HcclComm` points to).
pub(crate) struct CommHandle {
    pub(crate) group: Arc<Group>,
    pub(crate) rank: usize,
    pub(crate) device: i32,
    pub(crate) exec_timeout: Option<Duration>,
    pub(crate) name: String,
    /// Operations enqueued and not finished (destroy is `HCCL_E_AGAIN` meanwhile).
    pub(crate) in_flight: AtomicUsize,
}

fn wait_until<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>, deadline: Option<Instant>) -> (MutexGuard<'a, T>, bool) {
    match deadline {
        None => (cv.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner), false),
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return (guard, true);
            }
            let (g, _) = cv
                .wait_timeout(guard, d - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (g, Instant::now() >= d)
        }
    }
}

impl Group {
    pub(crate) fn new(size: usize, is_sub: bool) -> Arc<Group> {
        Arc::new(Group {
            size,
            is_sub,
            coll: Mutex::new(CollState {
                next_seq: vec![0; size],
                slots: HashMap::new(),
            }),
            coll_cv: Condvar::new(),
            p2p: Mutex::new(P2pState::default()),
            p2p_cv: Condvar::new(),
            subs: Mutex::new(HashMap::new()),
        })
    }

    /// The sub-group `members` with user id `sub_id`, shared by every member that asks.
    pub(crate) fn sub_group(&self, sub_id: u64, members: &[u32]) -> Arc<Group> {
        let mut subs = lock(&self.subs);
        let key = (sub_id, members.to_vec());
        let entry = subs
            .entry(key.clone())
            .or_insert_with(|| (Group::new(members.len(), true), 0));
        entry.1 += 1;
        let group = Arc::clone(&entry.0);
        if entry.1 == members.len() {
            subs.remove(&key);
        }
        group
    }

    /// Runs one collective for `rank`. Blocks until every rank called it.
    pub(crate) fn collective(&self, rank: usize, desc: Desc, timeout: Option<Duration>) -> Result<(), ExecError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let n = self.size;
        let kind = desc.kind;
        let mut st = lock(&self.coll);
        let seq = st.next_seq[rank];
        st.next_seq[rank] += 1;
        {
            let slot = st.slots.entry(seq).or_insert_with(|| Slot {
                descs: vec![None; n],
                arrived: 0,
                computed: 0,
                left: 0,
                poisoned: None,
            });
            if let Some(why) = &slot.poisoned {
                return Err(ExecError::Failed(why.clone()));
            }
            slot.descs[rank] = Some(desc);
            slot.arrived += 1;
        }
        self.coll_cv.notify_all();
        loop {
            let Some(slot) = st.slots.get_mut(&seq) else {
                return Err(ExecError::Failed(format!(
                    "{}: internal error: slot vanished",
                    kind.symbol()
                )));
            };
            if slot.arrived == n {
                break;
            }
            if let Some(why) = slot.poisoned.clone() {
                slot.descs[rank] = None;
                slot.arrived -= 1;
                return Err(ExecError::Failed(why));
            }
            let (g, timed_out) = wait_until(&self.coll_cv, st, deadline);
            st = g;
            if timed_out {
                let Some(slot) = st.slots.get_mut(&seq) else { continue };
                if slot.arrived == n {
                    break;
                }
                let missing: Vec<usize> = (0..n).filter(|&r| slot.descs[r].is_none()).collect();
                let why = format!(
                    "{} (collective #{seq}) on rank {rank}: ranks {missing:?} did not call it within the execution timeout of {:?}",
                    kind.symbol(),
                    timeout.unwrap_or_default()
                );
                slot.poisoned = Some(why.clone());
                slot.descs[rank] = None;
                slot.arrived -= 1;
                self.coll_cv.notify_all();
                return Err(ExecError::Timeout(why));
            }
        }
        let descs: Vec<Desc> = st
            .slots
            .get(&seq)
            .map(|s| s.descs.iter().flatten().cloned().collect())
            .unwrap_or_default();
        drop(st);

        let result = if descs.len() == n {
            check_agree(&descs, rank).and_then(|()| compute(&descs, rank))
        } else {
            Err(format!(
                "{}: internal error: {} of {n} calls",
                kind.symbol(),
                descs.len()
            ))
        };

        // Nobody writes before everybody has read.
        let mut st = lock(&self.coll);
        if let Some(slot) = st.slots.get_mut(&seq) {
            slot.computed += 1;
        }
        self.coll_cv.notify_all();
        while st.slots.get(&seq).is_some_and(|s| s.computed < n) {
            st = self.coll_cv.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if let Some(slot) = st.slots.get_mut(&seq) {
            slot.left += 1;
            if slot.left == n {
                st.slots.remove(&seq);
            }
        }
        drop(st);

        match result {
            Ok(Some((dst, bytes))) => {
                // SAFETY: `dst` is this rank's registered output buffer with room
                // for `bytes.len()` bytes (checked when the call was made), and no
                // peer reads it any more.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, bytes.len()) };
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(message) => Err(ExecError::Failed(message)),
        }
    }

    /// Posts a send of `count` elements at `ptr` to `peer`; returns its id.
    pub(crate) fn post_send(&self, rank: usize, peer: usize, ptr: usize, count: u64, dtype: HcclDataType) -> u64 {
        let mut st = lock(&self.p2p);
        st.next_id += 1;
        let id = st.next_id;
        st.queues
            .entry((rank, peer))
            .or_default()
            .push_back(SendEntry { id, ptr, count, dtype });
        self.p2p_cv.notify_all();
        id
    }

    /// The wait loop of the point-to-point calls: under the p2p lock, returns what
    /// `step` yields once it yields something; when `timeout` passed and `ready`
    /// still says there is nothing to take, returns `on_timeout` instead.
    fn p2p_wait<R>(
        &self,
        timeout: Option<Duration>,
        ready: impl Fn(&P2pState) -> bool,
        mut step: impl FnMut(&mut P2pState) -> Option<R>,
        on_timeout: impl FnOnce(&mut P2pState) -> R,
    ) -> R {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut st = lock(&self.p2p);
        loop {
            if let Some(r) = step(&mut st) {
                return r;
            }
            let (g, timed_out) = wait_until(&self.p2p_cv, st, deadline);
            st = g;
            if timed_out && !ready(&st) {
                return on_timeout(&mut st);
            }
        }
    }

    /// Waits until the receivers consumed `ids`; on timeout withdraws the ones not taken.
    pub(crate) fn wait_sends(
        &self,
        rank: usize,
        ids: &[u64],
        what: &str,
        timeout: Option<Duration>,
    ) -> Result<(), ExecError> {
        let all_done = |st: &P2pState| ids.iter().all(|id| st.done.contains_key(id));
        self.p2p_wait(
            timeout,
            all_done,
            |st| {
                if !all_done(st) {
                    return None;
                }
                let mut first = Ok(());
                for id in ids {
                    if let Some(Err(e)) = st.done.remove(id) {
                        if first.is_ok() {
                            first = Err(ExecError::Failed(e));
                        }
                    }
                }
                Some(first)
            },
            |st| {
                let pending: HashSet<u64> = ids.iter().copied().filter(|id| !st.done.contains_key(id)).collect();
                let mut peers = Vec::new();
                for ((src, dst), q) in &mut st.queues {
                    if *src == rank {
                        let before = q.len();
                        q.retain(|e| !pending.contains(&e.id));
                        if q.len() != before {
                            peers.push(*dst);
                        }
                    }
                }
                for id in ids {
                    st.done.remove(id);
                }
                peers.sort_unstable();
                Err(ExecError::Timeout(format!(
                    "{what} on rank {rank}: ranks {peers:?} did not receive within the execution timeout of {:?}",
                    timeout.unwrap_or_default()
                )))
            },
        )
    }

    /// Receives `count` elements from `peer` into `ptr` (the oldest pending send).
    pub(crate) fn recv(
        &self,
        rank: usize,
        peer: usize,
        ptr: usize,
        count: u64,
        dtype: HcclDataType,
        what: &str,
        timeout: Option<Duration>,
    ) -> Result<(), ExecError> {
        self.p2p_wait(
            timeout,
            |st| st.queues.get(&(peer, rank)).is_some_and(|q| !q.is_empty()),
            |st| {
                let entry = st.queues.get_mut(&(peer, rank)).and_then(VecDeque::pop_front)?;
                let result = if entry.count != count || entry.dtype != dtype {
                    Err(format!(
                        "{what}: rank {rank} receives {count} x {:?} from rank {peer}, which sends {} x {:?}",
                        dtype, entry.count, entry.dtype
                    ))
                } else {
                    let bytes = count as usize * dtype.size().unwrap_or(0);
                    // SAFETY: both buffers are registered allocations large enough
                    // for `bytes` (checked when the calls were made); the sender
                    // waits under this lock's protocol until `done` is set.
                    unsafe { std::ptr::copy(entry.ptr as *const u8, ptr as *mut u8, bytes) };
                    Ok(())
                };
                st.done.insert(entry.id, result.clone());
                self.p2p_cv.notify_all();
                Some(result.map_err(ExecError::Failed))
            },
            |_| {
                Err(ExecError::Timeout(format!(
                    "{what} on rank {rank}: rank {peer} did not send within the execution timeout of {:?}",
                    timeout.unwrap_or_default()
                )))
            },
        )
    }
}

fn check_agree(descs: &[Desc], rank: usize) -> Result<(), String> {
    let mine = &descs[rank];
    for (r, d) in descs.iter().enumerate() {
        let same = d.kind == mine.kind
            && d.dtype == mine.dtype
            && d.op == mine.op
            && d.root == mine.root
            && (matches!(d.kind, Kind::AlltoAllV | Kind::AllGatherV | Kind::ReduceScatterV) || d.count == mine.count);
        if !same {
            return Err(format!(
                "collective mismatch: rank {rank} called {}({:?} x {}, op {:?}, root {}) but rank {r} called {}({:?} x {}, op {:?}, root {})",
                mine.kind.symbol(), mine.dtype, mine.count, mine.op, mine.root,
                d.kind.symbol(), d.dtype, d.count, d.op, d.root
            ));
        }
    }
    Ok(())
}

/// Reads `len` bytes at `addr + offset`.
///
/// # Safety
///
/// The range lies in a registered buffer that no one writes during the call.
unsafe fn bytes(addr: usize, offset: usize, len: usize) -> &'static [u8] {
    // SAFETY: per the contract; the 'static lifetime never escapes `compute`.
    unsafe { std::slice::from_raw_parts((addr + offset) as *const u8, len) }
}

/// This rank's output of a V-op gathering one block from every rank `j` into its
/// receive buffer at `recv_displs[j]`: `block(rank j's desc)` is (elements rank `j`
/// sends this rank, element offset of that block in rank `j`'s send buffer).
fn gather_blocks(descs: &[Desc], rank: usize, block: &dyn Fn(&Desc) -> (u64, u64)) -> Result<Vec<u8>, String> {
    let me = &descs[rank];
    let es = me.dtype.size().unwrap_or(0);
    let total = (0..descs.len())
        .map(|j| (me.recv_displs[j] + me.recv_counts[j]) as usize)
        .max()
        .unwrap_or(0)
        * es;
    // SAFETY: my receive buffer holds `total` bytes (checked at call time);
    // start from its current content so gaps between blocks are kept.
    let mut out = unsafe { bytes(me.recv, 0, total) }.to_vec();
    for (j, d) in descs.iter().enumerate() {
        let (count, displ) = block(d);
        if count != me.recv_counts[j] {
            return Err(format!(
                "{}: rank {rank} expects {} elements from rank {j}, which sends {count}",
                me.kind.symbol(),
                me.recv_counts[j]
            ));
        }
        let len = count as usize * es;
        let at = me.recv_displs[j] as usize * es;
        // SAFETY: rank j's send buffer holds its block for me (checked by rank j).
        out[at..at + len].copy_from_slice(unsafe { bytes(d.send, displ as usize * es, len) });
    }
    Ok(out)
}

/// This rank's output: (destination address, bytes), or `None` if it writes nothing.
#[allow(clippy::type_complexity)]
fn compute(descs: &[Desc], rank: usize) -> Result<Option<(usize, Vec<u8>)>, String> {
    let n = descs.len();
    let me = &descs[rank];
    let es = me.dtype.size().unwrap_or(0);
    let c = me.count as usize * es;
    let reduce_all = |offset_of: &dyn Fn(usize) -> usize, len: usize| -> Vec<u8> {
        // SAFETY: every rank's send buffer holds the read range (checked at call time)
        // and is not written before every rank finished computing.
        let mut acc = unsafe { bytes(descs[0].send, offset_of(0), len) }.to_vec();
        for (r, d) in descs.iter().enumerate().skip(1) {
            // SAFETY: as above.
            reduce_into(me.dtype, me.op, &mut acc, unsafe { bytes(d.send, offset_of(r), len) });
        }
        acc
    };
    // Every rank's `c` bytes at `offset_of(rank)` of its send buffer, in rank order.
    let concat_all = |offset_of: &dyn Fn(usize) -> usize| -> Vec<u8> {
        let mut out = Vec::with_capacity(n * c);
        for (r, d) in descs.iter().enumerate() {
            // SAFETY: every send buffer holds the read range (checked at call time).
            out.extend_from_slice(unsafe { bytes(d.send, offset_of(r), c) });
        }
        out
    };
    let out = match me.kind {
        Kind::Barrier => None,
        Kind::AllReduce => Some((me.recv, reduce_all(&|_| 0, c))),
        Kind::Reduce => (rank == me.root as usize).then(|| (me.recv, reduce_all(&|_| 0, c))),
        Kind::ReduceScatter => Some((me.recv, reduce_all(&|_| rank * c, c))),
        Kind::Broadcast => {
            let root = &descs[me.root as usize];
            // SAFETY: the root's buffer holds `c` bytes and is only read here.
            (rank != me.root as usize).then(|| (me.recv, unsafe { bytes(root.send, 0, c) }.to_vec()))
        }
        Kind::Scatter => {
            let root = &descs[me.root as usize];
            // SAFETY: the root's send buffer holds `n * c` bytes.
            Some((me.recv, unsafe { bytes(root.send, rank * c, c) }.to_vec()))
        }
        Kind::AllGather => Some((me.recv, concat_all(&|_| 0))),
        Kind::AlltoAll => Some((me.recv, concat_all(&|_| rank * c))),
        Kind::AlltoAllV => Some((
            me.recv,
            gather_blocks(descs, rank, &|d| (d.send_counts[rank], d.send_displs[rank]))?,
        )),
        Kind::AllGatherV => Some((me.recv, gather_blocks(descs, rank, &|d| (d.count, 0))?)),
        Kind::ReduceScatterV => {
            for (j, d) in descs.iter().enumerate() {
                if d.send_counts[rank] != me.count {
                    return Err(format!(
                        "HcclReduceScatterV: rank {rank} receives {} elements but rank {j} sends it {}",
                        me.count, d.send_counts[rank]
                    ));
                }
            }
            let displs: Vec<usize> = descs.iter().map(|d| d.send_displs[rank] as usize * es).collect();
            Some((me.recv, reduce_all(&|r| displs[r], c)))
        }
    };
    Ok(out)
}

// --- worlds being joined through HcclCommInitRootInfo -----------------------

struct Pending {
    size: u32,
    joined: Vec<bool>,
    count: u32,
    group: Option<Arc<Group>>,
    taken: u32,
}

static PENDING: Mutex<Option<HashMap<u64, Pending>>> = Mutex::new(None);
static PENDING_CV: Condvar = Condvar::new();

/// Why joining a world failed.
pub(crate) enum JoinError {
    /// Disagreeing `nRanks` or a rank joining twice.
    Para(String),
    /// Not every rank joined in time.
    Timeout(String),
}

/// Joins world `world` as `rank` of `size`; blocks until all ranks joined.
pub(crate) fn join_world(world: u64, size: u32, rank: u32, timeout: Duration) -> Result<Arc<Group>, JoinError> {
    let deadline = Instant::now().checked_add(timeout);
    let mut guard = lock(&PENDING);
    {
        let map = guard.get_or_insert_with(HashMap::new);
        let p = map.entry(world).or_insert_with(|| Pending {
            size,
            joined: vec![false; size as usize],
            count: 0,
            group: None,
            taken: 0,
        });
        if p.size != size {
            return Err(JoinError::Para(format!(
                "HcclCommInitRootInfo: rank {rank} passes nRanks = {size}, another rank passed {}",
                p.size
            )));
        }
        if p.joined[rank as usize] || p.group.is_some() {
            return Err(JoinError::Para(format!(
                "HcclCommInitRootInfo: rank {rank} of this root info joined twice"
            )));
        }
        p.joined[rank as usize] = true;
        p.count += 1;
        if p.count == size {
            p.group = Some(Group::new(size as usize, false));
        }
    }
    PENDING_CV.notify_all();
    loop {
        let map = guard.get_or_insert_with(HashMap::new);
        let Some(p) = map.get_mut(&world) else {
            return Err(JoinError::Para(
                "HcclCommInitRootInfo: internal error: world vanished".to_owned(),
            ));
        };
        if let Some(g) = p.group.clone() {
            p.taken += 1;
            if p.taken == p.size {
                map.remove(&world);
            }
            return Ok(g);
        }
        let (g, timed_out) = wait_until(&PENDING_CV, guard, deadline);
        guard = g;
        if timed_out {
            let map = guard.get_or_insert_with(HashMap::new);
            if let Some(p) = map.get_mut(&world) {
                if p.group.is_none() {
                    p.joined[rank as usize] = false;
                    p.count -= 1;
                    let missing: Vec<usize> = (0..p.size as usize).filter(|&r| !p.joined[r]).collect();
                    if p.count == 0 {
                        map.remove(&world);
                    }
                    return Err(JoinError::Timeout(format!(
                        "HcclCommInitRootInfo: rank {rank}: ranks {missing:?} did not join within {timeout:?} (HCCL_CONNECT_TIMEOUT)"
                    )));
                }
            }
        }
    }
}
