//! The NCCL driver: NCCL + the CUDA runtime through `hcomm-sys`.
//!
//! Batches are `ncclGroupStart` / `ncclSend`+`ncclRecv` / `ncclGroupEnd`;
//! waits poll `cudaStreamQuery` and `ncclCommGetAsyncError`; an abort is
//! `ncclCommAbort`. Collectives NCCL lacks (all-to-all-v; gather, scatter and
//! all-to-all before 2.28; barrier) are built by the shared device layer from
//! one group of sends and receives or a one-element all-reduce.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hcomm_sys::{
    cudaError_t, cudaMemcpyKind, cudaStreamNonBlocking, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t,
    ncclUniqueId, CudaApi, CudaError, NcclApi,
};

use super::device::driver::{
    bind_cached, load_error, next_driver_id, void, DevError, DevResult, Driver, Item, LibColl, Poll, Raw, SubComm,
    SubRequest, Table,
};
use super::device::memory::CopyKind;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};

/// NCCL and the CUDA runtime, loaded.
pub(crate) struct NcclDriver {
    id: u64,
    pub(crate) nccl: Table<NcclApi>,
    pub(crate) cuda: Table<CudaApi>,
    versions: NcclVersions,
    /// One non-blocking stream per device for staging copies
    /// (`cudaMemcpyAsync` + `cudaStreamSynchronize` of that stream alone:
    /// a copy never waits for, nor is waited on by, communication work).
    copy_streams: Mutex<HashMap<i32, Raw>>,
}

/// The versions of the loaded NCCL, CUDA runtime and NVIDIA driver, as
/// the libraries report them (`None`: the library lacks the query).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NcclVersions {
    /// `ncclGetVersion` (`major * 10000 + minor * 100 + patch`).
    pub nccl: Option<i32>,
    /// `cudaRuntimeGetVersion` (`major * 1000 + minor * 10`).
    pub cuda_runtime: Option<i32>,
    /// `cudaDriverGetVersion`: the newest CUDA the installed driver
    /// supports; `Some(0)` when no NVIDIA driver is installed.
    pub cuda_driver: Option<i32>,
}

impl NcclVersions {
    fn cuda(v: Option<i32>) -> String {
        match v {
            Some(0) => "none".into(),
            Some(v) => format!("{}.{}", v / 1000, v % 1000 / 10),
            None => "unknown".into(),
        }
    }

    /// Why `cudaGetDeviceCount` (or another first CUDA call) failed, when
    /// the versions tell: no driver, or a driver older than the runtime.
    fn driver_problem(&self, runtime_path: &str) -> Option<String> {
        match (self.cuda_driver, self.cuda_runtime) {
            (Some(0), _) => Some(format!(
                "no NVIDIA driver is installed (cudaDriverGetVersion reports 0, so libcuda.so.1 did not load); \
                 the CUDA runtime {runtime_path} is CUDA {}. hint: install the NVIDIA driver, or run on a \
                 machine with a GPU",
                Self::cuda(self.cuda_runtime)
            )),
            (Some(d), Some(r)) if d < r => Some(format!(
                "the NVIDIA driver supports CUDA up to {} but the CUDA runtime {runtime_path} is CUDA {}. \
                 hint: upgrade the driver, or set HCOMM_CUDART_LIB to a runtime no newer than CUDA {}",
                Self::cuda(Some(d)),
                Self::cuda(Some(r)),
                Self::cuda(Some(d))
            )),
            _ => None,
        }
    }
}

impl std::fmt::Display for NcclVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nccl = match self.nccl {
            Some(v) => format!("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100),
            None => "unknown".into(),
        };
        write!(
            f,
            "nccl {nccl}, cuda runtime {}, driver supports cuda {}",
            Self::cuda(self.cuda_runtime),
            Self::cuda(self.cuda_driver)
        )
    }
}

impl std::fmt::Debug for NcclDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclDriver")
            .field("nccl", &self.nccl.path())
            .field("cuda", &self.cuda.path())
            .finish_non_exhaustive()
    }
}

impl NcclDriver {
    /// The process-wide tables (`HCOMM_NCCL_LIB`, `HCOMM_CUDART_LIB`, then the
    /// CUDA install directories and the system search path).
    pub(crate) fn system() -> Result<Arc<NcclDriver>> {
        let nccl = NcclApi::get().map_err(|e| load_error("nccl", &e))?;
        let cuda = CudaApi::get().map_err(|e| load_error("nccl", &e))?;
        Ok(Self::new(Table::Static(nccl), Table::Static(cuda)))
    }

