//! The `cuda` feature on a real GPU, world 1 on the NCCL backend (one GPU
//! holds one NCCL rank): the in-place all-reduce and every mapping's
//! forward and backward on candle CUDA tensors, exact against the same
//! calls on CPU tensors (a host-backend group of one); contiguous,
//! transposed and offset inputs, each written by candle's stream right
//! after a long matmul, so a collective that did not wait for candle's
//! stream would read memory not yet written. A CUDA tensor on a
//! host-backend communicator fails with an error naming both backends.
//! Without a GPU or NCCL the tests say why and pass, unless
//! `HCOMM_DEVICE_CHECK=1` (set by scripts/device-python.sh), where that is
//! a failure.

use candle_core::{DType, Device, Tensor, Var};
use hcomm::nccl::Nccl;
use hcomm::tp::Mapping;
use hcomm::{Comm, CommOptions, ReduceOp};
use hcomm_candle::to_hcomm;

/// The NCCL library when a GPU is there; `None` (the test passes) when not
/// and the device check was not asked for.
fn nccl() -> Option<Nccl> {
    let required = std::env::var("HCOMM_DEVICE_CHECK").is_ok_and(|v| v == "1");
    match Nccl::load().and_then(|n| n.device_count().map(|g| (n, g))) {
        Ok((nccl, gpus)) if gpus > 0 => Some(nccl),
        Ok(_) | Err(_) if !required => {
            eprintln!("hcomm-candle cuda test skipped: no NCCL device");
            None
        }
        Ok(_) => panic!("HCOMM_DEVICE_CHECK=1 but no CUDA device"),
        Err(e) => panic!("HCOMM_DEVICE_CHECK=1 but NCCL cannot run: {e}"),
    }
}

/// Runs `f` on rank 0 of an NCCL group of one, with the rank's device.
fn on_gpu<R: Send>(nccl: &Nccl, f: impl Fn(&Comm, &Device) -> candle_core::Result<R> + Sync) -> R {
    let mut out = nccl
        .run(1, &CommOptions::default(), |comm| {
            let device = Device::new_cuda(0).map_err(to_hcomm)?;
            f(comm, &device).map_err(to_hcomm)
        })
        .unwrap_or_else(|e| panic!("on the GPU: {e}"));
    out.remove(0)
}

/// Runs `f` on rank 0 of a host group of one, with the CPU device.
fn on_cpu<R: Send>(f: impl Fn(&Comm, &Device) -> candle_core::Result<R> + Sync) -> R {
    let mut out = hcomm::host::run(1, |comm| f(comm, &Device::Cpu).map_err(to_hcomm))
        .unwrap_or_else(|e| panic!("on the CPU: {e}"));
    out.remove(0)
}

const ROWS: usize = 4;
const COLS: usize = 6;

/// How the input of a call is laid out.
#[derive(Clone, Copy, Debug)]
enum Input {
    Contiguous,
    /// A transposed view (not contiguous).
    Transposed,
    /// Rows 1.. of a larger tensor (contiguous from a start offset).
    Offset,
}

const INPUTS: [Input; 3] = [Input::Contiguous, Input::Transposed, Input::Offset];

/// Distinct values, exact in every floating type used.
fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 7.0).collect()
}

/// Keeps candle's stream busy for a while (a few large matmuls), so work
/// enqueued next runs well after the host has moved on.
fn busy(device: &Device) -> candle_core::Result<Tensor> {
    if device.is_cpu() {
        return Tensor::zeros(1, DType::F32, device);
    }
    let a = Tensor::ones((4096, 4096), DType::F32, device)?;
    let mut acc = a.matmul(&a)?;
    for _ in 0..3 {
        acc = acc.matmul(&a)?;
    }
    Ok(acc)
}

/// The input of a call as `input` lays it out.
struct Made {
    /// The variable the input is computed from (its gradient is the input's).
    var: Var,
    /// The `ROWS x COLS` input.
    x: Tensor,
    /// The tensor `x` is a view of, written by a kernel enqueued after
    /// [`busy`] work.
    whole: Tensor,
    /// The busy work's result, kept alive for the call.
    _busy: Tensor,
}

