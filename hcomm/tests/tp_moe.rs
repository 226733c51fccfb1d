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
