//! Communicator management: root info, initialisation, sub-communicators,
//! destruction and queries.

use std::ffi::c_char;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hcomm_sys::{
    HcclComm, HcclCommConfig, HcclResult, HcclRootInfo, COMM_NAME_MAX_LENGTH, HCCL_COMM_CONFIG_MAGIC_WORD,
    HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET,
};

use super::{call, comm_of, err, new_comm, HcclRes, COMMS};
use crate::hub;
use crate::link::{JoinError, Link, Remote, Who};
use crate::runtime::{connect_timeout, current_device, default_exec_timeout};
use crate::world::{fresh_id, join_world, CommHandle, Group, World};

/// What a root info of this stand-in starts with.
const ROOT_MAGIC: &[u8; 16] = b"hcomm-standin-v1";

/// `HcclGetRootInfo`: a fresh process-unique world, served to other
/// processes by this one's hub (`remote`): the root info carries the hub's
/// loopback port.
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
        let hub = hub::hub().or_else(|m| err(HcclResult::HCCL_E_TCP_CONNECT, m))?;
        let mut info = HcclRootInfo::zeroed();
        info.internal[..16].copy_from_slice(ROOT_MAGIC);
        info.internal[16..24].copy_from_slice(&fresh_id().to_le_bytes());
        info.internal[24..28].copy_from_slice(&std::process::id().to_le_bytes());
        info.internal[28..30].copy_from_slice(&hub.port().to_le_bytes());
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
    if &info.internal[..16] != ROOT_MAGIC {
        return err(HcclResult::HCCL_E_PARA, "rootInfo was not produced by HcclGetRootInfo");
    }
    let local = info.internal[24..28] == std::process::id().to_le_bytes();
    let hub = SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        u16::from_le_bytes([info.internal[28], info.internal[29]]),
    );
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
    let join_failed = |e| match e {
        JoinError::Para(m) => (HcclResult::HCCL_E_PARA, m),
        JoinError::Timeout(m) => (HcclResult::HCCL_E_TIMEOUT, m),
    };
    let name = name.unwrap_or_else(|| format!("standin_world_{world}"));
    let (joined, remote) = if local {
        (
            join_world(world, nRanks, rank, connect_timeout()).map_err(join_failed)?,
            None,
        )
    } else {
        let link = Link::new(hub);
        let group = link.join(world, nRanks, rank, connect_timeout()).map_err(join_failed)?;
        let who = Who::new(group, rank as usize, device, timeout);
        (World::new(nRanks as usize), Some(Remote { link, who }))
    };
    let member = (Arc::clone(&joined.group), rank as usize);
    let h = new_comm((joined, rank as usize), member, device, timeout, name, remote);
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
            let h = new_comm(
                (Arc::clone(&world), i),
                member,
                d,
                timeout,
                format!("standin_all_{id}"),
                None,
            );
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
        let (group, remote) = match &parent.remote {
            None => (parent.world.sub(parent.world_rank, subCommId, &ids), None),
            Some(r) => {
                let group = r
                    .link
                    .sub(r.who.group, parent.world_rank, subCommId, &ids)
                    .or_else(|m| err(HcclResult::HCCL_E_TCP_TRANSFER, m))?;
                let link = Arc::clone(&r.link);
                let who = Who::new(group, subCommRankId as usize, parent.device, timeout);
                (Group::new(ids.len(), true), Some(Remote { link, who }))
            }
        };
        let member = (group, subCommRankId as usize);
        let name = name.unwrap_or_else(|| format!("{}_sub_{subCommId}", parent.name));
        let world = (Arc::clone(&parent.world), parent.world_rank);
        let h = new_comm(world, member, parent.device, timeout, name, remote);
        // SAFETY: non-null and writable.
        unsafe { subComm.write(h) };
        Ok(())
    })
}

/// `HcclCommDestroy`. Operations of this stand-in are never mid-transfer:
/// in flight means waiting for peers, HCCL's link setup, where a destroy
/// (from any thread) makes them fail at once: HCCL's way to abort. A rank
/// of another process's world is in use while its operations run at the
/// hub: `HCCL_E_AGAIN` then, as HCCL answers for a communicator in use.
#[no_mangle]
pub extern "C" fn HcclCommDestroy(comm: HcclComm) -> HcclResult {
    call("HcclCommDestroy", || {
        let h = comm_of(comm)?;
        if h.in_flight.load(Ordering::SeqCst) > 0 {
            if h.remote.is_some() {
                return err(
                    HcclResult::HCCL_E_AGAIN,
                    "operations are still in flight; synchronise the stream first",
                );
            }
            h.group.rendezvous.stop(h.rank);
            h.group.mailbox.stop(h.rank);
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
