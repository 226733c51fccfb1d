//! Exported HCCL symbols: communicator management (`comm`), collectives
//! (`collective`) and point-to-point operations (`p2p`), and the checks
//! they share.

#![allow(non_snake_case)]

pub mod collective;
pub mod comm;
pub mod p2p;

pub use collective::*;
pub use comm::*;
pub use p2p::*;

use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hcomm_sys::{aclrtStream, HcclComm, HcclDataType, HcclReduceOp, HcclResult};

use crate::acl::STREAMS;
use crate::inject::injected;
use crate::memory;
use crate::reduce::reducible;
use crate::runtime::{set_recent, Registry};
use crate::stream::{AsyncError, Stream};
use crate::world::{CommHandle, Group, World};

static COMMS: Registry<CommHandle> = Registry::new();

type HcclRes<T> = Result<T, (HcclResult, String)>;

fn err<T>(code: HcclResult, message: impl Into<String>) -> HcclRes<T> {
    Err((code, message.into()))
}

/// Runs `body` unless an injection applies; records the message of a failure.
fn call(symbol: &str, body: impl FnOnce() -> HcclRes<()>) -> HcclResult {
    if let Some(code) = injected(symbol) {
        set_recent(&format!("{symbol}: injected failure"));
        return HcclResult(code);
    }
    match body() {
        Ok(()) => HcclResult::HCCL_SUCCESS,
        Err((code, message)) => {
            set_recent(&format!("{symbol}: {message}"));
            code
        }
    }
}

fn comm_of(comm: HcclComm) -> HcclRes<Arc<CommHandle>> {
    if comm.is_null() {
        return err(HcclResult::HCCL_E_PTR, "comm is null");
    }
    COMMS
        .get(comm)
        .map_or_else(|| err(HcclResult::HCCL_E_PTR, "comm is not a live communicator"), Ok)
}

fn stream_of(stream: aclrtStream) -> HcclRes<Arc<Stream>> {
    if stream.is_null() {
        return err(HcclResult::HCCL_E_PTR, "stream is null");
    }
    STREAMS
        .get(stream)
        .map_or_else(|| err(HcclResult::HCCL_E_PTR, "stream is not a live aclrtStream"), Ok)
}

fn elem_size(dtype: HcclDataType) -> HcclRes<usize> {
    dtype.size().map_or_else(
        || err(HcclResult::HCCL_E_PARA, format!("data type {dtype:?} is not valid")),
        Ok,
    )
}

/// Rejects what HCCL rejects: an invalid operator or type (`HCCL_E_PARA`),
/// a reduction HCCL does not run on the chip played (`HCCL_E_NOT_SUPPORT`,
/// `hcomm_sys::support`'s matrix).
fn check_reduce(what: hcomm_sys::HcclReduction, dtype: HcclDataType, op: HcclReduceOp) -> HcclRes<()> {
    if !(0..=3).contains(&op.0) {
        return err(HcclResult::HCCL_E_PARA, format!("reduce op {op:?} is not valid"));
    }
    elem_size(dtype)?;
    if !reducible(dtype) || !hcomm_sys::hccl_reduction_supported(crate::acl::chip(), what, dtype, op) {
        return err(
            HcclResult::HCCL_E_NOT_SUPPORT,
            format!("{what:?} of data type {dtype:?} with {op:?} is not supported"),
        );
    }
    Ok(())
}

/// Checks that `[ptr, ptr + count * size)` is device memory of the comm's device.
fn check_buf(name: &str, ptr: *const c_void, count: u64, size: usize, comm: &CommHandle) -> HcclRes<usize> {
    let Some(bytes) = usize::try_from(count).ok().and_then(|c| c.checked_mul(size)) else {
        return err(HcclResult::HCCL_E_PARA, format!("{name}: count {count} is too large"));
    };
    if bytes == 0 {
        return Ok(ptr as usize);
    }
    if ptr.is_null() {
        return err(HcclResult::HCCL_E_PTR, format!("{name} is null"));
    }
    let Some(a) = memory::find(ptr.cast(), bytes) else {
        return err(
            HcclResult::HCCL_E_PTR,
            format!("{name} {ptr:p} is not device memory: no live aclrtMalloc allocation holds {bytes} bytes there"),
        );
    };
    if a.device != comm.device {
        return err(
            HcclResult::HCCL_E_PARA,
            format!(
                "{name} is on device {} but the communicator is on device {}",
                a.device, comm.device
            ),
        );
    }
    Ok(ptr as usize)
}

fn check_rank(name: &str, rank: u32, comm: &CommHandle) -> HcclRes<usize> {
    let r = rank as usize;
    if r >= comm.group.size {
        return err(
            HcclResult::HCCL_E_PARA,
            format!("{name} {rank} is out of range for {} ranks", comm.group.size),
        );
    }
    Ok(r)
}

/// Enqueues `work` on `stream` (which must be live) for `comm`; `buffers`
/// (address, bytes) are the device ranges it uses, which `work` is given.
fn enqueue(
    comm: &Arc<CommHandle>,
    stream: aclrtStream,
    buffers: &[(usize, usize)],
    work: impl FnOnce(&CommHandle, &[(usize, usize)]) -> Result<(), AsyncError> + Send + 'static,
) -> HcclRes<()> {
    let stream = stream_of(stream)?;
    if stream.device != comm.device {
        return err(
            HcclResult::HCCL_E_PARA,
            format!(
                "stream is on device {} but the communicator is on device {}",
                stream.device, comm.device
            ),
        );
    }
    let guard = InFlight::new(Arc::clone(comm), buffers);
    let used = buffers.to_vec();
    stream.enqueue(Box::new(move || work(&guard.comm, &used)));
    Ok(())
}

/// Counts an enqueued operation as in flight, and pins its buffers, until it
/// ran or was discarded.
struct InFlight {
    comm: Arc<CommHandle>,
    _pin: memory::Pin,
}

impl InFlight {
    fn new(comm: Arc<CommHandle>, buffers: &[(usize, usize)]) -> Self {
        comm.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight {
            comm,
            _pin: memory::Pin::new(buffers),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.comm.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Registers the handle of world rank `world_rank` (rank `rank` of `group`
/// in `world`), whose waits end after `timeout` (`None`: never); `remote`
/// where its world is served by another process.
fn new_comm(
    (world, world_rank): (Arc<World>, usize),
    (group, rank): (Arc<Group>, usize),
    device: i32,
    timeout: Option<Duration>,
    name: String,
    remote: Option<crate::link::Remote>,
) -> HcclComm {
    COMMS.insert(Arc::new(CommHandle {
        world,
        group,
        rank,
        world_rank,
        device,
        exec_timeout: timeout,
        name,
        in_flight: std::sync::atomic::AtomicUsize::new(0),
        remote,
    }))
}
