//! Tensor-parallel operations on `ndarray` arrays: the sums, gathers and
//! splits of Megatron-LM's column- and row-parallel layers.
//!
//! Every operation is collective over `group` (usually
//! [`Context::tp`](crate::parallel::Context::tp)) except [`split`]. `dim`
//! counts from the end when negative (`-1` is the last dimension). Every
//! rank must pass an array of the same shape; before moving any data the
//! ranks compare shapes, so a shape that differs, a `dim` out of range or a
//! length along `dim` that the group size does not divide fails on every
//! rank with an [`Error::Precondition`] naming the dimension.
//!
//! Arrays in any memory layout are accepted; those not in standard
//! (row-major, contiguous) layout are copied into one first. Results are in
//! standard layout.
//!
//! ```
//! use hcomm::ndarray::{array, Array2};
//!
//! hcomm::host::run(2, |comm| {
//!     let r = comm.rank() as f32;
//!     let mine: Array2<f32> = array![[r, r], [r, r]];
//!     let whole = hcomm::tp::all_gather(comm, mine.view(), -1)?;
//!     assert_eq!(whole, array![[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]);
//!     let back = hcomm::tp::split(comm, whole.view(), -1)?;
//!     assert_eq!(back, mine);
//!     Ok(())
//! })
//! .unwrap();
//! ```

use ndarray::{Array, ArrayView, ArrayViewMut, Axis, Dimension, Slice};

use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::parallel::same_shape;

/// Sums `x` over the group, in place.
pub fn all_reduce<T: Element, D: Dimension>(group: &Comm, mut x: ArrayViewMut<'_, T, D>) -> Result<()> {
    group.call("tp::all_reduce", || {
        let _span = span(group, "all_reduce", None);
        same_shape(group, "tp::all_reduce", x.shape())?;
        if x.is_standard_layout() {
            return group.all_reduce_in_place(&mut x, ReduceOp::Sum);
        }
        let mut tmp = standard_copy(&x.view());
        group.all_reduce_in_place(&mut tmp, ReduceOp::Sum)?;
        x.assign(&tmp);
        Ok(())
    })
}

/// The concatenation along `dim` of every rank's `x`, in group-rank order.
pub fn all_gather<T: Element, D: Dimension>(group: &Comm, x: ArrayView<'_, T, D>, dim: isize) -> Result<Array<T, D>> {
    group.call("tp::all_gather", || {
        let _span = span(group, "all_gather", Some(dim));
        same_shape(group, "tp::all_gather", x.shape())?;
        let axis = axis(x.shape(), dim, "tp::all_gather")?;
        let x = contiguous(x);
        let (n, w) = (x.len(), group.world());
        let mut all = vec![T::ZERO; n * w];
        group.all_gather(&x, &mut all)?;
        let len = x.len_of(axis);
        let mut shape = x.raw_dim();
        shape[axis.index()] = len * w;
        if axis.index() == 0 {
            // Blocks along the first axis lie end to end: the gather is the result.
            return Array::from_shape_vec(shape, all).map_err(|e| Error::precondition(format!("tp::all_gather: {e}")));
        }
        let mut out = Array::from_elem(shape, T::ZERO);
        for r in 0..w {
            let block = ArrayView::from_shape(x.raw_dim(), &all[r * n..(r + 1) * n])
                .map_err(|e| Error::precondition(format!("tp::all_gather: {e}")))?;
            out.slice_axis_mut(axis, Slice::from(r * len..(r + 1) * len))
                .assign(&block);
        }
        Ok(out)
    })
}

/// Sums `x` over the group and keeps this rank's slice along `dim` (slice
/// `r` of `group.world()` equal slices).
#[allow(clippy::needless_pass_by_value)] // views are passed by value, as ndarray passes them
pub fn reduce_scatter<T: Element, D: Dimension>(
    group: &Comm,
    x: ArrayView<'_, T, D>,
    dim: isize,
) -> Result<Array<T, D>> {
    group.call("tp::reduce_scatter", || {
        let _span = span(group, "reduce_scatter", Some(dim));
        same_shape(group, "tp::reduce_scatter", x.shape())?;
        let axis = axis(x.shape(), dim, "tp::reduce_scatter")?;
        let w = group.world();
        let part = part_len(x.shape(), axis, w, "tp::reduce_scatter")?;
        let mut recv = vec![T::ZERO; x.len() / w.max(1)];
        if axis.index() == 0 && x.is_standard_layout() {
            // Slices along the first axis lie end to end: send the array itself.
            group.reduce_scatter(&x, &mut recv, ReduceOp::Sum)?;
        } else {
            let mut send = Vec::with_capacity(x.len());
            for r in 0..w {
                send.extend(
                    x.slice_axis(axis, Slice::from(r * part..(r + 1) * part))
                        .iter()
                        .copied(),
                );
            }
            group.reduce_scatter(&send, &mut recv, ReduceOp::Sum)?;
        }
        let mut shape = x.raw_dim();
        shape[axis.index()] = part;
        Array::from_shape_vec(shape, recv).map_err(|e| Error::precondition(format!("tp::reduce_scatter: {e}")))
    })
}

/// This rank's slice of `x` along `dim` (slice `r` of `group.world()` equal
/// slices), without communicating.
pub fn split<'a, T: Element, D: Dimension>(
    group: &Comm,
    x: ArrayView<'a, T, D>,
    dim: isize,
) -> Result<ArrayView<'a, T, D>> {
    let axis = axis(x.shape(), dim, "tp::split")?;
    let part = part_len(x.shape(), axis, group.world(), "tp::split")?;
    let r = group.rank();
    let mut x = x;
    x.slice_axis_inplace(axis, Slice::from(r * part..(r + 1) * part));
    Ok(x)
}

/// The span of a tensor-parallel operation.
fn span(group: &Comm, op: &'static str, dim: Option<isize>) -> tracing::span::EnteredSpan {
    tracing::debug_span!("tp", op, comm.rank = group.rank(), comm.world = group.world(), dim).entered()
}

/// The axis `dim` names in an array of `shape` (negative: from the end).
pub(crate) fn axis(shape: &[usize], dim: isize, what: &str) -> Result<Axis> {
    let n = shape.len() as isize;
    let d = if dim < 0 { dim + n } else { dim };
    if (0..n).contains(&d) {
        Ok(Axis(d as usize))
    } else {
        Err(Error::precondition(format!(
            "{what}: dim {dim} is out of range for an array of {n} dimensions (shape {shape:?})"
        )))
    }
}

/// The length of one of `parts` equal slices along `axis`.
fn part_len(shape: &[usize], axis: Axis, parts: usize, what: &str) -> Result<usize> {
    let len = shape[axis.index()];
    if len.is_multiple_of(parts) {
        Ok(len / parts)
    } else {
        Err(Error::precondition(format!(
            "{what}: dimension {} has length {len} (shape {shape:?}), which the group size {parts} does not divide",
            axis.index()
        )))
    }
}

/// `x` itself when it is in standard layout, else a standard-layout copy.
fn contiguous<T: Element, D: Dimension>(x: ArrayView<'_, T, D>) -> ndarray::CowArray<'_, T, D> {
    if x.is_standard_layout() {
        x.into()
    } else {
        standard_copy(&x).into()
    }
}

/// A standard-layout copy of `x`.
fn standard_copy<T: Element, D: Dimension>(x: &ArrayView<'_, T, D>) -> Array<T, D> {
    let mut out = Array::from_elem(x.raw_dim(), T::ZERO);
    out.assign(x);
    out
}
