//! Collectives: each is checked when called, then enqueued on its stream.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

use hcomm_sys::{aclrtStream, HcclComm, HcclDataType, HcclReduceOp, HcclResult};

use super::{call, check_buf, check_rank, check_reduce, comm_of, elem_size, enqueue, err, HcclRes};
use crate::exec;
use crate::op::{extent, Desc, Kind};
use crate::world::CommHandle;

/// What a collective's arguments are validated against.
struct Args {
    h: Arc<CommHandle>,
    /// Element size of the call's data type.
    es: usize,
    /// The device ranges checked so far: (address, bytes).
    used: RefCell<Vec<(usize, usize)>>,
}

impl Args {
    /// Checks a device buffer of `count` elements of the call's data type.
    fn buf(&self, name: &str, ptr: *const c_void, count: u64) -> HcclRes<usize> {
        let addr = check_buf(name, ptr, count, self.es, &self.h)?;
        // `check_buf` made sure the product fits.
        self.used.borrow_mut().push((addr, count as usize * self.es));
        Ok(addr)
    }

    /// Number of ranks of the communicator.
    fn ranks(&self) -> usize {
        self.h.group.size
    }

    /// Checks `root`; whether this rank is the root.
    fn is_root(&self, root: u32) -> HcclRes<bool> {
        Ok(check_rank("root", root, &self.h)? == self.h.rank)
    }
}

/// The skeleton every collective entry point shares: unless injected, resolves
/// `comm`, checks `op` (reductions only) and `dtype`, lets `fill` check the rest
/// and describe the call, and enqueues it on `stream`.
fn collective(
    kind: Kind,
    dtype: HcclDataType,
    op: Option<HcclReduceOp>,
    comm: HcclComm,
    stream: aclrtStream,
    fill: impl FnOnce(&Args, &mut Desc) -> HcclRes<()>,
) -> HcclResult {
    call(kind.symbol(), || {
        let h = comm_of(comm)?;
        let mut d = Desc::new(kind, dtype);
        if let Some(op) = op {
            let what = match kind {
                Kind::AllReduce => hcomm_sys::HcclReduction::AllReduce,
                Kind::Reduce => hcomm_sys::HcclReduction::Reduce,
                _ => hcomm_sys::HcclReduction::ReduceScatter,
            };
            check_reduce(what, dtype, op)?;
            d.op = op;
        }
        let args = Args {
            es: elem_size(dtype)?,
            h,
            used: RefCell::new(Vec::new()),
        };
        fill(&args, &mut d)?;
        let used = args.used.take();
        enqueue(&args.h, stream, &used, move |c, used| exec::collective(c, &d, used))
    })
}

/// `HcclAllReduce`.
///
/// # Safety
///
/// Buffers are device memory (checked against the registry).
#[no_mangle]
pub unsafe extern "C" fn HcclAllReduce(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::AllReduce, dataType, Some(op), comm, stream, |a, d| {
        d.count = count;
        d.send = a.buf("sendBuf", sendBuf, count)?;
        d.recv = a.buf("recvBuf", recvBuf, count)?;
        Ok(())
    })
}

/// `HcclBroadcast` (in place).
///
/// # Safety
///
/// `buf` is device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclBroadcast(
    buf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::Broadcast, dataType, None, comm, stream, |a, d| {
        a.is_root(root)?;
        d.root = root;
        d.count = count;
        d.send = a.buf("buf", buf, count)?;
        d.recv = d.send;
        Ok(())
    })
}

/// `HcclReduce`: `recvBuf` is only used (and checked) on the root.
///
/// # Safety
///
/// Buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclReduce(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    op: HcclReduceOp,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::Reduce, dataType, Some(op), comm, stream, |a, d| {
        let is_root = a.is_root(root)?;
        d.root = root;
        d.count = count;
        d.send = a.buf("sendBuf", sendBuf, count)?;
        if is_root {
            d.recv = a.buf("recvBuf", recvBuf, count)?;
        }
        Ok(())
    })
}

