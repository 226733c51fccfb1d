//! Trains a two-layer MLP with candle, tensor-parallel (tp = 2) and
//! data-parallel (dp = 2) over 4 ranks, with Megatron-LM's mappings from
//! `hcomm_candle` (their backward passes come with `loss.backward()`) and
//! the data-parallel gradient mean through `ReduceOp::Avg`; then trains the
//! same model in one process and exits non-zero when the losses or the
//! weights differ.
//!
//! `cargo run --example candle_tp_mlp --features candle`

use candle_core::{Device, Tensor, Var};
use hcomm::ndarray::Array2;
use hcomm::parallel::{Context, ParallelConfig};
use hcomm::ReduceOp;

const BATCH: usize = 8;
const D: usize = 6;
const H: usize = 8;
const STEPS: usize = 6;
const LR: f64 = 0.1;
const TP: usize = 2;
const DP: usize = 2;
/// Relative tolerance: the tensor-parallel sums add partial products in
/// another order than the single matrix product.
const TOLERANCE: f32 = 1e-5;

/// A deterministic value in [-1, 1) for element `i` of table `seed`.
fn value(seed: usize, i: usize) -> f32 {
    (((i * 37 + seed * 101) % 97) as f32 / 48.5) - 1.0
}

fn table(seed: usize, rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    let v: Vec<f32> = (0..rows * cols).map(|i| value(seed, i) * 0.5).collect();
    Tensor::from_vec(v, (rows, cols), &Device::Cpu)
}

/// Losses and the final weights of the single-process run.
fn serial() -> candle_core::Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let (x, y) = (table(1, BATCH, D)?, table(2, BATCH, D)?);
    let w1 = Var::from_tensor(&table(3, D, H)?)?;
    let w2 = Var::from_tensor(&table(4, H, D)?)?;
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        let out = x.matmul(w1.as_tensor())?.relu()?.matmul(w2.as_tensor())?;
        let loss = (out - &y)?.sqr()?.mean_all()?;
        losses.push(loss.to_scalar::<f32>()?);
        let grads = loss.backward()?;
        for w in [&w1, &w2] {
            let g = grads
                .get(w.as_tensor())
                .ok_or_else(|| candle_core::Error::Msg("no gradient".into()))?;
            w.set(&(w.as_tensor() - (g * LR)?)?)?;
        }
    }
    let flat = |w: &Var| w.as_tensor().flatten_all()?.to_vec1::<f32>();
    Ok((losses, flat(&w1)?, flat(&w2)?))
}

/// One rank's run: its half of the batch (dp), its columns of `w1` and rows
/// of `w2` (tp). Returns the losses (mean over the dp group) and, gathered,
/// the whole weights.
fn parallel(comm: &hcomm::Comm) -> candle_core::Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let c = hcomm_candle::to_candle;
    let ctx = Context::init(
        comm,
        ParallelConfig {
            tp: TP,
            dp: DP,
            ..Default::default()
        },
    )
    .map_err(c)?;
    let (tp, dp) = (ctx.tp(), ctx.dp());
    let rows = BATCH / DP;
    let x = table(1, BATCH, D)?.narrow(0, ctx.dp_index() * rows, rows)?;
    let y = table(2, BATCH, D)?.narrow(0, ctx.dp_index() * rows, rows)?;
    let cols = H / TP;
    let w1 = Var::from_tensor(&table(3, D, H)?.narrow(1, ctx.tp_index() * cols, cols)?.contiguous()?)?;
    let w2 = Var::from_tensor(&table(4, H, D)?.narrow(0, ctx.tp_index() * cols, cols)?.contiguous()?)?;
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        // Column-parallel, then row-parallel (Megatron-LM's MLP).
        let input = hcomm_candle::copy_to_tensor_model_parallel_region(tp, &x)?;
        let partial = input.matmul(w1.as_tensor())?.relu()?.matmul(w2.as_tensor())?;
        let out = hcomm_candle::reduce_from_tensor_model_parallel_region(tp, &partial)?;
        let loss = (out - &y)?.sqr()?.mean_all()?;
        let mean = loss.copy()?;
        hcomm_candle::all_reduce_in_place(dp, &mean, ReduceOp::Avg)?;
        losses.push(mean.to_scalar::<f32>()?);
        let grads = loss.backward()?;
        for w in [&w1, &w2] {
            let g = grads
                .get(w.as_tensor())
                .ok_or_else(|| candle_core::Error::Msg("no gradient".into()))?;
            // Each replica's loss is the mean over its half of the batch:
            // the mean of the replicas' gradients is the whole batch's.
            hcomm_candle::all_reduce_in_place(dp, g, ReduceOp::Avg)?;
            w.set(&(w.as_tensor() - (g * LR)?)?)?;
        }
    }
    let w1_all = hcomm_candle::gather_from_tensor_model_parallel_region(tp, w1.as_tensor())?;
    let w2_part = Array2::from_shape_vec((cols, D), w2.as_tensor().flatten_all()?.to_vec1::<f32>()?)
        .map_err(candle_core::Error::wrap)?;
    let w2_all = hcomm::tp::all_gather(tp, w2_part.view(), 0).map_err(c)?;
    Ok((
        losses,
        w1_all.flatten_all()?.to_vec1::<f32>()?,
        w2_all.iter().copied().collect(),
    ))
}

/// The largest relative difference between `a` and `b` (and whether their
/// lengths agree).
fn differs(what: &str, a: &[f32], b: &[f32]) -> bool {
    if a.len() != b.len() {
        eprintln!("{what}: {} values against {}", a.len(), b.len());
        return true;
    }
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / x.abs().max(y.abs()).max(1.0))
        .fold(0.0f32, f32::max);
    if worst > TOLERANCE {
        eprintln!("{what}: relative difference {worst:e} exceeds {TOLERANCE:e}");
    }
    worst > TOLERANCE
}

fn main() -> std::process::ExitCode {
    let reference = match serial() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: the single-process run failed: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let ranks = match hcomm::host::run(TP * DP, |comm| parallel(comm).map_err(hcomm_candle::to_hcomm)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: the tensor-parallel run failed: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut bad = false;
    for (rank, (losses, w1, w2)) in ranks.iter().enumerate() {
        bad |= differs(&format!("rank {rank} losses"), losses, &reference.0);
        bad |= differs(&format!("rank {rank} w1"), w1, &reference.1);
        bad |= differs(&format!("rank {rank} w2"), w2, &reference.2);
    }
    println!(
        "candle tp {TP} x dp {DP}: loss {:.6} -> {:.6} over {STEPS} steps; single process {:.6} -> {:.6}",
        ranks[0].0[0],
        ranks[0].0[STEPS - 1],
        reference.0[0],
        reference.0[STEPS - 1]
    );
    if bad {
        eprintln!("error: the tensor-parallel run differs from the single-process run");
        return std::process::ExitCode::FAILURE;
    }
    println!("ok: every rank matches the single-process run");
    std::process::ExitCode::SUCCESS
}
