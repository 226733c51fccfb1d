//! Exported HCCL symbols: communicator management, collectives and
//! point-to-point operations.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hcomm_sys::{
    aclrtStream, HcclComm, HcclCommConfig, HcclDataType, HcclReduceOp, HcclResult, HcclRootInfo, HcclSendRecvItem,
    HcclSendRecvType, COMM_NAME_MAX_LENGTH, HCCL_COMM_CONFIG_MAGIC_WORD, HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET,
};

use crate::acl::STREAMS;
use crate::exec;
use crate::inject::injected;
use crate::memory;
use crate::op::{extent, Desc, Item, Kind};
use crate::reduce::reducible;
use crate::runtime::{connect_timeout, current_device, default_exec_timeout, set_recent, Registry};
use crate::stream::{AsyncError, Stream};
use crate::world::{fresh_id, join_world, CommHandle, Group, JoinError, World};

static COMMS: Registry<CommHandle> = Registry::new();

const ROOT_MAGIC: &[u8; 16] = b"hcomm-standin-v1";

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

fn check_reduce(dtype: HcclDataType, op: HcclReduceOp) -> HcclRes<()> {
    if !(0..=3).contains(&op.0) {
        return err(HcclResult::HCCL_E_PARA, format!("reduce op {op:?} is not valid"));
    }
    elem_size(dtype)?;
    if !reducible(dtype) {
        return err(
            HcclResult::HCCL_E_NOT_SUPPORT,
            format!("data type {dtype:?} cannot be reduced"),
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

/// Enqueues `work` on `stream` (which must be live) for `comm`.
fn enqueue(
    comm: &Arc<CommHandle>,
    stream: aclrtStream,
    work: impl FnOnce(&CommHandle) -> Result<(), AsyncError> + Send + 'static,
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
    let guard = InFlight::new(Arc::clone(comm));
    stream.enqueue(Box::new(move || work(&guard.0)));
    Ok(())
}

/// Counts an enqueued operation as in flight until it ran or was discarded.
struct InFlight(Arc<CommHandle>);

impl InFlight {
    fn new(comm: Arc<CommHandle>) -> Self {
        comm.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(comm)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Registers the handle of world rank `world_rank` (rank `rank` of `group`
/// in `world`), whose waits end after `timeout` (`None`: never).
fn new_comm(
    (world, world_rank): (Arc<World>, usize),
    (group, rank): (Arc<Group>, usize),
    device: i32,
    timeout: Option<Duration>,
    name: String,
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
    }))
}

// --- communicator management -------------------------------------------------

/// `HcclGetRootInfo`: a fresh process-unique world.
///
/// # Safety
///
/// `rootInfo` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRootInfo(rootInfo: *mut HcclRootInfo) -> HcclResult {
    call("HcclGetRootInfo", || {
        if rootInfo.is_null() {
            return err(HcclResult::HCCL_E_PTR, "rootInfo is null");
        }
        if current_device().is_none() {
            return err(
                HcclResult::HCCL_E_RUNTIME,
                "no device set on this thread; call aclrtSetDevice first",
            );
        }
        let mut info = HcclRootInfo::zeroed();
        info.internal[..16].copy_from_slice(ROOT_MAGIC);
        info.internal[16..24].copy_from_slice(&fresh_id().to_le_bytes());
        info.internal[24..28].copy_from_slice(&std::process::id().to_le_bytes());
        // SAFETY: non-null and writable per the contract.
        unsafe { rootInfo.write(info) };
        Ok(())
    })
}

/// Shared body of the two root-info inits.
///
/// # Safety
///
/// Pointers are null or valid (`config` for its declared `size`).
unsafe fn init_root_info(
    nRanks: u32,
    rootInfo: *const HcclRootInfo,
    rank: u32,
    config: *const HcclCommConfig,
    comm: *mut HcclComm,
) -> HcclRes<()> {
    if rootInfo.is_null() || comm.is_null() {
        return err(HcclResult::HCCL_E_PTR, "rootInfo or comm is null");
    }
    if nRanks == 0 || rank >= nRanks {
        return err(
            HcclResult::HCCL_E_PARA,
            format!("rank {rank} is out of range for nRanks = {nRanks}"),
        );
    }
    // SAFETY: non-null; a C caller passes a whole HcclRootInfo.
    let info = unsafe { &*rootInfo };
    if &info.internal[..16] != ROOT_MAGIC || info.internal[24..28] != std::process::id().to_le_bytes() {
        return err(
            HcclResult::HCCL_E_PARA,
            "rootInfo was not produced by HcclGetRootInfo of this process",
        );
    }
    let mut world = [0u8; 8];
    world.copy_from_slice(&info.internal[16..24]);
    let world = u64::from_le_bytes(world);
    // SAFETY: forwarded contract.
    let (timeout, name) = unsafe { read_config(config) }?;
    let Some(device) = current_device() else {
        return err(
            HcclResult::HCCL_E_RUNTIME,
            "no device set on this thread; call aclrtSetDevice first",
        );
    };
    let joined = join_world(world, nRanks, rank, connect_timeout()).or_else(|e| match e {
        JoinError::Para(m) => err(HcclResult::HCCL_E_PARA, m),
        JoinError::Timeout(m) => err(HcclResult::HCCL_E_TIMEOUT, m),
    })?;
    let name = name.unwrap_or_else(|| format!("standin_world_{world}"));
    let member = (Arc::clone(&joined.group), rank as usize);
    let h = new_comm((joined, rank as usize), member, device, timeout, name);
    // SAFETY: non-null and writable per the contract.
    unsafe { comm.write(h) };
    Ok(())
}

/// Reads what the stand-in honours from a config: (exec timeout, comm name).
///
/// # Safety
///
/// `config` is null or valid for reads of its header's `size` bytes.
#[allow(clippy::type_complexity)]
unsafe fn read_config(config: *const HcclCommConfig) -> HcclRes<(Option<Duration>, Option<String>)> {
    if config.is_null() {
        return Ok((default_exec_timeout(), None));
    }
    // Like CommConfig::Load: read the header, copy min(size, ours), honour only
    // the fields the caller's version has.
    // SAFETY: every config starts with the 24-byte header.
    let header = unsafe { std::ptr::addr_of!((*config).header).read_unaligned() };
    if header.magicWord != HCCL_COMM_CONFIG_MAGIC_WORD {
        return err(
            HcclResult::HCCL_E_PARA,
            format!("config magic word is {:#x}, not 0xF0F0F0F0", header.magicWord),
        );
    }
    let mut c = HcclCommConfig::new();
    let n = header.size.min(std::mem::size_of::<HcclCommConfig>());
    // SAFETY: the caller's struct holds `size` bytes; ours holds at least `n`.
    unsafe { std::ptr::copy_nonoverlapping(config.cast::<u8>(), std::ptr::addr_of_mut!(c).cast::<u8>(), n) };
    let v = header.version;
    let timeout = if v >= 8 && n > std::mem::offset_of!(HcclCommConfig, hcclExecTimeOut) {
        match c.hcclExecTimeOut {
            HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET => default_exec_timeout(),
            0 => None,
            s if s > 0 => Some(Duration::from_secs(s as u64)),
            s => return err(HcclResult::HCCL_E_PARA, format!("hcclExecTimeOut {s} is negative")),
        }
    } else {
        default_exec_timeout()
    };
    let name = (v >= 2 && n >= std::mem::offset_of!(HcclCommConfig, hcclCommName) + COMM_NAME_MAX_LENGTH)
        .then(|| c.comm_name())
        .filter(|s| !s.is_empty());
    Ok((timeout, name))
}

/// `HcclCommInitRootInfo`: joins the world of `rootInfo`; blocks until all joined.
///
/// # Safety
///
/// `rootInfo` is null or a valid `HcclRootInfo`; `comm` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitRootInfo(
    nRanks: u32,
    rootInfo: *const HcclRootInfo,
    rank: u32,
    comm: *mut HcclComm,
) -> HcclResult {
    // SAFETY: forwarded contract.
    call("HcclCommInitRootInfo", || unsafe {
        init_root_info(nRanks, rootInfo, rank, std::ptr::null(), comm)
    })
}

/// `HcclCommInitRootInfoConfig`: as `HcclCommInitRootInfo`, honouring
/// `hcclExecTimeOut` and `hcclCommName`.
///
/// # Safety
///
/// As `HcclCommInitRootInfo`; `config` is null or an initialised config.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitRootInfoConfig(
    nRanks: u32,
    rootInfo: *const HcclRootInfo,
    rank: u32,
    config: *const HcclCommConfig,
    comm: *mut HcclComm,
) -> HcclResult {
    call("HcclCommInitRootInfoConfig", || {
        if config.is_null() {
            return err(HcclResult::HCCL_E_PTR, "config is null");
        }
        // SAFETY: forwarded contract.
        unsafe { init_root_info(nRanks, rootInfo, rank, config, comm) }
    })
}

