//! Megatron-LM's tensor- and sequence-parallel mappings, each a forward
//! operation paired with the backward that autograd runs for it.
//!
//! | mapping | forward | backward |
//! |---|---|---|
//! | [`copy_to_tensor_model_parallel_region`] | identity | all-reduce (sum) |
//! | [`reduce_from_tensor_model_parallel_region`] | all-reduce (sum) | identity |
//! | [`scatter_to_tensor_model_parallel_region`] | split, last dim | all-gather, last dim |
//! | [`gather_from_tensor_model_parallel_region`] | all-gather, last dim | split, last dim |
//! | [`scatter_to_sequence_parallel_region`] | split, first dim | all-gather, first dim |
//! | [`gather_from_sequence_parallel_region`] | all-gather, first dim | reduce-scatter, first dim (split where the output's gradient is not tensor-parallel) |
//! | [`reduce_scatter_to_sequence_parallel_region`] | reduce-scatter, first dim | all-gather, first dim |
//!
//! A column-parallel linear layer is `copy_to` on its input (so its input
//! gradient is summed over the group) and, when its output is gathered,
//! `gather_from`; a row-parallel one is `scatter_to` on an input that is not
//! split yet and `reduce_from` on its output. With sequence parallelism the
//! `copy_to` / `reduce_from` pair becomes `gather_from_sequence_parallel_region`
//! / `reduce_scatter_to_sequence_parallel_region`.

use ndarray::{Array, ArrayView, Dimension};

use super::ops::{all_gather, all_reduce, reduce_scatter, split, standard_copy};
use crate::comm::Comm;
use crate::element::Element;
use crate::error::Result;

/// One of Megatron-LM's paired tensor-parallel mappings: what
/// [`Mapping::forward`] and [`Mapping::backward`] do is in the table of
/// the [module](crate::tp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mapping {
    /// `copy_to_tensor_model_parallel_region`.
    CopyToTensorModelParallelRegion,
    /// `reduce_from_tensor_model_parallel_region`.
    ReduceFromTensorModelParallelRegion,
    /// `scatter_to_tensor_model_parallel_region`.
    ScatterToTensorModelParallelRegion,
    /// `gather_from_tensor_model_parallel_region`.
    GatherFromTensorModelParallelRegion,
    /// `scatter_to_sequence_parallel_region`.
    ScatterToSequenceParallelRegion,
    /// `gather_from_sequence_parallel_region`; `tensor_parallel_output_grad`
    /// as in Megatron-LM: whether the gradient of the output differs across
    /// the group (then the backward reduce-scatters it; else it splits it).
    GatherFromSequenceParallelRegion {
        /// Megatron-LM's flag of the same name (`true` there by default).
        tensor_parallel_output_grad: bool,
    },
    /// `reduce_scatter_to_sequence_parallel_region`.
    ReduceScatterToSequenceParallelRegion,
}

/// What one direction of a mapping does.
#[derive(Clone, Copy)]
enum Step {
    Identity,
    AllReduce,
    Split(isize),
    AllGather(isize),
    ReduceScatter(isize),
}

/// The last dimension (the hidden one) and the first (the sequence).
const LAST: isize = -1;
const FIRST: isize = 0;

