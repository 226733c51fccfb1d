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

/// The operation's usual form: out of place where it has one, else in place.
fn primary(row: &Value) -> &Value {
    let out = &row["out_of_place"];
    if out.is_null() {
        &row["in_place"]
    } else {
        out
    }
}

#[test]
fn a_sweep_prints_one_json_object_per_size_with_the_nccl_tests_fields() {
    let rows = json_rows(&["all_reduce", "-b", "1K", "-e", "16K", "-f", "4", "--ranks", "4"]);
    let bytes: Vec<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes, [1024, 4096, 16384]);
    for r in &rows {
        assert_eq!(r["op"], "all_reduce");
        assert_eq!(r["redop"], "sum");
        assert_eq!(r["ranks"], 4);
        assert_eq!(r["dtype"], "f32");
        assert_eq!(r["count"].as_u64().unwrap() * 4, r["bytes"].as_u64().unwrap());
        // all-reduce is timed out of place and in place, like nccl-tests
        for form in [&r["out_of_place"], &r["in_place"]] {
            assert_eq!(form["check"], "ok", "{r}");
            assert_eq!(form["iters"], 2, "{r}");
            assert!(form["algorithm"].as_str().is_some_and(|a| !a.is_empty()));
            let (t, algbw, busbw) = (
                form["time_us"].as_f64().unwrap(),
                form["algbw"].as_f64().unwrap(),
                form["busbw"].as_f64().unwrap(),
            );
            assert!(t > 0.0);
            let want = r["bytes"].as_f64().unwrap() / (t * 1e-6) / 1e9;
            assert!((algbw - want).abs() <= 1e-6 * want, "{r}");
            assert!((busbw - algbw * 1.5).abs() <= 1e-9 * busbw.max(1.0), "{r}");
        }
    }
}