/// `HcclCommInitAll`: `ndev` communicators of one world, rank `i` on `devices[i]`.
///
/// # Safety
///
/// `devices` holds `ndev` ids and `comms` room for `ndev` handles (or null).
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitAll(ndev: u32, devices: *mut i32, comms: *mut HcclComm) -> HcclResult {
    call("HcclCommInitAll", || {
        if devices.is_null() || comms.is_null() {
            return err(HcclResult::HCCL_E_PTR, "devices or comms is null");
        }
        if ndev == 0 {
            return err(HcclResult::HCCL_E_PARA, "ndev is 0");
        }
        // SAFETY: `devices` holds `ndev` ids per the contract.
        let devs = unsafe { std::slice::from_raw_parts(devices, ndev as usize) };
        let count = crate::runtime::device_count();
        for (i, d) in devs.iter().enumerate() {
            if !(0..count).contains(d) || devs[..i].contains(d) {
                return err(
                    HcclResult::HCCL_E_PARA,
                    format!("devices[{i}] = {d} is out of range or repeated"),
                );
            }
        }
        let world = World::new(ndev as usize);
        let timeout = default_exec_timeout();
        let id = fresh_id();
        for (i, &d) in devs.iter().enumerate() {
            let member = (Arc::clone(&world.group), i);
            let h = new_comm((Arc::clone(&world), i), member, d, timeout, format!("standin_all_{id}"));
            // SAFETY: `comms` has room for `ndev` handles per the contract.
            unsafe { comms.add(i).write(h) };
        }
        Ok(())
    })
}

