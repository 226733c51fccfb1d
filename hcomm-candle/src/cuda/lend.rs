//! Elements of a candle `CudaSlice` lent to a communicator as an
//! [`ExternalDeviceBuffer`], for the length of one collective.

use std::ffi::c_void;

use candle_core::backend::BackendDevice;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use candle_core::{CudaDevice, DeviceLocation};
use hcomm::{Comm, ExternalDeviceBuffer};

use super::{precondition, CudaElement};
use crate::device::{device_buffer, ProducerStream};
use crate::to_candle;

/// A lent range; dropping it ends the loan.
pub(super) struct Lent<'a, T: hcomm::Element> {
    buffer: ExternalDeviceBuffer<T>,
    /// Candle's record of the use on its stream (its event tracking), made
    /// when this drops, after the buffer (fields drop in order).
    _sync: SyncOnDrop<'a>,
}

impl<T: hcomm::Element> Lent<'_, T> {
    /// The buffer, for a collective that reads it.
    pub(super) fn buffer(&self) -> &ExternalDeviceBuffer<T> {
        &self.buffer
    }

    /// The buffer, for a collective that writes it.
    pub(super) fn buffer_mut(&mut self) -> &mut ExternalDeviceBuffer<T> {
        &mut self.buffer
    }
}

/// Elements `[offset, offset + len)` of `slice`, read by the collective.
pub(super) fn readable<'a, T: CudaElement>(
    group: &Comm,
    device: &CudaDevice,
    slice: &'a CudaSlice<T>,
    stream: &'a CudaStream,
    offset: usize,
    len: usize,
) -> candle_core::Result<Lent<'a, T>> {
    in_range(slice.len(), offset, len)?;
    let (base, sync) = slice.device_ptr(stream);
    // SAFETY: `base` is the address of `slice`, a live allocation of
    // `slice.len()` elements that `in_range` keeps the range inside; the
    // borrow of `slice` outlives the loan, so candle frees nothing meanwhile.
    let buffer = unsafe { at(group, device, base, offset, len, stream) }?;
    Ok(Lent { buffer, _sync: sync })
}

/// Elements `[offset, offset + len)` of `slice`, written by the collective.
pub(super) fn writable<'a, T: CudaElement>(
    group: &Comm,
    device: &CudaDevice,
    slice: &'a mut CudaSlice<T>,
    stream: &'a CudaStream,
    offset: usize,
    len: usize,
) -> candle_core::Result<Lent<'a, T>> {
    in_range(slice.len(), offset, len)?;
    let (base, sync) = slice.device_ptr_mut(stream);
    // SAFETY: as in `readable`; the exclusive borrow of `slice` keeps every
    // other Rust user of it out for the loan.
    let buffer = unsafe { at(group, device, base, offset, len, stream) }?;
    Ok(Lent { buffer, _sync: sync })
}

fn in_range(slice_len: usize, offset: usize, len: usize) -> candle_core::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= slice_len => Ok(()),
        _ => Err(precondition(format!(
            "hcomm_candle: elements {offset}..{offset}+{len} lie outside a CUDA slice of {slice_len}"
        ))),
    }
}

/// `len` elements of `T` from element `offset` of the allocation at `base`
/// on `device`, lent to `group` once `stream` (candle's) drained.
///
/// # Safety
///
/// `[base, base + (offset + len) * size_of::<T>())` is a live allocation of
/// `device` that nothing but hcomm and `stream` touches until the returned
/// buffer is dropped, and nothing is enqueued on `stream` meanwhile (candle
/// enqueues only from the thread that is in this call).
unsafe fn at<T: CudaElement>(
    group: &Comm,
    device: &CudaDevice,
    base: u64,
    offset: usize,
    len: usize,
    stream: &CudaStream,
) -> candle_core::Result<ExternalDeviceBuffer<T>> {
    let addr = usize::try_from(base)
        .ok()
        .and_then(|b| b.checked_add(offset.checked_mul(size_of::<T>())?))
        .ok_or_else(|| {
            precondition(format!(
                "hcomm_candle: device address {base:#x} + {offset} elements overflows"
            ))
        })?;
    let ptr = std::ptr::with_exposed_provenance_mut::<T>(addr);
    // SAFETY: candle's stream of `device`, alive while `stream` is borrowed.
    let producer = unsafe { ProducerStream::from_raw(stream.cu_stream().cast::<c_void>()) };
    // SAFETY: forwarded from the caller, but for the device: `device` may
    // not be `group`'s, which is checked below, before any collective sees
    // the buffer (making one only waits for the stream and records the range).
    let buffer = unsafe { device_buffer(group, ptr, len, producer) }.map_err(to_candle)?;
    let tensor_gpu = match device.location() {
        DeviceLocation::Cuda { gpu_id } => Some(gpu_id),
        DeviceLocation::Cpu | DeviceLocation::Metal { .. } => None,
    };
    if usize::try_from(buffer.device()).ok() != tensor_gpu {
        return Err(precondition(format!(
            "hcomm_candle: the tensor is on {:?}, and rank {} of the communicator on cuda device {}. \
             hint: create the rank's tensors on its own device (`Device::new_cuda(device)`)",
            device.location(),
            group.rank(),
            buffer.device()
        )));
    }
    Ok(buffer)
}
