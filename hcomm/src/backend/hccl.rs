//! The HCCL driver: HCCL + the ACL runtime through `hcomm-sys`.
//!
//! Library calls map one to one; HCCL and ACL result codes
//! become [`Error::Backend`] with the library's own message (and
//! `aclGetRecentErrMsg`), or [`Error::Timeout`] for `HCCL_E_TIMEOUT` and the
//! ACL task and stream timeouts.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::Path;
use std::ptr::null_mut;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcomm_sys::{
    aclError, aclrtMemMallocPolicy, aclrtMemcpyKind, hccl_reduction_supported, AclApi, HcclApi, HcclChip, HcclComm,
    HcclCommConfig, HcclDataType, HcclError, HcclReduceOp, HcclReduction, HcclResult, HcclRootInfo, HcclSendRecvItem,
    HcclSendRecvType, ACL_STREAM_STATUS_COMPLETE, ACL_STREAM_STATUS_NOT_READY,
};

use super::device::driver::{
    bind_cached, exec_timeout_secs, key_hash, load_error, next_driver_id, void, DevError, DevResult, Driver, Item,
    LibColl, Poll, Raw, SubComm, SubRequest, Table,
};
use super::device::memory::CopyKind;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};

/// HCCL and the ACL runtime, loaded.
pub(crate) struct HcclDriver {
    id: u64,
    pub(crate) hccl: Table<HcclApi>,
    pub(crate) acl: Table<AclApi>,
    /// The chip generation (`aclrtGetSocName`), for HCCL's support matrix;
    /// `None`: unknown, the strictest rules.
    chip: Option<HcclChip>,
    /// How long `HcclCommDestroy` is retried while it says `HCCL_E_AGAIN`,
    /// per communicator (its timeout; [`DESTROY_PATIENCE`] when unknown).
    patience: Mutex<HashMap<usize, Duration>>,
}

/// How long a destroy of a communicator of unknown timeout (`init_all`) is
/// retried while HCCL says it is in use.
const DESTROY_PATIENCE: Duration = Duration::from_secs(30);

/// The largest `hcclExecTimeOut` chips other than Atlas A2/A3 keep (larger
/// values are ignored with a warning and the default, 1836 s, is used).
const EXEC_TIMEOUT_MAX_S: i32 = 17_340;
/// Their granularity: values are rounded down to a multiple of 68 s.
const EXEC_TIMEOUT_STEP_S: i32 = 68;
/// The cap in AIV mode (`HCCL_OP_EXPANSION_MODE=AIV`).
const EXEC_TIMEOUT_AIV_MAX_S: i32 = 1091;

/// The `hcclExecTimeOut` to pass for `secs` so HCCL keeps it as given, and
/// why it differs from `secs` when it does. On chips other than Atlas
/// A2/A3 (and unknown chips) HCCL ignores values above 17340 s and rounds
/// others down to a multiple of 68 s (at least 68): the value is rounded
/// up to a multiple of 68 (the library never gives up before hcomm's own
/// wait) and capped at 17340; AIV mode caps at 1091 s on every chip.
pub(crate) fn exec_timeout_for(chip: Option<HcclChip>, secs: i32, aiv: bool) -> (i32, Option<String>) {
    let mut out = secs.max(1);
    let mut why = None;
    if chip != Some(HcclChip::A2A3) {
        let stepped =
            (out.saturating_add(EXEC_TIMEOUT_STEP_S - 1) / EXEC_TIMEOUT_STEP_S).saturating_mul(EXEC_TIMEOUT_STEP_S);
        let clamped = stepped.min(EXEC_TIMEOUT_MAX_S);
        if clamped != out {
            why = Some(format!(
                "hccl execution timeout {out} s becomes {clamped} s: this chip keeps multiples of \
                 {EXEC_TIMEOUT_STEP_S} s up to {EXEC_TIMEOUT_MAX_S} s"
            ));
            out = clamped;
        }
    }
    if aiv && out > EXEC_TIMEOUT_AIV_MAX_S {
        why = Some(format!(
            "hccl execution timeout {out} s becomes {EXEC_TIMEOUT_AIV_MAX_S} s: the AIV expansion mode caps it"
        ));
        out = EXEC_TIMEOUT_AIV_MAX_S;
    }
    (out, why)
}

