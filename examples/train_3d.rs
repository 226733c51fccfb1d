//! 3D-parallel training on 8 ranks: tensor parallel 2 × pipeline parallel 2
//! × data parallel 2. The model is two residual MLP blocks, one per pipeline
//! stage, each split Megatron-style over its tensor-parallel pair (first
//! layer by columns, second by rows); the two data-parallel replicas see
//! different halves of the batch and sum their gradients with non-blocking
//! all-reduces that overlap the rest of the backward pass. After every SGD
//! step the loss and all weights are checked against the same model trained
//! in one process on the whole batch.
//!
//! `cargo run --release --example train_3d`

use hcomm::ndarray::{s, Array2};
use hcomm::parallel::{Context, ParallelConfig};
use hcomm::ReduceOp;

const TP: usize = 2;
const PP: usize = 2;
const DP: usize = 2;
const BATCH: usize = 8;
const HIDDEN: usize = 4;
const FFN: usize = 8;
const STEPS: usize = 3;
const LR: f64 = 0.1;

fn init(rows: usize, cols: usize, seed: usize) -> Array2<f64> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        (((i * 7 + j * 5 + seed * 11) % 13) as f64 - 6.0) / 13.0
    })
}

fn data() -> (Array2<f64>, Array2<f64>) {
    (init(BATCH, HIDDEN, 1), init(BATCH, HIDDEN, 2).mapv(|v| v * 0.5))
}

/// One residual block `h = x + relu(x A) B` (or a tensor-parallel shard of
/// it: A's columns and B's rows) and what its backward pass needs.
struct Block {
    a: Array2<f64>,
    b: Array2<f64>,
    x: Array2<f64>,
    pre: Array2<f64>,
}

impl Block {
    fn new(a: Array2<f64>, b: Array2<f64>) -> Block {
        Block {
            a,
            b,
            x: Array2::zeros((0, 0)),
            pre: Array2::zeros((0, 0)),
        }
    }

    /// The block's output before the tensor-parallel sum of the second
    /// layer: `relu(x A) B` (partial when sharded).
    fn forward_partial(&mut self, x: &Array2<f64>) -> Array2<f64> {
        self.x.clone_from(x);
        self.pre = x.dot(&self.a);
        self.pre.mapv(|v| v.max(0.0)).dot(&self.b)
    }

    /// Gradients of A and B, and this shard's part of the input gradient
    /// through the block (without the residual), for output gradient `g`.
    fn backward_partial(&self, g: &Array2<f64>) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
        let relu = self.pre.mapv(|v| v.max(0.0));
        let grad_b = relu.t().dot(g);
        let mut d_pre = g.dot(&self.b.t());
        d_pre.zip_mut_with(&self.pre, |d, &p| {
            if p <= 0.0 {
                *d = 0.0;
            }
        });
        let grad_a = self.x.t().dot(&d_pre);
        (grad_a, grad_b, d_pre.dot(&self.a.t()))
    }
}

fn loss_and_grad(h: &Array2<f64>, target: &Array2<f64>) -> (f64, Array2<f64>) {
    let d = h - target;
    (0.5 * d.mapv(|v| v * v).sum() / BATCH as f64, d / BATCH as f64)
}

/// A block's two weight matrices.
type Weights = (Array2<f64>, Array2<f64>);

/// The single-process run: losses per step and the final weights.
fn reference() -> (Vec<f64>, Vec<Weights>) {
    let (x, target) = data();
    let mut blocks: Vec<Block> = (0..PP)
        .map(|s| Block::new(init(HIDDEN, FFN, 3 + s), init(FFN, HIDDEN, 5 + s)))
        .collect();
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        let mut h = x.clone();
        for block in &mut blocks {
            h = &h + &block.forward_partial(&h);
        }
        let (loss, mut g) = loss_and_grad(&h, &target);
        losses.push(loss);
        for block in blocks.iter_mut().rev() {
            let (ga, gb, gx) = block.backward_partial(&g);
            g = &g + &gx;
            block.a.scaled_add(-LR, &ga);
            block.b.scaled_add(-LR, &gb);
        }
    }
    (losses, blocks.into_iter().map(|b| (b.a, b.b)).collect())
}

