//! The one trait every backend implements, and the descriptors that cross it.
//!
//! A backend moves bytes between ranks: it posts point-to-point operations
//! (several at once form one group call), waits for them with a deadline, and
//! creates subgroups. Collective algorithms live above it, in
//! [`crate::collective`], and are written once for every backend; a device
//! backend may answer a collective with its library's own implementation
//! through [`Backend::native_collective`].

pub(crate) mod capabilities;
pub(crate) mod device;
pub(crate) mod entries;
pub(crate) mod hccl;
pub(crate) mod host;
pub(crate) mod liveness;
pub(crate) mod nccl;

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use crate::buffer::Memory;
use crate::element::{DataType, ReduceOp};
use crate::error::Result;
use crate::header::CollHeader;
use crate::select::Algorithm;
use crate::topology::Topology;
pub(crate) use capabilities::{Board, Capabilities, EntryCarrier, EntryRoute, Issue};
use device::memory::DeviceCtx;

/// Which direction a point-to-point operation moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Dir {
    Send,
    Recv,
}

/// Traffic classes that never match each other: user point-to-point messages
/// and the messages of collective algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) enum Context {
    P2p,
    Coll,
}

/// One point-to-point operation as the backend sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct P2pOp {
    pub(crate) dir: Dir,
    /// Start of the buffer; only read for sends.
    pub(crate) ptr: *mut u8,
    /// Number of elements.
    pub(crate) count: usize,
    pub(crate) dtype: DataType,
    /// Peer rank in the backend's group.
    pub(crate) peer: usize,
    pub(crate) tag: i64,
    /// For receives: combine into the buffer instead of overwriting it.
    pub(crate) reduce: Option<ReduceOp>,
    pub(crate) context: Context,
    /// For collective traffic: what the sender's collective call was.
    pub(crate) header: Option<CollHeader>,
}

/// A posted operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct OpId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

/// Ids of the operations of one post.
pub(crate) type OpIds = SmallVec<[OpId; 8]>;

/// A communication backend bound to one rank of one group.
pub(crate) trait Backend: Send + Sync + 'static {
    /// The backend's name as users select it (`host`, `hccl`, `nccl`).
    fn name(&self) -> &'static str;

    /// This rank in the group.
    fn rank(&self) -> usize;

    /// The group size.
    fn world(&self) -> usize;

    /// Whether buffers in `memory` can be used with this backend.
    fn accepts(&self, memory: Memory) -> bool;

    /// The group's topology, for algorithm selection.
    fn topology(&self) -> Topology;

    /// Posts `ops` together (one group call) and appends their ids to `ids`.
    ///
    /// # Safety
    ///
    /// Every op's buffer must be valid for `count` elements of `dtype` and stay
    /// valid, and (for receives) not be accessed by anything else, until the op
    /// has been released by [`Backend::wait`], [`Backend::test`] returning
    /// anything but `Ok(false)`, or [`Backend::cancel`].
    unsafe fn post(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()>;

    /// [`Backend::post`] of ops whose [`Backend::wait`] is the caller's
    /// next call: the backend may count the caller as waiting from now on
    /// (the host backend then leaves a large incoming message for this
    /// rank to copy, rather than the peer that matches it copying both
    /// directions of an exchange).
    ///
    /// # Safety
    ///
    /// As [`Backend::post`].
    unsafe fn post_to_wait(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.post(ops, ids) }
    }

    /// Waits until every op in `ids` has completed, at most `timeout`.
    /// Every op is released when this returns, whatever it returns: on an
    /// error the ops still pending are cancelled first. `what` names the
    /// operation in a timeout error.
    fn wait(&self, ids: &[OpId], timeout: Duration, what: &str) -> Result<()>;

    /// `Ok(true)` (and the op is released) when the op has completed,
    /// `Ok(false)` while it is pending; on `Err` the op is released.
    fn test(&self, id: OpId) -> Result<bool>;

    /// Cancels pending ops and releases them; waits for a transfer that is
    /// already copying data, so no buffer is touched after this returns.
    fn cancel(&self, ids: &[OpId]);

    /// Records that this rank enters a collective, so that ranks calling
    /// different collectives get an error instead of a hang.
    fn enter_collective(&self, header: &CollHeader) -> Result<()>;

    /// Waits until every rank of the group has entered the collective
    /// `header` (or a later one) and fails if any disagreed.
    fn confirm_collective(&self, header: &CollHeader, timeout: Duration) -> Result<()>;

    /// A backend for the subgroup `members` (ranks of this group, increasing).
    /// Every member calls it with the same `key`; no message is exchanged.
    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>>;

    /// [`Backend::subgroup`] for a split, which every member calls at once:
    /// the members may exchange messages (for a board of their own), each
    /// wait at most `timeout`.
    fn split(&self, key: &str, members: &[usize], timeout: Duration) -> Result<Arc<dyn Backend>> {
        let _ = timeout;
        self.subgroup(key, members)
    }

    /// Whether every collective runs through [`Backend::native_collective`]
    /// (the device library's own algorithms).
    fn native_collectives(&self) -> bool {
        false
    }

    /// Runs a whole collective with the device library's own implementation
    /// and says what ran ([`Algorithm::Library`], or
    /// [`Algorithm::LibraryFold`] for a reduction the library does not run);
    /// `None` when the backend has none and the generic algorithms (written
    /// over point-to-point) should run.
    ///
    /// # Safety
    ///
    /// The call's buffers valid (receive buffers writable and exclusive) for
    /// the backend's memory until this returns.
    unsafe fn native_collective(
        &self,
        call: &NativeCall<'_>,
        dtype: DataType,
        timeout: Duration,
    ) -> Option<Result<Algorithm>> {
        let _ = (call, dtype, timeout);
        None
    }

    /// Fails every pending and future operation of the group.
    fn abort(&self, reason: &str);

    /// What this backend offers the layers above it besides its
    /// operations (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities<'_>;

    /// The device memory of a device backend (where `DeviceBuffer`s live);
    /// `None` for host backends.
    fn device_ctx(&self) -> Option<Arc<DeviceCtx>> {
        None
    }

    /// `dst = src` for `bytes` bytes of memory this backend accepts (on a
    /// device backend: host memory or its device's).
    ///
    /// # Safety
    ///
    /// Both ranges valid for `bytes` bytes, `dst` writable; they may overlap.
    unsafe fn local_copy(&self, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { crate::memcopy::copy(src, dst, bytes) };
        Ok(())
    }

    /// `dst = dst op src` for `count` elements of `dtype`.
    ///
    /// # Safety
    ///
    /// Both ranges valid for `count` elements, disjoint, `dst` writable.
    unsafe fn local_reduce(
        &self,
        dtype: DataType,
        op: ReduceOp,
        dst: *mut u8,
        src: *const u8,
        count: usize,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { dtype.reduce_raw(op, dst, src, count) };
        Ok(())
    }
}