#[test]
fn nccl_tests_flags_keep_their_meanings() {
    // -n iterations, -w warm-up, -o operator, -d type, -c 0 no check; the
    // name of an nccl-tests program selects the collective
    let out = bench(&[
        "all_reduce_perf",
        "-b",
        "64",
        "-e",
        "64",
        "-n",
        "5",
        "-w",
        "1",
        "-o",
        "max",
        "-d",
        "int32",
        "-c",
        "0",
        "--ranks",
        "3",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let row: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (&row["op"], &row["redop"], &row["dtype"], &row["ranks"]),
        (&"all_reduce".into(), &"max".into(), &"i32".into(), &3.into())
    );
    for form in [&row["out_of_place"], &row["in_place"]] {
        assert_eq!(form["iters"], 5, "{row}");
        assert_eq!(form["check"], "unchecked", "{row}");
    }
    // the operator reaches the reduction: max, prod, min and the mean
    // (the sum divided once, integers truncated) check out too
    for (op, redop, dtype) in [
        ("reduce_scatter", "max", "i32"),
        ("reduce_scatter", "prod", "i32"),
        ("reduce_scatter", "min", "i32"),
        ("reduce_scatter", "avg", "i32"),
        ("all_reduce", "avg", "f32"),
        ("all_reduce", "avg", "i32"),
        ("all_reduce", "avg", "bf16"),
    ] {
        let rows = json_rows(&[op, "-o", redop, "-b", "96", "-e", "96", "--ranks", "3", "-d", dtype]);
        let row = &rows[0];
        assert_eq!(row["redop"], redop);
        assert_eq!(row["out_of_place"]["check"], "ok", "{row}");
        // reduce-scatter has no in-place form
        if op == "all_reduce" {
            assert_eq!(row["in_place"]["check"], "ok", "{row}");
        } else {
            assert!(row["in_place"].is_null(), "{row}");
        }
    }
}

#[test]
fn in_a_job_of_processes_only_rank_0_prints() {
    // torchrun's variables: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_hcomm-bench"))
                .args(["broadcast", "--sizes", "1K,2K", "-n", "2", "-w", "1"])
                .env("HCOMM_TIMEOUT", "30")
                .env_remove("HCOMM_RANK")
                .env_remove("HCOMM_WORLD_SIZE")
                .env_remove("HCOMM_MASTER_ADDR")
                .env_remove("HCOMM_MASTER_PORT")
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .env("HCOMM_JOB_ID", format!("hcomm-bench-cli-{port}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = ranks.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for (rank, out) in outs.iter().enumerate() {
        assert!(
            out.status.success(),
            "rank {rank}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let zero = String::from_utf8_lossy(&outs[0].stdout);
    let lines: Vec<&str> = zero.lines().collect();
    assert_eq!(lines.len(), 5, "{zero}");
    assert!(lines[0].contains("2 ranks"), "{zero}");
    assert!(
        lines[3].trim_start().starts_with("1024") && lines[4].trim_start().starts_with("2048"),
        "{zero}"
    );
    assert_eq!(String::from_utf8_lossy(&outs[1].stdout), "");
    assert!(!String::from_utf8_lossy(&outs[1].stderr).contains("sizes done"));
}

#[test]
fn every_op_and_schedule_checks_out_on_three_ranks() {
    let ops: &[&[&str]] = &[
        &["all_gather", "-o", "sum"],
        &["reduce_scatter", "-o", "max"],
        &["all_to_all", "-o", "max"],
        &["broadcast", "-o", "max"],
        &["sendrecv", "-o", "max"],
        &["--schedule", "ring_all_gather"],
        &["--schedule", "bruck_all_gather"],
        &["--schedule", "pairwise_all_to_all"],
        &["--schedule", "binomial_broadcast"],
        &["--schedule", "ring_all_reduce_max"],
        &["--schedule", "two_level_all_gather"],
        &["--schedule", "sparse_all_gather"],
        &["--schedule", "direct_all_reduce"],
        &["--schedule", "recursive_doubling_all_reduce"],
        &["--schedule", "direct_reduce_scatter"],
        &["--schedule", "ring_reduce_scatter"],
        &["--schedule", "binomial_reduce"],
        &["--schedule", "scatter_all_gather_broadcast"],
        &["--schedule", "one_shot_all_reduce"],
        &["--schedule", "one_shot_all_gather"],
        &["--schedule", "one_shot_reduce_scatter"],
        &["--schedule", "one_shot_all_to_all"],
        &["--schedule", "one_shot_broadcast"],
    ];
    for op in ops {
        let rows = json_rows(&[*op, &["-b", "96", "-e", "96", "--ranks", "3", "--dtype", "i32"]].concat());
        assert_eq!(rows.len(), 1, "{op:?}");
        assert_eq!(primary(&rows[0])["check"], "ok", "{op:?}: {}", rows[0]);
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
            "--ranks",
            "4",
            "--dtype",
            "i32",
        ]);
        assert_eq!(primary(&rows[0])["check"], "ok", "{schedule}: {}", rows[0]);
    }
    let rows = json_rows(&["--schedule", "ring_all_gather", "-b", "48", "-e", "48", "--ranks", "2"]);
    assert_eq!(rows[0]["op"], "all_gather");
    assert_eq!(rows[0]["schedule"], "ring_all_gather");
    assert_eq!(rows[0]["out_of_place"]["algorithm"], "ring_all_gather");
    assert!(rows[0]["in_place"].is_null());
}

#[test]
fn a_forced_algorithm_is_the_one_reported() {
    for algo in ["ring", "halving_doubling", "reduce_broadcast", "direct"] {
        let rows = json_rows(&["all_reduce", "-b", "64K", "-e", "64K", "--ranks", "4", "--algo", algo]);
        assert_eq!(rows[0]["out_of_place"]["algorithm"], algo);
        assert_eq!(rows[0]["out_of_place"]["check"], "ok");
        assert_eq!(rows[0]["in_place"]["check"], "ok");
    }
}

#[test]
fn the_algorithms_that_ran_are_reported() {
    // 4 KiB is reduced whole by recursive doubling; 1000 B of f32 on 3 ranks
    // leaves a tail of one element, which the ring hands to it.
    let rows = json_rows(&[
        "all_reduce",
        "-b",
        "4K",
        "-e",
        "4K",
        "--ranks",
        "4",
        "--algo",
        "halving_doubling",
    ]);
    assert_eq!(rows[0]["out_of_place"]["algorithm"], "recursive_doubling");
    let rows = json_rows(&["all_reduce", "--sizes", "1000", "--ranks", "3", "--algo", "ring"]);
    assert_eq!(rows[0]["out_of_place"]["algorithm"], "ring+recursive_doubling");
    assert_eq!(rows[0]["out_of_place"]["check"], "ok");
}

#[test]
fn the_table_has_a_header_and_a_row_per_size() {
    let out = bench(&["sendrecv", "--sizes", "1K,2K", "--ranks", "2", "--iters", "2"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(
        lines[1].contains("out-of-place") && lines[1].contains("in-place"),
        "{stdout}"
    );
    assert!(
        lines[2].contains("busbw(GB/s)") && lines[2].contains("redop"),
        "{stdout}"
    );
    // sendrecv has no in-place form: its columns say so
    let cells: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(cells[0], "1024", "{stdout}");
    assert_eq!(cells.len(), 14, "{stdout}");
    assert_eq!(cells[3], "none", "{stdout}");
    assert_eq!(cells[9], "ok", "{stdout}");
    assert_eq!(cells[10..], ["n/a"; 4], "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("2/2 sizes done"));
}

#[test]
fn bad_arguments_are_errors_that_name_them() {
    for (args, msg) in [
        (&["gather"][..], "unknown collective `gather`"),
        (
            &["-o", "mean"],
            "unknown reduction operator `mean`; expected one of sum, prod, max, min",
        ),
        (&["-c", "2"], "2 is not in 0..=1"),
        (&["-n", "0"], "a row needs at least 1 timed iteration"),
        (&["-n", "many"], "`many` is not a number of iterations"),
        (&["--ranks", "0"], "--ranks must be at least 1"),
        (&["--schedule", "nope"], "unknown schedule `nope`"),
        (
            &["all_gather", "--algo", "halving_doubling"],
            "not an algorithm of `all_gather`",
        ),
        (&["sendrecv", "--algo", "ring"], "--algo applies to collectives"),
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
