//! What the HCCL and NCCL backends share: one [`DeviceBackend`] implements
//! [`Backend`] over a [`Driver`] (the library pair: HCCL + ACL runtime, or
//! NCCL + CUDA runtime).
//!
//! * **Streams.** Each communicator owns one stream; every library call is
//!   enqueued there, and a wait is a stream synchronisation polled in short
//!   slices up to the communicator's timeout, checking meanwhile for failed
//!   peers (in-process worlds), aborts and the library's asynchronous error.
//! * **Point-to-point.** Posted operations stay queued on the host until some
//!   operation of the communicator blocks (a wait, a test, a blocking call, a
//!   batch, a collective); then every queued operation is handed to the
//!   library at once, split by channel position into batch calls (see
//!   [`plan`]), so in-flight operations progress together and correct
//!   schedules never hang on the device.
//! * **Collectives** run as the library's own; those it lacks (gather on
//!   HCCL; all-to-all-v on NCCL) are built from one batch call. Nothing falls
//!   back to the host algorithms, which would dereference device addresses.
//! * **Host memory** is accepted everywhere: it is staged through device
//!   buffers (copy in, operate, copy out), so programs written for host
//!   slices run unchanged; [`crate::DeviceBuffer`]s avoid the copies.
//! * **Failures.** A wait that times out or sees a failed peer abandons the
//!   device work it cannot cancel: the communicator fails every later
//!   operation with the same error, its staging memory and (per device) every
//!   freed device buffer are kept until the stream drained, and its last drop
//!   hands stream and communicator to a thread that destroys them once idle.

pub(crate) mod memory;
pub(crate) mod plan;
pub(crate) mod world;

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use memory::{is_device, record_teardown_error, CopyKind, DevMem, DeviceCtx};
use world::{DeviceWorld, Envelope, GroupShared, Presence, RankState};

use super::{Backend, Dir, NativeCall, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::collective::CollHeader;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::topology::Topology;

/// A function table loaded once per process, or from an explicit path.
pub(crate) enum Table<T: 'static> {
    Static(&'static T),
    Owned(Arc<T>),
}

impl<T> std::ops::Deref for Table<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Table::Static(t) => t,
            Table::Owned(t) => t,
        }
    }
}

/// Binds `device` of driver `driver_id` to the calling thread unless it is
/// already bound; `set` does the binding.
pub(crate) fn bind_cached(driver_id: u64, device: i32, set: impl FnOnce() -> DevResult<()>) -> DevResult<()> {
    thread_local! {
        static BOUND: std::cell::Cell<(u64, i32)> = const { std::cell::Cell::new((0, -1)) };
    }
    if BOUND.with(std::cell::Cell::get) == (driver_id, device) {
        return Ok(());
    }
    set()?;
    BOUND.with(|b| b.set((driver_id, device)));
    Ok(())
}

/// A process-unique id for a loaded driver.
pub(crate) fn next_driver_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Seconds for a library's execution timeout: `timeout` rounded up, at least 1.
pub(crate) fn exec_timeout_secs(timeout: Duration) -> i32 {
    let secs = timeout.as_secs_f64().ceil();
    if secs >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        (secs as i32).max(1)
    }
}

/// A stable 63-bit hash (FNV-1a) of a communicator key, identical on every rank.
pub(crate) fn key_hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h >> 1
}

/// Locks, recovering from poisoning (state is updated in single steps).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long one stream poll may block before failures are checked again.
const POLL_SLICE: Duration = Duration::from_millis(20);

/// A failed library call, in the library's words.
#[derive(Clone, Debug)]
pub(crate) struct DevError {
    /// The library reported a timeout (execution or synchronisation).
    pub(crate) timeout: bool,
    pub(crate) message: String,
}

/// The result of a driver call.
pub(crate) type DevResult<T> = std::result::Result<T, DevError>;

impl DevError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        DevError {
            timeout: false,
            message: message.into(),
        }
    }

    /// As an [`Error`] outside any wait.
    pub(crate) fn into_error(self, backend: &'static str) -> Error {
        self.into_error_at(backend, 0, Duration::ZERO, Duration::ZERO)
    }

    /// As an [`Error`] of a wait of rank `rank` that took `waited` of `limit`.
    pub(crate) fn into_error_at(self, backend: &'static str, rank: usize, waited: Duration, limit: Duration) -> Error {
        if self.timeout {
            Error::Timeout {
                operation: format!("{backend}: {}", self.message),
                rank,
                waited,
                limit,
            }
        } else {
            Error::Backend {
                backend,
                message: self.message,
            }
        }
    }
}

/// An opaque library handle (communicator, stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Raw(pub(crate) *mut c_void);

// SAFETY: library handles are plain addresses to the host; HCCL and NCCL allow
// their use from any thread that bound the device (the driver binds first).
unsafe impl Send for Raw {}
// SAFETY: as above; `&Raw` only exposes the address.
unsafe impl Sync for Raw {}

/// What a stream poll found.
pub(crate) enum Poll {
    /// Everything enqueued has completed.
    Done,
    /// Work is still running.
    Pending,
    /// The stream (or the communicator's asynchronous state) failed.
    Failed(DevError),
}

/// One send or receive of a batch call; `peer` is the library's rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub(crate) send: bool,
    pub(crate) ptr: *mut u8,
    pub(crate) count: usize,
    pub(crate) dtype: DataType,
    pub(crate) peer: u32,
}

/// A collective in library terms: device addresses, library ranks.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LibColl<'a> {
    AllReduce {
        send: *mut u8,
        recv: *mut u8,
        count: usize,
        op: ReduceOp,
    },
    Broadcast {
        buf: *mut u8,
        count: usize,
        root: u32,
    },
    Reduce {
        send: *mut u8,
        recv: *mut u8,
        count: usize,
        op: ReduceOp,
        root: u32,
    },
    ReduceScatter {
        send: *mut u8,
        recv: *mut u8,
        recv_count: usize,
        op: ReduceOp,
    },
    AllGather {
        send: *mut u8,
        recv: *mut u8,
        send_count: usize,
    },
    Scatter {
        send: *mut u8,
        recv: *mut u8,
        count: usize,
        root: u32,
    },
    Gather {
        send: *mut u8,
        recv: *mut u8,
        count: usize,
        root: u32,
    },
    AllToAll {
        send: *mut u8,
        recv: *mut u8,
        count: usize,
    },
    /// Counts and displacements in elements, indexed by library rank.
    AllToAllV {
        send: *mut u8,
        send_counts: &'a [u64],
        send_displs: &'a [u64],
        recv: *mut u8,
        recv_counts: &'a [u64],
        recv_displs: &'a [u64],
    },
    Barrier,
}

/// What a sub-communicator is made from.
pub(crate) struct SubRequest<'a> {
    /// The world communicator (HCCL splits one level below it only).
    pub(crate) world_comm: Raw,
    pub(crate) device: i32,
    /// Identical on every member, different for every sub-communicator.
    pub(crate) key: &'a str,
    /// The members' ranks in the world communicator, in new-rank order.
    pub(crate) members: &'a [u32],
    /// This rank's new rank.
    pub(crate) me: usize,
    pub(crate) timeout: Duration,
    pub(crate) world: Option<&'a DeviceWorld>,
}

