//! The `hcomm-bench` binary end to end on tiny sweeps: its JSON lines, its
//! correctness check on every op, and its errors on bad input.

use std::process::{Command, Output};

use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcomm-bench"))
        .args(args)
        .env("HCOMM_TIMEOUT", "30")
        .env_remove("HCOMM_ALGO")
        .output()
        .expect("hcomm-bench runs")
}

fn json_rows(args: &[&str]) -> Vec<Value> {
    let out = bench(&[args, &["--json", "--iters", "2", "--warmup", "1"]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn a_sweep_prints_one_json_object_per_size_with_the_nccl_tests_fields() {
    let rows = json_rows(&["--op", "all_reduce", "-b", "1K", "-e", "16K", "-f", "4", "-n", "4"]);
    let bytes: Vec<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes, [1024, 4096, 16384]);
    for r in &rows {
        assert_eq!(r["op"], "all_reduce");
        assert_eq!(r["ranks"], 4);
        assert_eq!(r["dtype"], "f32");
        assert_eq!(r["check"], "ok");
        assert_eq!(r["count"].as_u64().unwrap() * 4, r["bytes"].as_u64().unwrap());
        assert!(r["algorithm"].as_str().is_some_and(|a| !a.is_empty()));
        let (t, algbw, busbw) = (
            r["time_us"].as_f64().unwrap(),
            r["algbw"].as_f64().unwrap(),
            r["busbw"].as_f64().unwrap(),
        );
        assert!(t > 0.0);
        let want = r["bytes"].as_f64().unwrap() / (t * 1e-6) / 1e9;
        assert!((algbw - want).abs() <= 1e-6 * want, "{r}");
        assert!((busbw - algbw * 1.5).abs() <= 1e-9 * busbw.max(1.0), "{r}");
    }
}

#[test]
fn every_op_and_schedule_checks_out_on_three_ranks() {
    let ops = [
        ["--op", "all_gather"],
        ["--op", "reduce_scatter"],
        ["--op", "all_to_all"],
        ["--op", "broadcast"],
        ["--op", "sendrecv"],
        ["--schedule", "ring_all_gather"],
        ["--schedule", "bruck_all_gather"],
        ["--schedule", "pairwise_all_to_all"],
        ["--schedule", "binomial_broadcast"],
        ["--schedule", "ring_all_reduce_max"],
        ["--schedule", "two_level_all_gather"],
        ["--schedule", "sparse_all_gather"],
        ["--schedule", "direct_all_reduce"],
        ["--schedule", "recursive_doubling_all_reduce"],
        ["--schedule", "direct_reduce_scatter"],
        ["--schedule", "ring_reduce_scatter"],
        ["--schedule", "binomial_reduce"],
        ["--schedule", "scatter_all_gather_broadcast"],
        ["--schedule", "one_shot_all_reduce"],
        ["--schedule", "one_shot_all_gather"],
        ["--schedule", "one_shot_reduce_scatter"],
        ["--schedule", "one_shot_all_to_all"],
        ["--schedule", "one_shot_broadcast"],
    ];
    for op in ops {
        let rows = json_rows(&[&op[..], &["-b", "96", "-e", "96", "-n", "3", "--dtype", "i32"]].concat());
        assert_eq!(rows.len(), 1, "{op:?}");
        assert_eq!(rows[0]["check"], "ok", "{op:?}: {}", rows[0]);
        // 96 bytes of i32 split into 3 blocks where the op splits.
        assert_eq!(rows[0]["bytes"], 96, "{op:?}");
    }
    for schedule in ["halving_doubling_all_reduce", "recursive_halving_reduce_scatter"] {
        let rows = json_rows(&[
            "--schedule",
            schedule,
            "-b",
            "96",
            "-e",
            "96",
            "-n",
            "4",
            "--dtype",
            "i32",
        ]);
        assert_eq!(rows[0]["check"], "ok", "{schedule}: {}", rows[0]);
    }
    let rows = json_rows(&["--schedule", "ring_all_gather", "-b", "48", "-e", "48", "-n", "2"]);
    assert_eq!(rows[0]["op"], "all_gather");
    assert_eq!(rows[0]["schedule"], "ring_all_gather");
    assert_eq!(rows[0]["algorithm"], "ring_all_gather");
}

#[test]
fn a_forced_algorithm_is_the_one_reported() {
    for algo in ["ring", "halving_doubling", "reduce_broadcast", "direct"] {
        let rows = json_rows(&[
            "--op",
            "all_reduce",
            "-b",
            "64K",
            "-e",
            "64K",
            "-n",
            "4",
            "--algo",
            algo,
        ]);
        assert_eq!(rows[0]["algorithm"], algo);
        assert_eq!(rows[0]["check"], "ok");
    }
}

#[test]
fn the_algorithms_that_ran_are_reported() {
    // 4 KiB is reduced whole by recursive doubling; 1000 B of f32 on 3 ranks
    // leaves a tail of one element, which the ring hands to it.
    let rows = json_rows(&[
        "--op",
        "all_reduce",
        "-b",
        "4K",
        "-e",
        "4K",
        "-n",
        "4",
        "--algo",
        "halving_doubling",
    ]);
    assert_eq!(rows[0]["algorithm"], "recursive_doubling");
    let rows = json_rows(&["--op", "all_reduce", "--sizes", "1000", "-n", "3", "--algo", "ring"]);
    assert_eq!(rows[0]["algorithm"], "ring+recursive_doubling");
    assert_eq!(rows[0]["check"], "ok");
}

#[test]
fn the_table_has_a_header_and_a_row_per_size() {
    let out = bench(&["--op", "sendrecv", "--sizes", "1K,2K", "-n", "2", "--iters", "2"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines[1].contains("busbw(GB/s)"));
    assert!(lines[2].trim_start().starts_with("1024") && lines[2].trim_end().ends_with("ok"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2/2 sizes done"));
}

#[test]
fn bad_arguments_are_errors_that_name_them() {
    for (args, msg) in [
        (&["--op", "gather"][..], "unknown op `gather`"),
        (&["--schedule", "nope"], "unknown schedule `nope`"),
        (
            &["--op", "all_gather", "--algo", "halving_doubling"],
            "not an algorithm of `all_gather`",
        ),
        (&["--op", "sendrecv", "--algo", "ring"], "--algo applies to collectives"),
        (&["--dtype", "f128"], "unknown dtype `f128`"),
        (&["-b", "4Q"], "unknown unit `Q`"),
        (&["-b", "64M", "-e", "4K"], "below the smallest"),
        (&["--backend", "mpi"], "unknown backend `mpi`"),
    ] {
        let out = bench(args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
    }
}
