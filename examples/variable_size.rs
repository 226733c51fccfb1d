//! The variable-size schedules of `hcomm_examples::vcollectives` on 5
//! in-process ranks: a sparse all-gather over per-rank counts (some ranks
//! contribute nothing) and a top-2 `MoE` dispatch and combine over count
//! matrices, each checked against the runtime's `all_gatherv` and
//! `all_to_allv`.
//!
//! `cargo run --release --example variable_size`

use hcomm_examples::vcollectives::{moe_combine, moe_dispatch, sparse_all_gather};

fn main() -> Result<(), hcomm::Report> {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    let world = 5;
    let counts = [3, 0, 1, 0, 2];
    let total: usize = counts.iter().sum();
    let out = hcomm::host::run(world, |comm| {
        let r = comm.rank();
        let segment: Vec<f32> = (0..counts[r]).map(|i| (10 * r + i) as f32).collect();
        let (mut ours, mut builtin) = (vec![0.0; total], vec![0.0; total]);
        sparse_all_gather(comm, &counts, &segment, &mut ours)?;
        comm.all_gatherv(&segment, &mut builtin, &counts)?;
        Ok((ours, builtin))
    })?;
    let (ours, builtin) = &out[0];
    assert!(out.iter().all(|(o, b)| o == ours && b == builtin));
    println!("sparse all-gather, counts {counts:?}: rank 0 -> {ours:?} (built-in all_gatherv: {builtin:?})");
    assert_eq!(ours, builtin);

    // top-2 routing: rank r's token t goes to experts (r + t) % world and
    // (r + 2 t + 1) % world, each token `hidden` values
    let (tokens, hidden) = (4, 2);
    let experts = |r: usize, t: usize| [(r + t) % world, (r + 2 * t + 1) % world];
    let mut sizes = vec![0_usize; world * world];
    for r in 0..world {
        for t in 0..tokens {
            for e in experts(r, t) {
                sizes[r * world + e] += hidden;
            }
        }
    }
    let out = hcomm::host::run(world, |comm| {
        let r = comm.rank();
        let mut send = Vec::new();
        for e in 0..world {
            for t in 0..tokens {
                for _ in experts(r, t).iter().filter(|&&x| x == e) {
                    send.extend((0..hidden).map(|h| (100 * r + 10 * t + h) as i64));
                }
            }
        }
        let row: Vec<usize> = sizes[r * world..(r + 1) * world].to_vec();
        let col: Vec<usize> = (0..world).map(|i| sizes[i * world + r]).collect();
        let mut routed = vec![0_i64; col.iter().sum()];
        let mut builtin = vec![0_i64; routed.len()];
        moe_dispatch(comm, &sizes, &send, &mut routed)?;
        comm.all_to_allv(&send, &row, &mut builtin, &col)?;
        let dispatch_agrees = routed == builtin;
        // expert r doubles what it received
        let outputs: Vec<i64> = routed.iter().map(|x| 2 * x).collect();
        let mut combined = vec![0_i64; send.len()];
        moe_combine(comm, &sizes, &outputs, &mut combined)?;
        let doubled = combined.iter().zip(&send).all(|(c, s)| *c == 2 * s);
        Ok((dispatch_agrees, doubled))
    })?;
    assert!(out.iter().all(|&(a, d)| a && d), "{out:?}");
    println!("MoE top-2 dispatch + combine over {world} ranks: every rank got its tokens back from both experts");
    Ok(())
}
