//! Megatron-LM's tensor- and sequence-parallel mappings, each a forward
//! operation paired with the backward that autograd runs for it, and a
//! function per mapping named as in Megatron-LM.

use ndarray::{Array, ArrayView, Dimension};

use super::ops::{all_gather, all_reduce, reduce_scatter, split, standard_copy};
use super::step::{Dim, Step};
use crate::comm::Comm;
use crate::element::Element;
use crate::error::Result;

/// One of Megatron-LM's paired tensor-parallel mappings. Its forward and
/// its backward ([`Mapping::forward`], [`Mapping::backward`]) each take one
/// [`Step`] ([`Mapping::forward_step`], [`Mapping::backward_step`]), along
/// the [`Dim`] `First` (the sequence) or `Last` (the hidden one):
///
/// | mapping | forward | backward |
/// |---|---|---|
/// | [`copy_to_tensor_model_parallel_region`] | `Identity` | `AllReduce` (sum) |
/// | [`reduce_from_tensor_model_parallel_region`] | `AllReduce` (sum) | `Identity` |
/// | [`scatter_to_tensor_model_parallel_region`] | `Split(Last)` | `AllGather(Last)` |
/// | [`gather_from_tensor_model_parallel_region`] | `AllGather(Last)` | `Split(Last)` |
/// | [`scatter_to_sequence_parallel_region`] | `Split(First)` | `AllGather(First)` |
/// | [`gather_from_sequence_parallel_region`] | `AllGather(First)` | `ReduceScatter(First)`; `Split(First)` where the output's gradient is not tensor-parallel |
/// | [`reduce_scatter_to_sequence_parallel_region`] | `ReduceScatter(First)` | `AllGather(First)` |
///
/// A column-parallel linear layer is `copy_to` on its input (so its input
/// gradient is summed over the group) and, when its output is gathered,
/// `gather_from`; a row-parallel one is `scatter_to` on an input that is not
/// split yet and `reduce_from` on its output. With sequence parallelism the
/// `copy_to` / `reduce_from` pair becomes `gather_from_sequence_parallel_region`
/// / `reduce_scatter_to_sequence_parallel_region`.
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

