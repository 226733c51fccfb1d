//! The ACL runtime function table (`libascendcl.so`, then `libacl_rt.so`).
//!
//! Signatures: the ACL runtime headers (`acl/acl_rt.h`).

use std::ffi::{c_char, c_int, c_void};

use crate::codes::{aclError, aclrtMemMallocPolicy, aclrtMemcpyKind, AclError};
use crate::load::api_table;
use crate::types::{aclrtContext, aclrtStream};

api_table! {
    /// Function table of the ACL runtime. Calling an entry is `unsafe`: the caller
    /// upholds the C contract and keeps the table alive during the call.
    pub struct AclApi: crate::load::ACL, ACL_API;
    required {
        /// Initialises ACL once per process (`configPath` may be null).
        fn aclInit(configPath: *const c_char) -> aclError;
        /// Finalises ACL.
        fn aclFinalize() -> aclError;
        /// Binds a device to the calling thread.
        fn aclrtSetDevice(deviceId: i32) -> aclError;
        /// Releases a device's resources.
        fn aclrtResetDevice(deviceId: i32) -> aclError;
        /// The calling thread's device.
        fn aclrtGetDevice(deviceId: *mut i32) -> aclError;
        /// Number of devices.
        fn aclrtGetDeviceCount(count: *mut u32) -> aclError;
        /// Creates a stream.
        fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError;
        /// Destroys a stream.
        fn aclrtDestroyStream(stream: aclrtStream) -> aclError;
        /// Blocks until everything enqueued on `stream` finished.
        fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError;
        /// Allocates device memory.
        fn aclrtMalloc(devPtr: *mut *mut c_void, size: usize, policy: aclrtMemMallocPolicy) -> aclError;
        /// Frees device memory.
        fn aclrtFree(devPtr: *mut c_void) -> aclError;
        /// Synchronous copy of `count` bytes; `destMax` is the capacity of `dst`.
        fn aclrtMemcpy(dst: *mut c_void, destMax: usize, src: *const c_void, count: usize, kind: aclrtMemcpyKind) -> aclError;
        /// Sets `count` bytes to `value`; `maxCount` is the capacity.
        fn aclrtMemset(devPtr: *mut c_void, maxCount: usize, value: i32, count: usize) -> aclError;
    }
    optional {
        /// Like `aclrtSynchronizeStream` with a timeout in ms (-1 forever);
        /// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` on timeout.
        fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError;
        /// Most recent error message of the calling thread.
        fn aclGetRecentErrMsg() -> *const c_char;
        /// The calling thread's context.
        fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError;
        /// Sets the calling thread's context.
        fn aclrtSetCurrentContext(context: aclrtContext) -> aclError;
        /// Whether the stream drained, without waiting and without logging:
        /// `*status` becomes [`ACL_STREAM_STATUS_COMPLETE`] or
        /// [`ACL_STREAM_STATUS_NOT_READY`] (`aclrtStreamStatus`).
        fn aclrtStreamQuery(stream: aclrtStream, status: *mut c_int) -> aclError;
        /// The chip's name (`"Ascend910B1"`), null before `aclInit`.
        fn aclrtGetSocName() -> *const c_char;
    }
}

/// `aclrtStreamStatus::ACL_STREAM_STATUS_COMPLETE`: every task of the stream ran.
pub const ACL_STREAM_STATUS_COMPLETE: c_int = 0;
/// `aclrtStreamStatus::ACL_STREAM_STATUS_NOT_READY`: tasks are pending.
pub const ACL_STREAM_STATUS_NOT_READY: c_int = 1;

impl AclApi {
    #[allow(clippy::unused_self)]
    fn on_load(&self) {}

    /// `aclGetRecentErrMsg()` copied into a `String`; `None` if unavailable or empty.
    #[doc(alias = "aclGetRecentErrMsg")]
    pub fn recent_error_message(&self) -> Option<String> {
        let f = self.aclGetRecentErrMsg?;
        // SAFETY: aclGetRecentErrMsg has no arguments and returns null or a
        // NUL-terminated thread-local string, copied before any other ACL call.
        let msg = unsafe { crate::codes::c_string(f()) }?;
        (!msg.is_empty()).then_some(msg)
    }

    /// `aclrtGetSocName()`: the chip's name (`"Ascend910B1"`); `None` where
    /// the runtime lacks the symbol or has no name yet.
    #[doc(alias = "aclrtGetSocName")]
    pub fn soc_name(&self) -> Option<String> {
        let f = self.aclrtGetSocName?;
        // SAFETY: no arguments; returns null or a static NUL-terminated string.
        let name = unsafe { crate::codes::c_string(f()) }?;
        (!name.is_empty()).then_some(name)
    }

    /// Maps a return code to `Result`; on failure records `aclGetRecentErrMsg()` so
    /// the error's `Display` includes it. Call it right after the failing call, on
    /// the same thread.
    pub fn check(&self, code: aclError) -> Result<(), AclError> {
        let result = code.result();
        if let Err(err) = result {
            if let Some(msg) = self.recent_error_message() {
                err.record(msg);
            }
        }
        result
    }
}
