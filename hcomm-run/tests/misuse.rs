//! Misuse between real processes started by `hcomm-run`: two threads of
//! every rank on one communicator (a shared handle, then a clone each), a
//! split against a user's all-gather, a rank arriving after its peers'
//! timeout, bad subgroup members. The scenarios are those of
//! `hcomm/tests/misuse.rs` (threads), shared through `misuse_cases`.
//!
//! The processes are this test binary itself, running the ignored test
//! `rank_main` with `HCOMM_TEST_SCENARIO` naming what to do.

#[path = "../../hcomm/tests/misuse_cases/mod.rs"]
mod misuse_cases;

mod common;

use std::time::Duration;

use common::{assert_all_passed, launch, SCENARIO};

#[test]
fn two_threads_on_one_communicator_across_processes_get_right_data_or_the_in_use_error() {
    let o = launch(2, "hammer", &[]);
    assert_all_passed(&o, 2);
    for l in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("refused"))
    {
        println!("{l}");
    }
    assert_all_passed(&launch(3, "hammer", &[("HCOMM_TRANSPORT", "tcp")]), 3);
}

#[test]
fn a_split_against_an_all_gather_across_processes_is_a_mismatch_on_every_rank() {
    assert_all_passed(&launch(2, "split_versus_all_gather", &[]), 2);
    assert_all_passed(&launch(3, "split_versus_all_gather", &[]), 3);
}

#[test]
fn a_process_arriving_after_its_peers_timed_out_gets_an_error() {
    assert_all_passed(&launch(3, "late_rank", &[]), 3);
}

#[test]
fn bad_subgroup_members_across_processes_are_refused_at_once() {
    assert_all_passed(&launch(3, "bad_subgroups", &[]), 3);
}

/// One rank of a scenario; run by `hcomm-run` through the tests above.
#[test]
#[ignore = "run by hcomm-run as one rank of a scenario"]
fn rank_main() {
    let scenario = std::env::var(SCENARIO).unwrap();
    let comm = hcomm::init_from_env().unwrap();
    match scenario.as_str() {
        "hammer" => {
            let shared = misuse_cases::hammer(&comm, false);
            let clones = misuse_cases::hammer(&comm, true);
            println!("calls refused: {shared} (one shared handle), {clones} (a clone per thread)");
        }
        "split_versus_all_gather" => misuse_cases::split_versus_all_gather(&comm),
        "late_rank" => misuse_cases::late_rank(&comm, Duration::from_millis(500), Duration::from_millis(1500)),
        "bad_subgroups" => misuse_cases::bad_subgroups(&comm),
        other => panic!("unknown scenario {other}"),
    }
    println!("scenario passed");
}