/// `HcclCreateSubCommConfig`: a sub-communicator of `*comm` over global ranks
/// `rankIds` (sorted); ranks not joining pass `rankIds = NULL`. One level only.
///
/// # Safety
///
/// `comm` points to a live handle; `rankIds` holds `rankNum` ids or is null;
/// `config` is null or initialised; `subComm` is writable.
#[no_mangle]
pub unsafe extern "C" fn HcclCreateSubCommConfig(
    comm: *mut HcclComm,
    rankNum: u32,
    rankIds: *mut u32,
    subCommId: u64,
    subCommRankId: u32,
    config: *mut HcclCommConfig,
    subComm: *mut HcclComm,
) -> HcclResult {
    call("HcclCreateSubCommConfig", || {
        if comm.is_null() || subComm.is_null() {
            return err(HcclResult::HCCL_E_PTR, "comm or subComm is null");
        }
        // SAFETY: non-null and readable per the contract.
        let parent = comm_of(unsafe { comm.read() })?;
        if rankIds.is_null() {
            // This rank does not join.
            // SAFETY: non-null and writable.
            unsafe { subComm.write(std::ptr::null_mut()) };
            return Ok(());
        }
        if parent.group.is_sub {
            return err(
                HcclResult::HCCL_E_NOT_SUPPORT,
                "a sub-communicator cannot be split again (one level only)",
            );
        }
        // SAFETY: `rankIds` holds `rankNum` ids per the contract.
        let ids = unsafe { std::slice::from_raw_parts(rankIds, rankNum as usize) }.to_vec();
        if ids.is_empty()
            || ids.windows(2).any(|w| w[0] >= w[1])
            || ids.iter().any(|&r| r as usize >= parent.group.size)
        {
            return err(
                HcclResult::HCCL_E_PARA,
                format!("rankIds {ids:?} must be sorted, unique and < {}", parent.group.size),
            );
        }
        if ids.get(subCommRankId as usize) != Some(&(parent.rank as u32)) {
            return err(
                HcclResult::HCCL_E_PARA,
                format!("rankIds[{subCommRankId}] is not this rank ({}) in {ids:?}", parent.rank),
            );
        }
        // SAFETY: forwarded contract.
        let (timeout, name) = unsafe { read_config(config) }?;
        let timeout = if config.is_null() { parent.exec_timeout } else { timeout };
        let member = (
            parent.world.sub(parent.world_rank, subCommId, &ids),
            subCommRankId as usize,
        );
        let name = name.unwrap_or_else(|| format!("{}_sub_{subCommId}", parent.name));
        let world = (Arc::clone(&parent.world), parent.world_rank);
        let h = new_comm(world, member, parent.device, timeout, name);
        // SAFETY: non-null and writable.
        unsafe { subComm.write(h) };
        Ok(())
    })
}

