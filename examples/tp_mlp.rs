//! A tensor-parallel MLP on four ranks, Megatron-LM style: the first layer
//! is split by columns (each rank computes a slice of the hidden units, no
//! communication), the second by rows (each rank's partial product is
//! summed with one all-reduce). The output is checked against the same MLP
//! computed whole in this process.
//!
//! `cargo run --release --example tp_mlp`

use hcomm::ndarray::{Array2, Axis};
use hcomm::parallel::{Context, ParallelConfig};

const TP: usize = 4;
const BATCH: usize = 6;
const HIDDEN: usize = 8;
const FFN: usize = 16;

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + (0.797_884_6 * (x + 0.044_715 * x * x * x)).tanh())
}

fn init(rows: usize, cols: usize, seed: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        (((i * 31 + j * 17 + seed * 7) % 23) as f32 - 11.0) / 23.0
    })
}

fn main() {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    let x = init(BATCH, HIDDEN, 1);
    let w1 = init(HIDDEN, FFN, 2);
    let w2 = init(FFN, HIDDEN, 3);
    let reference = x.dot(&w1).mapv(gelu).dot(&w2);

    let outputs = hcomm::host::run(TP, |comm| {
        let ctx = Context::init(
            comm,
            ParallelConfig {
                tp: TP,
                ..Default::default()
            },
        )?;
        // Column-parallel: this rank's columns of W1; row-parallel: its rows of W2.
        let w1_part = hcomm::tp::split(ctx.tp(), w1.view(), -1)?;
        let w2_part = hcomm::tp::split(ctx.tp(), w2.view(), 0)?;
        let hidden = x.dot(&w1_part).mapv(gelu);
        // The gathered hidden layer is the whole layer's.
        let whole = hcomm::tp::all_gather(ctx.tp(), hidden.view(), -1)?;
        let mut out = hidden.dot(&w2_part);
        hcomm::tp::all_reduce(ctx.tp(), &mut out)?;
        Ok((whole, out))
    })
    .unwrap_or_else(|e| {
        eprintln!("tp_mlp failed: {e}");
        std::process::exit(1);
    });

    let hidden_ref = x.dot(&w1).mapv(gelu);
    let mut worst = 0.0f32;
    for (rank, (whole, out)) in outputs.iter().enumerate() {
        let d_hidden = max_diff(whole, &hidden_ref);
        let d_out = max_diff(out, &reference);
        println!("rank {rank}: column-parallel hidden |Δ| = {d_hidden:.2e}, row-parallel output |Δ| = {d_out:.2e}");
        worst = worst.max(d_hidden).max(d_out);
    }
    println!(
        "output[0] = {:?}",
        reference
            .index_axis(Axis(0), 0)
            .iter()
            .map(|v| (v * 1e4).round() / 1e4)
            .collect::<Vec<_>>()
    );
    if worst > 1e-5 {
        println!("check: FAILED (max |Δ| {worst:.2e} > 1e-5)");
        std::process::exit(1);
    }
    println!("check: ok — tp = {TP} matches the single-process MLP (max |Δ| {worst:.2e})");
}

fn max_diff(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
    assert_eq!(a.dim(), b.dim());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}
