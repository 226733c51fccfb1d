//! `hcomm-bench-checker [-w 8,16,...]`: how the run-time verification of
//! built-in schedules scales with the world size (the check a communicator
//! outside a schedule's `#[verify]` set runs once per size), as a markdown
//! table with the fitted slope of log(time) against log(world).

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use hcomm::schedules;
use hcomm_bench::scaling::loglog_slope;
use hcomm_schedule::{check_world, Schedule};

/// Times `check_world` (every check the compiler runs, at one world size)
/// on built-in schedules.
#[derive(Parser, Debug)]
#[command(name = "hcomm-bench-checker", version)]
struct Cli {
    /// World sizes.
    #[arg(short = 'w', long, value_delimiter = ',', default_value = "8,16,32,64,128,256,512")]
    worlds: Vec<i64>,
    /// Repetitions per world size; the table shows the fastest.
    #[arg(short = 'r', long, default_value_t = 1)]
    reps: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let named: [(&str, &Schedule); 3] = [
        ("ring_all_gather", &schedules::ring_all_gather::SCHEDULE),
        ("ring_all_reduce_sum", &schedules::ring_all_reduce_sum::SCHEDULE),
        ("pairwise_all_to_all", &schedules::pairwise_all_to_all::SCHEDULE),
    ];
    println!("| world | {} |", named.map(|n| format!("{} (ms)", n.0)).join(" | "));
    println!("|---:|{}", "---:|".repeat(named.len()));
    let mut series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); named.len()];
    for &world in &cli.worlds {
        let mut cells = Vec::new();
        for (i, (name, schedule)) in named.iter().enumerate() {
            let mut best = f64::INFINITY;
            for _ in 0..cli.reps.max(1) {
                let t0 = Instant::now();
                let diags = check_world(schedule, world, &[]);
                best = best.min(t0.elapsed().as_secs_f64());
                if let Some(d) = diags.first() {
                    eprintln!("hcomm-bench-checker: {name} at world {world}: {d}");
                    return ExitCode::FAILURE;
                }
            }
            series[i].push((world as f64, best));
            cells.push(format!("{:.2}", best * 1e3));
        }
        println!("| {world} | {} |", cells.join(" | "));
    }
    let slopes: Vec<String> = series
        .iter()
        .map(|s| loglog_slope(s).map_or_else(|| "-".to_owned(), |k| format!("{k:.2}")))
        .collect();
    println!("| slope (log time / log world) | {} |", slopes.join(" | "));
    ExitCode::SUCCESS
}
