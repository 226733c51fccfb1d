//! Times the compile-time check of every schedule in a text file (the
//! items that go between the braces of `comm_schedule! { .. }`): parsing,
//! resolution and `verify` over each item's own `#[verify]` set, or over
//! `world in 1..=K` with `-k K`.
//!
//! `cargo run --release -p hcomm-schedule --example check_time -- FILE [-k K]`
//! (release: the checker runs optimised inside the compiler under the
//! documented `[profile.dev.build-override] opt-level = 3`).
//!
//! Each row gives the wall time and the CPU time of the whole process
//! (user + system, every thread: `verify` spreads large verify sets over
//! the cores) while that item was checked; on a loaded machine the CPU
//! time is the steadier figure. CPU time is read from `/proc/self/stat`
//! (Linux, 10 ms ticks) and shown as `-` elsewhere.

use std::process::ExitCode;
use std::time::Instant;

use hcomm_schedule::syntax::{front, parse_str};
use hcomm_schedule::{verify, WorldSet};

fn run(path: &str, k: Option<i64>) -> Result<(), String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let input = parse_str(&src).map_err(|e| format!("{path}: {e}"))?;
    println!("| schedule | worlds | wall s | cpu s | verdict |\n|---|---|---:|---:|---|");
    for item in &input.items {
        let mut fr = front(item).map_err(|r| format!("{path}: {:?}", r.errors))?;
        if let Some(hi) = k {
            fr.ir.verify.world = WorldSet::Range {
                lo: 1,
                hi,
                inclusive: true,
            };
        }
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let diags = verify(&fr.ir);
        let t = t0.elapsed().as_secs_f64();
        let cpu = match (c0, cpu_seconds()) {
            (Some(a), Some(b)) => format!("{:.2}", b - a),
            _ => "-".to_owned(),
        };
        let verdict = diags.first().map_or_else(|| "ok".to_owned(), ToString::to_string);
        println!(
            "| {} | {:?} | {t:.3} | {cpu} | {} |",
            fr.ir.name,
            fr.ir.verify.world,
            verdict.lines().next().unwrap_or("")
        );
    }
    Ok(())
}

/// User plus system CPU time of this process so far, in seconds (fields
/// 14 and 15 of `/proc/self/stat`, in ticks of 10 ms).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // the command name, field 2, is in parentheses and may hold spaces
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3
    let ticks = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: check_time FILE [-k K]");
        return ExitCode::FAILURE;
    };
    let k = match args.get(1).map(String::as_str) {
        Some("-k") => {
            let Some(v) = args.get(2).and_then(|v| v.parse::<i64>().ok()).filter(|&v| v > 0) else {
                eprintln!("-k needs a positive integer");
                return ExitCode::FAILURE;
            };
            Some(v)
        }
        Some(other) => {
            eprintln!("unknown argument {other}; usage: check_time FILE [-k K]");
            return ExitCode::FAILURE;
        }
        None => None,
    };
    match run(path, k) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
