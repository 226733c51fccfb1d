//! The CUDA runtime function table (`libcudart.so`, `libcudart.so.13`, `.12`, `.11`).
//!
//! Signatures: the CUDA runtime API (`cuda_runtime_api.h`).

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::codes::{cudaError_t, cudaMemcpyKind, Lib};
use crate::load::api_table;
use crate::types::cudaStream_t;

api_table! {
    /// Function table of the CUDA runtime. Calling an entry is `unsafe`: the caller
    /// upholds the C contract and keeps the table alive during the call.
    pub struct CudaApi: crate::load::CUDART, CUDART_API;
    required {
        /// Selects the calling thread's device.
        fn cudaSetDevice(device: c_int) -> cudaError_t;
        /// The calling thread's device.
        fn cudaGetDevice(device: *mut c_int) -> cudaError_t;
        /// Number of devices.
        fn cudaGetDeviceCount(count: *mut c_int) -> cudaError_t;
        /// Creates a stream.
        fn cudaStreamCreate(pStream: *mut cudaStream_t) -> cudaError_t;
        /// Destroys a stream.
        fn cudaStreamDestroy(stream: cudaStream_t) -> cudaError_t;
        /// Blocks until the stream drained.
        fn cudaStreamSynchronize(stream: cudaStream_t) -> cudaError_t;
        /// `cudaSuccess` if drained, `cudaErrorNotReady` if not (for polling with a timeout).
        fn cudaStreamQuery(stream: cudaStream_t) -> cudaError_t;
        /// Blocks until the device is idle.
        fn cudaDeviceSynchronize() -> cudaError_t;
        /// Allocates device memory.
        fn cudaMalloc(devPtr: *mut *mut c_void, size: usize) -> cudaError_t;
        /// Frees device memory.
        fn cudaFree(devPtr: *mut c_void) -> cudaError_t;
        /// Synchronous copy of `count` bytes.
        fn cudaMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: cudaMemcpyKind) -> cudaError_t;
        /// Sets `count` bytes to `value`.
        fn cudaMemset(devPtr: *mut c_void, value: c_int, count: usize) -> cudaError_t;
        /// Returns and clears the last error.
        fn cudaGetLastError() -> cudaError_t;
        /// Static message of a code.
        fn cudaGetErrorString(error: cudaError_t) -> *const c_char;
    }
    optional {
        /// Creates a stream with `flags` (`cudaStreamDefault` = 0 or
        /// [`cudaStreamNonBlocking`](crate::cudaStreamNonBlocking)).
        fn cudaStreamCreateWithFlags(pStream: *mut cudaStream_t, flags: c_uint) -> cudaError_t;
        /// Asynchronous copy of `count` bytes, ordered on `stream`.
        fn cudaMemcpyAsync(dst: *mut c_void, src: *const c_void, count: usize, kind: cudaMemcpyKind, stream: cudaStream_t) -> cudaError_t;
        /// The CUDA version the installed driver supports (`0`: no driver).
        fn cudaDriverGetVersion(driverVersion: *mut c_int) -> cudaError_t;
        /// The CUDA version of this runtime (`major * 1000 + minor * 10`).
        fn cudaRuntimeGetVersion(runtimeVersion: *mut c_int) -> cudaError_t;
    }
}

impl CudaApi {
    fn on_load(&self) {
        crate::codes::record_messages(Lib::Cuda, &cudaError_t::KNOWN, |code| self.error_string(code));
    }

    /// `cudaGetErrorString(code)` copied into a `String`.
    #[doc(alias = "cudaGetErrorString")]
    pub fn error_string(&self, code: cudaError_t) -> Option<String> {
        // SAFETY: cudaGetErrorString takes any code and returns a static
        // NUL-terminated string; the table is alive.
        unsafe { crate::codes::c_string((self.cudaGetErrorString)(code)) }
    }

    /// `cudaDriverGetVersion`: the CUDA version the installed driver
    /// supports (`major * 1000 + minor * 10`), `Some(0)` when no driver is
    /// installed, `None` where the runtime lacks the symbol or the call failed.
    #[doc(alias = "cudaDriverGetVersion")]
    pub fn driver_version(&self) -> Option<i32> {
        let f = self.cudaDriverGetVersion?;
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer; the table is alive.
        (unsafe { f(&raw mut v) } == cudaError_t::cudaSuccess).then_some(v)
    }

    /// `cudaRuntimeGetVersion`: this runtime's CUDA version.
    #[doc(alias = "cudaRuntimeGetVersion")]
    pub fn runtime_version(&self) -> Option<i32> {
        let f = self.cudaRuntimeGetVersion?;
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer; the table is alive.
        (unsafe { f(&raw mut v) } == cudaError_t::cudaSuccess).then_some(v)
    }
}