/// Checks the members of a subgroup of a `world`-rank group that rank
/// `rank` creates: every member in range, none repeated, `rank` among them.
/// Each failure is an [`crate::Error::Precondition`] naming the member.
pub(crate) fn check_members(rank: usize, world: usize, members: &[usize]) -> Result<()> {
    use crate::error::Error;
    if let Some(&bad) = members.iter().find(|&&m| m >= world) {
        return Err(Error::precondition(format!(
            "subgroup member {bad} is out of range for a communicator of {world} ranks (members {members:?})"
        )));
    }
    let mut seen = vec![false; world];
    for &m in members {
        if std::mem::replace(&mut seen[m], true) {
            return Err(Error::precondition(format!(
                "subgroup members {members:?} name rank {m} more than once; hint: each rank is a member at most once"
            )));
        }
    }
    if !seen.get(rank).copied().unwrap_or(false) {
        return Err(Error::precondition(format!(
            "rank {rank} is not a member of the subgroup {members:?}"
        )));
    }
    Ok(())
}

/// A whole collective handed to a device library (HCCL, NCCL), which runs it
/// with its own algorithms on the communicator's stream. Pointers are device
/// addresses; counts are in elements of `dtype`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NativeCall<'a> {
    AllReduce {
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: ReduceOp,
    },
    AllGather {
        send: *const u8,
        recv: *mut u8,
        send_count: usize,
    },
    ReduceScatter {
        send: *const u8,
        recv: *mut u8,
        recv_count: usize,
        op: ReduceOp,
    },
    AllToAll {
        send: *const u8,
        recv: *mut u8,
        count_per_peer: usize,
    },
    AllToAllV {
        send: *const u8,
        send_counts: &'a [usize],
        recv: *mut u8,
        recv_counts: &'a [usize],
    },
    Broadcast {
        buf: *mut u8,
        count: usize,
        root: usize,
    },
    Reduce {
        send: *const u8,
        recv: *mut u8,
        count: usize,
        op: ReduceOp,
        root: usize,
    },
    Gather {
        send: *const u8,
        recv: *mut u8,
        count: usize,
        root: usize,
    },
    Scatter {
        send: *const u8,
        recv: *mut u8,
        count: usize,
        root: usize,
    },
    Barrier,
}