/// A new sub-communicator and the library rank of each new rank.
pub(crate) struct SubComm {
    pub(crate) comm: Raw,
    pub(crate) lib_rank: Vec<u32>,
}

/// One device library pair. Calls act on the device bound to the calling
/// thread ([`Driver::bind`] first).
pub(crate) trait Driver: Send + Sync + 'static {
    /// `hccl` or `nccl`.
    fn name(&self) -> &'static str;
    /// Distinguishes loaded instances (tests load the stand-in explicitly).
    fn id(&self) -> u64;
    /// Binds `device` to the calling thread (cheap when already bound).
    fn bind(&self, device: i32) -> DevResult<()>;
    fn malloc(&self, bytes: usize) -> DevResult<*mut u8>;
    /// # Safety
    /// `ptr` from [`Driver::malloc`], freed once.
    unsafe fn free(&self, ptr: *mut u8) -> DevResult<()>;
    /// # Safety
    /// Both ranges valid for `bytes` bytes on the sides `kind` names.
    unsafe fn memcpy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: CopyKind) -> DevResult<()>;
    fn stream_create(&self) -> DevResult<Raw>;
    /// # Safety
    /// A live stream, destroyed once, with no work left.
    unsafe fn stream_destroy(&self, stream: Raw) -> DevResult<()>;
    /// Whether `stream` drained, blocking at most `slice`; also reports the
    /// communicator's asynchronous error.
    fn poll(&self, comm: Raw, stream: Raw, slice: Duration) -> Poll;
    /// Enqueues one batch of sends and receives (at most one per peer and
    /// direction).
    ///
    /// # Safety
    /// Live handles; every item's device range valid until the stream drained.
    unsafe fn batch(&self, comm: Raw, stream: Raw, items: &[Item]) -> DevResult<()>;
    /// Enqueues a collective; `None` when the library lacks it.
    ///
    /// # Safety
    /// Live handles; the call's device ranges valid until the stream drained.
    unsafe fn collective(&self, comm: Raw, stream: Raw, call: &LibColl<'_>, dtype: DataType) -> Option<DevResult<()>>;
    /// # Safety
    /// A live communicator, destroyed once.
    unsafe fn comm_destroy(&self, comm: Raw) -> DevResult<()>;
    /// Aborts device work of `comm`; `true` when this released the handle.
    ///
    /// # Safety
    /// A live communicator.
    unsafe fn comm_abort(&self, comm: Raw) -> bool;
    /// Creates a sub-communicator (this rank's part of it).
    fn subcomm(&self, req: &SubRequest<'_>) -> Result<SubComm>;
}

/// A communicator handle, destroyed on drop.
pub(crate) struct CommHandle {
    pub(crate) ctx: Arc<DeviceCtx>,
    pub(crate) raw: Raw,
    released: AtomicBool,
}

impl CommHandle {
    pub(crate) fn new(ctx: Arc<DeviceCtx>, raw: Raw) -> Arc<CommHandle> {
        Arc::new(CommHandle {
            ctx,
            raw,
            released: AtomicBool::new(false),
        })
    }
}

impl Drop for CommHandle {
    fn drop(&mut self) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        let driver = &self.ctx.driver;
        tracing::debug!(
            backend = driver.name(),
            device = self.ctx.device,
            "destroying communicator"
        );
        let result = self.ctx.bind().and_then(|()| {
            // SAFETY: the handle is live (never released) and this is its
            // last owner; every stream using it drained or was handed to the
            // reaper, which owns a clone of this handle.
            unsafe { driver.comm_destroy(self.raw) }.map_err(|e| e.into_error(driver.name()))
        });
        if let Err(e) = result {
            record_teardown_error(e);
        }
    }
}

/// What to do with a receive's staging buffer once its data arrived.
#[derive(Clone, Copy, Debug)]
enum Finish {
    /// Copy into the user's host buffer.
    ToHost(*mut u8),
    /// Combine into the user's buffer with `op` (through the host).
    Reduce {
        dst: *mut u8,
        on_device: bool,
        op: ReduceOp,
    },
}

#[derive(Clone, Debug)]
enum SlotState {
    Free,
    Queued,
    Submitted,
    Done,
    Failed(Error),
}

struct Slot {
    generation: u32,
    state: SlotState,
    staging: Option<DevMem>,
    finish: Option<Finish>,
    count: usize,
    dtype: DataType,
}

/// A posted operation not yet handed to the library.
#[derive(Clone, Copy)]
struct Queued {
    slot: u32,
    dir: Dir,
    peer: usize,
    /// Device address of the data (the user's, or the staging buffer).
    dev: *mut u8,
    count: usize,
    dtype: DataType,
    tag: i64,
}

struct State {
    stream: Option<Raw>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    queue: Vec<Queued>,
    /// Slots whose work is on the stream.
    submitted: Vec<u32>,
    /// Ranks the stream's unfinished work waits on.
    deps: Vec<bool>,
    /// Set once device work was abandoned or the group aborted.
    sticky: Option<Error>,
    abandoned: bool,
    /// Staging memory the device may still use.
    graveyard: Vec<DevMem>,
    /// One element of scratch for barriers built from an all-reduce.
    barrier: Option<DevMem>,
}

// SAFETY: the raw pointers in `Queued` and `Finish` are addresses of buffers
// that, per the `Backend::post` contract, stay valid and untouched until
// their operations are released; only the thread holding the state lock uses them.
unsafe impl Send for State {}

/// One rank's view of a device communicator.
pub(crate) struct DeviceBackend {
    ctx: Arc<DeviceCtx>,
    comm: Arc<CommHandle>,
    /// The world communicator this one was split from (itself for a world).
    world_comm: Arc<CommHandle>,
    /// Library rank of each rank of this group.
    lib_rank: Vec<u32>,
    /// Whether library ranks equal ranks.
    identity: bool,
    /// World rank of each rank of this group.
    global: Vec<usize>,
    rank: usize,
    key: String,
    topology: Topology,
    timeout: Duration,
    env: Option<Arc<DeviceWorld>>,
    /// Keeps this rank "running" for its peers while the backend lives.
    presence: Option<Arc<Presence>>,
    shared: Arc<GroupShared>,
    state: Mutex<State>,
}

/// What a new [`DeviceBackend`] is made of.
pub(crate) struct Parts {
    pub(crate) ctx: Arc<DeviceCtx>,
    pub(crate) comm: Arc<CommHandle>,
    pub(crate) world_comm: Arc<CommHandle>,
    pub(crate) lib_rank: Vec<u32>,
    pub(crate) global: Vec<usize>,
    pub(crate) rank: usize,
    pub(crate) key: String,
    pub(crate) topology: Topology,
    pub(crate) timeout: Duration,
    pub(crate) env: Option<Arc<DeviceWorld>>,
    pub(crate) presence: Option<Arc<Presence>>,
}