impl std::fmt::Debug for HcclDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcclDriver")
            .field("hccl", &self.hccl.path())
            .field("acl", &self.acl.path())
            .finish_non_exhaustive()
    }
}

impl HcclDriver {
    /// The process-wide tables (`HCOMM_HCCL_LIB`, `HCOMM_ACL_LIB`, then the
    /// Ascend install directories and the system search path).
    pub(crate) fn system() -> Result<Arc<HcclDriver>> {
        let hccl = HcclApi::get().map_err(|e| load_error("hccl", &e))?;
        let acl = AclApi::get().map_err(|e| load_error("hccl", &e))?;
        Self::init(Table::Static(hccl), Table::Static(acl))
    }

    /// Tables loaded from explicit files (both may be the same file).
    pub(crate) fn load(hccl: &Path, acl: &Path) -> Result<Arc<HcclDriver>> {
        let h = HcclApi::load(hccl).map_err(|e| load_error("hccl", &e))?;
        let a = AclApi::load(acl).map_err(|e| load_error("hccl", &e))?;
        Self::init(Table::Owned(Arc::new(h)), Table::Owned(Arc::new(a)))
    }

    fn init(hccl: Table<HcclApi>, acl: Table<AclApi>) -> Result<Arc<HcclDriver>> {
        // SAFETY: aclInit accepts a null config path; a second call per
        // process reports ACL_ERROR_REPEAT_INITIALIZE, which is fine.
        let code = unsafe { (acl.aclInit)(std::ptr::null()) };
        if code != aclError::ACL_SUCCESS && code != aclError::ACL_ERROR_REPEAT_INITIALIZE {
            return Err(acl_error(&acl, "aclInit", code).into_error("hccl"));
        }
        let soc = acl.soc_name();
        let chip = soc.as_deref().and_then(HcclChip::from_soc_name);
        tracing::info!(
            hccl = %hccl.path().display(),
            soc = soc.as_deref().unwrap_or("unknown"),
            ?chip,
            "hccl backend loaded"
        );
        Ok(Arc::new(HcclDriver {
            id: next_driver_id(),
            hccl,
            acl,
            chip,
            patience: Mutex::new(HashMap::new()),
        }))
    }

    fn hccl_check(&self, symbol: &str, code: HcclResult) -> DevResult<()> {
        match code.result() {
            Ok(()) => Ok(()),
            Err(e) => Err(hccl_error(&self.acl, symbol, e)),
        }
    }

    fn acl_check(&self, symbol: &str, code: aclError) -> DevResult<()> {
        if code == aclError::ACL_SUCCESS {
            return Ok(());
        }
        Err(acl_error(&self.acl, symbol, code))
    }

    /// Number of devices.
    pub(crate) fn device_count(&self) -> Result<usize> {
        let mut n = 0u32;
        // SAFETY: a valid out pointer.
        let code = unsafe { (self.acl.aclrtGetDeviceCount)(&raw mut n) };
        self.acl_check("aclrtGetDeviceCount", code)
            .map_err(|e| e.into_error("hccl"))?;
        Ok(n as usize)
    }

    /// `HcclGetRootInfo` with `device` bound.
    pub(crate) fn root_info(&self, device: i32) -> Result<HcclRootInfo> {
        self.bind(device).map_err(|e| e.into_error("hccl"))?;
        let mut root = HcclRootInfo::zeroed();
        // SAFETY: a valid, writable HcclRootInfo.
        let code = unsafe { (self.hccl.HcclGetRootInfo)(&raw mut root) };
        self.hccl_check("HcclGetRootInfo", code)
            .map_err(|e| e.into_error("hccl"))?;
        Ok(root)
    }

    /// A communicator config whose execution timeout HCCL keeps as given
    /// ([`exec_timeout_for`]); a changed value is reported (`tracing` warn).
    fn config(&self, timeout: Duration) -> HcclCommConfig {
        let aiv = std::env::var("HCCL_OP_EXPANSION_MODE").is_ok_and(|m| m.eq_ignore_ascii_case("AIV"));
        let (secs, why) = exec_timeout_for(self.chip, exec_timeout_secs(timeout), aiv);
        if let Some(why) = why {
            tracing::warn!(
                requested = ?timeout,
                hccl_exec_timeout_s = secs,
                "{why}"
            );
        }
        let mut config = HcclCommConfig::new();
        config.hcclExecTimeOut = secs;
        config
    }