    /// Tables loaded from explicit files.
    pub(crate) fn load(nccl: &Path, cuda: &Path) -> Result<Arc<NcclDriver>> {
        let n = NcclApi::load(nccl).map_err(|e| load_error("nccl", &e))?;
        let c = CudaApi::load(cuda).map_err(|e| load_error("nccl", &e))?;
        Ok(Self::new(Table::Owned(Arc::new(n)), Table::Owned(Arc::new(c))))
    }

    fn new(nccl: Table<NcclApi>, cuda: Table<CudaApi>) -> Arc<NcclDriver> {
        let versions = NcclVersions {
            nccl: nccl.version(),
            cuda_runtime: cuda.runtime_version(),
            cuda_driver: cuda.driver_version(),
        };
        tracing::info!(
            nccl = %nccl.path().display(),
            cudart = %cuda.path().display(),
            %versions,
            "nccl backend loaded"
        );
        Arc::new(NcclDriver {
            id: next_driver_id(),
            nccl,
            cuda,
            versions,
            copy_streams: Mutex::new(HashMap::new()),
        })
    }

    /// The loaded libraries' versions.
    pub(crate) fn versions(&self) -> NcclVersions {
        self.versions
    }

    /// The copy stream of the calling thread's device (created on first use).
    fn copy_stream(&self) -> DevResult<Option<Raw>> {
        if self.cuda.cudaMemcpyAsync.is_none() {
            return Ok(None);
        }
        let mut device: c_int = 0;
        // SAFETY: a valid out pointer.
        self.cuda_check("cudaGetDevice", unsafe { (self.cuda.cudaGetDevice)(&raw mut device) })?;
        let mut streams = crate::backend::device::lock(&self.copy_streams);
        if let Some(&s) = streams.get(&device) {
            return Ok(Some(s));
        }
        let s = self.stream_create()?;
        streams.insert(device, s);
        Ok(Some(s))
    }

