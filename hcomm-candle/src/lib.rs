//! [candle](https://docs.rs/candle-core) tensors with hcomm: in-place
//! collectives on a tensor's own memory, and Megatron-LM's tensor-parallel
//! mappings ([`hcomm::tp::Mapping`]) as candle custom operations whose
//! backward passes run the paired operation, so `loss.backward()` sums,
//! gathers and splits the gradients a tensor-parallel layer needs.
//!
//! ```
//! use candle_core::{Device, Tensor};
//!
//! let sums = hcomm::host::run(2, |comm| {
//!     let x = Tensor::new(&[comm.rank() as f32 + 1.0, 10.0], &Device::Cpu).map_err(hcomm_candle::to_hcomm)?;
//!     hcomm_candle::all_reduce_in_place(comm, &x, hcomm::ReduceOp::Sum).map_err(hcomm_candle::to_hcomm)?;
//!     x.to_vec1::<f32>().map_err(hcomm_candle::to_hcomm)
//! })
//! .unwrap();
//! assert_eq!(sums, vec![vec![3.0, 20.0], vec![3.0, 20.0]]);
//! ```
//!
//! # Memory
//!
//! CPU tensors (`Device::Cpu`) of `f32`, `f64`, `f16`, `bf16`, `u8`, `u32`
//! and `i64` work with every host backend. hcomm reads and writes a
//! tensor's storage in place, under candle's storage lock, for the length
//! of the call; a tensor that is not contiguous (a transposed view) is
//! made contiguous first by the mappings and refused by
//! [`all_reduce_in_place`] (which must write the caller's memory).
//!
//! # CUDA tensors and the NCCL backend (the contract)
//!
//! A CUDA tensor's memory is an hcomm buffer on a communicator of the
//! `nccl` backend bound to the tensor's device. The stream contract, which
//! hcomm keeps itself (the caller synchronises nothing):
//! 1. before the collective reads the tensor, the producer's stream (candle
//!    runs a device's kernels on one stream, `CudaDevice::cuda_stream`) is
//!    synchronised, so every kernel enqueued before the call has written it;
//! 2. the collective runs on the communicator's own stream, and the call
//!    returns only after that stream drained, so candle's later kernels see
//!    the result with no further synchronisation.
//!
//! [`device::device_buffer`] does this for any framework, given a device
//! pointer and the producer's stream handle (for candle: the storage's
//! `CudaSlice` pointer and `CudaDevice::cuda_stream().cu_stream()`).
//!
//! With the `cuda` feature (off by default, and not built by CI: candle's
//! CUDA build needs `nvcc` and the CUDA libraries at build time), candle is
//! built with its CUDA backend and [`all_reduce_in_place`] and the
//! mappings take CUDA tensors: the storage's `CudaSlice`, from the
//! layout's start offset on, is lent through [`device::device_buffer`]
//! with candle's stream as the producer stream. The in-place all-reduce
//! needs a contiguous tensor (an offset view is fine); the mappings take
//! any layout and copy on candle's stream around the collective (a rank's
//! slice, the blocks of a gather or reduce-scatter along the last
//! dimension). Before each collective the ranks agree on the element type
//! and the shape with one small all-gather (skipped in a group of one),
//! since NCCL checks neither. A CUDA tensor on a communicator of another
//! backend is an [`hcomm::Error::Precondition`] naming that backend;
//! without the feature, candle's own "no cuda implementation" error.
//!
//! ```sh
//! eval "$(scripts/device-cuda-env.sh)"   # nvcc, headers and libraries of CUDA 13.0 from PyPI
//! cargo build -p hcomm-candle --features cuda
//! ```
//!
//! # Other frameworks
//!
//! hcomm's `Buffer` trait is sealed (backends move buffers by address and
//! trust the length); a framework passes its tensors the way this crate
//! does: host memory as a borrowed slice `&[T]` / `&mut [T]` (or an
//! `ndarray` view) of the tensor's storage, held for the call under the
//! framework's own lock, and device memory through
//! `ExternalDeviceBuffer::from_raw_parts` with the contract above.

#[cfg(any(feature = "cuda", test))]
mod blocks;
#[cfg(any(feature = "cuda", test))]
mod claim;
#[cfg(feature = "cuda")]
mod cuda;
pub mod device;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, InplaceOp1, Layout, Shape, Tensor, WithDType};
use hcomm::ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};
use hcomm::tp::Mapping;
use hcomm::{Comm, ReduceOp};

/// An hcomm error as a candle error (its `Display` form is kept).
pub fn to_candle(e: hcomm::Error) -> candle_core::Error {
    candle_core::Error::wrap(e)
}

/// A candle error as an hcomm error, for closures run by `hcomm::host::run`.
#[allow(
    clippy::needless_pass_by_value,
    reason = "called as `map_err(to_hcomm)`, which passes the error by value"
)]
pub fn to_hcomm(e: candle_core::Error) -> hcomm::Error {
    hcomm::Error::Precondition {
        message: format!("candle: {e}"),
    }
}

/// The elements of a contiguous layout, or an error naming the layout.
fn contiguous_range(layout: &Layout, what: &str) -> candle_core::Result<(usize, usize)> {
    layout.contiguous_offsets().ok_or_else(|| {
        candle_core::Error::Msg(format!(
            "{what}: a tensor of shape {:?} with strides {:?} is not contiguous; hint: pass `x.contiguous()?`",
            layout.dims(),
            layout.stride()
        ))
    })
}