    /// Remembers how long a destroy of `comm` may wait for it to go idle.
    fn note_patience(&self, comm: HcclComm, timeout: Duration) {
        crate::backend::device::lock(&self.patience).insert(comm as usize, timeout);
    }

    /// Joins the communicator of `root` as `rank` of `world` on `device`
    /// (collective and blocking), with the execution timeout `timeout`.
    pub(crate) fn init_rank(
        &self,
        world: usize,
        root: &HcclRootInfo,
        rank: usize,
        device: i32,
        timeout: Duration,
    ) -> Result<Raw> {
        self.bind(device).map_err(|e| e.into_error("hccl"))?;
        let mut comm: HcclComm = null_mut();
        let n = u32::try_from(world).map_err(|_| Error::precondition("world size exceeds u32"))?;
        let r = rank as u32;
        let (symbol, code) = match self.hccl.HcclCommInitRootInfoConfig {
            Some(f) => {
                let config = self.config(timeout);
                // SAFETY: valid root info, initialised config and out pointer.
                ("HcclCommInitRootInfoConfig", unsafe {
                    f(n, root, r, &raw const config, &raw mut comm)
                })
            }
            // SAFETY: valid root info and out pointer.
            None => ("HcclCommInitRootInfo", unsafe {
                (self.hccl.HcclCommInitRootInfo)(n, root, r, &raw mut comm)
            }),
        };
        self.hccl_check(symbol, code).map_err(|e| e.into_error("hccl"))?;
        self.note_patience(comm, timeout);
        Ok(Raw(comm))
    }

    /// `HcclCommInitAll`: one communicator per device, rank `i` on `devices[i]`.
    pub(crate) fn init_all(&self, devices: &[i32]) -> Result<Vec<Raw>> {
        let first = *devices
            .first()
            .ok_or_else(|| Error::precondition("init_all needs at least one device"))?;
        self.bind(first).map_err(|e| e.into_error("hccl"))?;
        let mut devs = devices.to_vec();
        let mut comms: Vec<HcclComm> = vec![null_mut(); devices.len()];
        let n = u32::try_from(devices.len()).map_err(|_| Error::precondition("too many devices"))?;
        // SAFETY: `devs` holds `n` ids and `comms` room for `n` handles.
        let code = unsafe { (self.hccl.HcclCommInitAll)(n, devs.as_mut_ptr(), comms.as_mut_ptr()) };
        self.hccl_check("HcclCommInitAll", code)
            .map_err(|e| e.into_error("hccl"))?;
        Ok(comms.into_iter().map(Raw).collect())
    }
}

fn acl_error(acl: &AclApi, symbol: &str, code: aclError) -> DevError {
    let timeout = code == aclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT || code == aclError::ACL_ERROR_RT_TASK_TIMEOUT;
    let message = match acl.check(code) {
        Err(e) => format!("{symbol} failed: {e}"),
        Ok(()) => format!("{symbol} failed"),
    };
    DevError { timeout, message }
}

fn hccl_error(acl: &AclApi, symbol: &str, e: HcclError) -> DevError {
    let mut message = format!("{symbol} failed: {e}");
    if let Some(detail) = acl.recent_error_message() {
        message.push_str(" (");
        message.push_str(&detail);
        message.push(')');
    }
    DevError {
        timeout: e == HcclError::Timeout,
        message,
    }
}

/// The HCCL type of an element type (HCCL has a type for every hcomm
/// element type; which reductions it runs on them is
/// [`hcomm_sys::hccl_reduction_supported`]'s matrix).
pub(crate) fn hccl_dtype(dtype: DataType) -> HcclDataType {
    match dtype {
        DataType::I8 => HcclDataType::HCCL_DATA_TYPE_INT8,
        DataType::U8 => HcclDataType::HCCL_DATA_TYPE_UINT8,
        DataType::I32 => HcclDataType::HCCL_DATA_TYPE_INT32,
        DataType::U32 => HcclDataType::HCCL_DATA_TYPE_UINT32,
        DataType::I64 => HcclDataType::HCCL_DATA_TYPE_INT64,
        DataType::U64 => HcclDataType::HCCL_DATA_TYPE_UINT64,
        DataType::F16 => HcclDataType::HCCL_DATA_TYPE_FP16,
        DataType::Bf16 => HcclDataType::HCCL_DATA_TYPE_BFP16,
        DataType::F32 => HcclDataType::HCCL_DATA_TYPE_FP32,
        DataType::F64 => HcclDataType::HCCL_DATA_TYPE_FP64,
    }
}