impl DeviceBackend {
    /// A backend over a communicator, with a new stream on its device.
    pub(crate) fn new(parts: Parts) -> Result<DeviceBackend> {
        let Parts {
            ctx,
            comm,
            world_comm,
            lib_rank,
            global,
            rank,
            key,
            topology,
            timeout,
            env,
            presence,
        } = parts;
        ctx.bind()?;
        let stream = ctx
            .driver
            .stream_create()
            .map_err(|e| e.into_error(ctx.driver.name()))?;
        tracing::debug!(
            backend = ctx.driver.name(),
            device = ctx.device,
            comm.rank = rank,
            comm.world = lib_rank.len(),
            key = key.as_str(),
            "communicator ready"
        );
        let shared = env
            .as_ref()
            .map_or_else(|| Arc::new(GroupShared::default()), |w| w.group(&key));
        let world = lib_rank.len();
        Ok(DeviceBackend {
            identity: lib_rank.iter().enumerate().all(|(i, &l)| l as usize == i),
            ctx,
            comm,
            world_comm,
            lib_rank,
            global,
            rank,
            key,
            topology,
            timeout,
            env,
            presence,
            shared,
            state: Mutex::new(State {
                stream: Some(stream),
                slots: Vec::new(),
                free: Vec::new(),
                queue: Vec::new(),
                submitted: Vec::new(),
                deps: vec![false; world],
                sticky: None,
                abandoned: false,
                graveyard: Vec::new(),
                barrier: None,
            }),
        })
    }