/// `HcclReduceScatter`: `sendBuf` holds `recvCount * nranks` elements.
///
/// # Safety
///
/// Buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclReduceScatter(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    recvCount: u64,
    dataType: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::ReduceScatter, dataType, Some(op), comm, stream, |a, d| {
        d.count = recvCount;
        d.send = a.buf("sendBuf", sendBuf, recvCount.saturating_mul(a.ranks() as u64))?;
        d.recv = a.buf("recvBuf", recvBuf, recvCount)?;
        Ok(())
    })
}

/// `HcclAllGather`: `recvBuf` holds `sendCount * nranks` elements.
///
/// # Safety
///
/// Buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclAllGather(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    sendCount: u64,
    dataType: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::AllGather, dataType, None, comm, stream, |a, d| {
        d.count = sendCount;
        d.send = a.buf("sendBuf", sendBuf, sendCount)?;
        d.recv = a.buf("recvBuf", recvBuf, sendCount.saturating_mul(a.ranks() as u64))?;
        Ok(())
    })
}

/// `HcclScatter`: the root's `sendBuf` holds `recvCount * nranks` elements.
///
/// # Safety
///
/// Buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclScatter(
    sendBuf: *mut c_void,
    recvBuf: *mut c_void,
    recvCount: u64,
    dataType: HcclDataType,
    root: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::Scatter, dataType, None, comm, stream, |a, d| {
        let is_root = a.is_root(root)?;
        d.root = root;
        d.count = recvCount;
        if is_root {
            d.send = a.buf("sendBuf", sendBuf, recvCount.saturating_mul(a.ranks() as u64))?;
        }
        d.recv = a.buf("recvBuf", recvBuf, recvCount)?;
        Ok(())
    })
}

/// `HcclAlltoAll`: `count` elements per peer; `recvBuf != sendBuf`.
///
/// # Safety
///
/// Buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclAlltoAll(
    sendBuf: *const c_void,
    sendCount: u64,
    sendType: HcclDataType,
    recvBuf: *const c_void,
    recvCount: u64,
    recvType: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::AlltoAll, sendType, None, comm, stream, |a, d| {
        elem_size(recvType)?;
        if sendType != recvType || sendCount != recvCount {
            return err(
                HcclResult::HCCL_E_PARA,
                "send and receive types and counts must be equal",
            );
        }
        if sendCount > 0 && std::ptr::eq(sendBuf, recvBuf) {
            return err(HcclResult::HCCL_E_PARA, "recvBuf must differ from sendBuf");
        }
        let n = a.ranks() as u64;
        d.count = sendCount;
        d.send = a.buf("sendBuf", sendBuf, sendCount.saturating_mul(n))?;
        d.recv = a.buf("recvBuf", recvBuf, recvCount.saturating_mul(n))?;
        Ok(())
    })
}

/// `HCCL_E_PARA` if the (non-null) buffers of a V-op are the same.
fn distinct(sendBuf: *const c_void, recvBuf: *const c_void) -> HcclRes<()> {
    if std::ptr::eq(sendBuf, recvBuf) && !sendBuf.is_null() {
        return err(HcclResult::HCCL_E_PARA, "recvBuf must differ from sendBuf");
    }
    Ok(())
}

/// Copies a host `uint64_t[n]` array.
///
/// # Safety
///
/// `p` is null or holds `n` `u64`s.
unsafe fn host_u64s(name: &str, p: *const c_void, n: usize) -> HcclRes<Vec<u64>> {
    if p.is_null() {
        return err(HcclResult::HCCL_E_PTR, format!("{name} is null"));
    }
    // SAFETY: holds `n` u64s per the contract; read unaligned to be lenient.
    Ok((0..n)
        .map(|i| unsafe { p.cast::<u64>().add(i).read_unaligned() })
        .collect())
}

/// Per-peer blocks of a V-op: (counts, displacements), each a host `uint64_t[n]`
/// named `names.0` / `names.1` in errors.
///
/// # Safety
///
/// As [`host_u64s`], for both arrays.
unsafe fn host_blocks(
    names: (&str, &str),
    counts: *const c_void,
    displs: *const c_void,
    n: usize,
) -> HcclRes<(Vec<u64>, Vec<u64>)> {
    // SAFETY: forwarded contract.
    unsafe { Ok((host_u64s(names.0, counts, n)?, host_u64s(names.1, displs, n)?)) }
}