/// The HCCL reduction operator the library runs for `op`. HCCL has no
/// mean: [`ReduceOp::Avg`] is the sum, and [`HcclDriver::runs`] sends every
/// Avg reduction to the emulation (gathered, summed in rank order and
/// divided on the host), so the library is never asked for it.
pub(crate) fn hccl_op(op: ReduceOp) -> HcclReduceOp {
    match op.pairwise() {
        ReduceOp::Sum | ReduceOp::Avg => HcclReduceOp::HCCL_REDUCE_SUM,
        ReduceOp::Prod => HcclReduceOp::HCCL_REDUCE_PROD,
        ReduceOp::Max => HcclReduceOp::HCCL_REDUCE_MAX,
        ReduceOp::Min => HcclReduceOp::HCCL_REDUCE_MIN,
    }
}

impl Driver for HcclDriver {
    fn name(&self) -> &'static str {
        "hccl"
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn runs(&self, call: &LibColl<'_>, dtype: DataType) -> bool {
        let (what, op) = match *call {
            LibColl::AllReduce { op, .. } => (HcclReduction::AllReduce, op),
            LibColl::Reduce { op, .. } => (HcclReduction::Reduce, op),
            LibColl::ReduceScatter { op, .. } => (HcclReduction::ReduceScatter, op),
            _ => return true,
        };
        op != ReduceOp::Avg && hccl_reduction_supported(self.chip, what, hccl_dtype(dtype), hccl_op(op))
    }

    fn bind(&self, device: i32) -> DevResult<()> {
        bind_cached(self.id, device, || {
            // SAFETY: aclrtSetDevice takes any id and validates it.
            let code = unsafe { (self.acl.aclrtSetDevice)(device) };
            self.acl_check("aclrtSetDevice", code)
        })
    }

    fn malloc(&self, bytes: usize) -> DevResult<*mut u8> {
        let mut p: *mut c_void = null_mut();
        // SAFETY: a valid out pointer; the device is bound.
        let code =
            unsafe { (self.acl.aclrtMalloc)(&raw mut p, bytes, aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST) };
        self.acl_check("aclrtMalloc", code)?;
        Ok(p.cast())
    }

    unsafe fn free(&self, ptr: *mut u8) -> DevResult<()> {
        // SAFETY: forwarded from the caller.
        let code = unsafe { (self.acl.aclrtFree)(void(ptr)) };
        self.acl_check("aclrtFree", code)
    }