/// `HcclCommDestroy`: `HCCL_E_AGAIN` while operations are in flight.
#[no_mangle]
pub extern "C" fn HcclCommDestroy(comm: HcclComm) -> HcclResult {
    call("HcclCommDestroy", || {
        let h = comm_of(comm)?;
        if h.in_flight.load(Ordering::SeqCst) > 0 {
            return err(
                HcclResult::HCCL_E_AGAIN,
                "operations are still in flight; synchronise the stream first",
            );
        }
        COMMS.remove(comm);
        Ok(())
    })
}

/// The skeleton of the getters: unless injected, resolves `comm`, checks `out`
/// (named `name` in errors) and writes `value(comm)` to it.
///
/// # Safety
///
/// `out` is null or writable.
unsafe fn get<T>(
    symbol: &str,
    comm: HcclComm,
    (name, out): (&str, *mut T),
    value: impl FnOnce(&CommHandle) -> T,
) -> HcclResult {
    call(symbol, || {
        let h = comm_of(comm)?;
        if out.is_null() {
            return err(HcclResult::HCCL_E_PTR, format!("{name} is null"));
        }
        // SAFETY: non-null and writable per the contract.
        unsafe { out.write(value(&h)) };
        Ok(())
    })
}

/// `HcclGetRankSize`.
///
/// # Safety
///
/// `rankSize` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankSize(comm: HcclComm, rankSize: *mut u32) -> HcclResult {
    // SAFETY: forwarded contract.
    unsafe { get("HcclGetRankSize", comm, ("rankSize", rankSize), |h| h.group.size as u32) }
}

/// `HcclGetRankId`.
///
/// # Safety
///
/// `rank` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetRankId(comm: HcclComm, rank: *mut u32) -> HcclResult {
    // SAFETY: forwarded contract.
    unsafe { get("HcclGetRankId", comm, ("rank", rank), |h| h.rank as u32) }
}

/// `HcclGetCommName` (buffer of at least 128 bytes).
///
/// # Safety
///
/// `commName` is null or writable for 128 bytes.
#[no_mangle]
pub unsafe extern "C" fn HcclGetCommName(comm: HcclComm, commName: *mut c_char) -> HcclResult {
    call("HcclGetCommName", || {
        let h = comm_of(comm)?;
        if commName.is_null() {
            return err(HcclResult::HCCL_E_PTR, "commName is null");
        }
        let bytes = h.name.as_bytes();
        let n = bytes.len().min(COMM_NAME_MAX_LENGTH - 1);
        // SAFETY: writable for 128 bytes per the contract; n + 1 <= 128.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), commName.cast::<u8>(), n);
            commName.add(n).write(0);
        }
        Ok(())
    })
}

/// `HcclGetCommAsyncError`: always `HCCL_SUCCESS` (no RDMA here) unless injected.
///
/// # Safety
///
/// `asyncError` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn HcclGetCommAsyncError(comm: HcclComm, asyncError: *mut HcclResult) -> HcclResult {
    // SAFETY: forwarded contract.
    unsafe {
        get("HcclGetCommAsyncError", comm, ("asyncError", asyncError), |_| {
            HcclResult::HCCL_SUCCESS
        })
    }
}

/// `HcclGetErrorString`: a static string per code.
#[no_mangle]
pub extern "C" fn HcclGetErrorString(code: HcclResult) -> *const c_char {
    let s: &'static [u8] = match code.0 {
        0 => b"no error\0",
        1 => b"parameter error\0",
        2 => b"empty pointer\0",
        3 => b"memory error\0",
        4 => b"internal error\0",
        5 => b"not support feature\0",
        6 => b"not found specific resource\0",
        7 => b"resource unavailable\0",
        8 => b"call system interface error\0",
        9 => b"timeout\0",
        10 => b"open file fail\0",
        11 => b"tcp connect fail\0",
        12 => b"roce connect fail\0",
        13 => b"tcp transfer fail\0",
        14 => b"roce transfer fail\0",
        15 => b"call runtime api fail\0",
        16 => b"call driver api fail\0",
        17 => b"call profiling api fail\0",
        18 => b"call cce api fail\0",
        19 => b"call network api fail\0",
        20 => b"try again\0",
        21 => b"error cqe\0",
        22 => b"communicator suspending\0",
        23 => b"op retry failed\0",
        24 => b"out of memory\0",
        1041 => b"error information is in the status\0",
        _ => b"unknown error\0",
    };
    s.as_ptr().cast()
}

/// `HcclGetCommConfigCapability`: every capability of config version 11.
#[no_mangle]
pub extern "C" fn HcclGetCommConfigCapability() -> u32 {
    12
}

