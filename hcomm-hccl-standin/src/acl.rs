//! Exported ACL runtime symbols: devices, memory and streams.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hcomm_sys::{aclError, aclrtContext, aclrtMemMallocPolicy, aclrtMemcpyKind, aclrtStream};

use crate::inject::injected;
use crate::memory;
use crate::runtime::{current_device, device_count, recent_ptr, set_current_device, set_recent, Registry};
use crate::stream::Stream;

pub(crate) static STREAMS: Registry<Stream> = Registry::new();
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// `ACL_ERROR_RT_CONTEXT_NULL`: no device bound to the calling thread.
const ACL_ERROR_RT_CONTEXT_NULL: aclError = aclError(107_002);

fn fail(code: aclError, message: &str) -> aclError {
    set_recent(message);
    code
}

macro_rules! inject {
    ($symbol:literal) => {
        if let Some(code) = injected($symbol) {
            return fail(aclError(code), concat!($symbol, ": injected failure"));
        }
    };
}

/// `aclInit`.
///
/// # Safety
///
/// `configPath` is null or a NUL-terminated string (it is not read).
#[no_mangle]
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    let _ = configPath;
    inject!("aclInit");
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return fail(aclError::ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialised");
    }
    aclError::ACL_SUCCESS
}

/// `aclFinalize`.
#[no_mangle]
pub extern "C" fn aclFinalize() -> aclError {
    inject!("aclFinalize");
    if !INITIALIZED.swap(false, Ordering::SeqCst) {
        return fail(aclError::ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialised");
    }
    aclError::ACL_SUCCESS
}

/// `aclrtSetDevice`: binds `deviceId` to the calling thread.
#[no_mangle]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    inject!("aclrtSetDevice");
    if !(0..device_count()).contains(&deviceId) {
        return fail(
            aclError::ACL_ERROR_INVALID_DEVICE,
            &format!(
                "aclrtSetDevice: device {deviceId} does not exist ({} devices)",
                device_count()
            ),
        );
    }
    set_current_device(Some(deviceId));
    aclError::ACL_SUCCESS
}

/// `aclrtResetDevice`.
#[no_mangle]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    inject!("aclrtResetDevice");
    if !(0..device_count()).contains(&deviceId) {
        return fail(
            aclError::ACL_ERROR_INVALID_DEVICE,
            &format!("aclrtResetDevice: device {deviceId} does not exist"),
        );
    }
    if current_device() == Some(deviceId) {
        set_current_device(None);
    }
    aclError::ACL_SUCCESS
}

/// `aclrtGetDevice`.
///
/// # Safety
///
/// `deviceId` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    inject!("aclrtGetDevice");
    if deviceId.is_null() {
        return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is null");
    }
    let Some(d) = current_device() else {
        return fail(
            ACL_ERROR_RT_CONTEXT_NULL,
            "aclrtGetDevice: no device set on this thread",
        );
    };
    // SAFETY: non-null and writable per the contract.
    unsafe { deviceId.write(d) };
    aclError::ACL_SUCCESS
}

/// `aclrtGetDeviceCount`.
///
/// # Safety
///
/// `count` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    inject!("aclrtGetDeviceCount");
    if count.is_null() {
        return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is null");
    }
    // SAFETY: non-null and writable per the contract.
    unsafe { count.write(device_count() as u32) };
    aclError::ACL_SUCCESS
}

/// `aclrtGetCurrentContext`: the context is the thread's device (as an opaque handle).
///
/// # Safety
///
/// `context` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    inject!("aclrtGetCurrentContext");
    if context.is_null() {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtGetCurrentContext: context is null",
        );
    }
    let Some(d) = current_device() else {
        return fail(
            ACL_ERROR_RT_CONTEXT_NULL,
            "aclrtGetCurrentContext: no device set on this thread",
        );
    };
    // SAFETY: non-null and writable per the contract.
    unsafe { context.write((d as usize + 1) as aclrtContext) };
    aclError::ACL_SUCCESS
}

/// `aclrtSetCurrentContext`: binds the context's device to the calling thread.
#[no_mangle]
pub extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    inject!("aclrtSetCurrentContext");
    let d = (context as usize).wrapping_sub(1);
    match i32::try_from(d) {
        Ok(d) if (0..device_count()).contains(&d) => {
            set_current_device(Some(d));
            aclError::ACL_SUCCESS
        }
        _ => fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtSetCurrentContext: not a context",
        ),
    }
}

