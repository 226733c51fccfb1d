//! `hcomm-bench-checker`: how the schedule checker scales with the world
//! size, as markdown tables with the fitted slope of log(time) against
//! log(world):
//!
//! * run time: `check_world` at one world size, the check a communicator
//!   outside a schedule's `#[verify]` set runs once per size (first call);
//! * compile time: `verify` over `world in 1..=K`, the work `comm_schedule!`
//!   does inside the compiler for `#[verify(world in 1..=K)]` (without
//!   rustc's own parsing and expansion).

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use hcomm::schedules;
use hcomm_bench::scaling::loglog_slope;
use hcomm_schedule::{check_world, verify, Diagnostic, Schedule, WorldSet};

/// Times the checker on built-in schedules.
#[derive(Parser, Debug)]
#[command(name = "hcomm-bench-checker", version)]
struct Cli {
    /// World sizes for the run-time check.
    #[arg(short = 'w', long, value_delimiter = ',', default_value = "8,16,32,64,128,256,512")]
    worlds: Vec<i64>,
    /// Upper ends K of `#[verify(world in 1..=K)]` for the compile-time check.
    #[arg(short = 'k', long, value_delimiter = ',', default_value = "16,32,64,128")]
    ranges: Vec<i64>,
    /// Only these schedules in the run-time table (default: all three).
    #[arg(short = 's', long, value_delimiter = ',')]
    schedules: Vec<String>,
    /// The schedules of the compile-time table (every operator of an
    /// operator parameter is checked, as `comm_schedule!` does).
    #[arg(short = 'c', long, value_delimiter = ',', default_value = "ring_all_gather")]
    compiled: Vec<String>,
}

/// The built-in schedules the tables can time.
fn builtins() -> [(&'static str, &'static Schedule); 3] {
    [
        ("ring_all_gather", &*schedules::ring_all_gather::SCHEDULE),
        ("ring_all_reduce", &*schedules::ring_all_reduce::SCHEDULE),
        ("pairwise_all_to_all", &*schedules::pairwise_all_to_all::SCHEDULE),
    ]
}

fn timed(f: impl FnOnce() -> Vec<Diagnostic>, what: &str) -> Result<f64, String> {
    let t0 = Instant::now();
    let diags = f();
    let t = t0.elapsed().as_secs_f64();
    diags.first().map_or(Ok(t), |d| Err(format!("{what}: {d}")))
}

fn slope_row(label: &str, series: &[Vec<(f64, f64)>]) -> String {
    let cells: Vec<String> = series
        .iter()
        .map(|s| loglog_slope(s).map_or_else(|| "-".to_owned(), |k| format!("{k:.2}")))
        .collect();
    format!("| {label} | {} |", cells.join(" | "))
}

fn run(cli: &Cli) -> Result<(), String> {
    let named: Vec<(&str, &Schedule)> = builtins()
        .into_iter()
        .filter(|(name, _)| cli.schedules.is_empty() || cli.schedules.iter().any(|s| s == name))
        .collect();
    println!("Run-time check at one world size (first call), ms:\n");
    println!(
        "| world | {} |",
        named.iter().map(|n| n.0).collect::<Vec<_>>().join(" | ")
    );
    println!("|---:|{}", "---:|".repeat(named.len()));
    let mut series = vec![Vec::new(); named.len()];
    for &world in &cli.worlds {
        let mut cells = Vec::new();
        for (i, (name, schedule)) in named.iter().enumerate() {
            // operator parameters (the ring all-reduce's `op`) at `sum`
            let scalars = vec![0; schedule.scalars.len()];
            let t = timed(
                || check_world(schedule, world, &scalars),
                &format!("{name} at world {world}"),
            )?;
            series[i].push((world as f64, t));
            cells.push(format!("{:.2}", t * 1e3));
        }
        println!("| {world} | {} |", cells.join(" | "));
    }
    println!("{}", slope_row("slope", &series));
    let compiled: Vec<(&str, &Schedule)> = builtins()
        .into_iter()
        .filter(|(name, _)| cli.compiled.iter().any(|s| s == name))
        .collect();
    if compiled.len() != cli.compiled.len() {
        let known: Vec<&str> = builtins().iter().map(|b| b.0).collect();
        return Err(format!(
            "-c {:?} names a schedule that is not built in; the built-ins are {known:?}",
            cli.compiled
        ));
    }
    println!("\nCompile-time check of `#[verify(world in 1..=K)]`, s:\n");
    println!(
        "| K | {} |",
        compiled.iter().map(|n| n.0).collect::<Vec<_>>().join(" | ")
    );
    println!("|---:|{}", "---:|".repeat(compiled.len()));
    let mut series = vec![Vec::new(); compiled.len()];
    for &k in &cli.ranges {
        let mut cells = Vec::new();
        for (i, (name, schedule)) in compiled.iter().enumerate() {
            let mut s = (*schedule).clone();
            s.verify.world = WorldSet::Range {
                lo: 1,
                hi: k,
                inclusive: true,
            };
            let t = timed(|| verify(&s), &format!("{name} over 1..={k}"))?;
            series[i].push((k as f64, t));
            cells.push(format!("{t:.2}"));
        }
        println!("| {k} | {} |", cells.join(" | "));
    }
    println!("{}", slope_row("slope", &series));
    Ok(())
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hcomm-bench-checker: {e}");
            ExitCode::FAILURE
        }
    }
}
