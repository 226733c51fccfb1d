//! C enums as integer newtypes, and the safe error enums they map to.
//!
//! Every value a C library writes is read as a plain integer first
//! (`#[repr(transparent)]` newtypes with associated constants), so a newer
//! library returning a value this crate does not know is never undefined
//! behaviour; `Debug` prints the C name of known values and the number of
//! unknown ones. The `result()` helpers turn a return code into
//! `Result<(), XxxError>`; the error enums keep unknown codes in `Unknown(i32)`.
//!
//! The `Display` of an error includes the library's own message when one is
//! known: [`HcclError`], [`NcclError`] and [`CudaError`] messages are copied
//! from `HcclGetErrorString` / `ncclGetErrorString` / `cudaGetErrorString`
//! when a function table is loaded, [`AclError`] messages from
//! `aclGetRecentErrMsg` when [`AclApi::check`](crate::AclApi::check) sees a
//! failure. The copies live in a process-wide cache, so formatting an error
//! never calls into (or loads) a library.

#![allow(non_camel_case_types, non_upper_case_globals)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

/// Declares a C enum once, as data: each value with its C name and meaning.
///
/// Plain form: a `#[repr(transparent)]` integer newtype with one associated
/// constant per value, `name()` and a `Debug` naming known values.
///
/// Result-code form: the success value in the struct, then every failure value
/// with the variant and description of its safe error enum. It declares the
/// newtype as above (plus a private `ALL`: every value, success first), the error
/// enum (`Unknown(i32)` keeping codes this crate does not know) with `from_code`,
/// `code`, `description`, `library_message`, `Debug`, `Display` and `Error`,
/// and `result()` / `is_success()` on the code.
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        pub struct $name:ident($repr:ty) {
            $(#[$smeta:meta])* $success:ident = $svalue:expr,
        }
        $(#[$emeta:meta])*
        pub enum $error:ident($lib:ident) {
            $( $(#[$cmeta:meta])* $konst:ident = $value:expr => $variant:ident: $desc:literal, )*
        }
    ) => {
        c_enum! {
            $(#[$meta])*
            pub struct $name($repr) {
                $(#[$smeta])* $success = $svalue,
                $( $(#[$cmeta])* $konst = $value, )*
            }
        }

        impl $name {
            /// Every value this crate knows, success first.
            #[allow(dead_code)]
            pub(crate) const ALL: [Self; 1 + [$(stringify!($konst)),*].len()] =
                [Self::$success, $(Self::$konst),*];

            /// `Ok(())` for success, otherwise the error this code stands for.
            pub fn result(self) -> Result<(), $error> {
                $error::from_code(self).map_or(Ok(()), Err)
            }

            /// Whether this is the success code.
            pub fn is_success(self) -> bool {
                self == Self::$success
            }
        }

        $(#[$emeta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $error {
            $( #[doc = concat!("`", stringify!($konst), "`.")] $variant, )*
            /// A code this crate does not know (newer library); the raw value.
            Unknown(i32),
        }

        impl $error {
            /// Maps a failure code to the error; `None` for the success code.
            pub fn from_code(code: $name) -> Option<Self> {
                if code == $name::$success {
                    return None;
                }
                $( if code == $name::$konst { return Some(Self::$variant); } )*
                Some(Self::Unknown(code.0))
            }

            /// The raw code, as the library returned it.
            pub fn code(self) -> $name {
                match self {
                    $( Self::$variant => $name::$konst, )*
                    Self::Unknown(raw) => $name(raw),
                }
            }

            /// A short English description of the code.
            pub fn description(self) -> &'static str {
                match self {
                    $( Self::$variant => $desc, )*
                    Self::Unknown(_) => "unknown error code",
                }
            }

            /// The library's own message for this code, if one has been recorded.
            pub fn library_message(self) -> Option<String> {
                library_message(Lib::$lib, self.code().0)
            }
        }

        impl fmt::Debug for $error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $( Self::$variant => f.write_str(stringify!($variant)), )*
                    Self::Unknown(raw) => write!(f, "Unknown({raw})"),
                }
            }
        }

        impl fmt::Display for $error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let code = self.code();
                write!(f, "{} ({:?}, code {})", self.description(), code, code.0)?;
                match self.library_message() {
                    Some(msg) if !msg.is_empty() => write!(f, ": {msg}"),
                    _ => Ok(()),
                }
            }
        }

        impl std::error::Error for $error {}

        impl From<$error> for $name {
            fn from(err: $error) -> $name {
                err.code()
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident($repr:ty) {
            $( $(#[$cmeta:meta])* $konst:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[must_use]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $repr);

        #[allow(non_upper_case_globals)]
        impl $name {
            $( $(#[$cmeta])* pub const $konst: Self = Self($value); )*

            /// Every value this crate declares, with its C name, in declaration
            /// order (what an ABI probe compares against the C header).
            pub const NAMED: &'static [(&'static str, Self)] = &[$((stringify!($konst), Self::$konst)),*];

            /// The C name of this value, or `None` for a value this crate does not know.
            pub fn name(self) -> Option<&'static str> {
                // The first name wins where C gives one value two names (aliases).
                $( if self.0 == $value { return Some(stringify!($konst)); } )*
                None
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        impl From<$name> for $repr {
            fn from(value: $name) -> $repr {
                value.0
            }
        }
    };
}

// ---------------------------------------------------------------------------
// Library message cache
// ---------------------------------------------------------------------------

/// Which library a cached message belongs to.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Lib {
    Hccl,
    Acl,
    Nccl,
    Cuda,
}

static MESSAGES: Mutex<BTreeMap<(Lib, i32), String>> = Mutex::new(BTreeMap::new());

/// Records the library's message for `code` (last one wins).
pub(crate) fn record_message(lib: Lib, code: i32, message: String) {
    let mut map = MESSAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    map.insert((lib, code), message);
}

/// Records the library's message of each of `codes` that `message` returns one for
/// (what a function table does once loaded).
pub(crate) fn record_messages<C: Copy + Into<i32>>(lib: Lib, codes: &[C], message: impl Fn(C) -> Option<String>) {
    for &code in codes {
        if let Some(msg) = message(code) {
            record_message(lib, code.into(), msg);
        }
    }
}

fn library_message(lib: Lib, code: i32) -> Option<String> {
    let map = MESSAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    map.get(&(lib, code)).cloned()
}

/// Copies a C string returned by a library into an owned `String`.
///
/// # Safety
///
/// `ptr` is null or points to a NUL-terminated string valid for the call.
pub(crate) unsafe fn c_string(ptr: *const std::ffi::c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per this function's contract.
    let s = unsafe { std::ffi::CStr::from_ptr(ptr) };
    Some(s.to_string_lossy().into_owned())
}

// ---------------------------------------------------------------------------
// HCCL
// ---------------------------------------------------------------------------

c_enum! {
    /// `HcclResult`: return code of every HCCL function.
    pub struct HcclResult(i32) {
        /// Success.
        HCCL_SUCCESS = 0,
    }
    /// A failed [`HcclResult`].
    pub enum HcclError(Hccl) {
        /// Parameter error.
        HCCL_E_PARA = 1 => Para: "hccl parameter error",
        /// Null pointer.
        HCCL_E_PTR = 2 => Ptr: "hccl null pointer",
        /// Memory error.
        HCCL_E_MEMORY = 3 => Memory: "hccl memory error",
        /// Internal error.
        HCCL_E_INTERNAL = 4 => Internal: "hccl internal error",
        /// Feature not supported.
        HCCL_E_NOT_SUPPORT = 5 => NotSupport: "hccl feature not supported",
        /// Resource not found.
        HCCL_E_NOT_FOUND = 6 => NotFound: "hccl resource not found",
        /// Resource unavailable.
        HCCL_E_UNAVAIL = 7 => Unavail: "hccl resource unavailable",
        /// System call failed.
        HCCL_E_SYSCALL = 8 => Syscall: "hccl system call failed",
        /// Timeout.
        HCCL_E_TIMEOUT = 9 => Timeout: "hccl timeout",
        /// Opening a file failed.
        HCCL_E_OPEN_FILE_FAILURE = 10 => OpenFileFailure: "hccl failed to open a file",
        /// TCP connect failed.
        HCCL_E_TCP_CONNECT = 11 => TcpConnect: "hccl tcp connect failed",
        /// RoCE connect failed.
        HCCL_E_ROCE_CONNECT = 12 => RoceConnect: "hccl roce connect failed",
        /// TCP transfer failed.
        HCCL_E_TCP_TRANSFER = 13 => TcpTransfer: "hccl tcp transfer failed",
        /// RoCE transfer failed.
        HCCL_E_ROCE_TRANSFER = 14 => RoceTransfer: "hccl roce transfer failed",
        /// Runtime (ACL/rts) call failed.
        HCCL_E_RUNTIME = 15 => Runtime: "hccl runtime call failed",
        /// Driver call failed.
        HCCL_E_DRV = 16 => Drv: "hccl driver call failed",
        /// Profiling call failed.
        HCCL_E_PROFILING = 17 => Profiling: "hccl profiling call failed",
        /// CCE call failed.
        HCCL_E_CCE = 18 => Cce: "hccl cce call failed",
        /// Network call failed.
        HCCL_E_NETWORK = 19 => Network: "hccl network call failed",
        /// Try again (e.g. destroying a busy communicator).
        HCCL_E_AGAIN = 20 => Again: "hccl resource busy, try again",
        /// RDMA error completion (what `HcclGetCommAsyncError` reports).
        HCCL_E_REMOTE = 21 => Remote: "hccl remote (rdma completion) error",
        /// Communicator suspending.
        HCCL_E_SUSPENDING = 22 => Suspending: "hccl communicator suspending",
        /// Operation retry failed.
        HCCL_E_OPRETRY_FAIL = 23 => OpRetryFail: "hccl operation retry failed",
        /// Out of memory.
        HCCL_E_OOM = 24 => Oom: "hccl out of memory",
        /// The error information is in the status.
        HCCL_E_IN_STATUS = 1041 => InStatus: "hccl error information is in the status",
    }
}

impl HcclResult {
    /// Every code this crate knows, success included.
    pub const KNOWN: [Self; 26] = Self::ALL;
}

c_enum! {
    /// `HcclDataType`.
    pub struct HcclDataType(i32) {
        /// `int8_t`.
        HCCL_DATA_TYPE_INT8 = 0,
        /// `int16_t`.
        HCCL_DATA_TYPE_INT16 = 1,
        /// `int32_t`.
        HCCL_DATA_TYPE_INT32 = 2,
        /// IEEE half.
        HCCL_DATA_TYPE_FP16 = 3,
        /// `float`.
        HCCL_DATA_TYPE_FP32 = 4,
        /// `int64_t`.
        HCCL_DATA_TYPE_INT64 = 5,
        /// `uint64_t`.
        HCCL_DATA_TYPE_UINT64 = 6,
        /// `uint8_t`.
        HCCL_DATA_TYPE_UINT8 = 7,
        /// `uint16_t`.
        HCCL_DATA_TYPE_UINT16 = 8,
        /// `uint32_t`.
        HCCL_DATA_TYPE_UINT32 = 9,
        /// `double`.
        HCCL_DATA_TYPE_FP64 = 10,
        /// bfloat16.
        HCCL_DATA_TYPE_BFP16 = 11,
        /// 128-bit integer.
        HCCL_DATA_TYPE_INT128 = 12,
        /// `HiFloat8` (Ascend 950 only).
        HCCL_DATA_TYPE_HIF8 = 14,
        /// fp8 e4m3 (Ascend 950 only).
        HCCL_DATA_TYPE_FP8E4M3 = 15,
        /// fp8 e5m2 (Ascend 950 only).
        HCCL_DATA_TYPE_FP8E5M2 = 16,
        /// fp8 e8m0 (Ascend 950 only).
        HCCL_DATA_TYPE_FP8E8M0 = 17,
        /// Sentinel.
        HCCL_DATA_TYPE_RESERVED = 255,
    }
}

impl HcclDataType {
    /// Size of one element in bytes, `None` for an unknown or reserved type.
    pub fn size(self) -> Option<usize> {
        Some(match self.0 {
            0 | 7 | 14..=17 => 1,
            1 | 3 | 8 | 11 => 2,
            2 | 4 | 9 => 4,
            5 | 6 | 10 => 8,
            12 => 16,
            _ => return None,
        })
    }
}

c_enum! {
    /// `HcclReduceOp`. There is no average.
    pub struct HcclReduceOp(i32) {
        /// Sum.
        HCCL_REDUCE_SUM = 0,
        /// Product.
        HCCL_REDUCE_PROD = 1,
        /// Maximum.
        HCCL_REDUCE_MAX = 2,
        /// Minimum.
        HCCL_REDUCE_MIN = 3,
        /// Sentinel.
        HCCL_REDUCE_RESERVED = 255,
    }
}

c_enum! {
    /// `HcclSendRecvType`, the kind of one [`HcclSendRecvItem`](crate::HcclSendRecvItem).
    pub struct HcclSendRecvType(i32) {
        /// A send.
        HCCL_SEND = 0,
        /// A receive.
        HCCL_RECV = 1,
    }
}

c_enum! {
    /// `HcclCommConfigCapability`: a capability `v` is supported iff
    /// `HcclGetCommConfigCapability() > v`.
    pub struct HcclCommConfigCapability(u32) {
        /// `hcclBufferSize`.
        HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
        /// `hcclDeterministic`.
        HCCL_COMM_CONFIG_DETERMINISTIC = 1,
        /// `hcclCommName`.
        HCCL_COMM_CONFIG_COMM_NAME = 2,
        /// `hcclOpExpansionMode`.
        HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
        /// Initialisation by environment.
        HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
        /// `hcclWorldRankID`.
        HCCL_COMM_CONFIG_WORLD_RANKID = 5,
        /// `hcclJobID`.
        HCCL_COMM_CONFIG_JOBID = 6,
        /// `aclGraphZeroCopyEnable`.
        HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
        /// `hcclExecTimeOut`.
        HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
        /// `hcclAlgo`.
        HCCL_COMM_CONFIG_ALGO = 9,
        /// `hcclRetryEnable` / `hcclRetryParams`.
        HCCL_COMM_CONFIG_RETRY = 10,
        /// `hcclBufferName`.
        HCCL_COMM_CONFIG_BUFFER_NAME = 11,
    }
}

// ---------------------------------------------------------------------------
// ACL runtime
// ---------------------------------------------------------------------------

c_enum! {
    /// `aclError`: return code of the ACL runtime (selected codes).
    pub struct aclError(i32) {
        /// Success (`ACL_ERROR_NONE`).
        ACL_SUCCESS = 0,
    }
    /// A failed [`aclError`].
    pub enum AclError(Acl) {
        /// Invalid parameter.
        ACL_ERROR_INVALID_PARAM = 100_000 => InvalidParam: "acl invalid parameter",
        /// `aclInit` was not called.
        ACL_ERROR_UNINITIALIZE = 100_001 => Uninitialize: "acl not initialised",
        /// `aclInit` called twice.
        ACL_ERROR_REPEAT_INITIALIZE = 100_002 => RepeatInitialize: "acl initialised twice",
        /// `aclFinalize` called twice.
        ACL_ERROR_REPEAT_FINALIZE = 100_037 => RepeatFinalize: "acl finalised twice",
        /// Allocation failed.
        ACL_ERROR_BAD_ALLOC = 200_000 => BadAlloc: "acl allocation failed",
        /// API not supported.
        ACL_ERROR_API_NOT_SUPPORT = 200_001 => ApiNotSupport: "acl api not supported",
        /// Invalid device.
        ACL_ERROR_INVALID_DEVICE = 200_002 => InvalidDevice: "acl invalid device",
        /// Internal error.
        ACL_ERROR_INTERNAL_ERROR = 500_000 => InternalError: "acl internal error",
        /// Generic failure.
        ACL_ERROR_FAILURE = 500_001 => Failure: "acl failure",
        /// Runtime failure.
        ACL_ERROR_RT_FAILURE = 500_003 => RtFailure: "acl runtime failure",
        /// Device task timed out.
        ACL_ERROR_RT_TASK_TIMEOUT = 107_020 => RtTaskTimeout: "acl device task timed out",
        /// Device task aborted.
        ACL_ERROR_RT_DEVICE_TASK_ABORT = 107_022 => RtDeviceTaskAbort: "acl device task aborted",
        /// Stream synchronisation timed out.
        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507_046 => RtStreamSyncTimeout: "acl stream synchronisation timed out",
        /// Communication op retry failed.
        ACL_ERROR_RT_COMM_OP_RETRY_FAIL = 507_904 => RtCommOpRetryFail: "acl communication op retry failed",
    }
}

impl AclError {
    /// Records `message` (e.g. from `aclGetRecentErrMsg`) as the library message of this code.
    pub(crate) fn record(self, message: String) {
        record_message(Lib::Acl, self.code().0, message);
    }
}

c_enum! {
    /// `aclrtMemcpyKind`.
    pub struct aclrtMemcpyKind(i32) {
        /// Host to host.
        ACL_MEMCPY_HOST_TO_HOST = 0,
        /// Host to device.
        ACL_MEMCPY_HOST_TO_DEVICE = 1,
        /// Device to host.
        ACL_MEMCPY_DEVICE_TO_HOST = 2,
        /// Device to device.
        ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
        /// Inferred from the pointers.
        ACL_MEMCPY_DEFAULT = 4,
        /// Host to device through a buffer.
        ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
        /// Within one device.
        ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
        /// Between devices.
        ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7,
    }
}

c_enum! {
    /// `aclrtMemMallocPolicy`; the flags may be OR-ed in.
    pub struct aclrtMemMallocPolicy(i32) {
        /// Huge pages first.
        ACL_MEM_MALLOC_HUGE_FIRST = 0,
        /// Huge pages only (what the HCCL examples use).
        ACL_MEM_MALLOC_HUGE_ONLY = 1,
        /// Normal pages only.
        ACL_MEM_MALLOC_NORMAL_ONLY = 2,
        /// Huge first, P2P.
        ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
        /// Huge only, P2P.
        ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
        /// Normal only, P2P.
        ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
        /// 1 GiB huge pages only.
        ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
        /// 1 GiB huge pages only, P2P.
        ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
        /// Flag: low-bandwidth memory.
        ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x100,
        /// Flag: high-bandwidth memory.
        ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
        /// Flag: read-only from user space.
        ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x10_0000,
    }
}

// ---------------------------------------------------------------------------
// NCCL
// ---------------------------------------------------------------------------

c_enum! {
    /// `ncclResult_t`.
    pub struct ncclResult_t(i32) {
        /// Success.
        ncclSuccess = 0,
    }
    /// A failed [`ncclResult_t`]. `InProgress` is not a failure in non-blocking mode;
    /// callers using that mode check for it first.
    pub enum NcclError(Nccl) {
        /// A CUDA call failed.
        ncclUnhandledCudaError = 1 => UnhandledCudaError: "nccl unhandled cuda error",
        /// A system call failed.
        ncclSystemError = 2 => SystemError: "nccl system error",
        /// Internal error.
        ncclInternalError = 3 => InternalError: "nccl internal error",
        /// Invalid argument.
        ncclInvalidArgument = 4 => InvalidArgument: "nccl invalid argument",
        /// Invalid usage.
        ncclInvalidUsage = 5 => InvalidUsage: "nccl invalid usage",
        /// Remote process failed or network error (2.13+).
        ncclRemoteError = 6 => RemoteError: "nccl remote error",
        /// Non-blocking operation still in progress (2.14+).
        ncclInProgress = 7 => InProgress: "nccl operation in progress",
        /// Timeout (2.30+).
        ncclTimeout = 8 => Timeout: "nccl timeout",
    }
}

c_enum! {
    /// `ncclDataType_t`; aliases (`ncclChar`, `ncclInt`, ...) omitted.
    pub struct ncclDataType_t(i32) {
        /// `int8_t`.
        ncclInt8 = 0,
        /// `uint8_t`.
        ncclUint8 = 1,
        /// `int32_t`.
        ncclInt32 = 2,
        /// `uint32_t`.
        ncclUint32 = 3,
        /// `int64_t`.
        ncclInt64 = 4,
        /// `uint64_t`.
        ncclUint64 = 5,
        /// IEEE half.
        ncclFloat16 = 6,
        /// `float`.
        ncclFloat32 = 7,
        /// `double`.
        ncclFloat64 = 8,
        /// bfloat16.
        ncclBfloat16 = 9,
        /// fp8 e4m3 (2.24+).
        ncclFloat8e4m3 = 10,
        /// fp8 e5m2 (2.24+).
        ncclFloat8e5m2 = 11,
    }
}

c_enum! {
    /// `ncclRedOp_t`; values from 5 up are dynamic (pre-mul-sum) ops.
    pub struct ncclRedOp_t(i32) {
        /// Sum.
        ncclSum = 0,
        /// Product.
        ncclProd = 1,
        /// Maximum.
        ncclMax = 2,
        /// Minimum.
        ncclMin = 3,
        /// Average.
        ncclAvg = 4,
    }
}

// ---------------------------------------------------------------------------
// CUDA runtime
// ---------------------------------------------------------------------------

c_enum! {
    /// `cudaError_t` (selected codes; `cudaSuccess` = 0).
    pub struct cudaError_t(i32) {
        /// Success.
        cudaSuccess = 0,
    }
    /// A failed [`cudaError_t`].
    pub enum CudaError(Cuda) {
        /// Invalid value.
        cudaErrorInvalidValue = 1 => InvalidValue: "cuda invalid value",
        /// Allocation failed.
        cudaErrorMemoryAllocation = 2 => MemoryAllocation: "cuda allocation failed",
        /// Initialisation failed.
        cudaErrorInitializationError = 3 => InitializationError: "cuda initialisation failed",
        /// The runtime is unloading.
        cudaErrorCudartUnloading = 4 => CudartUnloading: "cuda runtime unloading",
        /// Driver too old.
        cudaErrorInsufficientDriver = 35 => InsufficientDriver: "cuda driver too old",
        /// No CUDA device.
        cudaErrorNoDevice = 100 => NoDevice: "no cuda device",
        /// Invalid device ordinal.
        cudaErrorInvalidDevice = 101 => InvalidDevice: "cuda invalid device",
        /// Invalid resource handle (e.g. a destroyed stream).
        cudaErrorInvalidResourceHandle = 400 => InvalidResourceHandle: "cuda invalid resource handle",
        /// Asynchronous work not finished yet (`cudaStreamQuery`).
        cudaErrorNotReady = 600 => NotReady: "cuda work not ready",
        /// Illegal address.
        cudaErrorIllegalAddress = 700 => IllegalAddress: "cuda illegal address",
        /// Kernel launch failed.
        cudaErrorLaunchFailure = 719 => LaunchFailure: "cuda launch failure",
        /// Unknown error.
        cudaErrorUnknown = 999 => UnknownError: "cuda unknown error",
    }
}

impl cudaError_t {
    /// Every code this crate knows, success included.
    pub const KNOWN: [Self; 13] = Self::ALL;
}

c_enum! {
    /// `cudaMemcpyKind`.
    pub struct cudaMemcpyKind(i32) {
        /// Host to host.
        cudaMemcpyHostToHost = 0,
        /// Host to device.
        cudaMemcpyHostToDevice = 1,
        /// Device to host.
        cudaMemcpyDeviceToHost = 2,
        /// Device to device.
        cudaMemcpyDeviceToDevice = 3,
        /// Inferred from unified addressing.
        cudaMemcpyDefault = 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_known_and_unknown_values() {
        assert_eq!(format!("{:?}", HcclResult::HCCL_E_PARA), "HCCL_E_PARA");
        assert_eq!(format!("{:?}", HcclResult(77)), "HcclResult(77)");
        assert_eq!(format!("{:?}", ncclDataType_t(6)), "ncclFloat16");
        assert_eq!(format!("{:?}", aclError(507_046)), "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT");
    }

    #[test]
    fn result_maps_codes() {
        assert_eq!(HcclResult::HCCL_SUCCESS.result(), Ok(()));
        assert_eq!(HcclResult(1).result(), Err(HcclError::Para));
        assert_eq!(HcclResult(9999).result(), Err(HcclError::Unknown(9999)));
        assert_eq!(HcclError::Unknown(9999).code(), HcclResult(9999));
        assert_eq!(ncclResult_t(8).result(), Err(NcclError::Timeout));
        assert_eq!(cudaError_t(600).result(), Err(CudaError::NotReady));
        assert_eq!(aclError(100_000).result(), Err(AclError::InvalidParam));
        for code in HcclResult::KNOWN {
            if let Err(e) = code.result() {
                assert_eq!(e.code(), code);
                assert!(!matches!(e, HcclError::Unknown(_)), "{code:?}");
            }
        }
    }

    #[test]
    fn display_includes_recorded_library_message() {
        let before = HcclError::Unknown(4242).to_string();
        assert_eq!(before, "unknown error code (HcclResult(4242), code 4242)");
        record_message(Lib::Hccl, 4242, "the library says so".to_owned());
        assert_eq!(
            HcclError::Unknown(4242).to_string(),
            "unknown error code (HcclResult(4242), code 4242): the library says so"
        );
    }

    #[test]
    fn data_type_sizes() {
        assert_eq!(HcclDataType::HCCL_DATA_TYPE_FP32.size(), Some(4));
        assert_eq!(HcclDataType::HCCL_DATA_TYPE_BFP16.size(), Some(2));
        assert_eq!(HcclDataType::HCCL_DATA_TYPE_INT128.size(), Some(16));
        assert_eq!(HcclDataType(13).size(), None);
        assert_eq!(HcclDataType::HCCL_DATA_TYPE_RESERVED.size(), None);
    }
}