/// Runs `$body` with `$v` bound to the typed vector of a CPU storage.
macro_rules! with_vec {
    ($storage:expr, $v:ident => $body:expr, $what:expr) => {
        match $storage {
            CpuStorage::F32($v) => $body,
            CpuStorage::F64($v) => $body,
            CpuStorage::F16($v) => $body,
            CpuStorage::BF16($v) => $body,
            CpuStorage::U8($v) => $body,
            CpuStorage::U32($v) => $body,
            CpuStorage::I64($v) => $body,
            other => Err(candle_core::Error::Msg(format!(
                "{}: hcomm has no element type for candle's {:?}",
                $what,
                other.dtype()
            ))),
        }
    };
}

/// Combines `x` over `group` with `op`, in place: every rank's tensor holds
/// the result afterwards. Collective over `group`; every rank passes a
/// contiguous tensor of the same shape and element type.
pub fn all_reduce_in_place(group: &Comm, x: &Tensor, op: ReduceOp) -> candle_core::Result<()> {
    x.inplace_op1(&AllReduce { group, op })
}

struct AllReduce<'a> {
    group: &'a Comm,
    op: ReduceOp,
}

impl InplaceOp1 for AllReduce<'_> {
    fn name(&self) -> &'static str {
        "hcomm-all-reduce"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let (start, end) = contiguous_range(layout, "hcomm_candle::all_reduce_in_place")?;
        with_vec!(storage, v => {
            // The tensor's own memory, in place: a contiguous run is an
            // hcomm buffer as it is.
            let view = ArrayViewMutD::from_shape(IxDyn(layout.dims()), &mut v[start..end]).map_err(candle_core::Error::wrap)?;
            hcomm::tp::all_reduce_with(self.group, view, self.op).map_err(to_candle)
        }, "hcomm_candle::all_reduce_in_place")
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, storage: &mut candle_core::CudaStorage, layout: &Layout) -> candle_core::Result<()> {
        cuda::all_reduce_in_place(self.group, self.op, storage, layout)
    }
}

/// `mapping`'s forward on `x`, recorded so that `backward` runs the
/// paired operation on the gradient. Collective over `group` (unless the
/// forward is an identity or a split); every rank calls it in the same
/// order, and the backward passes call the paired operations in the
/// reverse order on every rank.
pub fn apply(group: &Comm, x: &Tensor, mapping: Mapping) -> candle_core::Result<Tensor> {
    x.apply_op1(TpOp {
        group: group.clone(),
        mapping,
        backward: false,
    })
}

/// A mapping's forward (or, with `backward`, its backward) as a custom op.
struct TpOp {
    group: Comm,
    mapping: Mapping,
    backward: bool,
}

impl TpOp {
    fn run<T: hcomm::Element>(&self, x: ArrayViewD<'_, T>) -> hcomm::Result<ArrayD<T>> {
        if self.backward {
            self.mapping.backward(&self.group, x)
        } else {
            self.mapping.forward(&self.group, x)
        }
    }
}

impl CustomOp1 for TpOp {
    fn name(&self) -> &'static str {
        if self.backward {
            "hcomm-tp-backward"
        } else {
            "hcomm-tp-forward"
        }
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let what = self.mapping.name();
        let (start, end) = contiguous_range(layout, what)?;
        with_vec!(storage, v => {
            let view = ArrayViewD::from_shape(IxDyn(layout.dims()), &v[start..end]).map_err(candle_core::Error::wrap)?;
            let out = self.run(view).map_err(to_candle)?;
            let shape = Shape::from(out.shape().to_vec());
            Ok((WithDType::to_cpu_storage_owned(out.iter().copied().collect::<Vec<_>>()), shape))
        }, what)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::apply(&self.group, self.mapping, self.backward, storage, layout)
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let grad = grad_res.contiguous()?.apply_op1_no_bwd(&TpOp {
            group: self.group.clone(),
            mapping: self.mapping,
            backward: !self.backward,
        })?;
        Ok(Some(grad))
    }
}

/// A differentiable function per mapping, named as in Megatron-LM.
macro_rules! named {
    ($($name:ident => $mapping:expr;)*) => {$(
        #[doc = concat!(
            "[`hcomm::tp::", stringify!($name), "`] on a candle tensor; `backward` runs the paired operation."
        )]
        pub fn $name(group: &Comm, x: &Tensor) -> candle_core::Result<Tensor> {
            apply(group, x, $mapping)
        }
    )*};
}

named! {
    copy_to_tensor_model_parallel_region => Mapping::CopyToTensorModelParallelRegion;
    reduce_from_tensor_model_parallel_region => Mapping::ReduceFromTensorModelParallelRegion;
    scatter_to_tensor_model_parallel_region => Mapping::ScatterToTensorModelParallelRegion;
    gather_from_tensor_model_parallel_region => Mapping::GatherFromTensorModelParallelRegion;
    scatter_to_sequence_parallel_region => Mapping::ScatterToSequenceParallelRegion;
    gather_from_sequence_parallel_region => Mapping::GatherFromSequenceParallelRegion { tensor_parallel_output_grad: true };
    reduce_scatter_to_sequence_parallel_region => Mapping::ReduceScatterToSequenceParallelRegion;
}
