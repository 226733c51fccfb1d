//! Megatron-LM's mappings as steps: what the forward and the backward of
//! each [`Mapping`] do, the table of [`hcomm::tp`], for the CUDA halves
//! (which run each step on device memory). The tests check the table
//! against hcomm's own mappings on host ranks.

use hcomm::tp::Mapping;

use crate::blocks::Dim;

/// What one direction of a mapping does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Identity,
    AllReduce,
    Split(Dim),
    AllGather(Dim),
    ReduceScatter(Dim),
}

/// The step of `mapping`'s forward, or of its backward; an error naming a
/// mapping this table does not know.
pub(crate) fn of(mapping: Mapping, backward: bool) -> Result<Step, String> {
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
            return Err(format!(
                "{other}: this version of hcomm_candle has no CUDA steps for the mapping. \
                 hint: apply it to a CPU tensor"
            ))
        }
    };
    Ok(if backward { paired } else { forward })
}

#[cfg(test)]
mod tests {
    use hcomm::ndarray::{concatenate, Array2, Axis, Slice};
    use hcomm::tp::Mapping;

    use super::{of, Step};
    use crate::blocks::Dim;

    const MAPPINGS: [Mapping; 8] = [
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

    /// Rank `r`'s input: distinct values per rank and element.
    fn input(r: usize) -> Array2<f32> {
        Array2::from_shape_fn((4, 6), |(i, j)| (r * 100 + i * 6 + j) as f32)
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
        let sum = || xs.iter().fold(Array2::zeros((4, 6)), |acc, x| acc + x);
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
    fn the_table_does_what_hcomms_mappings_do_on_two_host_ranks() {
        for mapping in MAPPINGS {
            for backward in [false, true] {
                let step = of(mapping, backward).unwrap();
                let got = hcomm::host::run(2, |comm| {
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
                        &serial(step, 2, r),
                        "{mapping} backward={backward} {step:?}, rank {r}"
                    );
                }
            }
        }
    }
}
