//! The tensor-parallel collectives on arrays and [`split`].

use ndarray::{Array, ArrayView, ArrayViewMut, Axis, Dimension, Slice};

use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::parallel::same_shape;

/// Sums `x` over the group, in place (`&mut x` or `x.view_mut()`).
pub fn all_reduce<'a, T: Element, D: Dimension>(group: &Comm, x: impl Into<ArrayViewMut<'a, T, D>>) -> Result<()> {
    all_reduce_with(group, x, ReduceOp::Sum)
}

/// Combines `x` over the group with `op`, in place (`&mut x` or
/// `x.view_mut()`); [`ReduceOp::Avg`] is the mean, rounded as it documents.
pub fn all_reduce_with<'a, T: Element, D: Dimension>(
    group: &Comm,
    x: impl Into<ArrayViewMut<'a, T, D>>,
    op: ReduceOp,
) -> Result<()> {
    let mut x = x.into();
    group.call("tp::all_reduce", || {
        let _span = span(group, "all_reduce", None);
        let shaped = agreeing(group, "tp::all_reduce", x.shape())?;
        if x.is_standard_layout() {
            return shaped.all_reduce_in_place(&mut x, op);
        }
        let mut tmp = standard_copy(&x.view());
        shaped.all_reduce_in_place(&mut tmp, op)?;
        x.assign(&tmp);
        Ok(())
    })
}

/// The concatenation along `dim` of every rank's `x`, in group-rank order.
pub fn all_gather<T: Element, D: Dimension>(group: &Comm, x: ArrayView<'_, T, D>, dim: isize) -> Result<Array<T, D>> {
    group.call("tp::all_gather", || {
        let _span = span(group, "all_gather", Some(dim));
        let shaped = agreeing(group, "tp::all_gather", x.shape())?;
        let axis = local_check(&shaped, axis(x.shape(), dim, "tp::all_gather"))?;
        let x = contiguous(x);
        let (n, w) = (x.len(), group.world());
        let mut all = vec![T::ZERO; n * w];
        shaped.all_gather(&x, &mut all)?;
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
        let shaped = agreeing(group, "tp::reduce_scatter", x.shape())?;
        let w = group.world();
        let checked = axis(x.shape(), dim, "tp::reduce_scatter")
            .and_then(|a| Ok((a, part_len(x.shape(), a, w, "tp::reduce_scatter")?)));
        let (axis, part) = local_check(&shaped, checked)?;
        let mut recv = vec![T::ZERO; x.len() / w.max(1)];
        if axis.index() == 0 && x.is_standard_layout() {
            // Slices along the first axis lie end to end: send the array itself.
            shaped.reduce_scatter(&x, &mut recv, ReduceOp::Sum)?;
        } else {
            let mut send = Vec::with_capacity(x.len());
            for r in 0..w {
                send.extend(
                    x.slice_axis(axis, Slice::from(r * part..(r + 1) * part))
                        .iter()
                        .copied(),
                );
            }
            shaped.reduce_scatter(&send, &mut recv, ReduceOp::Sum)?;
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

/// The handle a `tp` call runs its collective on, its ranks agreeing on
/// `shape`: where the backend compares collective headers, one that
/// carries the shape in them (no message of its own); elsewhere `group`,
/// after an exchange that compares shapes.
fn agreeing(group: &Comm, what: &str, shape: &[usize]) -> Result<Comm> {
    if let Some(shaped) = group.shaped(shape) {
        return Ok(shaped);
    }
    same_shape(group, what, shape)?;
    Ok(group.clone())
}

/// `checked`, a check of this rank's arguments, as the call's result; when
/// it failed, the ranks that passed it still wait in the call's collective:
/// this rank enters a barrier (with the shape in its header) first, which
/// fails theirs with a mismatch naming this rank's call instead of leaving
/// them waiting. Where every rank failed alike, the barrier completes and
/// the error is this rank's own; where it fails too (the others passed, or
/// passed other shapes), the error names both causes.
fn local_check<R>(shaped: &Comm, checked: Result<R>) -> Result<R> {
    match checked {
        Ok(r) => Ok(r),
        Err(Error::Precondition { message }) => match shaped.barrier() {
            Ok(()) => Err(Error::Precondition { message }),
            Err(other) => Err(Error::precondition(format!(
                "{message}; and the group disagrees: {other}"
            ))),
        },
        Err(e) => Err(e),
    }
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
pub(super) fn standard_copy<T: Element, D: Dimension>(x: &ArrayView<'_, T, D>) -> Array<T, D> {
    let mut out = Array::from_elem(x.raw_dim(), T::ZERO);
    out.assign(x);
    out
}