/// `aclrtCreateStream`: a stream on the thread's device.
///
/// # Safety
///
/// `stream` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    inject!("aclrtCreateStream");
    if stream.is_null() {
        return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
    }
    let Some(device) = current_device() else {
        return fail(
            ACL_ERROR_RT_CONTEXT_NULL,
            "aclrtCreateStream: no device set on this thread; call aclrtSetDevice first",
        );
    };
    let Some(s) = Stream::new(device) else {
        return fail(
            aclError::ACL_ERROR_RT_FAILURE,
            "aclrtCreateStream: cannot spawn the stream thread",
        );
    };
    // SAFETY: non-null and writable per the contract.
    unsafe { stream.write(STREAMS.insert(s)) };
    aclError::ACL_SUCCESS
}

/// `aclrtDestroyStream`: drains the queue, then destroys the stream.
#[no_mangle]
pub extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    inject!("aclrtDestroyStream");
    let Some(s) = STREAMS.remove(stream) else {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtDestroyStream: not a live stream",
        );
    };
    s.close();
    aclError::ACL_SUCCESS
}

fn synchronize(symbol: &str, stream: aclrtStream, timeout: Option<Duration>) -> aclError {
    if stream.is_null() {
        // The default stream: nothing is ever enqueued on it here.
        return aclError::ACL_SUCCESS;
    }
    let Some(s): Option<Arc<Stream>> = STREAMS.get(stream) else {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            &format!("{symbol}: not a live stream"),
        );
    };
    match s.synchronize(timeout) {
        Ok(()) => aclError::ACL_SUCCESS,
        Err(None) => {
            SYNC_TIMEOUTS.fetch_add(1, Ordering::Relaxed);
            fail(
                aclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                &format!("{symbol}: stream not drained within {:?}", timeout.unwrap_or_default()),
            )
        }
        Err(Some(e)) => fail(e.code, &e.message),
    }
}

/// `aclrtSynchronizeStream`: waits for the stream; returns the first error since
/// the last synchronisation.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    inject!("aclrtSynchronizeStream");
    synchronize("aclrtSynchronizeStream", stream, None)
}

/// `aclrtSynchronizeStreamWithTimeout`: `timeout` in ms, -1 forever.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError {
    inject!("aclrtSynchronizeStreamWithTimeout");
    let limit = match timeout {
        -1 => None,
        t if t >= 0 => Some(Duration::from_millis(t as u64)),
        _ => {
            return fail(
                aclError::ACL_ERROR_INVALID_PARAM,
                "aclrtSynchronizeStreamWithTimeout: timeout < -1",
            )
        }
    };
    synchronize("aclrtSynchronizeStreamWithTimeout", stream, limit)
}

/// Synchronisations that timed out (each one an ERROR in the real runtime's
/// log, and a stale `aclGetRecentErrMsg`): what a quiet waiter avoids.
static SYNC_TIMEOUTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many `aclrtSynchronizeStreamWithTimeout` calls timed out in this
/// process (a stand-in extra, for tests).
#[no_mangle]
pub extern "C" fn hcomm_standin_sync_timeouts() -> u64 {
    SYNC_TIMEOUTS.load(Ordering::Relaxed)
}

/// `aclrtStreamQuery`: `*status` 0 (complete) or 1 (not ready), no wait, no
/// log, errors kept for the next synchronisation.
///
/// # Safety
///
/// `status` null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamQuery(stream: aclrtStream, status: *mut std::ffi::c_int) -> aclError {
    inject!("aclrtStreamQuery");
    if status.is_null() {
        return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is null");
    }
    let idle = if stream.is_null() {
        true
    } else {
        let Some(s): Option<Arc<Stream>> = STREAMS.get(stream) else {
            return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: not a live stream");
        };
        s.idle()
    };
    // SAFETY: non-null, valid for a write per the contract.
    unsafe { *status = std::ffi::c_int::from(!idle) };
    aclError::ACL_SUCCESS
}