    unsafe fn memcpy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: CopyKind) -> DevResult<()> {
        let kind = match kind {
            CopyKind::HostToDevice => aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE,
            CopyKind::DeviceToHost => aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST,
            CopyKind::DeviceToDevice => aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_DEVICE,
        };
        // SAFETY: forwarded from the caller; destMax = count = `bytes`.
        let code = unsafe { (self.acl.aclrtMemcpy)(void(dst), bytes, src.cast(), bytes, kind) };
        self.acl_check("aclrtMemcpy", code)
    }

    fn stream_create(&self) -> DevResult<Raw> {
        let mut s = null_mut();
        // SAFETY: a valid out pointer; the device is bound.
        let code = unsafe { (self.acl.aclrtCreateStream)(&raw mut s) };
        self.acl_check("aclrtCreateStream", code)?;
        Ok(Raw(s))
    }

    unsafe fn stream_destroy(&self, stream: Raw) -> DevResult<()> {
        // SAFETY: forwarded from the caller.
        let code = unsafe { (self.acl.aclrtDestroyStream)(stream.0) };
        self.acl_check("aclrtDestroyStream", code)
    }

    fn poll(&self, comm: Raw, stream: Raw, slice: Duration) -> Poll {
        if let Some(f) = self.hccl.HcclGetCommAsyncError {
            let mut async_error = HcclResult::HCCL_SUCCESS;
            // SAFETY: a live communicator and a valid out pointer.
            let code = unsafe { f(comm.0, &raw mut async_error) };
            if let Err(e) = self.hccl_check("HcclGetCommAsyncError", code) {
                return Poll::Failed(e);
            }
            if let Err(e) = self.hccl_check("HcclGetCommAsyncError (asynchronous error)", async_error) {
                return Poll::Failed(e);
            }
        }
        if let Some(query) = self.acl.aclrtStreamQuery {
            return self.poll_quietly(query, stream, slice);
        }
        let (symbol, code) = match self.acl.aclrtSynchronizeStreamWithTimeout {
            Some(f) => {
                let ms = i32::try_from(slice.as_millis()).unwrap_or(i32::MAX);
                // SAFETY: a live stream.
                ("aclrtSynchronizeStreamWithTimeout", unsafe { f(stream.0, ms) })
            }
            // Without the timed variant the library's execution timeout
            // (set from the communicator's timeout) bounds the wait.
            // SAFETY: a live stream.
            None => ("aclrtSynchronizeStream", unsafe {
                (self.acl.aclrtSynchronizeStream)(stream.0)
            }),
        };
        match code {
            aclError::ACL_SUCCESS => Poll::Done,
            aclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT => Poll::Pending,
            c => Poll::Failed(self.acl_check(symbol, c).err().unwrap_or_else(|| DevError::new(symbol))),
        }
    }

    unsafe fn batch(&self, comm: Raw, stream: Raw, items: &[Item]) -> DevResult<()> {
        let mut raw: Vec<HcclSendRecvItem> = items
            .iter()
            .map(|it| HcclSendRecvItem {
                sendRecvType: if it.send {
                    HcclSendRecvType::HCCL_SEND
                } else {
                    HcclSendRecvType::HCCL_RECV
                },
                buf: void(it.ptr),
                count: it.count as u64,
                dataType: hccl_dtype(it.dtype),
                remoteRank: it.peer,
            })
            .collect();
        let n = u32::try_from(raw.len()).map_err(|_| DevError::new("HcclBatchSendRecv: too many items"))?;
        // SAFETY: `raw` holds `n` items whose buffers the caller keeps valid.
        let code = unsafe { (self.hccl.HcclBatchSendRecv)(raw.as_mut_ptr(), n, comm.0, stream.0) };
        self.hccl_check("HcclBatchSendRecv", code)
    }

    unsafe fn collective(&self, comm: Raw, stream: Raw, call: &LibColl<'_>, dtype: DataType) -> Option<DevResult<()>> {
        let h = &*self.hccl;
        let t = hccl_dtype(dtype);
        let (c, s) = (comm.0, stream.0);
        // SAFETY (every call): live handles; device ranges valid per the caller.
        let (symbol, code) = unsafe {
            match *call {
                LibColl::AllReduce { send, recv, count, op } => (
                    "HcclAllReduce",
                    (h.HcclAllReduce)(void(send), void(recv), count as u64, t, hccl_op(op), c, s),
                ),
                LibColl::Broadcast { buf, count, root } => (
                    "HcclBroadcast",
                    (h.HcclBroadcast)(void(buf), count as u64, t, root, c, s),
                ),
                LibColl::Reduce {
                    send,
                    recv,
                    count,
                    op,
                    root,
                } => (
                    "HcclReduce",
                    (h.HcclReduce)(void(send), void(recv), count as u64, t, hccl_op(op), root, c, s),
                ),
                LibColl::ReduceScatter {
                    send,
                    recv,
                    recv_count,
                    op,
                } => (
                    "HcclReduceScatter",
                    (h.HcclReduceScatter)(void(send), void(recv), recv_count as u64, t, hccl_op(op), c, s),
                ),
                LibColl::AllGather { send, recv, send_count } => (
                    "HcclAllGather",
                    (h.HcclAllGather)(void(send), void(recv), send_count as u64, t, c, s),
                ),
                LibColl::Scatter {
                    send,
                    recv,
                    count,
                    root,
                } => (
                    "HcclScatter",
                    (h.HcclScatter)(void(send), void(recv), count as u64, t, root, c, s),
                ),
                // HCCL has no gather: the caller builds it from one batch.
                LibColl::Gather { .. } => return None,
                LibColl::AllToAll { send, recv, count } => (
                    "HcclAlltoAll",
                    (h.HcclAlltoAll)(send.cast(), count as u64, t, recv.cast(), count as u64, t, c, s),
                ),
                LibColl::AllToAllV {
                    send,
                    send_counts,
                    send_displs,
                    recv,
                    recv_counts,
                    recv_displs,
                } => (
                    "HcclAlltoAllV",
                    (h.HcclAlltoAllV)(
                        send.cast(),
                        send_counts.as_ptr().cast(),
                        send_displs.as_ptr().cast(),
                        t,
                        recv.cast(),
                        recv_counts.as_ptr().cast(),
                        recv_displs.as_ptr().cast(),
                        t,
                        c,
                        s,
                    ),
                ),
                LibColl::Barrier => ("HcclBarrier", (h.HcclBarrier)(c, s)),
            }
        };
        Some(self.hccl_check(symbol, code))
    }

    unsafe fn comm_destroy(&self, comm: Raw) -> DevResult<()> {
        // HCCL answers HCCL_E_AGAIN while the communicator is in use: retry
        // within its timeout, with naps growing to 10 ms.
        let patience = crate::backend::device::lock(&self.patience)
            .remove(&(comm.0 as usize))
            .unwrap_or(DESTROY_PATIENCE);
        let deadline = std::time::Instant::now() + patience;
        let mut nap = Duration::from_micros(100);
        let mut tries = 1u32;
        loop {
            // SAFETY: forwarded from the caller; a refused destroy leaves
            // the communicator live, so it may be destroyed again.
            let code = unsafe { (self.hccl.HcclCommDestroy)(comm.0) };
            if code != HcclResult::HCCL_E_AGAIN || std::time::Instant::now() >= deadline {
                if code == HcclResult::HCCL_E_AGAIN {
                    return Err(DevError::new(format!(
                        "HcclCommDestroy still said HCCL_E_AGAIN (in use) after {tries} tries in {patience:?}"
                    )));
                }
                return self.hccl_check("HcclCommDestroy", code);
            }
            tries += 1;
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        }
    }

    unsafe fn comm_abort(&self, comm: Raw) -> bool {
        // HCCL's abort is a destroy from another thread: operations still
        // waiting for their peers (link setup) fail at once. A communicator
        // in use answers HCCL_E_AGAIN and stays live; its work then ends at
        // its execution timeout.
        // SAFETY: a live communicator (forwarded); destroyed at most once,
        // since `true` marks the handle released.
        let code = unsafe { (self.hccl.HcclCommDestroy)(comm.0) };
        code == HcclResult::HCCL_SUCCESS
    }

    fn subcomm(&self, req: &SubRequest<'_>) -> Result<SubComm> {
        let f = hcomm_sys::require_fn!(self.hccl, HcclCreateSubCommConfig).map_err(|e| load_error("hccl", &e))?;
        // HCCL wants the members sorted (index = library rank) and splits
        // one level deep: always split the world communicator.
        let mut sorted = req.members.to_vec();
        sorted.sort_unstable();
        let lib_rank: Vec<u32> = req
            .members
            .iter()
            .map(|m| sorted.binary_search(m).unwrap_or(0) as u32)
            .collect();
        let mut id = key_hash(req.key);
        if id == 0xFFFF_FFFF {
            id += 1;
        }
        let mut config = self.config(req.timeout);
        let mut parent: HcclComm = req.world_comm.0;
        let mut out: HcclComm = null_mut();
        let n = sorted.len() as u32;
        self.bind(req.device).map_err(|e| e.into_error("hccl"))?;
        // SAFETY: a pointer to the live parent handle, `n` rank ids, an
        // initialised config and a writable out pointer.
        let code = unsafe {
            f(
                &raw mut parent,
                n,
                sorted.as_mut_ptr(),
                id,
                lib_rank[req.me],
                &raw mut config,
                &raw mut out,
            )
        };
        self.hccl_check("HcclCreateSubCommConfig", code)
            .map_err(|e| e.into_error("hccl"))?;
        if out.is_null() {
            return Err(Error::Backend {
                backend: "hccl",
                message: "HcclCreateSubCommConfig returned no communicator for a member".into(),
            });
        }
        self.note_patience(out, req.timeout);
        Ok(SubComm {
            comm: Raw(out),
            lib_rank,
        })
    }
}

