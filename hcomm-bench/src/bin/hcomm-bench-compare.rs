//! `hcomm-bench-compare RESULTS [--svg DIR]`: the comparison table of a
//! `bench/compare.sh` results folder (markdown), and one SVG plot per op.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hcomm_bench::compare::{op_order, Results};
use hcomm_bench::plot::plot_op;

/// Prints hcomm beside Open MPI (default and nommap settings) and the
/// memcpy ceiling, from the files `bench/compare.sh` writes.
#[derive(Parser, Debug)]
#[command(name = "hcomm-bench-compare", version)]
struct Cli {
    /// The results folder (hcomm_*.jsonl, mpi_*.tsv, memcpy_*.tsv).
    results: PathBuf,
    /// Also draw `<op>.svg` for every op into this folder.
    #[arg(long)]
    svg: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = || -> Result<(), String> {
        let results = Results::read_dir(&cli.results)?;
        print!("{}", results.table());
        println!("\nhcomm time against size (median over runs):\n");
        print!("{}", results.scaling_table());
        if let Some(dir) = &cli.svg {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut ops: Vec<String> = results.hcomm_points().into_iter().map(|p| p.0).collect();
            ops.sort_by_key(|o| op_order(o));
            ops.dedup();
            for op in ops {
                let path = dir.join(format!("{op}.svg"));
                plot_op(&results, &op, &path)?;
                eprintln!("hcomm-bench-compare: wrote {}", path.display());
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hcomm-bench-compare: {e}");
            ExitCode::FAILURE
        }
    }
}
