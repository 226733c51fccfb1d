//! Megatron-LM's mappings (the table of [`hcomm::tp`]) as steps on CUDA
//! storage: the collectives run on device memory through the NCCL backend,
//! and the copies around them (a contiguous copy, a rank's slice, the
//! blocks of a gather or a reduce-scatter along an inner dimension) are
//! candle's own strided copies on its stream.

use candle_core::backend::BackendStorage;
use candle_core::{CudaDevice, CudaStorage, Layout, Shape};
use hcomm::tp::Mapping;
use hcomm::{Comm, ReduceOp};

use super::{lend, precondition, CudaElement};
use crate::to_candle;

/// What one direction of a mapping does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Identity,
    AllReduce,
    Split(Dim),
    AllGather(Dim),
    ReduceScatter(Dim),
}

/// The dimension a step splits or joins: the first (the sequence) or the
/// last (the hidden one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dim {
    First,
    Last,
}

/// The step of `mapping`'s forward, or of its backward.
pub(super) fn of(mapping: Mapping, backward: bool) -> candle_core::Result<Step> {
    use Dim::{First, Last};
    use Step::{AllGather, AllReduce, Identity, ReduceScatter, Split};
    let (forward, paired) = match mapping {
        Mapping::CopyToTensorModelParallelRegion => (Identity, AllReduce),
        Mapping::ReduceFromTensorModelParallelRegion => (AllReduce, Identity),
        Mapping::ScatterToTensorModelParallelRegion => (Split(Last), AllGather(Last)),
        Mapping::GatherFromTensorModelParallelRegion => (AllGather(Last), Split(Last)),
        Mapping::ScatterToSequenceParallelRegion => (Split(First), AllGather(First)),
        Mapping::GatherFromSequenceParallelRegion {
            tensor_parallel_output_grad: true,
        } => (AllGather(First), ReduceScatter(First)),
        Mapping::GatherFromSequenceParallelRegion {
            tensor_parallel_output_grad: false,
        } => (AllGather(First), Split(First)),
        Mapping::ReduceScatterToSequenceParallelRegion => (ReduceScatter(First), AllGather(First)),
        other => {
            return Err(precondition(format!(
                "{other}: this version of hcomm_candle has no CUDA steps for the mapping. \
                 hint: apply it to a CPU tensor"
            )))
        }
    };
    Ok(if backward { paired } else { forward })
}

/// `step` on the tensor of `storage` and `layout` (any strides and start
/// offset): a new contiguous tensor.
pub(super) fn run<T: CudaElement>(
    group: &Comm,
    step: Step,
    what: &str,
    storage: &CudaStorage,
    layout: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    match step {
        Step::Identity => Ok((contiguous::<T>(storage, layout)?, layout.shape().clone())),
        Step::AllReduce => {
            let mut out = contiguous::<T>(storage, layout)?;
            let n = layout.shape().elem_count();
            if n > 0 {
                let device = out.device.clone();
                let stream = device.cuda_stream();
                let mut lent = lend::writable(group, &device, out.as_cuda_slice_mut::<T>()?, &stream, 0, n)?;
                group
                    .all_reduce_in_place(lent.buffer_mut(), ReduceOp::Sum)
                    .map_err(to_candle)?;
            }
            Ok((out, layout.shape().clone()))
        }
        Step::Split(dim) => {
            let blocks = Blocks::new(layout.dims(), dim, group.world(), what)?;
            let mine = layout.narrow(blocks.axis, group.rank() * blocks.part, blocks.part)?;
            Ok((contiguous::<T>(storage, &mine)?, mine.shape().clone()))
        }
        Step::AllGather(dim) => all_gather::<T>(group, dim, what, storage, layout),
        Step::ReduceScatter(dim) => reduce_scatter::<T>(group, dim, what, storage, layout),
    }
}

/// The blocks of a tensor along `axis`: `outer` runs (the product of the
/// dimensions before it), each of `len` slices of `inner` elements;
/// `part` is one rank's share of `len`.
struct Blocks {
    axis: usize,
    outer: usize,
    len: usize,
    inner: usize,
    part: usize,
}

impl Blocks {
    fn new(dims: &[usize], dim: Dim, world: usize, what: &str) -> candle_core::Result<Blocks> {
        let axis = match (dim, dims.len()) {
            (_, 0) => {
                return Err(precondition(format!(
                    "{what}: a tensor of no dimensions (a scalar) has no dimension to split or join"
                )))
            }
            (Dim::First, _) => 0,
            (Dim::Last, n) => n - 1,
        };
        let len = dims[axis];
        if !len.is_multiple_of(world) {
            return Err(precondition(format!(
                "{what}: dimension {axis} has length {len} (shape {dims:?}), which the group size {world} does not divide"
            )));
        }
        Ok(Blocks {
            axis,
            outer: dims[..axis].iter().product(),
            len,
            inner: dims[axis + 1..].iter().product(),
            part: len / world,
        })
    }

