//! Device memory that hcomm did not allocate: a framework's tensor, used in
//! place as an hcomm buffer.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::backend::device::memory::{self, DeviceCtx};
use crate::buffer::{sealed, Buffer, BufferMut, Memory};
use crate::comm::Comm;
use crate::device::ctx_of;
use crate::element::Element;
use crate::error::{Error, Result};

/// `len` elements of `T` in device memory that something else allocated
/// (a tensor of a training framework), usable with every operation of a
/// device communicator like a [`DeviceBuffer`](crate::DeviceBuffer). hcomm
/// never frees it.
///
/// ```no_run
/// # fn tensor_ptr() -> *mut f32 { std::ptr::null_mut() }
/// hcomm::hccl::run(2, |comm| {
///     // SAFETY: the framework's tensor holds 1024 f32 on this rank's device,
///     // and nothing touches it until `grad` is dropped.
///     let mut grad = unsafe { hcomm::ExternalDeviceBuffer::from_raw_parts(comm, tensor_ptr(), 1024)? };
///     comm.all_reduce_in_place(&mut grad, hcomm::ReduceOp::Sum)
/// })
/// .unwrap();
/// ```
pub struct ExternalDeviceBuffer<T: Element> {
    ctx: Arc<DeviceCtx>,
    ptr: *mut T,
    len: usize,
    /// Whether this value recorded the range as device memory (and so
    /// forgets it on drop).
    registered: bool,
    _elem: PhantomData<T>,
}

// SAFETY: the value is an address and a length; the memory it names is
// device memory that hcomm only reaches through its device backend, which
// serialises access on the communicator's stream, and `from_raw_parts`'
// contract makes the caller keep it valid and otherwise untouched.
unsafe impl<T: Element> Send for ExternalDeviceBuffer<T> {}
// SAFETY: as for `Send`; shared references only read the address.
unsafe impl<T: Element> Sync for ExternalDeviceBuffer<T> {}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ExternalDeviceBuffer<f32>>();
};

impl<T: Element> std::fmt::Debug for ExternalDeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalDeviceBuffer")
            .field("backend", &self.ctx.driver.name())
            .field("device", &self.ctx.device)
            .field("elem", &T::DTYPE)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<T: Element> ExternalDeviceBuffer<T> {
    /// Wraps `len` elements at `ptr` in the memory of `comm`'s device.
    ///
    /// Fails when `comm` is not a device communicator, when `ptr` is null
    /// or misaligned, and when the range already belongs to a
    /// [`DeviceBuffer`](crate::DeviceBuffer) (pass that instead).
    ///
    /// # Safety
    ///
    /// Until the returned value is dropped:
    /// * `[ptr, ptr + len)` is memory of the device `comm` runs on (allocated
    ///   with `aclrtMalloc` / `cudaMalloc` or a framework's allocator on top
    ///   of them), valid for reads and writes of `len` elements of `T`, and
    ///   not freed or reused by its owner;
    /// * nothing else reads or writes it while an hcomm operation that was
    ///   given it is in flight (for a framework: the tensor's producers have
    ///   finished before the call and its consumers start after it returns;
    ///   synchronise the framework's stream first);
    /// * no other `ExternalDeviceBuffer` overlapping it is alive.
    pub unsafe fn from_raw_parts(comm: &Comm, ptr: *mut T, len: usize) -> Result<Self> {
        let ctx = ctx_of(comm)?;
        if ptr.is_null() || !ptr.is_aligned() {
            return Err(Error::precondition(format!(
                "an external device buffer needs a non-null pointer aligned for `{}`; got {ptr:p}",
                T::DTYPE.name()
            )));
        }
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            Error::precondition(format!("an external device buffer of {len} elements overflows usize"))
        })?;
        if memory::is_device(ptr.cast(), bytes) {
            return Err(Error::precondition(
                "this range is part of an hcomm `DeviceBuffer`; pass the `DeviceBuffer` itself",
            ));
        }
        memory::register(ptr.cast(), bytes);
        Ok(ExternalDeviceBuffer {
            ctx,
            ptr,
            len,
            registered: bytes > 0,
            _elem: PhantomData,
        })
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
        self.ctx.device
    }

    /// The address it was created with.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T: Element> Drop for ExternalDeviceBuffer<T> {
    fn drop(&mut self) {
        if self.registered {
            memory::unregister(self.ptr.cast());
        }
    }
}

impl<T: Element> sealed::Sealed for ExternalDeviceBuffer<T> {}

impl<T: Element> Buffer for ExternalDeviceBuffer<T> {
    type Elem = T;

    fn raw_parts(&self) -> (*const T, usize) {
        (self.ptr.cast_const(), self.len)
    }

    fn memory(&self) -> Memory {
        Memory::Device {
            backend: self.ctx.driver.name(),
            device: self.ctx.device,
        }
    }
}

impl<T: Element> BufferMut for ExternalDeviceBuffer<T> {
    fn raw_parts_mut(&mut self) -> (*mut T, usize) {
        (self.ptr, self.len)
    }
}
