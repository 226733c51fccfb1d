//! A mixture-of-experts layer: 8 experts spread over an expert-parallel
//! group of 4 ranks (two experts each), top-2 routing from a softmax gate.
//! Tokens are dispatched to the ranks holding their experts (counts first,
//! then an all-to-all-v), each expert runs on its rows, and the outputs are
//! combined back, weighted, into every token's original place. The result
//! is checked against the dense layer computed in this process.
//!
//! `cargo run --release --example moe_layer`

use hcomm::ndarray::{s, Array2, ArrayView1};
use hcomm::parallel::{Context, ParallelConfig};

const EP: usize = 4;
const EXPERTS: usize = 8;
const TOP_K: usize = 2;
const HIDDEN: usize = 6;

fn tokens(rank: usize) -> Array2<f32> {
    // Uneven loads: rank r has 5 + 3r tokens.
    Array2::from_shape_fn((5 + 3 * rank, HIDDEN), |(t, h)| {
        (((rank * 37 + t * 11 + h * 5) % 17) as f32 - 8.0) / 8.0
    })
}

fn gate() -> Array2<f32> {
    Array2::from_shape_fn((HIDDEN, EXPERTS), |(h, e)| (((h * 7 + e * 5) % 13) as f32 - 6.0) / 4.0)
}

fn expert_weight(e: usize) -> Array2<f32> {
    Array2::from_shape_fn((HIDDEN, HIDDEN), |(i, j)| {
        (((e * 19 + i * 3 + j * 7) % 9) as f32 - 4.0) / 6.0
    })
}

fn expert(e: usize, x: &ArrayView1<'_, f32>) -> Vec<f32> {
    x.dot(&expert_weight(e)).mapv(|v| v.max(0.0)).to_vec()
}

/// Top-2 experts of each token and their softmax weights, renormalised.
fn route(x: &Array2<f32>) -> (Array2<usize>, Array2<f32>) {
    let logits = x.dot(&gate());
    let mut ids = Array2::zeros((x.nrows(), TOP_K));
    let mut weights = Array2::zeros((x.nrows(), TOP_K));
    for (t, row) in logits.outer_iter().enumerate() {
        let mut order: Vec<usize> = (0..EXPERTS).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let max = row[order[0]];
        let p: Vec<f32> = order[..TOP_K].iter().map(|&e| (row[e] - max).exp()).collect();
        let sum: f32 = p.iter().sum();
        for j in 0..TOP_K {
            ids[[t, j]] = order[j];
            weights[[t, j]] = p[j] / sum;
        }
    }
    (ids, weights)
}

fn main() {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    let outputs = hcomm::host::run(EP, |comm| {
        let ctx = Context::init(
            comm,
            ParallelConfig {
                dp: EP,
                ep: EP,
                ..Default::default()
            },
        )?;
        let x = tokens(comm.rank());
        let (ids, weights) = route(&x);
        let d = hcomm::moe::dispatch(ctx.ep(), x.view(), ids.view(), weights.view(), EXPERTS)?;
        // Run this rank's experts on their rows.
        let first = ctx.ep().rank() * (EXPERTS / EP);
        let mut y = Array2::zeros(d.tokens.dim());
        let mut at = 0;
        for (local, &n) in d.tokens_per_expert.iter().enumerate() {
            for row in at..at + n {
                let out = expert(first + local, &d.tokens.row(row));
                y.slice_mut(s![row, ..]).assign(&ArrayView1::from(&out[..]));
            }
            at += n;
        }
        let out = hcomm::moe::combine(ctx.ep(), y.view(), &d)?;
        Ok((d.tokens_per_expert, out))
    })
    .unwrap_or_else(|e| {
        eprintln!("moe_layer failed: {e}");
        std::process::exit(1);
    });

    let mut worst = 0.0f32;
    for (rank, (load, out)) in outputs.iter().enumerate() {
        let x = tokens(rank);
        let (ids, weights) = route(&x);
        let mut dense = Array2::<f32>::zeros(x.dim());
        for t in 0..x.nrows() {
            for j in 0..TOP_K {
                let y = expert(ids[[t, j]], &x.row(t));
                for h in 0..HIDDEN {
                    dense[[t, h]] += weights[[t, j]] * y[h];
                }
            }
        }
        let d = out.iter().zip(&dense).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        println!(
            "rank {rank}: {} tokens, rows per local expert {load:?}, |Δ| vs dense = {d:.2e}",
            x.nrows()
        );
        worst = worst.max(d);
    }
    if worst > 1e-5 {
        println!("check: FAILED (max |Δ| {worst:.2e} > 1e-5)");
        std::process::exit(1);
    }
    println!("check: ok — {EXPERTS} experts over ep = {EP} with top-{TOP_K} routing match the dense layer (max |Δ| {worst:.2e})");
}