fn input(device: &Device, input: Input) -> candle_core::Result<Made> {
    let (rows, cols) = match input {
        Input::Contiguous => (ROWS, COLS),
        Input::Transposed => (COLS, ROWS),
        Input::Offset => (ROWS + 1, COLS),
    };
    let var = Var::from_tensor(&Tensor::from_vec(values(rows * cols), (rows, cols), device)?)?;
    let keep = busy(device)?;
    let whole = var.as_tensor().affine(1.0, 0.0)?;
    let x = match input {
        Input::Contiguous => whole.clone(),
        Input::Transposed => whole.t()?,
        Input::Offset => whole.narrow(0, 1, ROWS)?,
    };
    Ok(Made {
        var,
        x,
        whole,
        _busy: keep,
    })
}

fn weights(shape: &[usize], device: &Device) -> candle_core::Result<Tensor> {
    let n = shape.iter().product::<usize>();
    Tensor::from_vec((0..n).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>(), shape, device)
}

/// A mapping's output and the input variable's gradient under the loss
/// `sum(y * weights)`, flattened, with the output's shape.
type Outcome = (Vec<usize>, Vec<f32>, Vec<f32>);

fn mapped(comm: &Comm, device: &Device, mapping: Mapping, how: Input) -> candle_core::Result<Outcome> {
    let Made { var, x, .. } = input(device, how)?;
    let y = hcomm_candle::apply(comm, &x, mapping)?;
    let loss = (&y * weights(y.dims(), device)?)?.sum_all()?;
    let grads = loss.backward()?;
    let grad = grads
        .get(var.as_tensor())
        .ok_or_else(|| candle_core::Error::Msg(format!("{mapping}: no gradient reached the input")))?;
    Ok((
        y.dims().to_vec(),
        y.flatten_all()?.to_vec1::<f32>()?,
        grad.flatten_all()?.to_vec1::<f32>()?,
    ))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn every_mapping_forward_and_backward_on_cuda_equals_the_cpu() {
    let Some(nccl) = nccl() else { return };
    let cases: Vec<(Mapping, Input)> = Mapping::ALL.iter().flat_map(|&m| INPUTS.map(|how| (m, how))).collect();
    let all = |comm: &Comm, device: &Device| {
        cases
            .iter()
            .map(|&(mapping, how)| mapped(comm, device, mapping, how))
            .collect::<candle_core::Result<Vec<_>>>()
    };
    let gpu = on_gpu(&nccl, all);
    let cpu = on_cpu(all);
    for (((mapping, how), gpu), cpu) in cases.iter().zip(gpu).zip(cpu) {
        // In a group of one every mapping passes values through: the
        // serial reference is the input itself, laid out contiguously.
        let expected = on_cpu(|_, device| input(device, *how)?.x.flatten_all()?.to_vec1::<f32>());
        assert_eq!(gpu.0, vec![ROWS, COLS], "{mapping}, {how:?}: output shape");
        assert_eq!(
            bits(&gpu.1),
            bits(&expected),
            "{mapping}, {how:?}: forward against the serial reference"
        );
        assert_eq!(
            bits(&gpu.1),
            bits(&cpu.1),
            "{mapping}, {how:?}: forward against the CPU"
        );
        assert_eq!(
            bits(&gpu.2),
            bits(&cpu.2),
            "{mapping}, {how:?}: gradient against the CPU"
        );
        eprintln!("device-check case candle cuda {mapping} {how:?}: ok");
    }
}

/// The in-place all-reduce of `how` under `op`: the whole underlying
/// tensor afterwards (for an offset view, the rows around it too).
fn reduced(comm: &Comm, device: &Device, how: Input, op: ReduceOp) -> candle_core::Result<Vec<f32>> {
    let made = input(device, how)?;
    hcomm_candle::all_reduce_in_place(comm, &made.x, op)?;
    made.whole.flatten_all()?.to_vec1::<f32>()
}

#[test]
fn all_reduce_in_place_on_cuda_keeps_the_tensor_and_refuses_a_transposed_view() {
    let Some(nccl) = nccl() else { return };
    let cases: Vec<(ReduceOp, Input)> = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg]
        .into_iter()
        .flat_map(|op| [(op, Input::Contiguous), (op, Input::Offset)])
        .collect();
    let all = |comm: &Comm, device: &Device| {
        let results = cases
            .iter()
            .map(|&(op, how)| reduced(comm, device, how, op))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let refused = reduced(comm, device, Input::Transposed, ReduceOp::Sum).map_err(|e| e.to_string());
        Ok((results, refused))
    };
    let (gpu, refused) = on_gpu(&nccl, all);
    let (cpu, _) = on_cpu(all);
    for (((op, how), gpu), cpu) in cases.iter().zip(gpu).zip(cpu) {
        let n = if matches!(how, Input::Offset) {
            (ROWS + 1) * COLS
        } else {
            ROWS * COLS
        };
        assert_eq!(
            bits(&gpu),
            bits(&values(n)),
            "{op:?}, {how:?}: against the serial reference"
        );
        assert_eq!(bits(&gpu), bits(&cpu), "{op:?}, {how:?}: against the CPU");
        eprintln!("device-check case candle cuda all_reduce_in_place {op:?} {how:?}: ok");
    }
    let err = refused.expect_err("a transposed view cannot be reduced in place");
    assert!(
        err.contains(
            "hcomm_candle::all_reduce_in_place: a tensor of shape [4, 6] with strides [1, 4] is not contiguous"
        ),
        "{err}"
    );
    eprintln!("device-check case candle cuda all_reduce_in_place refuses a transposed view: ok");
}

