//! The steps of Megatron-LM's mappings ([`hcomm::tp::Step`], the table on
//! [`hcomm::tp::Mapping`]) on CUDA storage: the collectives run on device
//! memory through the NCCL backend, and the copies around them (a
//! contiguous copy, a rank's slice, the blocks of a gather or a
//! reduce-scatter along an inner dimension) are candle's own strided
//! copies on its stream.

use candle_core::backend::BackendStorage;
use candle_core::{CudaDevice, CudaStorage, Layout, Shape};
use hcomm::tp::{Dim, Step};
use hcomm::{Comm, ReduceOp};

use super::{lend, precondition, CudaElement};
use crate::blocks::Blocks;
use crate::to_candle;

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
            let blocks = Blocks::new(layout.dims(), dim, group.world(), what).map_err(precondition)?;
            let mine = layout.narrow(blocks.axis, group.rank() * blocks.part, blocks.part)?;
            Ok((contiguous::<T>(storage, &mine)?, mine.shape().clone()))
        }
        Step::AllGather(dim) => all_gather::<T>(group, dim, what, storage, layout),
        Step::ReduceScatter(dim) => reduce_scatter::<T>(group, dim, what, storage, layout),
        other => Err(precondition(format!(
            "{what}: this version of hcomm_candle has no CUDA step for {other:?}. hint: apply the mapping to a CPU tensor"
        ))),
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

/// The tensor as one contiguous run: `storage` itself from the layout's
/// start offset where the layout is contiguous, else a contiguous copy
/// (kept in `copy`), from 0.
fn run_of<'a, T: CudaElement>(
    storage: &'a CudaStorage,
    layout: &Layout,
    copy: &'a mut Option<CudaStorage>,
) -> candle_core::Result<(&'a CudaStorage, usize)> {
    if let Some((start, _)) = layout.contiguous_offsets() {
        return Ok((storage, start));
    }
    Ok((copy.insert(contiguous::<T>(storage, layout)?), 0))
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
    let b = Blocks::new(dims, dim, 1, what).map_err(precondition)?;
    let n = layout.shape().elem_count();
    let total = n.checked_mul(w).ok_or_else(|| overflow(what, n, w))?;
    let device = &storage.device;
    let mut copy = None;
    let (src, start) = run_of::<T>(storage, layout, &mut copy)?;
    let mut all = zeros::<T>(device, total)?;
    if n > 0 {
        let stream = device.cuda_stream();
        let send = lend::readable(group, device, src.as_cuda_slice::<T>()?, &stream, start, n)?;
        let mut recv = lend::writable(group, device, all.as_cuda_slice_mut::<T>()?, &stream, 0, total)?;
        group.all_gather(send.buffer(), recv.buffer_mut()).map_err(to_candle)?;
    }
    let gathered = b.len.checked_mul(w).ok_or_else(|| overflow(what, b.len, w))?;
    let shape = b.dims_with(dims, gathered);
    if b.outer == 1 {
        // Blocks along the first dimension lie end to end: the gather is the result.
        return Ok((all, shape));
    }
    let mut out = zeros::<T>(device, total)?;
    all.copy_strided_src(&mut out, 0, &b.gathered(w))?;
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
    let b = Blocks::new(dims, dim, w, what).map_err(precondition)?;
    let n = layout.shape().elem_count();
    let device = &storage.device;
    let mut out = zeros::<T>(device, n / w)?;
    let shape = b.dims_with(dims, b.part);
    if n == 0 {
        return Ok((out, shape));
    }
    let mut copy = None;
    let (mut src, mut start) = run_of::<T>(storage, layout, &mut copy)?;
    let packed;
    if b.outer > 1 {
        let mut p = zeros::<T>(device, n)?;
        src.copy_strided_src(&mut p, 0, &b.packed(w, start))?;
        packed = p;
        (src, start) = (&packed, 0);
    }
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
