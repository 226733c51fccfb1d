//! The contract one device library pair (HCCL + ACL, NCCL + CUDA) fulfils:
//! the [`Driver`] trait, the values that cross it, and the helpers both
//! drivers share (function tables, device binding, ids, error values).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::memory::CopyKind;
use super::world::DeviceWorld;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};

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

/// A library that failed to load, as an [`Error`] of `backend`.
pub(crate) fn load_error(backend: &'static str, e: &hcomm_sys::LoadError) -> Error {
    Error::Backend {
        backend,
        message: e.to_string(),
    }
}

/// A device address as the C APIs take it.
pub(crate) fn void(p: *mut u8) -> *mut c_void {
    p.cast()
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
    static NEXT: AtomicU64 = AtomicU64::new(1);
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
    use std::hash::Hasher;
    let mut h = crate::fnv::Fnv::default();
    h.write(key.as_bytes());
    h.finish() >> 1
}

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

impl LibColl<'_> {
    /// The collective's name as hcomm spells it (`all_reduce`, ...).
    pub(crate) fn name(&self) -> &'static str {
        match self {
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
    /// Whether freed device memory is kept for reuse ([`super::memory`]'s
    /// pool) instead of handed back at once: NCCL, where `cudaFree`
    /// synchronises the whole device and so would wait for communication
    /// in flight on any stream.
    fn pools_memory(&self) -> bool {
        false
    }
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
    /// Whether the library runs `call` on `dtype` (it has the entry point
    /// and accepts the type and operator); where not, reductions are
    /// emulated (`emulate.rs`).
    fn runs(&self, call: &LibColl<'_>, dtype: DataType) -> bool {
        let _ = (call, dtype);
        true
    }
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
