//! The CUDA halves of [`crate::all_reduce_in_place`] and the mappings: a
//! CUDA tensor's memory (its storage's `CudaSlice`, from the layout's start
//! offset on) lent to a communicator of the `nccl` backend through
//! [`crate::device::device_buffer`], with candle's stream as the producer
//! stream, under the contract of the crate docs.

mod agree;
mod lend;
mod steps;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use candle_core::cuda_backend::CudaDType;
use candle_core::{CudaStorage, DType, Layout, Shape, WithDType};
use hcomm::tp::Mapping;
use hcomm::{Comm, ReduceOp};

use crate::{contiguous_range, to_candle};

/// The element types hcomm and candle's CUDA backend share.
trait CudaElement: hcomm::Element + CudaDType + DeviceRepr + ValidAsZeroBits + WithDType {}

impl<T: hcomm::Element + CudaDType + DeviceRepr + ValidAsZeroBits + WithDType> CudaElement for T {}

/// Runs `$body` with `$t` the Rust type of candle's `$dtype`.
macro_rules! with_type {
    ($dtype:expr, $t:ident => $body:expr, $what:expr) => {
        match $dtype {
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F64 => {
                type $t = f64;
                $body
            }
            DType::F16 => {
                type $t = hcomm::f16;
                $body
            }
            DType::BF16 => {
                type $t = hcomm::bf16;
                $body
            }
            DType::U8 => {
                type $t = u8;
                $body
            }
            DType::U32 => {
                type $t = u32;
                $body
            }
            DType::I64 => {
                type $t = i64;
                $body
            }
            other => Err(precondition(format!(
                "{}: hcomm has no element type for candle's {other:?}",
                $what
            ))),
        }
    };
}

/// An hcomm precondition failure as a candle error.
fn precondition(message: String) -> candle_core::Error {
    to_candle(hcomm::Error::Precondition { message })
}

/// Fails unless `group` can take device memory of a CUDA tensor: a
/// communicator of the `nccl` backend.
fn nccl_only(group: &Comm, what: &str) -> candle_core::Result<()> {
    if group.backend_name() == "nccl" {
        return Ok(());
    }
    Err(precondition(format!(
        "{what}: a CUDA tensor needs a communicator of the `nccl` backend, and this one uses the `{}` backend. \
         hint: create the communicator with `hcomm::nccl` (one rank per GPU), or move the tensor to the CPU",
        group.backend_name()
    )))
}

/// [`crate::all_reduce_in_place`] on a CUDA tensor: the collective runs on
/// the tensor's own memory.
pub(crate) fn all_reduce_in_place(
    group: &Comm,
    op: ReduceOp,
    storage: &mut CudaStorage,
    layout: &Layout,
) -> candle_core::Result<()> {
    const WHAT: &str = "hcomm_candle::all_reduce_in_place";
    nccl_only(group, WHAT)?;
    let range = contiguous_range(layout, WHAT);
    with_type!(storage.dtype(), T => {
        agree::all_agree::<T>(group, WHAT, &storage.device, layout.dims(), range.is_ok())?;
        let (start, end) = range?;
        if start == end {
            return Ok(());
        }
        let stream = storage.device.cuda_stream();
        let device = storage.device.clone();
        let slice = storage.as_cuda_slice_mut::<T>()?;
        let mut lent = lend::writable(group, &device, slice, &stream, start, end - start)?;
        group.all_reduce_in_place(lent.buffer_mut(), op).map_err(to_candle)
    }, WHAT)
}

/// `mapping`'s forward (or, with `backward`, its backward) on a CUDA
/// tensor: a new contiguous tensor.
pub(crate) fn apply(
    group: &Comm,
    mapping: Mapping,
    backward: bool,
    storage: &CudaStorage,
    layout: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let what = mapping.name();
    nccl_only(group, what)?;
    let step = if backward {
        mapping.backward_step()
    } else {
        mapping.forward_step()
    };
    with_type!(storage.dtype(), T => {
        agree::all_agree::<T>(group, what, &storage.device, layout.dims(), true)?;
        steps::run::<T>(group, step, what, storage, layout)
    }, what)
}