    /// `code` as a result; a failure carries NCCL's own last message
    /// (`ncclGetLastError`, where present), which often names the cause
    /// the code alone does not ("unhandled cuda error"), and the driver
    /// problem the versions show, if any.
    fn nccl_check(&self, symbol: &str, code: ncclResult_t) -> DevResult<()> {
        match code.result() {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut message = format!("{symbol} failed: {e}");
                if let Some(d) = self.nccl.last_error() {
                    message = format!("{message}; nccl's last error: {d}");
                }
                if code == ncclResult_t::ncclUnhandledCudaError {
                    if let Some(why) = self.driver_problem() {
                        message = format!("{message}; cause: {why}");
                    }
                }
                Err(DevError {
                    timeout: code == ncclResult_t::ncclTimeout,
                    message,
                })
            }
        }
    }

    /// `code` as a result. The CUDA runtime reports a missing driver as
    /// "driver too old" (`cudaErrorInsufficientDriver`): where the versions
    /// tell the real cause, the message leads with it; other first-call
    /// failures carry the versions.
    fn cuda_check(&self, symbol: &str, code: cudaError_t) -> DevResult<()> {
        let Err(e) = code.result() else { return Ok(()) };
        let first_call = matches!(
            e,
            CudaError::InsufficientDriver | CudaError::NoDevice | CudaError::InitializationError
        );
        let message = match self.driver_problem() {
            Some(why) if first_call => format!("{symbol} failed: {why} (the runtime's code: {:?}, {})", code, code.0),
            _ if first_call => format!("{symbol} failed: {e} ({})", self.versions),
            _ => format!("{symbol} failed: {e}"),
        };
        Err(DevError::new(message))
    }

    /// No driver, or one older than the runtime, as the versions tell.
    fn driver_problem(&self) -> Option<String> {
        self.versions.driver_problem(&self.cuda.path().display().to_string())
    }

    /// Number of CUDA devices.
    pub(crate) fn device_count(&self) -> Result<usize> {
        let mut n: c_int = 0;
        // SAFETY: a valid out pointer.
        let code = unsafe { (self.cuda.cudaGetDeviceCount)(&raw mut n) };
        self.cuda_check("cudaGetDeviceCount", code)
            .map_err(|e| e.into_error("nccl"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// `ncclGetUniqueId`.
    pub(crate) fn unique_id(&self) -> Result<ncclUniqueId> {
        let mut id = ncclUniqueId::zeroed();
        // SAFETY: a valid, writable id.
        let code = unsafe { (self.nccl.ncclGetUniqueId)(&raw mut id) };
        self.nccl_check("ncclGetUniqueId", code)
            .map_err(|e| e.into_error("nccl"))?;
        Ok(id)
    }

    /// Joins the communicator of `id` as `rank` of `world` on `device`.
    pub(crate) fn init_rank(&self, world: usize, id: &ncclUniqueId, rank: usize, device: i32) -> Result<Raw> {
        self.bind(device).map_err(|e| e.into_error("nccl"))?;
        let mut comm: ncclComm_t = null_mut();
        let n = c_int::try_from(world).map_err(|_| Error::precondition("world size exceeds int"))?;
        // SAFETY: a valid out pointer; the id is passed by value.
        let code = unsafe { (self.nccl.ncclCommInitRank)(&raw mut comm, n, *id, rank as c_int) };
        self.nccl_check("ncclCommInitRank", code)
            .map_err(|e| e.into_error("nccl"))?;
        Ok(Raw(comm))
    }

    /// `ncclCommInitAll`: rank `i` on `devices[i]`.
    pub(crate) fn init_all(&self, devices: &[i32]) -> Result<Vec<Raw>> {
        let mut comms: Vec<ncclComm_t> = vec![null_mut(); devices.len()];
        let n = c_int::try_from(devices.len()).map_err(|_| Error::precondition("too many devices"))?;
        // SAFETY: `comms` has room for `n` handles, `devices` holds `n` ids.
        let code = unsafe { (self.nccl.ncclCommInitAll)(comms.as_mut_ptr(), n, devices.as_ptr()) };
        self.nccl_check("ncclCommInitAll", code)
            .map_err(|e| e.into_error("nccl"))?;
        Ok(comms.into_iter().map(Raw).collect())
    }
}

/// The NCCL type of an element type.
pub(crate) fn nccl_dtype(dtype: DataType) -> ncclDataType_t {
    match dtype {
        DataType::I8 => ncclDataType_t::ncclInt8,
        DataType::U8 => ncclDataType_t::ncclUint8,
        DataType::I32 => ncclDataType_t::ncclInt32,
        DataType::U32 => ncclDataType_t::ncclUint32,
        DataType::I64 => ncclDataType_t::ncclInt64,
        DataType::U64 => ncclDataType_t::ncclUint64,
        DataType::F16 => ncclDataType_t::ncclFloat16,
        DataType::Bf16 => ncclDataType_t::ncclBfloat16,
        DataType::F32 => ncclDataType_t::ncclFloat32,
        DataType::F64 => ncclDataType_t::ncclFloat64,
    }
}

/// The NCCL reduction operator (`ncclAvg` needs NCCL 2.10: see
/// [`NCCL_AVG_VERSION`]).
pub(crate) fn nccl_op(op: ReduceOp) -> ncclRedOp_t {
    match op {
        ReduceOp::Sum => ncclRedOp_t::ncclSum,
        ReduceOp::Prod => ncclRedOp_t::ncclProd,
        ReduceOp::Max => ncclRedOp_t::ncclMax,
        ReduceOp::Min => ncclRedOp_t::ncclMin,
        ReduceOp::Avg => ncclRedOp_t::ncclAvg,
    }
}

/// The first NCCL with `ncclAvg` (2.10.0, as `ncclGetVersion` writes it).
const NCCL_AVG_VERSION: i32 = 21_000;

/// Whether an NCCL of `version` runs `op` itself; an older one (or one
/// that does not say) gets [`ReduceOp::Avg`] emulated: gathered, summed
/// in rank order and divided on the host.
fn nccl_runs_op(version: Option<i32>, op: ReduceOp) -> bool {
    op != ReduceOp::Avg || version.is_some_and(|v| v >= NCCL_AVG_VERSION)
}

impl Driver for NcclDriver {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn runs(&self, call: &LibColl<'_>, _dtype: DataType) -> bool {
        match *call {
            LibColl::AllReduce { op, .. } | LibColl::Reduce { op, .. } | LibColl::ReduceScatter { op, .. } => {
                nccl_runs_op(self.versions.nccl, op)
            }
            _ => true,
        }
    }

    fn pools_memory(&self) -> bool {
        true
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn bind(&self, device: i32) -> DevResult<()> {
        bind_cached(self.id, device, || {
            // SAFETY: cudaSetDevice takes any ordinal and validates it.
            let code = unsafe { (self.cuda.cudaSetDevice)(device) };
            self.cuda_check("cudaSetDevice", code)
        })
    }

    fn malloc(&self, bytes: usize) -> DevResult<*mut u8> {
        let mut p: *mut c_void = null_mut();
        // SAFETY: a valid out pointer; the device is bound.
        let code = unsafe { (self.cuda.cudaMalloc)(&raw mut p, bytes) };
        self.cuda_check("cudaMalloc", code)?;
        Ok(p.cast())
    }

    unsafe fn free(&self, ptr: *mut u8) -> DevResult<()> {
        // SAFETY: forwarded from the caller.
        let code = unsafe { (self.cuda.cudaFree)(void(ptr)) };
        self.cuda_check("cudaFree", code)
    }

    unsafe fn memcpy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: CopyKind) -> DevResult<()> {
        let kind = match kind {
            CopyKind::HostToDevice => cudaMemcpyKind::cudaMemcpyHostToDevice,
            CopyKind::DeviceToHost => cudaMemcpyKind::cudaMemcpyDeviceToHost,
            CopyKind::DeviceToDevice => cudaMemcpyKind::cudaMemcpyDeviceToDevice,
        };
        let (Some(stream), Some(copy)) = (self.copy_stream()?, self.cuda.cudaMemcpyAsync) else {
            // SAFETY: forwarded from the caller.
            let code = unsafe { (self.cuda.cudaMemcpy)(void(dst), src.cast(), bytes, kind) };
            return self.cuda_check("cudaMemcpy", code);
        };
        // SAFETY: forwarded from the caller; the copy stream is live. The
        // copy is complete (the host side may be reused) once its stream
        // is synchronised below.
        let code = unsafe { copy(void(dst), src.cast(), bytes, kind, stream.0) };
        self.cuda_check("cudaMemcpyAsync", code)?;
        // SAFETY: a live stream holding only staging copies.
        let code = unsafe { (self.cuda.cudaStreamSynchronize)(stream.0) };
        self.cuda_check("cudaStreamSynchronize", code)
    }

    fn stream_create(&self) -> DevResult<Raw> {
        let mut s = null_mut();
        // A non-blocking stream: work on it never synchronises with the
        // legacy default stream (any `cudaMemcpy` or kernel of the
        // process), so communication and copies cannot wait on each other.
        if let Some(create) = self.cuda.cudaStreamCreateWithFlags {
            // SAFETY: a valid out pointer; the device is bound.
            let code = unsafe { create(&raw mut s, cudaStreamNonBlocking) };
            self.cuda_check("cudaStreamCreateWithFlags", code)?;
        } else {
            // SAFETY: a valid out pointer; the device is bound.
            let code = unsafe { (self.cuda.cudaStreamCreate)(&raw mut s) };
            self.cuda_check("cudaStreamCreate", code)?;
        }
        Ok(Raw(s))
    }

    unsafe fn stream_destroy(&self, stream: Raw) -> DevResult<()> {
        // SAFETY: forwarded from the caller.
        let code = unsafe { (self.cuda.cudaStreamDestroy)(stream.0) };
        self.cuda_check("cudaStreamDestroy", code)
    }

    fn poll(&self, comm: Raw, stream: Raw, slice: Duration) -> Poll {
        let start = Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            let mut async_error = ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator and a valid out pointer.
            let code = unsafe { (self.nccl.ncclCommGetAsyncError)(comm.0, &raw mut async_error) };
            if let Err(e) = self.nccl_check("ncclCommGetAsyncError", code) {
                return Poll::Failed(e);
            }
            if async_error != ncclResult_t::ncclInProgress {
                if let Err(e) = self.nccl_check("NCCL asynchronous error", async_error) {
                    return Poll::Failed(e);
                }
            }
            // SAFETY: a live stream.
            let code = unsafe { (self.cuda.cudaStreamQuery)(stream.0) };
            if code == cudaError_t::cudaSuccess {
                return Poll::Done;
            }
            if code != cudaError_t::cudaErrorNotReady {
                return Poll::Failed(
                    self.cuda_check("cudaStreamQuery", code)
                        .err()
                        .unwrap_or_else(|| DevError::new("cudaStreamQuery")),
                );
            }
            if start.elapsed() >= slice {
                return Poll::Pending;
            }
            std::thread::sleep(nap.min(slice.saturating_sub(start.elapsed())));
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }

    unsafe fn batch(&self, comm: Raw, stream: Raw, items: &[Item]) -> DevResult<()> {
        let n = &*self.nccl;
        // SAFETY: group calls take no arguments.
        self.nccl_check("ncclGroupStart", unsafe { (n.ncclGroupStart)() })?;
        let mut first = Ok(());
        for it in items {
            let t = nccl_dtype(it.dtype);
            let peer = it.peer as c_int;
            // SAFETY: live handles; the buffers are valid per the caller.
            let (symbol, code) = unsafe {
                if it.send {
                    (
                        "ncclSend",
                        (n.ncclSend)(it.ptr.cast(), it.count, t, peer, comm.0, stream.0),
                    )
                } else {
                    (
                        "ncclRecv",
                        (n.ncclRecv)(void(it.ptr), it.count, t, peer, comm.0, stream.0),
                    )
                }
            };
            if first.is_ok() {
                first = self.nccl_check(symbol, code);
            }
        }
        // The group is always closed, even after a failed call inside it.
        // SAFETY: closes the group opened above.
        let end = self.nccl_check("ncclGroupEnd", unsafe { (n.ncclGroupEnd)() });
        first.and(end)
    }

    unsafe fn collective(&self, comm: Raw, stream: Raw, call: &LibColl<'_>, dtype: DataType) -> Option<DevResult<()>> {
        let n = &*self.nccl;
        let t = nccl_dtype(dtype);
        let (c, s) = (comm.0, stream.0);
        // SAFETY (every call): live handles; device ranges valid per the caller.
        let (symbol, code) = unsafe {
            match *call {
                LibColl::AllReduce { send, recv, count, op } => (
                    "ncclAllReduce",
                    (n.ncclAllReduce)(send.cast(), void(recv), count, t, nccl_op(op), c, s),
                ),
                LibColl::Broadcast { buf, count, root } => (
                    "ncclBroadcast",
                    (n.ncclBroadcast)(buf.cast(), void(buf), count, t, root as c_int, c, s),
                ),
                LibColl::Reduce {
                    send,
                    recv,
                    count,
                    op,
                    root,
                } => (
                    "ncclReduce",
                    (n.ncclReduce)(send.cast(), void(recv), count, t, nccl_op(op), root as c_int, c, s),
                ),
                LibColl::ReduceScatter {
                    send,
                    recv,
                    recv_count,
                    op,
                } => (
                    "ncclReduceScatter",
                    (n.ncclReduceScatter)(send.cast(), void(recv), recv_count, t, nccl_op(op), c, s),
                ),
                LibColl::AllGather { send, recv, send_count } => (
                    "ncclAllGather",
                    (n.ncclAllGather)(send.cast(), void(recv), send_count, t, c, s),
                ),
                LibColl::Scatter {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let f = n.ncclScatter?;
                    ("ncclScatter", f(send.cast(), void(recv), count, t, root as c_int, c, s))
                }
                LibColl::Gather {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let f = n.ncclGather?;
                    ("ncclGather", f(send.cast(), void(recv), count, t, root as c_int, c, s))
                }
                LibColl::AllToAll { send, recv, count } => {
                    let f = n.ncclAlltoAll?;
                    ("ncclAlltoAll", f(send.cast(), void(recv), count, t, c, s))
                }
                LibColl::AllToAllV { .. } | LibColl::Barrier => return None,
            }
        };
        Some(self.nccl_check(symbol, code))
    }

    unsafe fn comm_destroy(&self, comm: Raw) -> DevResult<()> {
        if let Some(f) = self.nccl.ncclCommFinalize {
            // SAFETY: forwarded from the caller.
            self.nccl_check("ncclCommFinalize", unsafe { f(comm.0) })?;
        }
        // SAFETY: forwarded from the caller.
        let code = unsafe { (self.nccl.ncclCommDestroy)(comm.0) };
        self.nccl_check("ncclCommDestroy", code)
    }

    unsafe fn comm_abort(&self, comm: Raw) -> bool {
        // SAFETY: forwarded from the caller; the handle is freed by NCCL.
        let _ = unsafe { (self.nccl.ncclCommAbort)(comm.0) };
        true
    }

    fn subcomm(&self, req: &SubRequest<'_>) -> Result<SubComm> {
        // `ncclCommSplit` is collective over the whole parent, but a member
        // creates a subgroup without the other ranks (`Comm::split` ranks
        // with no color do not take part): members share a fresh unique id
        // through the in-process world instead.
        let world = req.world.ok_or_else(|| Error::Config {
            message: "nccl: subgroups of a communicator created with `init_rank` need every rank in this \
                      process; use `hcomm::nccl::run` or `init_all`"
                .into(),
        })?;
        let bytes = world.exchange(req.key, req.members.len(), req.timeout, || {
            self.unique_id().map(|id| id.internal.to_vec())
        })?;
        let id = ncclUniqueId::from_bytes(&bytes).ok_or_else(|| Error::Backend {
            backend: "nccl",
            message: "a unique id of the wrong size was exchanged".into(),
        })?;
        let comm = self.init_rank(req.members.len(), &id, req.me, req.device)?;
        Ok(SubComm {
            comm,
            lib_rank: (0..req.members.len() as u32).collect(),
        })
    }
}

impl Drop for NcclDriver {
    fn drop(&mut self) {
        let streams = std::mem::take(&mut *crate::backend::device::lock(&self.copy_streams));
        for (_, s) in streams {
            // SAFETY: a copy stream of this driver, idle (every copy was
            // synchronised before `memcpy` returned), destroyed once.
            let code = unsafe { (self.cuda.cudaStreamDestroy)(s.0) };
            if let Err(e) = self.cuda_check("cudaStreamDestroy", code) {
                super::device::memory::record_teardown_error(e.into_error("nccl"));
            }
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<NcclDriver>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_type_maps_to_an_nccl_type() {
        let mapped: Vec<i32> = DataType::ALL.iter().map(|&d| nccl_dtype(d).0).collect();
        // f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64 (`DataType::ALL`'s order).
        assert_eq!(mapped, vec![7, 8, 6, 9, 0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn versions_read_as_numbers_and_name_a_missing_or_old_driver() {
        let v = NcclVersions {
            nccl: Some(23203),
            cuda_runtime: Some(13000),
            cuda_driver: Some(12090),
        };
        assert_eq!(
            v.to_string(),
            "nccl 2.32.3, cuda runtime 13.0, driver supports cuda 12.9"
        );
        let old = v.driver_problem("/x/libcudart.so.13").unwrap_or_default();
        assert!(
            old.starts_with(
                "the NVIDIA driver supports CUDA up to 12.9 but the CUDA runtime /x/libcudart.so.13 is CUDA 13.0."
            ),
            "{old}"
        );
        let none = NcclVersions {
            cuda_driver: Some(0),
            ..v
        };
        let why = none.driver_problem("/x/libcudart.so.13").unwrap_or_default();
        assert!(why.starts_with("no NVIDIA driver is installed"), "{why}");
        let fine = NcclVersions {
            cuda_driver: Some(13000),
            ..v
        };
        assert_eq!(fine.driver_problem("/x"), None);
        let unknown = NcclVersions {
            nccl: None,
            cuda_runtime: None,
            cuda_driver: None,
        };
        assert_eq!(
            unknown.to_string(),
            "nccl unknown, cuda runtime unknown, driver supports cuda unknown"
        );
    }

    #[test]
    fn reduce_ops_map_to_nccl_values() {
        let values: Vec<i32> = ReduceOp::ALL.iter().map(|&op| nccl_op(op).0).collect();
        assert_eq!(values, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn avg_is_native_from_nccl_2_10_and_emulated_before() {
        assert!(nccl_runs_op(Some(21_000), ReduceOp::Avg));
        assert!(nccl_runs_op(Some(22_304), ReduceOp::Avg));
        assert!(!nccl_runs_op(Some(20_906), ReduceOp::Avg));
        assert!(!nccl_runs_op(None, ReduceOp::Avg));
        assert!(nccl_runs_op(None, ReduceOp::Sum));
    }
}
