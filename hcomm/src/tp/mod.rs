//! Tensor-parallel operations on `ndarray` arrays: the sums, gathers and
//! splits of Megatron-LM's column- and row-parallel layers, and
//! Megatron-LM's paired mappings ([`Mapping`]), each forward with the
//! backward that autograd runs for it, and the table of their [`Step`]s
//! (on [`Mapping`]) for code that runs them on memory of its own.
//!
//! Every operation is collective over `group` (usually
//! [`Context::tp`](crate::parallel::Context::tp)) except [`split`]. `dim`
//! counts from the end when negative (`-1` is the last dimension). Every
//! rank must pass an array of the same shape. The shape travels in the
//! header every collective already compares across ranks, so agreeing
//! costs no message of its own: a shape that differs fails the call on
//! every rank with [`Error::Mismatch`](crate::Error::Mismatch) naming both
//! shapes, which, like every collective mismatch, ends the group (on the
//! device backends, whose libraries compare no headers, an
//! exchange before the call finds it: [`Error::Precondition`](crate::Error::Precondition)
//! naming the dimension). A `dim` out of range or a length along `dim`
//! that the group size does not divide is an `Error::Precondition` naming
//! the dimension, on every rank.
//!
//! Arrays in any memory layout are accepted; those not in standard
//! (row-major, contiguous) layout are copied into one first. Results are in
//! standard layout. In-place operations take the array the way
//! [`Comm::all_reduce_in_place`](crate::Comm::all_reduce_in_place) takes a
//! buffer: `&mut x` (or a view, `x.view_mut()`).
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
//!     let mut mean = mine.clone();
//!     hcomm::tp::all_reduce_with(comm, &mut mean, hcomm::ReduceOp::Avg)?;
//!     assert_eq!(mean, array![[0.5, 0.5], [0.5, 0.5]]);
//!     Ok(())
//! })
//! .unwrap();
//! ```

mod mapping;
mod ops;
mod step;

pub use mapping::{
    copy_to_tensor_model_parallel_region, gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region, reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region, scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region, Mapping,
};
pub use ops::{all_gather, all_reduce, all_reduce_with, reduce_scatter, split};
pub use step::{Dim, Step};