/// `HcclAlltoAllV`: per-peer counts and displacements (host `uint64_t` arrays, in
/// elements); `recvBuf != sendBuf`.
///
/// # Safety
///
/// Buffers are device memory; the four arrays hold `nranks` values each.
#[no_mangle]
pub unsafe extern "C" fn HcclAlltoAllV(
    sendBuf: *const c_void,
    sendCounts: *const c_void,
    sdispls: *const c_void,
    sendType: HcclDataType,
    recvBuf: *const c_void,
    recvCounts: *const c_void,
    rdispls: *const c_void,
    recvType: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::AlltoAllV, sendType, None, comm, stream, |a, d| {
        elem_size(recvType)?;
        if sendType != recvType {
            return err(HcclResult::HCCL_E_PARA, "send and receive types must be equal");
        }
        distinct(sendBuf, recvBuf)?;
        // SAFETY: the arrays hold `nranks` values per the contract.
        unsafe {
            (d.send_counts, d.send_displs) = host_blocks(("sendCounts", "sdispls"), sendCounts, sdispls, a.ranks())?;
            (d.recv_counts, d.recv_displs) = host_blocks(("recvCounts", "rdispls"), recvCounts, rdispls, a.ranks())?;
        }
        d.send = a.buf("sendBuf", sendBuf, extent(&d.send_counts, &d.send_displs))?;
        d.recv = a.buf("recvBuf", recvBuf, extent(&d.recv_counts, &d.recv_displs))?;
        Ok(())
    })
}

/// `HcclAllGatherV`: rank `j`'s block lands at `recvDispls[j]`; `recvBuf != sendBuf`.
///
/// # Safety
///
/// Buffers are device memory; the arrays hold `nranks` values each.
#[no_mangle]
pub unsafe extern "C" fn HcclAllGatherV(
    sendBuf: *mut c_void,
    sendCount: u64,
    recvBuf: *mut c_void,
    recvCounts: *const c_void,
    recvDispls: *const c_void,
    dataType: HcclDataType,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::AllGatherV, dataType, None, comm, stream, |a, d| {
        distinct(sendBuf, recvBuf)?;
        d.count = sendCount;
        // SAFETY: the arrays hold `nranks` values per the contract.
        (d.recv_counts, d.recv_displs) =
            unsafe { host_blocks(("recvCounts", "recvDispls"), recvCounts, recvDispls, a.ranks()) }?;
        d.send = a.buf("sendBuf", sendBuf, sendCount)?;
        d.recv = a.buf("recvBuf", recvBuf, extent(&d.recv_counts, &d.recv_displs))?;
        Ok(())
    })
}

/// `HcclReduceScatterV`: this rank's block comes from `sendDispls[rank]` of every
/// rank; `recvBuf != sendBuf`.
///
/// # Safety
///
/// Buffers are device memory; the arrays hold `nranks` values each.
#[no_mangle]
pub unsafe extern "C" fn HcclReduceScatterV(
    sendBuf: *mut c_void,
    sendCounts: *const c_void,
    sendDispls: *const c_void,
    recvBuf: *mut c_void,
    recvCount: u64,
    dataType: HcclDataType,
    op: HcclReduceOp,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    collective(Kind::ReduceScatterV, dataType, Some(op), comm, stream, |a, d| {
        distinct(sendBuf, recvBuf)?;
        d.count = recvCount;
        // SAFETY: the arrays hold `nranks` values per the contract.
        (d.send_counts, d.send_displs) =
            unsafe { host_blocks(("sendCounts", "sendDispls"), sendCounts, sendDispls, a.ranks()) }?;
        d.send = a.buf("sendBuf", sendBuf, extent(&d.send_counts, &d.send_displs))?;
        d.recv = a.buf("recvBuf", recvBuf, recvCount)?;
        Ok(())
    })
}

/// `HcclBarrier`.
#[no_mangle]
pub extern "C" fn HcclBarrier(comm: HcclComm, stream: aclrtStream) -> HcclResult {
    collective(
        Kind::Barrier,
        HcclDataType::HCCL_DATA_TYPE_INT8,
        None,
        comm,
        stream,
        |_, _| Ok(()),
    )
}
