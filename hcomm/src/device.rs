//! Device buffers: memory of the accelerator a device communicator runs on.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::backend::device::memory::{self, CopyKind, DevMem, DeviceCtx};
use crate::buffer::{sealed, Buffer, BufferMut, Memory};
use crate::comm::Comm;
use crate::element::Element;
use crate::error::{Error, Result};

/// `len` elements of `T` in the memory of a device communicator's device
/// (`aclrtMalloc` on HCCL, `cudaMalloc` on NCCL), freed on drop.
///
/// Device buffers are [`Buffer`]s and [`BufferMut`]s like host slices, so
/// every operation of [`Comm`] takes them; with them the device backends move
/// data without staging copies through host memory. The host backend rejects
/// them. The data is reached only through copies
/// ([`to_host`](DeviceBuffer::to_host), [`copy_from_host`](DeviceBuffer::copy_from_host)).
///
/// If device work that used the buffer was abandoned (a wait timed out, a
/// peer failed), the memory is released only once that work drained.
///
/// ```no_run
/// # fn main() -> hcomm::Result<()> {
/// hcomm::hccl::run(2, |comm| {
///     let mut x = hcomm::DeviceBuffer::from_host(comm, &[comm.rank() as f32; 4])?;
///     comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
///     assert_eq!(x.to_host()?, vec![1.0; 4]);
///     Ok(())
/// })?;
/// # Ok(())
/// # }
/// ```
pub struct DeviceBuffer<T: Element> {
    mem: DevMem,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("backend", &self.mem.ctx.driver.name())
            .field("device", &self.mem.ctx.device)
            .field("elem", &T::DTYPE)
            .field("len", &self.len)
            .finish()
    }
}

pub(crate) fn ctx_of(comm: &Comm) -> Result<Arc<DeviceCtx>> {
    comm.inner.backend.device_ctx().ok_or_else(|| {
        Error::precondition(format!(
            "device buffers need a device communicator; this one uses the `{}` backend",
            comm.backend_name()
        ))
    })
}

impl<T: Element> DeviceBuffer<T> {
    fn alloc(comm: &Comm, len: usize) -> Result<Self> {
        let ctx = ctx_of(comm)?;
        let bytes = len
            .checked_mul(size_of::<T>())
            .ok_or_else(|| Error::precondition(format!("a device buffer of {len} elements overflows usize")))?;
        let mem = ctx.alloc(bytes)?;
        memory::register(mem.ptr, bytes);
        Ok(DeviceBuffer {
            mem,
            len,
            _elem: PhantomData,
        })
    }

    /// `len` zeros on `comm`'s device.
    #[doc(alias = "aclrtMalloc")]
    #[doc(alias = "cudaMalloc")]
    pub fn zeros(comm: &Comm, len: usize) -> Result<Self> {
        let mut b = Self::alloc(comm, len)?;
        b.copy_from_host(&vec![T::ZERO; len])?;
        Ok(b)
    }

    /// A copy of `data` on `comm`'s device.
    pub fn from_host(comm: &Comm, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(comm, data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// Overwrites the buffer with `data` (of equal length).
    #[doc(alias = "aclrtMemcpy")]
    #[doc(alias = "cudaMemcpy")]
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::buffer_length("data", data.len(), self.len));
        }
        // SAFETY: `data` is valid for reads of its bytes; the allocation holds
        // as many bytes and is exclusively borrowed.
        unsafe {
            self.mem.ctx.copy(
                self.mem.ptr,
                data.as_ptr().cast(),
                size_of_val(data),
                CopyKind::HostToDevice,
            )
        }
    }

    /// Copies the buffer into `out` (of equal length).
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::buffer_length("out", out.len(), self.len));
        }
        // SAFETY: `out` is valid for writes of its bytes; the allocation holds
        // as many bytes.
        unsafe {
            self.mem.ctx.copy(
                out.as_mut_ptr().cast(),
                self.mem.ptr,
                size_of_val(out),
                CopyKind::DeviceToHost,
            )
        }
    }

    /// The buffer's content as a host vector.
    pub fn to_host(&self) -> Result<Vec<T>> {
        let mut out = vec![T::ZERO; self.len];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device index.
    pub fn device(&self) -> i32 {
        self.mem.ctx.device
    }
}

impl<T: Element> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        memory::unregister(self.mem.ptr);
        // `mem` frees the allocation (or defers it) when dropped after this.
    }
}

impl<T: Element> sealed::Sealed for DeviceBuffer<T> {}

impl<T: Element> Buffer for DeviceBuffer<T> {
    type Elem = T;

    fn raw_parts(&self) -> (*const T, usize) {
        (self.mem.ptr.cast_const().cast(), self.len)
    }

    fn memory(&self) -> Memory {
        Memory::Device {
            backend: self.mem.ctx.driver.name(),
            device: self.mem.ctx.device,
        }
    }
}

impl<T: Element> BufferMut for DeviceBuffer<T> {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.mem.ptr.cast(), self.len)
    }
}

/// Errors that destructors of device resources (communicators, streams,
/// device memory) met since the last call: they cannot return them, so they
/// record them here (and log them with `tracing`).
pub fn take_device_teardown_errors() -> Vec<Error> {
    memory::take_teardown_errors()
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DeviceBuffer<f32>>();
};