/// The signature of `aclrtStreamQuery`.
type StreamQuery = unsafe extern "C" fn(hcomm_sys::aclrtStream, *mut std::ffi::c_int) -> aclError;

impl HcclDriver {
    /// A stream poll without timed-out synchronisations:
    /// `aclrtSynchronizeStreamWithTimeout` logs an ERROR (and leaves an
    /// `aclGetRecentErrMsg`) on every timeout, so a long wait polled with it
    /// floods the log. `aclrtStreamQuery` asks quietly, with naps growing
    /// from 20 µs to 1 ms; once drained, `aclrtSynchronizeStream` returns at
    /// once with the stream's error, if any.
    fn poll_quietly(&self, query: StreamQuery, stream: Raw, slice: Duration) -> Poll {
        let start = std::time::Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            let mut status = ACL_STREAM_STATUS_NOT_READY;
            // SAFETY: a live stream and a valid out pointer.
            let code = unsafe { query(stream.0, &raw mut status) };
            if let Err(e) = self.acl_check("aclrtStreamQuery", code) {
                return Poll::Failed(e);
            }
            if status == ACL_STREAM_STATUS_COMPLETE {
                // SAFETY: a live, drained stream: returns at once.
                let code = unsafe { (self.acl.aclrtSynchronizeStream)(stream.0) };
                return match self.acl_check("aclrtSynchronizeStream", code) {
                    Ok(()) => Poll::Done,
                    Err(e) => Poll::Failed(e),
                };
            }
            if start.elapsed() >= slice {
                return Poll::Pending;
            }
            std::thread::sleep(nap.min(slice.saturating_sub(start.elapsed())));
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HcclDriver>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_type_maps_to_an_hccl_type_of_its_size() {
        for dtype in DataType::ALL {
            assert_eq!(hccl_dtype(dtype).size(), Some(dtype.size()), "{dtype}");
        }
        assert_eq!(hccl_dtype(DataType::Bf16), HcclDataType::HCCL_DATA_TYPE_BFP16);
        assert_eq!(hccl_dtype(DataType::F16), HcclDataType::HCCL_DATA_TYPE_FP16);
    }

    #[test]
    fn exec_timeouts_are_what_each_chip_keeps() {
        let a2 = Some(HcclChip::A2A3);
        let other = Some(HcclChip::Other);
        assert_eq!(exec_timeout_for(a2, 100, false), (100, None));
        assert_eq!(exec_timeout_for(a2, 20_000, false), (20_000, None));
        let (s, why) = exec_timeout_for(other, 100, false);
        assert_eq!(s, 136);
        assert!(why.is_some_and(|w| w.contains("100 s becomes 136 s")));
        assert_eq!(exec_timeout_for(other, 68, false), (68, None));
        assert_eq!(exec_timeout_for(other, 1, false).0, 68);
        assert_eq!(exec_timeout_for(other, 17_340, false), (17_340, None));
        assert_eq!(exec_timeout_for(other, 20_000, false).0, 17_340);
        assert_eq!(exec_timeout_for(None, 30, false).0, 68);
        let (s, why) = exec_timeout_for(a2, 2000, true);
        assert_eq!(s, 1091);
        assert!(why.is_some_and(|w| w.contains("AIV")));
        assert_eq!(
            exec_timeout_for(other, 1000, true),
            (
                1020,
                Some(
                    "hccl execution timeout 1000 s becomes 1020 s: this chip keeps multiples of 68 s up to 17340 s"
                        .into()
                )
            )
        );
    }

    #[test]
    fn reduce_ops_map_to_hccl_values() {
        let values: Vec<i32> = ReduceOp::ALL.iter().map(|&op| hccl_op(op).0).collect();
        // Avg is never handed to HCCL (`runs` says no); its sum maps to SUM.
        assert_eq!(values, vec![0, 1, 2, 3, 0]);
    }
}