    /// The dimensions with the blocked one replaced by `len`.
    fn dims_with(dims: &[usize], axis: usize, len: usize) -> Shape {
        let mut d = dims.to_vec();
        d[axis] = len;
        Shape::from(d)
    }
}

/// `n` zeros of `T` on `device`.
fn zeros<T: CudaElement>(device: &CudaDevice, n: usize) -> candle_core::Result<CudaStorage> {
    Ok(CudaStorage::wrap_cuda_slice(
        device.alloc_zeros::<T>(n)?,
        device.clone(),
    ))
}

/// A contiguous copy of the tensor of `storage` and `layout`.
fn contiguous<T: CudaElement>(storage: &CudaStorage, layout: &Layout) -> candle_core::Result<CudaStorage> {
    let mut out = zeros::<T>(&storage.device, layout.shape().elem_count())?;
    storage.copy_strided_src(&mut out, 0, layout)?;
    Ok(out)
}

fn overflow(what: &str, n: usize, world: usize) -> candle_core::Error {
    precondition(format!("{what}: {n} elements times a group of {world} overflows usize"))
}

/// Every rank's tensor, concatenated along `dim` in group-rank order.
fn all_gather<T: CudaElement>(
    group: &Comm,
    dim: Dim,
    what: &str,
    storage: &CudaStorage,
    layout: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let dims = layout.dims();
    let w = group.world();
    let b = Blocks::new(dims, dim, 1, what)?;
    let n = layout.shape().elem_count();
    let total = n.checked_mul(w).ok_or_else(|| overflow(what, n, w))?;
    let device = &storage.device;
    let copied;
    let (src, start) = match layout.contiguous_offsets() {
        Some((start, _)) => (storage, start),
        None => {
            copied = contiguous::<T>(storage, layout)?;
            (&copied, 0)
        }
    };
    let mut all = zeros::<T>(device, total)?;
    if n > 0 {
        let stream = device.cuda_stream();
        let send = lend::readable(group, device, src.as_cuda_slice::<T>()?, &stream, start, n)?;
        let mut recv = lend::writable(group, device, all.as_cuda_slice_mut::<T>()?, &stream, 0, total)?;
        group.all_gather(send.buffer(), recv.buffer_mut()).map_err(to_candle)?;
    }
    let gathered = b.len.checked_mul(w).ok_or_else(|| overflow(what, b.len, w))?;
    let shape = Blocks::dims_with(dims, b.axis, gathered);
    if b.outer == 1 {
        // Blocks along the first dimension lie end to end: the gather is the result.
        return Ok((all, shape));
    }
    // Rank r's block of run o lands at run o, slot r of the result: `all`
    // read as [outer, rank, chunk] with the rank stride `n`.
    let chunk = b.len * b.inner;
    let interleaved = Layout::new(Shape::from((b.outer, w, chunk)), vec![chunk, n, 1], 0);
    let mut out = zeros::<T>(device, total)?;
    all.copy_strided_src(&mut out, 0, &interleaved)?;
    Ok((out, shape))
}

/// The sum over the group, this rank's slice of it along `dim` kept.
fn reduce_scatter<T: CudaElement>(
    group: &Comm,
    dim: Dim,
    what: &str,
    storage: &CudaStorage,
    layout: &Layout,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let dims = layout.dims();
    let w = group.world();
    let b = Blocks::new(dims, dim, w, what)?;
    let n = layout.shape().elem_count();
    let device = &storage.device;
    let mut out = zeros::<T>(device, n / w)?;
    let shape = Blocks::dims_with(dims, b.axis, b.part);
    if n == 0 {
        return Ok((out, shape));
    }
    let packed;
    let (src, start) = match layout.contiguous_offsets() {
        // Slices along the first dimension lie end to end: send the tensor itself.
        Some((start, _)) if b.outer == 1 => (storage, start),
        _ => {
            // Rank r's slice of every run, packed as block r.
            let mut p = zeros::<T>(device, n)?;
            for r in 0..w {
                let slice = layout.narrow(b.axis, r * b.part, b.part)?;
                storage.copy_strided_src(&mut p, r * (n / w), &slice)?;
            }
            packed = p;
            (&packed, 0)
        }
    };
    {
        let stream = device.cuda_stream();
        let send = lend::readable(group, device, src.as_cuda_slice::<T>()?, &stream, start, n)?;
        let mut recv = lend::writable(group, device, out.as_cuda_slice_mut::<T>()?, &stream, 0, n / w)?;
        group
            .reduce_scatter(send.buffer(), recv.buffer_mut(), ReduceOp::Sum)
            .map_err(to_candle)?;
    }
    Ok((out, shape))
}