const DTYPES: [DType; 6] = [DType::F64, DType::F16, DType::BF16, DType::U8, DType::U32, DType::I64];

#[test]
fn other_element_types_pass_through_a_gather_on_cuda() {
    let Some(nccl) = nccl() else { return };
    let all = |comm: &Comm, device: &Device| {
        DTYPES
            .iter()
            .map(|&dtype| {
                let _keep = busy(device)?;
                let x = Tensor::from_vec((0..24u32).map(|i| i as f32).collect::<Vec<_>>(), (ROWS, COLS), device)?
                    .to_dtype(dtype)?
                    .t()?;
                let y = hcomm_candle::gather_from_tensor_model_parallel_region(comm, &x)?;
                hcomm_candle::all_reduce_in_place(comm, &y, ReduceOp::Sum)?;
                y.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()
            })
            .collect::<candle_core::Result<Vec<_>>>()
    };
    let gpu = on_gpu(&nccl, all);
    let cpu = on_cpu(all);
    let expected: Vec<f64> = (0..COLS)
        .flat_map(|c| (0..ROWS).map(move |r| (r * COLS + c) as f64))
        .collect();
    for ((dtype, gpu), cpu) in DTYPES.iter().zip(gpu).zip(cpu) {
        assert_eq!(gpu, expected, "{dtype:?}: against the serial reference");
        assert_eq!(gpu, cpu, "{dtype:?}: against the CPU");
        eprintln!("device-check case candle cuda {dtype:?}: ok");
    }
}

#[test]
fn a_cuda_tensor_on_a_host_communicator_is_refused_naming_both_backends() {
    if nccl().is_none() {
        return;
    }
    let errors = on_cpu(|comm, _| {
        let device = Device::new_cuda(0)?;
        let x = Tensor::from_vec(values(ROWS * COLS), (ROWS, COLS), &device)?;
        let reduce = hcomm_candle::all_reduce_in_place(comm, &x, ReduceOp::Sum).map(|()| x.clone());
        let copy = hcomm_candle::copy_to_tensor_model_parallel_region(comm, &x);
        Ok([reduce, copy].map(|r| r.map(|_| ()).map_err(|e| e.to_string())))
    });
    for (what, result) in [
        "hcomm_candle::all_reduce_in_place",
        "copy_to_tensor_model_parallel_region",
    ]
    .into_iter()
    .zip(errors)
    {
        let err = result.expect_err("a host communicator cannot take device memory");
        assert!(
            err.contains(&format!(
                "{what}: a CUDA tensor needs a communicator of the `nccl` backend, and this one uses the `host` backend"
            )),
            "{err}"
        );
        eprintln!("device-check case candle cuda on a host communicator, {what}: refused");
    }
}