// --- operators -----------------------------------------------------------------

/// What a collective's arguments are validated against.
struct Args {
    h: Arc<CommHandle>,
    /// Element size of the call's data type.
    es: usize,
}

impl Args {
    /// Checks a device buffer of `count` elements of the call's data type.
    fn buf(&self, name: &str, ptr: *const c_void, count: u64) -> HcclRes<usize> {
        check_buf(name, ptr, count, self.es, &self.h)
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
            check_reduce(dtype, op)?;
            d.op = op;
        }
        let args = Args {
            es: elem_size(dtype)?,
            h,
        };
        fill(&args, &mut d)?;
        enqueue(&args.h, stream, move |c| exec::collective(c, &d))
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

/// The skeleton `HcclSend` and `HcclRecv` share: unless injected, checks the
/// peer rank and the buffer, then enqueues the send (`send`) or receive.
fn point_to_point(
    symbol: &'static str,
    send: bool,
    (buf_name, buf): (&str, *mut c_void),
    count: u64,
    dtype: HcclDataType,
    (rank_name, rank): (&str, u32),
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    call(symbol, || {
        let h = comm_of(comm)?;
        let es = elem_size(dtype)?;
        let peer = check_rank(rank_name, rank, &h)?;
        let addr = check_buf(buf_name, buf, count, es, &h)?;
        let item = Item {
            send,
            peer,
            addr,
            count,
            dtype,
        };
        enqueue(&h, stream, move |c| exec::point_to_point(c, symbol, &[item]))
    })
}

/// `HcclSend`: synchronous; completes when `destRank`'s matching `HcclRecv` copied it.
///
/// # Safety
///
/// `sendBuf` is device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclSend(
    sendBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    destRank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    point_to_point(
        "HcclSend",
        true,
        ("sendBuf", sendBuf),
        count,
        dataType,
        ("destRank", destRank),
        comm,
        stream,
    )
}

/// `HcclRecv`: synchronous; takes the oldest pending send of `srcRank`.
///
/// # Safety
///
/// `recvBuf` is device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclRecv(
    recvBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    srcRank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    point_to_point(
        "HcclRecv",
        false,
        ("recvBuf", recvBuf),
        count,
        dataType,
        ("srcRank", srcRank),
        comm,
        stream,
    )
}

/// `HcclBatchSendRecv`: sends and receives that progress together; at most one
/// send and one receive per peer (else `HCCL_E_PARA`).
///
/// # Safety
///
/// `sendRecvInfo` holds `itemNum` items whose buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclBatchSendRecv(
    sendRecvInfo: *mut HcclSendRecvItem,
    itemNum: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    call("HcclBatchSendRecv", || {
        let h = comm_of(comm)?;
        if itemNum == 0 {
            return err(HcclResult::HCCL_E_PARA, "itemNum is 0");
        }
        if sendRecvInfo.is_null() {
            return err(HcclResult::HCCL_E_PTR, "sendRecvInfo is null");
        }
        // SAFETY: holds `itemNum` items per the contract.
        let raw = unsafe { std::slice::from_raw_parts(sendRecvInfo, itemNum as usize) };
        let mut items: Vec<Item> = Vec::with_capacity(raw.len());
        for (i, it) in raw.iter().enumerate() {
            let es = elem_size(it.dataType)?;
            let peer = check_rank(&format!("items[{i}].remoteRank"), it.remoteRank, &h)?;
            let addr = check_buf(&format!("items[{i}].buf"), it.buf, it.count, es, &h)?;
            let send = match it.sendRecvType {
                HcclSendRecvType::HCCL_SEND => true,
                HcclSendRecvType::HCCL_RECV => false,
                t => {
                    return err(
                        HcclResult::HCCL_E_PARA,
                        format!("items[{i}].sendRecvType {t:?} is not valid"),
                    )
                }
            };
            if items.iter().any(|o| o.send == send && o.peer == peer) {
                return err(
                    HcclResult::HCCL_E_PARA,
                    format!(
                        "items[{i}]: a second {} with rank {peer} in one call (at most one send and one receive per peer)",
                        if send { "send" } else { "receive" }
                    ),
                );
            }
            items.push(Item {
                send,
                peer,
                addr,
                count: it.count,
                dtype: it.dataType,
            });
        }
        enqueue(&h, stream, move |c| {
            exec::point_to_point(c, "HcclBatchSendRecv", &items)
        })
    })
}