/// One rank's training: returns the losses (last stage) and its weight shards.
fn train(ctx: &Context) -> hcomm::Result<(Vec<f64>, Array2<f64>, Array2<f64>)> {
    let stage = ctx.stage();
    let (tp, dp) = (ctx.tp(), ctx.dp());
    let pipe = ctx.pipeline();
    let a_full = init(HIDDEN, FFN, 3 + stage);
    let b_full = init(FFN, HIDDEN, 5 + stage);
    let mut block = Block::new(
        hcomm::tp::split(tp, a_full.view(), -1)?.to_owned(),
        hcomm::tp::split(tp, b_full.view(), 0)?.to_owned(),
    );
    // This replica's half of the batch.
    let (x_all, t_all) = data();
    let rows = BATCH / DP;
    let mine = s![dp.rank() * rows..(dp.rank() + 1) * rows, ..];
    let (x, target) = (x_all.slice(mine).to_owned(), t_all.slice(mine).to_owned());
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        // Forward.
        let mut input = Array2::zeros((rows, HIDDEN));
        if pipe.is_first_stage() {
            input.assign(&x);
        } else {
            pipe.recv_forward(&mut input)?;
        }
        let mut out = block.forward_partial(&input);
        hcomm::tp::all_reduce(tp, &mut out)?;
        let h = &input + &out;
        // Loss and the gradient of the block's output.
        let mut g = Array2::zeros((rows, HIDDEN));
        if pipe.is_last_stage() {
            let (loss, dh) = loss_and_grad(&h, &target);
            let mut total = [loss];
            dp.all_reduce_in_place(&mut total, ReduceOp::Sum)?;
            losses.push(total[0]);
            g = dh;
        } else {
            pipe.send_forward(&h)?;
            pipe.recv_backward(&mut g)?;
        }
        // Backward. The data-parallel sums of the weight gradients start at
        // once and run while the input gradient is summed over tp and sent
        // to the previous stage.
        let (mut ga, mut gb, mut gx) = block.backward_partial(&g);
        hcomm::scope(|s| {
            let grads = [
                dp.iall_reduce_in_place(s, &mut ga, ReduceOp::Sum)?,
                dp.iall_reduce_in_place(s, &mut gb, ReduceOp::Sum)?,
            ];
            hcomm::tp::all_reduce(tp, &mut gx)?;
            if !pipe.is_first_stage() {
                pipe.send_backward(&(&g + &gx))?;
            }
            hcomm::wait_all(grads)
        })?;
        block.a.scaled_add(-LR, &ga);
        block.b.scaled_add(-LR, &gb);
    }
    Ok((losses, block.a, block.b))
}

fn main() {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    let (losses_ref, weights_ref) = reference();
    let results = hcomm::host::run(TP * PP * DP, |comm| {
        let ctx = Context::init(
            comm,
            ParallelConfig {
                tp: TP,
                pp: PP,
                dp: DP,
                ..Default::default()
            },
        )?;
        let (losses, a, b) = train(&ctx)?;
        Ok((ctx.stage(), ctx.tp().rank(), losses, a, b))
    })
    .unwrap_or_else(|e| {
        eprintln!("train_3d failed: {e}");
        std::process::exit(1);
    });

    let mut worst = 0.0f64;
    for (rank, (stage, tp_rank, losses, a, b)) in results.iter().enumerate() {
        let (a_ref, b_ref) = &weights_ref[*stage];
        let cols = FFN / TP;
        let a_ref = a_ref.slice(s![.., tp_rank * cols..(tp_rank + 1) * cols]);
        let b_ref = b_ref.slice(s![tp_rank * cols..(tp_rank + 1) * cols, ..]);
        let dw = a
            .iter()
            .zip(a_ref.iter())
            .chain(b.iter().zip(b_ref.iter()))
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        worst = worst.max(dw);
        if *stage == PP - 1 {
            let dl = losses
                .iter()
                .zip(&losses_ref)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            worst = worst.max(dl);
            if rank == TP * PP * DP - 1 {
                for (step, (l, r)) in losses.iter().zip(&losses_ref).enumerate() {
                    println!("step {step}: loss {l:.8} (single process {r:.8})");
                }
            }
        }
        println!("rank {rank} (stage {stage}, tp {tp_rank}): weights |Δ| = {dw:.2e}");
    }
    assert_eq!(results.iter().map(|r| r.2.len()).max(), Some(STEPS));
    if worst > 1e-5 {
        println!("check: FAILED (max |Δ| {worst:.2e} > 1e-5)");
        std::process::exit(1);
    }
    println!("check: ok — tp {TP} × pp {PP} × dp {DP} training matches the single-process run (max |Δ| {worst:.2e})");
}
