//! A four-stage pipeline running the 1F1B schedule over eight micro-batches:
//! each stage is a `tanh` layer; activations go forward and gradients
//! backward with the paired calls (`send_forward_recv_backward`,
//! `send_backward_recv_forward`), which post both directions at once. The
//! loss and every stage's weight gradient are checked against the same
//! network run whole in this process.
//!
//! `cargo run --release --example pipeline_1f1b`

use hcomm::ndarray::{Array1, Array2};
use hcomm::parallel::{Context, ParallelConfig};
use hcomm::pp::Pipeline;

const STAGES: usize = 4;
const MICRO: usize = 8;
const DIM: usize = 6;

fn weight(stage: usize) -> Array2<f32> {
    Array2::from_shape_fn((DIM, DIM), |(i, j)| {
        (((stage * 13 + i * 7 + j * 3) % 11) as f32 - 5.0) / 11.0 * 0.8
    })
}

fn input(m: usize) -> Array1<f32> {
    Array1::from_shape_fn(DIM, |i| (((m * 5 + i) % 7) as f32 - 3.0) / 7.0)
}

fn target(m: usize) -> Array1<f32> {
    Array1::from_shape_fn(DIM, |i| (((m * 3 + i) % 5) as f32 - 2.0) / 5.0)
}

/// One stage's layer: `y = tanh(W x)`, with what backward needs.
struct Layer {
    w: Array2<f32>,
    grad: Array2<f32>,
    saved: Vec<(Array1<f32>, Array1<f32>)>,
}

impl Layer {
    fn new(stage: usize) -> Layer {
        Layer {
            w: weight(stage),
            grad: Array2::zeros((DIM, DIM)),
            saved: vec![(Array1::zeros(DIM), Array1::zeros(DIM)); MICRO],
        }
    }

    fn forward(&mut self, m: usize, x: &Array1<f32>) -> Array1<f32> {
        let y = self.w.dot(x).mapv(f32::tanh);
        self.saved[m] = (x.clone(), y.clone());
        y
    }

    /// Accumulates the weight gradient of micro-batch `m` and returns the
    /// gradient of its input.
    fn backward(&mut self, m: usize, g: &Array1<f32>) -> Array1<f32> {
        let (x, y) = &self.saved[m];
        let gz = g * &y.mapv(|v| 1.0 - v * v);
        for i in 0..DIM {
            for j in 0..DIM {
                self.grad[[i, j]] += gz[i] * x[j];
            }
        }
        self.w.t().dot(&gz)
    }
}

fn loss_grad(y: &Array1<f32>, m: usize) -> (f32, Array1<f32>) {
    let d = y - &target(m);
    (0.5 * d.dot(&d), d)
}

/// This stage's part of the 1F1B schedule; returns the loss (last stage)
/// and the weight gradient.
fn run_stage(pipe: &Pipeline) -> hcomm::Result<(f32, Array2<f32>)> {
    let (s, p) = (pipe.stage(), pipe.stages());
    let mut layer = Layer::new(s);
    let mut loss = 0.0;
    let mut x = Array1::<f32>::zeros(DIM);
    let mut g = Array1::<f32>::zeros(DIM);
    let recv_input = |x: &mut Array1<f32>, m: usize| -> hcomm::Result<()> {
        if pipe.is_first_stage() {
            *x = input(m);
            Ok(())
        } else {
            pipe.recv_forward(x)
        }
    };
    // Warm-up: forward passes only.
    let warmup = (p - s - 1).min(MICRO);
    for m in 0..warmup {
        recv_input(&mut x, m)?;
        let y = layer.forward(m, &x);
        pipe.send_forward(&y)?;
    }
    // Steady state: one forward, one backward.
    let steady = MICRO - warmup;
    if steady > 0 {
        recv_input(&mut x, warmup)?;
    }
    for i in 0..steady {
        let (fwd, bwd) = (warmup + i, i);
        let y = layer.forward(fwd, &x);
        if pipe.is_last_stage() {
            let (l, dy) = loss_grad(&y, fwd);
            loss += l;
            g = dy;
        } else {
            pipe.send_forward_recv_backward(&y, &mut g)?;
        }
        let gx = layer.backward(bwd, &g);
        let last = i + 1 == steady;
        if pipe.is_first_stage() {
            if !last {
                x = input(fwd + 1);
            }
        } else if last {
            pipe.send_backward(&gx)?;
        } else {
            pipe.send_backward_recv_forward(&gx, &mut x)?;
        }
    }
    // Cool-down: the remaining backward passes.
    for bwd in steady..MICRO {
        pipe.recv_backward(&mut g)?;
        let gx = layer.backward(bwd, &g);
        if !pipe.is_first_stage() {
            pipe.send_backward(&gx)?;
        }
    }
    Ok((loss, layer.grad))
}

fn main() {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    // Single-process reference.
    let mut layers: Vec<Layer> = (0..STAGES).map(Layer::new).collect();
    let mut loss_ref = 0.0;
    for m in 0..MICRO {
        let mut a = input(m);
        for layer in &mut layers {
            a = layer.forward(m, &a);
        }
        let (l, mut g) = loss_grad(&a, m);
        loss_ref += l;
        for layer in layers.iter_mut().rev() {
            g = layer.backward(m, &g);
        }
    }

    let stages = hcomm::host::run(STAGES, |comm| {
        let ctx = Context::init(
            comm,
            ParallelConfig {
                pp: STAGES,
                ..Default::default()
            },
        )?;
        run_stage(&ctx.pipeline())
    })
    .unwrap_or_else(|e| {
        eprintln!("pipeline_1f1b failed: {e}");
        std::process::exit(1);
    });

    let mut worst = (stages[STAGES - 1].0 - loss_ref).abs();
    println!(
        "loss over {MICRO} micro-batches: pipeline {:.6}, reference {loss_ref:.6}",
        stages[STAGES - 1].0
    );
    for (s, (_, grad)) in stages.iter().enumerate() {
        let d = grad
            .iter()
            .zip(&layers[s].grad)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        println!("stage {s}: weight gradient |Δ| = {d:.2e}");
        worst = worst.max(d);
    }
    if worst > 1e-5 {
        println!("check: FAILED (max |Δ| {worst:.2e} > 1e-5)");
        std::process::exit(1);
    }
    println!("check: ok — 1F1B over {STAGES} stages matches the single-process network (max |Δ| {worst:.2e})");
}
