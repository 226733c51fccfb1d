//! `hcomm-bench-predicted MACHINE ROWS.jsonl.. [--svg PATH]`: each cell of
//! `hcomm-bench --json` runs (median over its rows) beside the cost
//! model's prediction on MACHINE (a preset name or a topology file), the
//! share within ±25 %, and a plot of predicted against measured.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hcomm_bench::predicted::{cells, plot, within};

/// Measured against predicted, per cell.
#[derive(Parser, Debug)]
#[command(name = "hcomm-bench-predicted", version)]
struct Cli {
    /// The machine: a preset name (`host`, `host-processes`, `dgx-h100`, ...) or a `.toml` topology file.
    machine: String,
    /// Files of `hcomm-bench --json` rows.
    #[arg(required = true)]
    rows: Vec<PathBuf>,
    /// Also draw predicted against measured into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = || -> Result<(), String> {
        let machine = hcomm_cost::machine(&cli.machine).map_err(|e| e.to_string())?;
        let samples = hcomm_cost::measured(&cli.rows).map_err(|e| e.to_string())?;
        let cells = cells(&machine, &samples);
        println!("| collective | algorithm | ranks | bytes | measured us | predicted us | error |");
        println!("|---|---|---:|---:|---:|---:|---:|");
        for c in &cells {
            let s = &c.sample;
            println!(
                "| {:?} | {} | {} | {} | {:.1} | {:.1} | {:+.0} % |",
                s.algorithm.collective(),
                s.algorithm.schedule_name(),
                s.world,
                s.bytes,
                s.us,
                c.predicted_us,
                c.error() * 100.0
            );
        }
        println!("\n{} of {} cells within +-25 %", within(&cells, 0.25), cells.len());
        if let Some(path) = &cli.svg {
            plot(&cells, &machine.name, path)?;
            eprintln!("hcomm-bench-predicted: wrote {}", path.display());
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hcomm-bench-predicted: {e}");
            ExitCode::FAILURE
        }
    }
}
