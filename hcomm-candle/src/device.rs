//! Device memory under the stream contract of the crate docs, without
//! candle's CUDA types: a tensor's device pointer and the stream its
//! producer enqueued its writes on (candle: the one stream of the tensor's
//! `CudaDevice`). [`device_buffer`] waits for that stream, then lends the
//! memory to hcomm as an [`ExternalDeviceBuffer`]; the NCCL backend runs
//! the collective on its own stream and returns once that drained, so the
//! producer's later work sees the result.

use std::ffi::c_void;

use hcomm::{Comm, Element, ExternalDeviceBuffer};

/// The stream a device tensor's producer enqueued its writes on, as a raw
/// `cudaStream_t` / `CUstream` handle (null: the legacy default stream).
#[derive(Clone, Copy, Debug)]
pub struct ProducerStream {
    handle: *mut c_void,
}

impl ProducerStream {
    /// Wraps a stream handle.
    ///
    /// # Safety
    ///
    /// `handle` is null or a live stream of the CUDA context of the calling
    /// thread's device, and stays live while the value is used.
    pub unsafe fn from_raw(handle: *mut c_void) -> ProducerStream {
        ProducerStream { handle }
    }

    /// Waits until everything enqueued on the stream has finished.
    ///
    /// # Errors
    ///
    /// [`hcomm::Error::Backend`] when the CUDA runtime cannot be loaded or
    /// the synchronisation fails (its message names the CUDA error).
    pub fn synchronize(&self) -> hcomm::Result<()> {
        let cuda = hcomm_sys::CudaApi::get().map_err(|e| backend(format!("the CUDA runtime did not load: {e}")))?;
        // SAFETY: `handle` is null or a live stream (`from_raw`'s contract);
        // `cudaStreamSynchronize` only waits on it.
        let code = unsafe { (cuda.cudaStreamSynchronize)(self.handle) };
        if code.is_success() {
            return Ok(());
        }
        Err(backend(format!(
            "cudaStreamSynchronize({:p}) failed: {}",
            self.handle,
            cuda.error_string(code)
                .unwrap_or_else(|| format!("cuda error {}", code.0))
        )))
    }
}

fn backend(message: String) -> hcomm::Error {
    hcomm::Error::Backend {
        backend: "cuda",
        message,
    }
}

/// `len` elements of `T` at `ptr`, a device tensor's memory, as a buffer
/// of `group` (a communicator of a device backend on the tensor's
/// device), once `producer` has drained.
///
/// # Errors
///
/// The synchronisation's error; [`hcomm::Error::Precondition`] when `group`
/// is not a device communicator or `ptr` is null or misaligned.
///
/// # Safety
///
/// As for [`ExternalDeviceBuffer::from_raw_parts`]: `[ptr, ptr + len)` is
/// memory of `group`'s device, valid for reads and writes, and nothing but
/// hcomm touches it until the buffer is dropped (no work on other streams
/// than `producer`, and nothing enqueued on `producer` meanwhile).
pub unsafe fn device_buffer<T: Element>(
    group: &Comm,
    ptr: *mut T,
    len: usize,
    producer: ProducerStream,
) -> hcomm::Result<ExternalDeviceBuffer<T>> {
    producer.synchronize()?;
    // SAFETY: forwarded from the caller; the producer's writes are done.
    unsafe { ExternalDeviceBuffer::from_raw_parts(group, ptr, len) }
}