/// `aclrtMalloc`: registered host memory on the thread's device.
///
/// # Safety
///
/// `devPtr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(devPtr: *mut *mut c_void, size: usize, policy: aclrtMemMallocPolicy) -> aclError {
    let _ = policy;
    inject!("aclrtMalloc");
    if devPtr.is_null() || size == 0 {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtMalloc: devPtr is null or size is 0",
        );
    }
    let Some(device) = current_device() else {
        return fail(
            ACL_ERROR_RT_CONTEXT_NULL,
            "aclrtMalloc: no device set on this thread; call aclrtSetDevice first",
        );
    };
    let Some(p) = memory::alloc(size, device) else {
        return fail(
            aclError::ACL_ERROR_BAD_ALLOC,
            &format!("aclrtMalloc: cannot allocate {size} bytes"),
        );
    };
    // SAFETY: non-null and writable per the contract.
    unsafe { devPtr.write(p.cast()) };
    aclError::ACL_SUCCESS
}

/// `aclrtFree`.
#[no_mangle]
pub extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
    inject!("aclrtFree");
    if memory::free(devPtr.cast()) {
        aclError::ACL_SUCCESS
    } else {
        fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtFree: not a live aclrtMalloc allocation",
        )
    }
}

/// `aclrtMemcpy`: checks `count <= destMax` and that device sides are registered.
///
/// # Safety
///
/// Host-side pointers are valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: aclrtMemcpyKind,
) -> aclError {
    inject!("aclrtMemcpy");
    if count == 0 {
        return aclError::ACL_SUCCESS;
    }
    if dst.is_null() || src.is_null() {
        return fail(aclError::ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: null pointer");
    }
    if count > destMax {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            &format!("aclrtMemcpy: count {count} > destMax {destMax}"),
        );
    }
    let dst_dev = memory::find(dst.cast(), count).is_some();
    let src_dev = memory::find(src.cast(), count).is_some();
    let (want_dst, want_src) = match kind {
        aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_HOST => (false, false),
        aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE => (true, false),
        aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST => (false, true),
        aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_DEVICE => (true, true),
        aclrtMemcpyKind::ACL_MEMCPY_DEFAULT => (dst_dev, src_dev),
        _ => {
            return fail(
                aclError::ACL_ERROR_INVALID_PARAM,
                &format!("aclrtMemcpy: unsupported kind {kind:?}"),
            )
        }
    };
    if (want_dst && !dst_dev) || (want_src && !src_dev) {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            &format!("aclrtMemcpy: {kind:?} needs device memory (a live aclrtMalloc range of {count} bytes) on the device side"),
        );
    }
    // SAFETY: device sides are registered ranges of `count` bytes; host sides are
    // valid for `count` bytes per the contract. `copy` tolerates overlap.
    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), count) };
    aclError::ACL_SUCCESS
}

/// `aclrtMemset` on device memory.
#[no_mangle]
pub extern "C" fn aclrtMemset(devPtr: *mut c_void, maxCount: usize, value: i32, count: usize) -> aclError {
    inject!("aclrtMemset");
    if count > maxCount || memory::find(devPtr.cast(), count).is_none() {
        return fail(
            aclError::ACL_ERROR_INVALID_PARAM,
            "aclrtMemset: count > maxCount or not device memory",
        );
    }
    // SAFETY: `[devPtr, devPtr + count)` is a registered allocation.
    unsafe { std::ptr::write_bytes(devPtr.cast::<u8>(), value as u8, count) };
    aclError::ACL_SUCCESS
}

/// `aclrtGetSocName`: the chip the stand-in plays, `HCOMM_STANDIN_SOC`
/// (default `Ascend910B1`, an Atlas A2 chip: HCCL's strictest rules).
#[no_mangle]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    static NAME: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let name = std::env::var("HCOMM_STANDIN_SOC").unwrap_or_else(|_| "Ascend910B1".into());
        std::ffi::CString::new(name).unwrap_or_default()
    })
    .as_ptr()
}

/// The chip whose rules the stand-in enforces (see [`aclrtGetSocName`]).
pub(crate) fn chip() -> Option<hcomm_sys::HcclChip> {
    // SAFETY: a static NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(aclrtGetSocName()) };
    hcomm_sys::HcclChip::from_soc_name(&name.to_string_lossy())
}

/// `aclGetRecentErrMsg`: the calling thread's last error message.
#[no_mangle]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    recent_ptr()
}