    fn name(&self) -> &'static str {
        self.ctx.driver.name()
    }

    fn dev_err(&self, e: DevError) -> Error {
        e.into_error(self.name())
    }

    /// The error every operation gets once the group is unusable.
    fn unusable(&self, st: &State) -> Option<Error> {
        if let Some(reason) = self.shared.aborted() {
            return Some(Error::Aborted { reason });
        }
        st.sticky.clone()
    }

    fn release(st: &mut State, ids: &[OpId]) {
        for id in ids {
            let Some(slot) = st.slots.get_mut(id.slot as usize) else {
                continue;
            };
            if slot.generation != id.generation || matches!(slot.state, SlotState::Free) {
                continue;
            }
            match slot.state {
                SlotState::Queued => st.queue.retain(|q| q.slot != id.slot),
                SlotState::Submitted => {
                    // Only after abandonment: the device may still use it.
                    if let Some(m) = slot.staging.take() {
                        st.graveyard.push(m);
                    }
                    st.submitted.retain(|&s| s != id.slot);
                }
                _ => {}
            }
            let slot = &mut st.slots[id.slot as usize];
            slot.state = SlotState::Free;
            slot.staging = None;
            slot.finish = None;
            st.free.push(id.slot);
        }
    }

    fn alloc_slot(st: &mut State, count: usize, dtype: DataType) -> OpId {
        let fresh = Slot {
            generation: 0,
            state: SlotState::Queued,
            staging: None,
            finish: None,
            count,
            dtype,
        };
        if let Some(i) = st.free.pop() {
            let slot = &mut st.slots[i as usize];
            let generation = slot.generation.wrapping_add(1);
            *slot = Slot { generation, ..fresh };
            OpId { slot: i, generation }
        } else {
            st.slots.push(fresh);
            OpId {
                slot: (st.slots.len() - 1) as u32,
                generation: 0,
            }
        }
    }

    fn slot_state(st: &State, id: OpId) -> Option<SlotState> {
        let slot = st.slots.get(id.slot as usize)?;
        (slot.generation == id.generation).then(|| slot.state.clone())
    }

    fn set_state(st: &mut State, slot: u32, state: SlotState) {
        st.slots[slot as usize].state = state;
    }

    /// Copies `bytes` bytes of host memory into a new device buffer.
    ///
    /// # Safety
    ///
    /// `src` valid for reads of `bytes` bytes.
    unsafe fn stage_in(&self, src: *const u8, bytes: usize) -> Result<DevMem> {
        let m = self.ctx.alloc(bytes)?;
        // SAFETY: `m` holds `bytes` device bytes; `src` per the caller.
        unsafe { self.ctx.copy(m.ptr, src, bytes, CopyKind::HostToDevice)? };
        Ok(m)
    }

    /// Runs a receive's finishing step from the device bytes at `src`.
    ///
    /// # Safety
    ///
    /// `src` valid device memory of `count` elements; the finish's target
    /// valid and exclusively this operation's.
    unsafe fn finish(&self, finish: Finish, src: *const u8, count: usize, dtype: DataType) -> Result<()> {
        let bytes = count * dtype.size();
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: forwarded from the caller for every copy below.
        unsafe {
            match finish {
                Finish::ToHost(host) => self.ctx.copy(host, src, bytes, CopyKind::DeviceToHost),
                Finish::Reduce { dst, on_device, op } => {
                    let mut incoming = vec![0u64; bytes.div_ceil(8)];
                    let incoming = incoming.as_mut_ptr().cast::<u8>();
                    self.ctx.copy(incoming, src, bytes, CopyKind::DeviceToHost)?;
                    if on_device {
                        let mut acc = vec![0u64; bytes.div_ceil(8)];
                        let acc = acc.as_mut_ptr().cast::<u8>();
                        self.ctx.copy(acc, dst, bytes, CopyKind::DeviceToHost)?;
                        dtype.reduce_raw(op, acc, incoming, count);
                        self.ctx.copy(dst, acc, bytes, CopyKind::HostToDevice)
                    } else {
                        dtype.reduce_raw(op, dst, incoming, count);
                        Ok(())
                    }
                }
            }
        }
    }

    /// Hands every queued operation to the library. Failures land in the
    /// operations' slots.
    fn flush(&self, st: &mut State) {
        if st.queue.is_empty() {
            return;
        }
        if let Some(e) = self.unusable(st) {
            for q in std::mem::take(&mut st.queue) {
                Self::set_state(st, q.slot, SlotState::Failed(e.clone()));
            }
            return;
        }
        self.match_self_messages(st);
        let ops: Vec<Queued> = st.queue.iter().filter(|q| q.peer != self.rank).copied().collect();
        if ops.is_empty() {
            return;
        }
        st.queue.retain(|q| q.peer == self.rank);
        if self.env.is_some() {
            for q in &ops {
                let env = Envelope {
                    tag: q.tag,
                    count: q.count,
                    dtype: q.dtype,
                };
                let (src, dst) = match q.dir {
                    Dir::Send => (self.rank, q.peer),
                    Dir::Recv => (q.peer, self.rank),
                };
                if let Err(e) = self.shared.record(src, dst, q.dir == Dir::Send, env) {
                    for q in &ops {
                        Self::set_state(st, q.slot, SlotState::Failed(e.clone()));
                    }
                    return;
                }
            }
        }
        let Some(stream) = st.stream else { return };
        let channels: Vec<(usize, Dir)> = ops.iter().map(|q| (q.peer, q.dir)).collect();
        let mut failure: Option<Error> = None;
        for call in plan::split_by_channel_position(&channels) {
            if let Some(e) = &failure {
                for &i in &call {
                    Self::set_state(st, ops[i].slot, SlotState::Failed(e.clone()));
                }
                continue;
            }
            let items: Vec<Item> = call
                .iter()
                .map(|&i| {
                    let q = &ops[i];
                    Item {
                        send: q.dir == Dir::Send,
                        ptr: q.dev,
                        count: q.count,
                        dtype: q.dtype,
                        peer: self.lib_rank[q.peer],
                    }
                })
                .collect();
            tracing::trace!(comm.rank = self.rank, items = items.len(), "batch send/recv");
            let result = self.ctx.bind().and_then(|()| {
                // SAFETY: live handles; every item's buffer stays valid until
                // its op is released, which waits for the stream (or keeps
                // the staging memory alive after abandonment).
                unsafe { self.ctx.driver.batch(self.comm.raw, stream, &items) }.map_err(|e| self.dev_err(e))
            });
            match result {
                Ok(()) => {
                    for &i in &call {
                        Self::set_state(st, ops[i].slot, SlotState::Submitted);
                        st.submitted.push(ops[i].slot);
                        st.deps[ops[i].peer] = true;
                    }
                }
                Err(e) => {
                    for &i in &call {
                        Self::set_state(st, ops[i].slot, SlotState::Failed(e.clone()));
                    }
                    failure = Some(e);
                }
            }
        }
    }

    /// Completes messages this rank sends to itself, matched per tag in
    /// posting order, with device copies.
    fn match_self_messages(&self, st: &mut State) {
        loop {
            let mut pair = None;
            'find: for (ri, r) in st.queue.iter().enumerate() {
                if r.peer != self.rank || r.dir != Dir::Recv {
                    continue;
                }
                for (si, s) in st.queue.iter().enumerate() {
                    if s.peer == self.rank && s.dir == Dir::Send && s.tag == r.tag {
                        pair = Some((si, ri));
                        break 'find;
                    }
                }
                // The oldest receive of this tag has no send yet: later
                // receives of the same tag must not overtake it.
            }
            let Some((si, ri)) = pair else { return };
            let (s, r) = (st.queue[si], st.queue[ri]);
            st.queue.retain(|q| q.slot != s.slot && q.slot != r.slot);
            let result = if s.count != r.count || s.dtype != r.dtype {
                Err(Error::mismatch(format!(
                    "rank {0} sends {1} elements of {2} to itself (tag {3}), which receives {4} elements of {5}",
                    self.rank, s.count, s.dtype, s.tag, r.count, r.dtype
                )))
            } else {
                let finish = st.slots[r.slot as usize].finish;
                // SAFETY: both device ranges hold `count` elements and belong
                // to these two posted operations.
                unsafe {
                    self.ctx
                        .copy(r.dev, s.dev, s.count * s.dtype.size(), CopyKind::DeviceToDevice)
                        .and_then(|()| match finish {
                            Some(f) => self.finish(f, r.dev, r.count, r.dtype),
                            None => Ok(()),
                        })
                }
            };
            let state = match result {
                Ok(()) => SlotState::Done,
                Err(e) => SlotState::Failed(e),
            };
            Self::set_state(st, s.slot, state.clone());
            Self::set_state(st, r.slot, state);
            st.slots[s.slot as usize].staging = None;
            st.slots[r.slot as usize].staging = None;
        }
    }

    /// Every submitted operation completed: finish receives, free staging.
    fn complete_submitted(&self, st: &mut State) {
        for slot in std::mem::take(&mut st.submitted) {
            let s = &mut st.slots[slot as usize];
            if !matches!(s.state, SlotState::Submitted) {
                continue;
            }
            let staging = s.staging.take();
            let result = match (s.finish.take(), &staging) {
                // SAFETY: the stream drained, so the staging buffer holds the
                // received data; the target is this op's own buffer.
                (Some(f), Some(m)) => unsafe { self.finish(f, m.ptr, s.count, s.dtype) },
                _ => Ok(()),
            };
            drop(staging);
            st.slots[slot as usize].state = match result {
                Ok(()) => SlotState::Done,
                Err(e) => SlotState::Failed(e),
            };
        }
        st.deps.iter_mut().for_each(|d| *d = false);
    }

    /// The stream failed: every submitted operation fails with `e`.
    fn fail_submitted(st: &mut State, e: &Error) {
        for slot in std::mem::take(&mut st.submitted) {
            let s = &mut st.slots[slot as usize];
            if matches!(s.state, SlotState::Submitted) {
                s.state = SlotState::Failed(e.clone());
                s.staging = None;
                s.finish = None;
            }
        }
        st.deps.iter_mut().for_each(|d| *d = false);
    }

    /// Gives up on the stream's work: it can be neither cancelled nor
    /// trusted, so the communicator fails every later operation with `e`.
    fn abandon(&self, st: &mut State, e: &Error, local: &mut Vec<DevMem>) {
        for slot in std::mem::take(&mut st.submitted) {
            let s = &mut st.slots[slot as usize];
            if matches!(s.state, SlotState::Submitted) {
                s.state = SlotState::Failed(e.clone());
                s.finish = None;
                if let Some(m) = s.staging.take() {
                    st.graveyard.push(m);
                }
            }
        }
        st.graveyard.append(local);
        st.deps.iter_mut().for_each(|d| *d = false);
        if !st.abandoned {
            st.abandoned = true;
            self.ctx.mark_stuck();
        }
        st.sticky.get_or_insert_with(|| e.clone());
    }

    /// Why the stream's work can never complete, if that is already known.
    fn blocking_failure(&self, st: &State) -> Option<Error> {
        if let Some(reason) = self.shared.aborted() {
            return Some(Error::Aborted { reason });
        }
        let peers = || (0..st.deps.len()).filter(|&r| st.deps[r] && r != self.rank);
        if let Some(e) = self.shared.channel_failure(self.rank, peers()) {
            return Some(e);
        }
        let world = self.env.as_ref()?;
        // Name a root cause where one is known, not a rank that failed
        // because of it.
        let mut found: Option<(u8, Error)> = None;
        for r in peers() {
            let (rank_order, e) = match world.state(self.global[r]) {
                RankState::Running => continue,
                RankState::Failed { reason, secondary } => (u8::from(secondary), Error::PeerFailed { rank: r, reason }),
                RankState::Finished => (
                    2,
                    Error::PeerFailed {
                        rank: r,
                        reason: "it finished while this rank waited on it (a missing matching operation?)".into(),
                    },
                ),
            };
            if found.as_ref().is_none_or(|(o, _)| rank_order < *o) {
                found = Some((rank_order, e));
            }
        }
        found.map(|(_, e)| e)
    }

    /// Drives the stream until its work completed, failed, or `deadline`.
    /// On abandonment, `local` staging memory is kept alive.
    fn drain(
        &self,
        st: &mut State,
        start: Instant,
        limit: Duration,
        what: &str,
        local: &mut Vec<DevMem>,
    ) -> Result<()> {
        let deadline = start.checked_add(limit);
        let Some(stream) = st.stream else {
            return Ok(());
        };
        if let Err(e) = self.ctx.bind() {
            self.abandon(st, &e, local);
            return Err(e);
        }
        loop {
            let now = Instant::now();
            let left = deadline.map_or(POLL_SLICE, |d| d.saturating_duration_since(now));
            match self.ctx.driver.poll(self.comm.raw, stream, left.min(POLL_SLICE)) {
                Poll::Done => {
                    self.complete_submitted(st);
                    return Ok(());
                }
                Poll::Failed(e) => {
                    let e = e.into_error_at(self.name(), self.rank, start.elapsed(), limit);
                    Self::fail_submitted(st, &e);
                    if e.is_secondary() || matches!(e, Error::Timeout { .. }) {
                        // The stream may still hold work behind the failure.
                        self.abandon(st, &e, local);
                    }
                    return Err(e);
                }
                Poll::Pending => {}
            }
            if let Some(e) = self.blocking_failure(st) {
                self.abandon(st, &e, local);
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let e = Error::Timeout {
                    operation: format!("{what} on the `{}` backend", self.name()),
                    rank: self.rank,
                    waited: start.elapsed(),
                    limit,
                };
                self.abandon(st, &e, local);
                return Err(e);
            }
        }
    }

    /// Waits for `ids` (see [`Backend::wait`]).
    fn wait_ids(&self, st: &mut State, ids: &[OpId], limit: Duration, what: &str) -> Result<()> {
        let start = Instant::now();
        loop {
            self.flush(st);
            let mut submitted = false;
            let mut queued = false;
            let mut failure = None;
            for id in ids {
                match Self::slot_state(st, *id) {
                    Some(SlotState::Submitted) => submitted = true,
                    Some(SlotState::Queued) => queued = true,
                    Some(SlotState::Failed(e)) => {
                        failure.get_or_insert(e);
                    }
                    _ => {}
                }
            }
            if let Some(e) = failure {
                if submitted {
                    // Finish the rest of the stream's work before releasing.
                    let _ = self.drain(st, start, limit, what, &mut Vec::new());
                }
                Self::release(st, ids);
                return Err(e);
            }
            if submitted {
                if let Err(e) = self.drain(st, start, limit, what, &mut Vec::new()) {
                    Self::release(st, ids);
                    return Err(e);
                }
                continue;
            }
            if !queued {
                Self::release(st, ids);
                return Ok(());
            }
            // Only messages to self wait for their partner, which this rank
            // has not posted yet (another thread may).
            if start.elapsed() >= limit {
                Self::release(st, ids);
                return Err(Error::Timeout {
                    operation: format!("{what}: a message to itself whose matching operation was never posted"),
                    rank: self.rank,
                    waited: start.elapsed(),
                    limit,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Device address and staging of an input of `bytes` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` valid for reads of `bytes` bytes (host or this device).
    unsafe fn input(&self, ptr: *const u8, bytes: usize, local: &mut Vec<DevMem>) -> Result<*mut u8> {
        if bytes == 0 || is_device(ptr, bytes) {
            return Ok(ptr.cast_mut());
        }
        // SAFETY: forwarded from the caller.
        let m = unsafe { self.stage_in(ptr, bytes)? };
        let p = m.ptr;
        local.push(m);
        Ok(p)
    }

    /// Device address of an output of `bytes` bytes at `ptr`; host outputs
    /// get a staging buffer (preloaded with the host data when `preload`)
    /// whose content is copied back by [`DeviceBackend::copy_out`].
    ///
    /// # Safety
    ///
    /// `ptr` valid for reads and writes of `bytes` bytes.
    unsafe fn output(
        &self,
        ptr: *mut u8,
        bytes: usize,
        preload: bool,
        local: &mut Vec<DevMem>,
        outs: &mut Vec<(*mut u8, *const u8, usize)>,
    ) -> Result<*mut u8> {
        if bytes == 0 || is_device(ptr, bytes) {
            return Ok(ptr);
        }
        let m = if preload {
            // SAFETY: forwarded from the caller.
            unsafe { self.stage_in(ptr, bytes)? }
        } else {
            self.ctx.alloc(bytes)?
        };
        outs.push((ptr, m.ptr, bytes));
        let p = m.ptr;
        local.push(m);
        Ok(p)
    }

    /// Enqueues `call` on the stream (the caller drains it).
    fn enqueue(&self, st: &State, call: &LibColl<'_>, dtype: DataType) -> Option<Result<()>> {
        let stream = st.stream?;
        if let Err(e) = self.ctx.bind() {
            return Some(Err(e));
        }
        // SAFETY: live handles; the call's device ranges stay valid until the
        // caller drained the stream (or kept them alive after abandonment).
        let r = unsafe { self.ctx.driver.collective(self.comm.raw, stream, call, dtype) }?;
        Some(r.map_err(|e| self.dev_err(e)))
    }

    /// One batch call that moves `sends` and `recvs` (this group's ranks,
    /// device addresses), each peer at most once per direction; blocks of
    /// this rank to itself are device copies.
    fn direct(
        &self,
        st: &mut State,
        sends: &[(usize, *mut u8, usize)],
        recvs: &[(usize, *mut u8, usize)],
        dtype: DataType,
    ) -> Result<()> {
        let me = self.rank;
        if let (Some(&(_, s, n)), Some(&(_, r, _))) =
            (sends.iter().find(|x| x.0 == me), recvs.iter().find(|x| x.0 == me))
        {
            // SAFETY: both ranges are device memory of `n` elements of this call.
            unsafe { self.ctx.copy(r, s, n * dtype.size(), CopyKind::DeviceToDevice)? };
        }
        let items: Vec<Item> = sends
            .iter()
            .map(|x| (true, x))
            .chain(recvs.iter().map(|x| (false, x)))
            .filter(|(_, x)| x.0 != me)
            .map(|(send, &(peer, ptr, count))| Item {
                send,
                ptr,
                count,
                dtype,
                peer: self.lib_rank[peer],
            })
            .collect();
        if items.is_empty() {
            return Ok(());
        }
        let Some(stream) = st.stream else { return Ok(()) };
        self.ctx.bind()?;
        for x in sends.iter().chain(recvs) {
            st.deps[x.0] = true;
        }
        // SAFETY: as in `enqueue`.
        unsafe { self.ctx.driver.batch(self.comm.raw, stream, &items) }.map_err(|e| self.dev_err(e))
    }

    /// Copies block `j` of `src` to block `perm(j)` of a new device buffer.
    fn permute_blocks(&self, src: *mut u8, block_bytes: usize, local: &mut Vec<DevMem>) -> Result<*mut u8> {
        let w = self.lib_rank.len();
        let m = self.ctx.alloc(block_bytes * w)?;
        for (r, &l) in self.lib_rank.iter().enumerate() {
            // SAFETY: block `r` of `src` and block `l` of `m` are in bounds.
            unsafe {
                self.ctx.copy(
                    m.ptr.add(l as usize * block_bytes),
                    src.add(r * block_bytes),
                    block_bytes,
                    CopyKind::DeviceToDevice,
                )?;
            }
        }
        let p = m.ptr;
        local.push(m);
        Ok(p)
    }

    /// Stages, enqueues and drains one collective.
    ///
    /// # Safety
    ///
    /// The call's buffers valid (receive buffers writable and exclusive)
    /// until this returns.
    unsafe fn run_collective(
        &self,
        st: &mut State,
        call: &NativeCall<'_>,
        dtype: DataType,
        limit: Duration,
    ) -> Result<()> {
        let start = Instant::now();
        let es = dtype.size();
        let w = self.lib_rank.len();
        let me = self.rank;
        let mut local: Vec<DevMem> = Vec::new();
        let mut outs: Vec<(*mut u8, *const u8, usize)> = Vec::new();
        let lib = |r: usize| self.lib_rank[r];
        // SAFETY (whole block): every address comes from the caller's call,
        // valid for the lengths the collective implies; staged copies are
        // owned by `local` until the stream drained.
        let enqueued: Result<()> = unsafe {
            match *call {
                NativeCall::AllReduce { send, recv, count, op } => {
                    let bytes = count * es;
                    let (s, d) = if std::ptr::eq(send, recv) {
                        let d = self.output(recv, bytes, true, &mut local, &mut outs)?;
                        (d, d)
                    } else {
                        (
                            self.input(send, bytes, &mut local)?,
                            self.output(recv, bytes, false, &mut local, &mut outs)?,
                        )
                    };
                    self.native(
                        st,
                        &LibColl::AllReduce {
                            send: s,
                            recv: d,
                            count,
                            op,
                        },
                        dtype,
                    )
                }
                NativeCall::Broadcast { buf, count, root } => {
                    let d = self.output(buf, count * es, me == root, &mut local, &mut outs)?;
                    if me == root {
                        outs.clear();
                    }
                    self.native(
                        st,
                        &LibColl::Broadcast {
                            buf: d,
                            count,
                            root: lib(root),
                        },
                        dtype,
                    )
                }
                NativeCall::Reduce {
                    send,
                    recv,
                    count,
                    op,
                    root,
                } => {
                    let bytes = count * es;
                    let (s, d) = if me != root {
                        let s = self.input(send, bytes, &mut local)?;
                        (s, s)
                    } else if std::ptr::eq(send, recv) {
                        let d = self.output(recv, bytes, true, &mut local, &mut outs)?;
                        (d, d)
                    } else {
                        (
                            self.input(send, bytes, &mut local)?,
                            self.output(recv, bytes, false, &mut local, &mut outs)?,
                        )
                    };
                    let c = LibColl::Reduce {
                        send: s,
                        recv: d,
                        count,
                        op,
                        root: lib(root),
                    };
                    self.native(st, &c, dtype)
                }
                NativeCall::ReduceScatter {
                    send,
                    recv,
                    recv_count,
                    op,
                } => {
                    let block = recv_count * es;
                    let mut s = self.input(send, block * w, &mut local)?;
                    let d = self.output(recv, block, false, &mut local, &mut outs)?;
                    if !self.identity && block > 0 {
                        s = self.permute_blocks(s, block, &mut local)?;
                    }
                    let c = LibColl::ReduceScatter {
                        send: s,
                        recv: d,
                        recv_count,
                        op,
                    };
                    self.native(st, &c, dtype)
                }
                NativeCall::AllGather { send, recv, send_count } => {
                    let block = send_count * es;
                    let s = self.input(send, block, &mut local)?;
                    let d = self.output(recv, block * w, false, &mut local, &mut outs)?;
                    let c = LibColl::AllGather {
                        send: s,
                        recv: d,
                        send_count,
                    };
                    if self.identity {
                        self.native(st, &c, dtype)
                    } else {
                        let sends: Vec<_> = (0..w).map(|p| (p, s, send_count)).collect();
                        let recvs: Vec<_> = (0..w).map(|p| (p, d.add(p * block), send_count)).collect();
                        self.direct(st, &sends, &recvs, dtype)
                    }
                }
                NativeCall::AllToAll {
                    send,
                    recv,
                    count_per_peer: n,
                } => {
                    let block = n * es;
                    let s = self.input(send, block * w, &mut local)?;
                    let d = self.output(recv, block * w, false, &mut local, &mut outs)?;
                    let native = if self.identity {
                        self.enqueue(
                            st,
                            &LibColl::AllToAll {
                                send: s,
                                recv: d,
                                count: n,
                            },
                            dtype,
                        )
                    } else {
                        None
                    };
                    native.unwrap_or_else(|| {
                        let sends: Vec<_> = (0..w).map(|p| (p, s.add(p * block), n)).collect();
                        let recvs: Vec<_> = (0..w).map(|p| (p, d.add(p * block), n)).collect();
                        self.direct(st, &sends, &recvs, dtype)
                    })
                }
                NativeCall::AllToAllV {
                    send,
                    send_counts,
                    recv,
                    recv_counts,
                } => {
                    let total = |c: &[usize]| c.iter().sum::<usize>() * es;
                    let s = self.input(send, total(send_counts), &mut local)?;
                    let d = self.output(recv, total(recv_counts), false, &mut local, &mut outs)?;
                    let displs = |c: &[usize]| {
                        c.iter()
                            .scan(0usize, |at, &n| {
                                let here = *at;
                                *at += n;
                                Some(here)
                            })
                            .collect::<Vec<usize>>()
                    };
                    let (sd, rd) = (displs(send_counts), displs(recv_counts));
                    // Indexed by library rank.
                    let mut arrays = [vec![0u64; w], vec![0u64; w], vec![0u64; w], vec![0u64; w]];
                    for r in 0..w {
                        let l = lib(r) as usize;
                        arrays[0][l] = send_counts[r] as u64;
                        arrays[1][l] = sd[r] as u64;
                        arrays[2][l] = recv_counts[r] as u64;
                        arrays[3][l] = rd[r] as u64;
                    }
                    let c = LibColl::AllToAllV {
                        send: s,
                        send_counts: &arrays[0],
                        send_displs: &arrays[1],
                        recv: d,
                        recv_counts: &arrays[2],
                        recv_displs: &arrays[3],
                    };
                    self.enqueue(st, &c, dtype).unwrap_or_else(|| {
                        let sends: Vec<_> = (0..w).map(|p| (p, s.add(sd[p] * es), send_counts[p])).collect();
                        let recvs: Vec<_> = (0..w).map(|p| (p, d.add(rd[p] * es), recv_counts[p])).collect();
                        self.direct(st, &sends, &recvs, dtype)
                    })
                }
                NativeCall::Gather {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let block = count * es;
                    let s = self.input(send, block, &mut local)?;
                    let d = if me == root {
                        self.output(recv, block * w, false, &mut local, &mut outs)?
                    } else {
                        s
                    };
                    let native = if self.identity {
                        self.enqueue(
                            st,
                            &LibColl::Gather {
                                send: s,
                                recv: d,
                                count,
                                root: lib(root),
                            },
                            dtype,
                        )
                    } else {
                        None
                    };
                    native.unwrap_or_else(|| {
                        if me == root {
                            let recvs: Vec<_> = (0..w).map(|p| (p, d.add(p * block), count)).collect();
                            self.direct(st, &[(me, s, count)], &recvs, dtype)
                        } else {
                            self.direct(st, &[(root, s, count)], &[], dtype)
                        }
                    })
                }
                NativeCall::Scatter {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let block = count * es;
                    let d = self.output(recv, block, false, &mut local, &mut outs)?;
                    let s = if me == root {
                        self.input(send, block * w, &mut local)?
                    } else {
                        d
                    };
                    let native = if self.identity {
                        self.enqueue(
                            st,
                            &LibColl::Scatter {
                                send: s,
                                recv: d,
                                count,
                                root: lib(root),
                            },
                            dtype,
                        )
                    } else {
                        None
                    };
                    native.unwrap_or_else(|| {
                        if me == root {
                            let sends: Vec<_> = (0..w).map(|p| (p, s.add(p * block), count)).collect();
                            self.direct(st, &sends, &[(me, d, count)], dtype)
                        } else {
                            self.direct(st, &[], &[(root, d, count)], dtype)
                        }
                    })
                }
                NativeCall::Barrier => {
                    if let Some(r) = self.enqueue(st, &LibColl::Barrier, dtype) {
                        r.map(|()| st.deps.iter_mut().for_each(|d| *d = true))
                    } else {
                        // No barrier in the library: a one-byte all-reduce.
                        if st.barrier.is_none() {
                            st.barrier = Some(self.ctx.alloc(8)?);
                        }
                        let p = st.barrier.as_ref().map_or(std::ptr::null_mut(), |m| m.ptr);
                        let c = LibColl::AllReduce {
                            send: p,
                            recv: p,
                            count: 1,
                            op: ReduceOp::Sum,
                        };
                        self.native(st, &c, DataType::U8)
                    }
                }
            }
        };
        if let Err(e) = enqueued {
            // Earlier work (queued p2p) may be on the stream: finish it.
            let _ = self.drain(st, start, limit, "collective", &mut local);
            return Err(e);
        }
        self.drain(st, start, limit, call_name(call), &mut local)?;
        for (host, dev, bytes) in outs {
            // SAFETY: the stream drained; `dev` holds the result, `host` is
            // the caller's output buffer of `bytes` bytes.
            unsafe { self.ctx.copy(host, dev, bytes, CopyKind::DeviceToHost)? };
        }
        Ok(())
    }

    /// Enqueues a collective every library has; all ranks become dependencies.
    fn native(&self, st: &mut State, call: &LibColl<'_>, dtype: DataType) -> Result<()> {
        match self.enqueue(st, call, dtype) {
            Some(r) => {
                r?;
                st.deps.iter_mut().for_each(|d| *d = true);
                Ok(())
            }
            None => Err(Error::Backend {
                backend: self.name(),
                message: format!("the loaded library lacks `{}`", call_name_lib(call)),
            }),
        }
    }
}

fn call_name(call: &NativeCall<'_>) -> &'static str {
    match call {
        NativeCall::AllReduce { .. } => "all_reduce",
        NativeCall::AllGather { .. } => "all_gather",
        NativeCall::ReduceScatter { .. } => "reduce_scatter",
        NativeCall::AllToAll { .. } => "all_to_all",
        NativeCall::AllToAllV { .. } => "all_to_allv",
        NativeCall::Broadcast { .. } => "broadcast",
        NativeCall::Reduce { .. } => "reduce",
        NativeCall::Gather { .. } => "gather",
        NativeCall::Scatter { .. } => "scatter",
        NativeCall::Barrier => "barrier",
    }
}

fn call_name_lib(call: &LibColl<'_>) -> &'static str {
    match call {
        LibColl::AllReduce { .. } => "all_reduce",
        LibColl::Broadcast { .. } => "broadcast",
        LibColl::Reduce { .. } => "reduce",
        LibColl::ReduceScatter { .. } => "reduce_scatter",
        LibColl::AllGather { .. } => "all_gather",
        LibColl::Scatter { .. } => "scatter",
        LibColl::Gather { .. } => "gather",
        LibColl::AllToAll { .. } => "all_to_all",
        LibColl::AllToAllV { .. } => "all_to_allv",
        LibColl::Barrier => "barrier",
    }
}

impl Backend for DeviceBackend {
    fn name(&self) -> &'static str {
        self.ctx.driver.name()
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.lib_rank.len()
    }

    fn accepts(&self, memory: Memory) -> bool {
        match memory {
            Memory::Host => true,
            Memory::Device { backend, device } => backend == self.name() && device == self.ctx.device,
        }
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }

    unsafe fn post(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        let world = self.lib_rank.len();
        if let Some(op) = ops.iter().find(|op| op.peer >= world) {
            return Err(Error::precondition(format!(
                "peer rank {} is out of range for a communicator of {world} ranks",
                op.peer
            )));
        }
        let mut st = lock(&self.state);
        if let Some(e) = self.unusable(&st) {
            return Err(e);
        }
        let first = ids.len();
        for op in ops {
            let bytes = op.count * op.dtype.size();
            let on_device = bytes > 0 && is_device(op.ptr, bytes);
            // SAFETY: the op's buffer is valid for `bytes` bytes (post contract).
            let staged: Result<(Option<DevMem>, Option<Finish>)> = match (op.dir, on_device, op.reduce) {
                (Dir::Send, true, _) | (Dir::Recv, true, None) => Ok((None, None)),
                (Dir::Send, false, _) => unsafe { self.stage_in(op.ptr, bytes) }.map(|m| (Some(m), None)),
                (Dir::Recv, _, reduce) => self.ctx.alloc(bytes).map(|m| {
                    let finish = match reduce {
                        None => Finish::ToHost(op.ptr),
                        Some(op_) => Finish::Reduce {
                            dst: op.ptr,
                            on_device,
                            op: op_,
                        },
                    };
                    (Some(m), Some(finish))
                }),
            };
            let (staging, finish) = match staged {
                Ok(x) => x,
                Err(e) => {
                    let posted: Vec<OpId> = ids.drain(first..).collect();
                    Self::release(&mut st, &posted);
                    return Err(e);
                }
            };
            let id = Self::alloc_slot(&mut st, op.count, op.dtype);
            let dev = staging.as_ref().map_or(op.ptr, |m| m.ptr);
            let slot = &mut st.slots[id.slot as usize];
            slot.staging = staging;
            slot.finish = finish;
            st.queue.push(Queued {
                slot: id.slot,
                dir: op.dir,
                peer: op.peer,
                dev,
                count: op.count,
                dtype: op.dtype,
                tag: op.tag,
            });
            ids.push(id);
        }
        Ok(())
    }

    fn wait(&self, ids: &[OpId], timeout: Duration, what: &str) -> Result<()> {
        let mut st = lock(&self.state);
        self.wait_ids(&mut st, ids, timeout, what)
    }

    fn test(&self, id: OpId) -> Result<bool> {
        let mut st = lock(&self.state);
        self.flush(&mut st);
        if matches!(Self::slot_state(&st, id), Some(SlotState::Submitted)) {
            if let Some(stream) = st.stream {
                let _ = self.ctx.bind();
                match self.ctx.driver.poll(self.comm.raw, stream, Duration::ZERO) {
                    Poll::Done => self.complete_submitted(&mut st),
                    Poll::Failed(e) => {
                        let e = self.dev_err(e);
                        Self::fail_submitted(&mut st, &e);
                    }
                    Poll::Pending => {
                        if let Some(e) = self.blocking_failure(&st) {
                            self.abandon(&mut st, &e, &mut Vec::new());
                        }
                    }
                }
            }
        }
        match Self::slot_state(&st, id) {
            Some(SlotState::Queued | SlotState::Submitted) => Ok(false),
            Some(SlotState::Failed(e)) => {
                Self::release(&mut st, &[id]);
                Err(e)
            }
            _ => {
                Self::release(&mut st, &[id]);
                Ok(true)
            }
        }
    }

    fn cancel(&self, ids: &[OpId]) {
        let mut st = lock(&self.state);
        let submitted: Vec<OpId> = ids
            .iter()
            .copied()
            .filter(|&id| matches!(Self::slot_state(&st, id), Some(SlotState::Submitted)))
            .collect();
        let queued: Vec<OpId> = ids.iter().copied().filter(|id| !submitted.contains(id)).collect();
        Self::release(&mut st, &queued);
        if !submitted.is_empty() {
            // Device work cannot be cancelled: let it finish (or abandon it).
            let _ = self.wait_ids(&mut st, &submitted, self.timeout, "cancel");
        }
    }

    fn enter_collective(&self, _header: &CollHeader) -> Result<()> {
        // The library checks that ranks agree; only a dead group fails fast.
        let st = lock(&self.state);
        self.unusable(&st).map_or(Ok(()), Err)
    }

    fn confirm_collective(&self, _header: &CollHeader, _timeout: Duration) -> Result<()> {
        // The library's collective synchronised every rank already.
        Ok(())
    }

    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>> {
        let world = self.lib_rank.len();
        let me = members.iter().position(|&m| m == self.rank).ok_or_else(|| {
            Error::precondition(format!(
                "rank {} is not a member of the subgroup {members:?}",
                self.rank
            ))
        })?;
        if let Some(&bad) = members.iter().find(|&&m| m >= world) {
            return Err(Error::precondition(format!(
                "subgroup member {bad} is out of range for a communicator of {world} ranks"
            )));
        }
        if members.iter().enumerate().any(|(i, m)| members[..i].contains(m)) {
            return Err(Error::precondition(format!(
                "subgroup members {members:?} repeat a rank"
            )));
        }
        let global: Vec<usize> = members.iter().map(|&m| self.global[m]).collect();
        let in_world: Vec<u32> = global.iter().map(|&g| g as u32).collect();
        let sub_key = format!("{}/{key}{members:?}", self.key);
        let sub = {
            let _st = lock(&self.state);
            self.ctx.bind()?;
            self.ctx.driver.subcomm(&SubRequest {
                world_comm: self.world_comm.raw,
                device: self.ctx.device,
                key: &sub_key,
                members: &in_world,
                me,
                timeout: self.timeout,
                world: self.env.as_deref(),
            })?
        };
        let comm = CommHandle::new(Arc::clone(&self.ctx), sub.comm);
        let topology = match &self.topology {
            Topology::Custom { .. } => Topology::FullMesh,
            t => t.clone(),
        };
        let backend = DeviceBackend::new(Parts {
            ctx: Arc::clone(&self.ctx),
            comm,
            world_comm: Arc::clone(&self.world_comm),
            lib_rank: sub.lib_rank,
            global,
            rank: me,
            key: sub_key,
            topology,
            timeout: self.timeout,
            env: self.env.clone(),
            presence: self.presence.clone(),
        })?;
        Ok(Arc::new(backend))
    }

    fn native_collectives(&self) -> bool {
        true
    }

    unsafe fn native_collective(
        &self,
        call: &NativeCall<'_>,
        dtype: DataType,
        timeout: Duration,
    ) -> Option<Result<()>> {
        let mut st = lock(&self.state);
        if let Some(e) = self.unusable(&st) {
            return Some(Err(e));
        }
        // In-flight point-to-point operations go first, in posting order.
        self.flush(&mut st);
        // SAFETY: forwarded from the caller.
        Some(unsafe { self.run_collective(&mut st, call, dtype, timeout) })
    }

    fn device_ctx(&self) -> Option<Arc<DeviceCtx>> {
        Some(Arc::clone(&self.ctx))
    }

    unsafe fn local_copy(&self, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
        let kind = match (is_device(dst, bytes), is_device(src, bytes)) {
            (false, false) => {
                // SAFETY: forwarded from the caller.
                unsafe { std::ptr::copy(src, dst, bytes) };
                return Ok(());
            }
            (true, false) => CopyKind::HostToDevice,
            (false, true) => CopyKind::DeviceToHost,
            (true, true) => CopyKind::DeviceToDevice,
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.ctx.copy(dst, src, bytes, kind) }
    }

    unsafe fn local_reduce(
        &self,
        dtype: DataType,
        op: ReduceOp,
        dst: *mut u8,
        src: *const u8,
        count: usize,
    ) -> Result<()> {
        let bytes = count * dtype.size();
        if !is_device(src, bytes) {
            let finish = Finish::Reduce {
                dst,
                on_device: is_device(dst, bytes),
                op,
            };
            if !is_device(dst, bytes) {
                // SAFETY: forwarded from the caller.
                unsafe { dtype.reduce_raw(op, dst, src, count) };
                return Ok(());
            }
            // Host source, device destination: stage the source.
            // SAFETY: forwarded from the caller.
            let m = unsafe { self.stage_in(src, bytes)? };
            // SAFETY: `m` holds `count` elements; `dst` per the caller.
            return unsafe { self.finish(finish, m.ptr, count, dtype) };
        }
        let finish = Finish::Reduce {
            dst,
            on_device: is_device(dst, bytes),
            op,
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.finish(finish, src, count, dtype) }
    }

    fn abort(&self, reason: &str) {
        self.shared.abort(reason);
        let mut st = lock(&self.state);
        let e = Error::Aborted {
            reason: reason.to_owned(),
        };
        for q in std::mem::take(&mut st.queue) {
            Self::set_state(&mut st, q.slot, SlotState::Failed(e.clone()));
        }
        if !st.submitted.is_empty() {
            self.abandon(&mut st, &e, &mut Vec::new());
            let _ = self.ctx.bind();
            // SAFETY: a live communicator; after an abort the handle is
            // released (NCCL) and never destroyed again.
            if unsafe { self.ctx.driver.comm_abort(self.comm.raw) } {
                self.comm.released.store(true, Ordering::SeqCst);
            }
        }
        st.sticky.get_or_insert(e);
    }
}

impl Drop for DeviceBackend {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stream = st.stream.take();
        let mut keep: Vec<DevMem> = std::mem::take(&mut st.graveyard);
        keep.extend(st.slots.iter_mut().filter_map(|s| s.staging.take()));
        keep.extend(st.barrier.take());
        let abandoned = st.abandoned;
        let ctx = Arc::clone(&self.ctx);
        let comm = Arc::clone(&self.comm);
        let world_comm = Arc::clone(&self.world_comm);
        let limit = self.timeout;
        let teardown = move || {
            if let Some(stream) = stream {
                if ctx.bind().is_ok() {
                    // Let the device finish (its own execution timeout ends
                    // abandoned work), then release in dependency order.
                    let deadline = Instant::now() + limit.saturating_mul(2) + Duration::from_secs(5);
                    loop {
                        match ctx.driver.poll(comm.raw, stream, POLL_SLICE) {
                            Poll::Pending if Instant::now() < deadline => {}
                            _ => break,
                        }
                    }
                    // SAFETY: the stream is live, drained (or given up on),
                    // and destroyed once.
                    if let Err(e) = unsafe { ctx.driver.stream_destroy(stream) } {
                        record_teardown_error(e.into_error(ctx.driver.name()));
                    }
                }
            }
            drop(keep);
            drop(comm);
            drop(world_comm);
            if abandoned {
                ctx.unmark_stuck();
            }
        };
        if abandoned {
            let spawned = std::thread::Builder::new()
                .name("hcomm-device-reaper".into())
                .spawn(teardown);
            if let Err(e) = spawned {
                record_teardown_error(Error::Backend {
                    backend: self.ctx.driver.name(),
                    message: format!("cannot start the thread that releases an abandoned communicator: {e}"),
                });
            }
        } else {
            teardown();
        }
    }
}
