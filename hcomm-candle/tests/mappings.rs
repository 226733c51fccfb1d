//! The candle custom ops on 1 to 4 threads: every mapping's forward result
//! and the gradient `backward()` produces through the paired operation,
//! exact against serial references (small integers, exact in f32).

use candle_core::{Device, Tensor, Var};
use hcomm::ndarray::{self, Array2, Axis, Slice};
use hcomm::tp::Mapping;
use hcomm::Comm;

fn c(e: candle_core::Error) -> hcomm::Error {
    hcomm_candle::to_hcomm(e)
}

/// What rank `r` holds at element `i`.
fn val(r: usize, i: usize) -> f32 {
    (r * 100 + i) as f32
}

fn tensor(r: usize, rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_vec(
        (0..rows * cols).map(|i| val(r, i)).collect::<Vec<_>>(),
        (rows, cols),
        &Device::Cpu,
    )
}

/// Weights of the loss `sum(y * weights)`, so the gradient of `y` is them.
fn weights(rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_vec(
        (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>(),
        (rows, cols),
        &Device::Cpu,
    )
}

/// What one direction of a mapping does, as the serial reference computes it.
#[derive(Clone, Copy, Debug)]
enum Step {
    Identity,
    Sum,
    Split(Axis),
    Gather(Axis),
    SumThenSplit(Axis),
}

const FIRST: Axis = Axis(0);
const LAST: Axis = Axis(1);

/// What `step` leaves rank `r` with when each rank `q` passes `xs[q]`.
fn serial(step: Step, xs: &[Array2<f32>], r: usize) -> Array2<f32> {
    let w = xs.len();
    let sum = || xs.iter().fold(Array2::zeros(xs[0].dim()), |acc, x| acc + x);
    let part = |a: &Array2<f32>, axis: Axis| {
        let n = a.len_of(axis) / w;
        a.slice_axis(axis, Slice::from(r * n..(r + 1) * n)).to_owned()
    };
    match step {
        Step::Identity => xs[r].clone(),
        Step::Sum => sum(),
        Step::Split(axis) => part(&xs[r], axis),
        Step::Gather(axis) => {
            let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
            ndarray::concatenate(axis, &views).unwrap()
        }
        Step::SumThenSplit(axis) => part(&sum(), axis),
    }
}

fn to_array(t: &Tensor) -> candle_core::Result<Array2<f32>> {
    let (rows, cols) = t.dims2()?;
    Array2::from_shape_vec((rows, cols), t.flatten_all()?.to_vec1::<f32>()?).map_err(candle_core::Error::wrap)
}

fn to_tensor(a: &Array2<f32>) -> candle_core::Result<Tensor> {
    Tensor::from_vec(a.iter().copied().collect::<Vec<_>>(), a.dim(), &Device::Cpu)
}

type Forward = fn(&Comm, &Tensor) -> candle_core::Result<Tensor>;

fn gather_from_sequence_without_tensor_parallel_output_grad(group: &Comm, x: &Tensor) -> candle_core::Result<Tensor> {
    hcomm_candle::apply(
        group,
        x,
        Mapping::GatherFromSequenceParallelRegion {
            tensor_parallel_output_grad: false,
        },
    )
}

/// Each mapping (by the function of its name, and the sequence gather
/// without a tensor-parallel output gradient through `apply`) with its
/// forward and backward as Megatron-LM defines them.
const TABLE: [(&str, Forward, Step, Step); 8] = [
    (
        "copy_to_tensor_model_parallel_region",
        hcomm_candle::copy_to_tensor_model_parallel_region,
        Step::Identity,
        Step::Sum,
    ),
    (
        "reduce_from_tensor_model_parallel_region",
        hcomm_candle::reduce_from_tensor_model_parallel_region,
        Step::Sum,
        Step::Identity,
    ),
    (
        "scatter_to_tensor_model_parallel_region",
        hcomm_candle::scatter_to_tensor_model_parallel_region,
        Step::Split(LAST),
        Step::Gather(LAST),
    ),
    (
        "gather_from_tensor_model_parallel_region",
        hcomm_candle::gather_from_tensor_model_parallel_region,
        Step::Gather(LAST),
        Step::Split(LAST),
    ),
    (
        "scatter_to_sequence_parallel_region",
        hcomm_candle::scatter_to_sequence_parallel_region,
        Step::Split(FIRST),
        Step::Gather(FIRST),
    ),
    (
        "gather_from_sequence_parallel_region",
        hcomm_candle::gather_from_sequence_parallel_region,
        Step::Gather(FIRST),
        Step::SumThenSplit(FIRST),
    ),
    (
        "reduce_scatter_to_sequence_parallel_region",
        hcomm_candle::reduce_scatter_to_sequence_parallel_region,
        Step::SumThenSplit(FIRST),
        Step::Gather(FIRST),
    ),
    (
        "gather_from_sequence_parallel_region, tensor_parallel_output_grad = false",
        gather_from_sequence_without_tensor_parallel_output_grad,
        Step::Gather(FIRST),
        Step::Split(FIRST),
    ),
];

/// Every mapping on 1 to 4 ranks: the forward's result, then the gradient
/// of `sum(y * weights)` that `backward()` gives the input (the same
/// weights on every rank, so the output's gradient is them).
#[test]
fn forwards_and_backwards_match_serial_references() {
    for w in 1..=4 {
        hcomm::host::run(w, |comm| {
            let r = comm.rank();
            let xs: Vec<Array2<f32>> = (0..w)
                .map(|q| to_array(&tensor(q, 2 * w, 2 * w)?))
                .collect::<Result<_, _>>()
                .map_err(c)?;
            for (name, forward, fwd, bwd) in TABLE {
                let x = Var::from_tensor(&to_tensor(&xs[r]).map_err(c)?).map_err(c)?;
                let y = forward(comm, x.as_tensor()).map_err(c)?;
                assert_eq!(
                    to_array(&y).map_err(c)?,
                    serial(fwd, &xs, r),
                    "{name} forward on rank {r} of {w}"
                );
                let (rows, cols) = y.dims2().map_err(c)?;
                let g = weights(rows, cols).map_err(c)?;
                let loss = (&y * &g).and_then(|t| t.sum_all()).map_err(c)?;
                let grads = loss.backward().map_err(c)?;
                let gx = grads.get(x.as_tensor()).expect("the input has a gradient");
                let gs = vec![to_array(&g).map_err(c)?; w];
                assert_eq!(
                    to_array(gx).map_err(c)?,
                    serial(bwd, &gs, r),
                    "{name} backward on rank {r} of {w}"
                );
            }

            // In place, with the mean.
            let m = tensor(r, 1, 3).map_err(c)?;
            hcomm_candle::all_reduce_in_place(comm, &m, hcomm::ReduceOp::Avg).map_err(c)?;
            let want: Vec<f32> = (0..3)
                .map(|i| (0..w).map(|q| val(q, i)).sum::<f32>() / w as f32)
                .collect();
            assert_eq!(
                m.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?,
                want,
                "avg on {w} ranks"
            );
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn a_transposed_tensor_is_refused_in_place_and_named() {
    hcomm::host::run(2, |comm| {
        let t = tensor(comm.rank(), 2, 3).map_err(c)?.t().map_err(c)?;
        let e = hcomm_candle::all_reduce_in_place(comm, &t, hcomm::ReduceOp::Sum)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not contiguous") && e.contains("[3, 2]"), "{e}");
        Ok(())
    })
    .unwrap();
}
