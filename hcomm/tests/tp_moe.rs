//! Tensor- and expert-parallel operations on the host backend, for group
//! sizes 1 to 5, against serial references.

mod parallel_cases;

use std::time::Duration;

use hcomm::CommOptions;

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

#[test]
fn tensor_parallel_ops_match_serial_references() {
    for w in 1..=5 {
        hcomm::host::run_with(w, &options(), parallel_cases::tensor_parallel).unwrap();
    }
}

#[test]
fn megatron_mappings_forward_and_backward_match_serial_references() {
    for w in 1..=5 {
        hcomm::host::run_with(w, &options(), parallel_cases::megatron_mappings).unwrap();
    }
}

#[test]
fn avg_and_operators_in_tp_all_reduce_match_serial_references() {
    for w in 1..=5 {
        hcomm::host::run_with(w, &options(), parallel_cases::averages).unwrap();
    }
}

#[test]
fn moe_dispatch_and_combine_match_a_dense_reference() {
    for w in 1..=4 {
        hcomm::host::run_with(w, &options(), parallel_cases::expert_parallel).unwrap();
    }
}

#[test]
fn all_gatherv_with_uneven_and_empty_blocks() {
    for w in 1..=6 {
        hcomm::host::run_with(w, &options(), parallel_cases::all_gatherv).unwrap();
    }
}

/// What `tp::all_reduce` costs over the raw in-place all-reduce, per call,
/// on 4 threads, for a 4×8 and a 64×256 f32 array (the shape travels in
/// the collective's header). `cargo test --release -p hcomm --test tp_moe
/// tp_all_reduce_overhead -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn tp_all_reduce_overhead() {
    use hcomm::ndarray::Array2;
    use std::time::Instant;
    for (rows, cols) in [(4, 8), (64, 256)] {
        let times = hcomm::host::run_with(4, &options(), |comm| {
            let mut x = Array2::<f32>::ones((rows, cols));
            let n = 2_000 / (rows * cols / 32).max(1);
            for _ in 0..100 {
                hcomm::tp::all_reduce(comm, &mut x)?;
            }
            // Rounds alternate the two, and the fastest round of each
            // counts: on a shared machine the slow rounds are other work.
            let (mut raw, mut tp) = (Duration::MAX, Duration::MAX);
            for _ in 0..10 {
                let t = Instant::now();
                for _ in 0..n {
                    comm.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
                }
                raw = raw.min(t.elapsed() / n as u32);
                let t = Instant::now();
                for _ in 0..n {
                    hcomm::tp::all_reduce(comm, &mut x)?;
                }
                tp = tp.min(t.elapsed() / n as u32);
            }
            Ok((raw, tp))
        })
        .unwrap();
        let (raw, tp) = times[0];
        println!(
            "{rows}x{cols} f32 on 4 ranks: raw all_reduce_in_place {raw:?}, tp::all_reduce {tp:?} ({:.2}x)",
            tp.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
