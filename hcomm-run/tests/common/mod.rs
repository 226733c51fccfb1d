//! Helpers shared by the `hcomm-run` integration tests: start this test
//! binary's own rank entry under `hcomm-run`, print an `Output` for a
//! failure message, and read what each rank said.
//!
//! A rank prints its lines as `[RANK] ...`; a scenario that ends well prints
//! `scenario passed`.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::process::{Command, Output};

/// The variable that names the scenario a rank runs.
pub const SCENARIO: &str = "HCOMM_TEST_SCENARIO";

/// `hcomm-run -n N` this binary's ignored test `entry` with `scenario`, a
/// 30 s `HCOMM_TIMEOUT` and `extra_env`.
pub fn launch_entry(n: usize, entry: &str, scenario: &str, extra_env: &[(&str, &str)]) -> Output {
    let me = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hcomm-run"));
    cmd.args(["-n", &n.to_string(), "--grace", "20", "--"])
        .arg(me)
        .args(["--ignored", "--exact", entry, "--nocapture", "--test-threads=1"])
        .env(SCENARIO, scenario)
        .env("HCOMM_TIMEOUT", "30");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.output().expect("hcomm-run starts")
}

/// `launch_entry` of the usual entry, `rank_main`.
pub fn launch(n: usize, scenario: &str, extra_env: &[(&str, &str)]) -> Output {
    launch_entry(n, "rank_main", scenario, extra_env)
}

/// The exit status, stdout and stderr of `o`, for a failure message.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether rank `r` printed a line containing `what`.
pub fn said(out: &str, r: usize, what: &str) -> bool {
    let prefix = format!("[{r}] ");
    out.lines().any(|l| l.starts_with(&prefix) && l.contains(what))
}

/// Every rank of `n` printed a line containing `what`.
pub fn assert_all_said(o: &Output, n: usize, what: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    for r in 0..n {
        assert!(said(&out, r, what), "rank {r} did not say `{what}`\n{}", text(o));
    }
}

/// The job succeeded and every rank of `n` passed its scenario.
pub fn assert_all_passed(o: &Output, n: usize) {
    assert!(o.status.success(), "{}", text(o));
    assert_all_said(o, n, "scenario passed");
}

/// The names in `/dev/shm` that could be hcomm's (other programs on a
/// shared host, Open MPI among them, put their own there meanwhile).
pub fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm").map_or_else(
        |_| BTreeSet::new(),
        |d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("hcomm"))
                .collect()
        },
    )
}