impl Mapping {
    /// Every mapping, in the order of the table above (the sequence
    /// gather with and without a tensor-parallel output gradient).
    pub const ALL: &'static [Mapping] = &[
        Mapping::CopyToTensorModelParallelRegion,
        Mapping::ReduceFromTensorModelParallelRegion,
        Mapping::ScatterToTensorModelParallelRegion,
        Mapping::GatherFromTensorModelParallelRegion,
        Mapping::ScatterToSequenceParallelRegion,
        Mapping::GatherFromSequenceParallelRegion {
            tensor_parallel_output_grad: true,
        },
        Mapping::GatherFromSequenceParallelRegion {
            tensor_parallel_output_grad: false,
        },
        Mapping::ReduceScatterToSequenceParallelRegion,
    ];

    /// The mapping's row of the table: Megatron-LM's name, the forward
    /// step and the backward step.
    fn row(self) -> (&'static str, Step, Step) {
        use Dim::{First, Last};
        use Step::{AllGather, AllReduce, Identity, ReduceScatter, Split};
        match self {
            Mapping::CopyToTensorModelParallelRegion => ("copy_to_tensor_model_parallel_region", Identity, AllReduce),
            Mapping::ReduceFromTensorModelParallelRegion => {
                ("reduce_from_tensor_model_parallel_region", AllReduce, Identity)
            }
            Mapping::ScatterToTensorModelParallelRegion => {
                ("scatter_to_tensor_model_parallel_region", Split(Last), AllGather(Last))
            }
            Mapping::GatherFromTensorModelParallelRegion => {
                ("gather_from_tensor_model_parallel_region", AllGather(Last), Split(Last))
            }
            Mapping::ScatterToSequenceParallelRegion => {
                ("scatter_to_sequence_parallel_region", Split(First), AllGather(First))
            }
            Mapping::GatherFromSequenceParallelRegion {
                tensor_parallel_output_grad: true,
            } => (
                "gather_from_sequence_parallel_region",
                AllGather(First),
                ReduceScatter(First),
            ),
            Mapping::GatherFromSequenceParallelRegion {
                tensor_parallel_output_grad: false,
            } => ("gather_from_sequence_parallel_region", AllGather(First), Split(First)),
            Mapping::ReduceScatterToSequenceParallelRegion => (
                "reduce_scatter_to_sequence_parallel_region",
                ReduceScatter(First),
                AllGather(First),
            ),
        }
    }

    /// Megatron-LM's name of the mapping.
    pub fn name(self) -> &'static str {
        self.row().0
    }

    /// The step of the forward: its column of the table on [`Mapping`].
    pub fn forward_step(self) -> Step {
        self.row().1
    }

    /// The step of the backward: its column of the table on [`Mapping`].
    pub fn backward_step(self) -> Step {
        self.row().2
    }

    /// The forward operation on `x`, collective over `group` (every rank
    /// calls it) unless it is an identity or a split.
    pub fn forward<T: Element, D: Dimension>(self, group: &Comm, x: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
        apply(self.forward_step(), group, x)
    }

    /// The backward operation on the gradient of the forward's output: the
    /// gradient of its input.
    pub fn backward<T: Element, D: Dimension>(self, group: &Comm, grad: ArrayView<'_, T, D>) -> Result<Array<T, D>> {
        apply(self.backward_step(), group, grad)
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
        Step::Split(dim) => Ok(standard_copy(&split(group, x, dim.signed())?)),
        Step::AllGather(dim) => all_gather(group, x, dim.signed()),
        Step::ReduceScatter(dim) => reduce_scatter(group, x, dim.signed()),
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

#[cfg(test)]
mod tests {
    use ndarray::{concatenate, Array2, Axis, Slice};

    use super::{Dim, Mapping, Step};

    /// Rank `r`'s input, 6 by 6 (2 and 3 divide both lengths): distinct
    /// values per rank and element.
    fn input(r: usize) -> Array2<f32> {
        Array2::from_shape_fn((6, 6), |(i, j)| (r * 100 + i * 6 + j) as f32)
    }

    /// What `step` leaves rank `r` of `w` with, computed serially.
    fn serial(step: Step, w: usize, r: usize) -> Array2<f32> {
        let xs: Vec<Array2<f32>> = (0..w).map(input).collect();
        let axis = |d: Dim| match d {
            Dim::First => Axis(0),
            Dim::Last => Axis(1),
        };
        let part = |a: &Array2<f32>, d: Dim| {
            let n = a.len_of(axis(d)) / w;
            a.slice_axis(axis(d), Slice::from(r * n..(r + 1) * n)).to_owned()
        };
        let sum = || xs.iter().fold(Array2::zeros((6, 6)), |acc, x| acc + x);
        match step {
            Step::Identity => xs[r].clone(),
            Step::AllReduce => sum(),
            Step::Split(d) => part(&xs[r], d),
            Step::AllGather(d) => {
                let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
                concatenate(axis(d), &views).unwrap()
            }
            Step::ReduceScatter(d) => part(&sum(), d),
        }
    }

    #[test]
    fn each_mappings_steps_do_what_its_forward_and_backward_do_on_host_ranks() {
        for w in [2, 3] {
            for &mapping in Mapping::ALL {
                for (backward, step) in [(false, mapping.forward_step()), (true, mapping.backward_step())] {
                    let got = crate::host::run(w, |comm| {
                        let x = input(comm.rank());
                        if backward {
                            mapping.backward(comm, x.view())
                        } else {
                            mapping.forward(comm, x.view())
                        }
                    })
                    .unwrap();
                    for (r, got) in got.iter().enumerate() {
                        assert_eq!(
                            got,
                            &serial(step, w, r),
                            "{mapping} backward={backward} {step:?}, rank {r} of {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn dims_index_the_first_and_the_last_dimension_and_not_a_scalars() {
        assert_eq!(Dim::First.index(3), Some(0));
        assert_eq!(Dim::Last.index(3), Some(2));
        assert_eq!(Dim::First.index(1), Some(0));
        assert_eq!(Dim::Last.index(1), Some(0));
        assert_eq!(Dim::First.index(0), None);
        assert_eq!(Dim::Last.index(0), None);
    }
}