impl Mapping {
    /// The mapping's row of the table: Megatron-LM's name, the forward
    /// step and the backward step.
    fn row(self) -> (&'static str, Step, Step) {
        use Step::{AllGather, AllReduce, Identity, ReduceScatter, Split};
        match self {
            Mapping::CopyToTensorModelParallelRegion => ("copy_to_tensor_model_parallel_region", Identity, AllReduce),
            Mapping::ReduceFromTensorModelParallelRegion => {
                ("reduce_from_tensor_model_parallel_region", AllReduce, Identity)
            }
            Mapping::ScatterToTensorModelParallelRegion => {
                ("scatter_to_tensor_model_parallel_region", Split(LAST), AllGather(LAST))
            }
            Mapping::GatherFromTensorModelParallelRegion => {
                ("gather_from_tensor_model_parallel_region", AllGather(LAST), Split(LAST))
            }
            Mapping::ScatterToSequenceParallelRegion => {
                ("scatter_to_sequence_parallel_region", Split(FIRST), AllGather(FIRST))
            }
            Mapping::GatherFromSequenceParallelRegion {
                tensor_parallel_output_grad: true,
            } => (
                "gather_from_sequence_parallel_region",
                AllGather(FIRST),
                ReduceScatter(FIRST),
            ),
            Mapping::GatherFromSequenceParallelRegion {
                tensor_parallel_output_grad: false,
            } => ("gather_from_sequence_parallel_region", AllGather(FIRST), Split(FIRST)),
            Mapping::ReduceScatterToSequenceParallelRegion => (
                "reduce_scatter_to_sequence_parallel_region",
                ReduceScatter(FIRST),
                AllGather(FIRST),
            ),
        }
    }

    /// Megatron-LM's name of the mapping.
    pub fn name(self) -> &'static str {
        self.row().0
    }

    /// The forward operation on `x`, collective over `group` (every rank
    /// calls it) unless it is an identity or a split.
    pub fn forward<T: Element, D: Dimension>(self, group: &Comm, x: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
        apply(self.row().1, group, x)
    }

    /// The backward operation on the gradient of the forward's output: the
    /// gradient of its input.
    pub fn backward<T: Element, D: Dimension>(self, group: &Comm, grad: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
        apply(self.row().2, group, grad)
    }
}

impl std::fmt::Display for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn apply<T: Element, D: Dimension>(step: Step, group: &Comm, x: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
    match step {
        Step::Identity => Ok(standard_copy(&x)),
        Step::AllReduce => {
            let mut out = standard_copy(&x);
            all_reduce(group, &mut out)?;
            Ok(out)
        }
        Step::Split(dim) => Ok(standard_copy(&split(group, x, dim)?)),
        Step::AllGather(dim) => all_gather(group, x, dim),
        Step::ReduceScatter(dim) => reduce_scatter(group, x, dim),
    }
}

/// A function per mapping, named as in Megatron-LM: the mapping's forward.
macro_rules! forwards {
    ($($(#[$doc:meta])* $name:ident => $mapping:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name<T: Element, D: Dimension>(group: &Comm, x: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
            $mapping.forward(group, x)
        }
    )*};
}

forwards! {
    /// Identity forward; the backward sums the gradient over the group.
    copy_to_tensor_model_parallel_region => Mapping::CopyToTensorModelParallelRegion;
    /// Sums over the group; the backward passes the gradient through.
    reduce_from_tensor_model_parallel_region => Mapping::ReduceFromTensorModelParallelRegion;
    /// This rank's slice along the last dimension; the backward all-gathers it.
    scatter_to_tensor_model_parallel_region => Mapping::ScatterToTensorModelParallelRegion;
    /// All-gathers along the last dimension; the backward keeps this rank's slice.
    gather_from_tensor_model_parallel_region => Mapping::GatherFromTensorModelParallelRegion;
    /// This rank's slice along the first (sequence) dimension; the backward
    /// all-gathers it.
    scatter_to_sequence_parallel_region => Mapping::ScatterToSequenceParallelRegion;
    /// All-gathers along the first (sequence) dimension; the backward
    /// reduce-scatters the gradient (Megatron-LM's default,
    /// `tensor_parallel_output_grad = true`).
    gather_from_sequence_parallel_region => Mapping::GatherFromSequenceParallelRegion { tensor_parallel_output_grad: true };
    /// Sums over the group and keeps this rank's slice along the first
    /// (sequence) dimension; the backward all-gathers it.
    reduce_scatter_to_sequence_parallel_region => Mapping::ReduceScatterToSequenceParallelRegion;
}
