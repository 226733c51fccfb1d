//! `hcomm-bench all_reduce -b 4K -e 64M -f 4 -n 20 --ranks 4`: times one
//! operation over a geometric sweep of sizes with nccl-tests' flags and
//! columns. The ranks are threads of this process; under `hcomm-run -n N --
//! hcomm-bench ...` (or torchrun) each rank is a process, the job's size
//! replaces `--ranks`, and only rank 0 prints.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use hcomm::{Algorithm, BackendKind};
use hcomm_bench::data::parse_dtype;
use hcomm_bench::op::parse_reduce_op;
use hcomm_bench::size::{format_size, parse_size, sweep};
use hcomm_bench::{Config, Op, Row, Schedule};

/// Times an hcomm collective, point-to-point ring or schedule over a sweep
/// of sizes, taking nccl-tests' flags (-b -e -f -n -w -c -o -d). Each row:
/// the median over iterations of the slowest rank's time, algbw = size /
/// time and busbw = algbw x the nccl-tests bus factor (1 GB = 1e9 B), and a
/// check of every rank's result against a serial reference, out of place
/// and in place where hcomm has that form (n/a where it does not).
#[derive(Parser, Debug)]
#[command(name = "hcomm-bench", version)]
#[allow(clippy::doc_markdown, reason = "the doc comments are the plain-text --help")]
struct Cli {
    /// all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or
    /// sendrecv (nccl-tests' program names, all_reduce_perf, ..., work too).
    #[arg(default_value = "all_reduce")]
    collective: String,
    /// Run a built-in or example schedule instead of a collective
    /// (ring_all_gather, recursive_doubling_all_gather, bruck_all_gather,
    /// pairwise_all_to_all, binomial_broadcast, ring_all_reduce_{sum,prod,max,min},
    /// two_level_all_gather, sparse_all_gather, direct_all_reduce,
    /// halving_doubling_all_reduce, recursive_doubling_all_reduce,
    /// direct_reduce_scatter, ring_reduce_scatter,
    /// recursive_halving_reduce_scatter, binomial_reduce,
    /// scatter_all_gather_broadcast, one_shot_all_reduce, one_shot_all_gather,
    /// one_shot_reduce_scatter, one_shot_all_to_all, one_shot_broadcast).
    #[arg(long, conflicts_with_all = ["collective", "algo", "redop"])]
    schedule: Option<String>,
    /// Smallest size (4096, 4K, 64M, 1G; powers of 1024).
    #[arg(short = 'b', long = "minbytes", default_value = "4K", value_parser = parse_size)]
    min_bytes: usize,
    /// Largest size.
    #[arg(short = 'e', long = "maxbytes", default_value = "64M", value_parser = parse_size)]
    max_bytes: usize,
    /// Factor between consecutive sizes.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    factor: usize,
    /// An explicit list of sizes instead of -b/-e/-f (4K,64K,1M).
    #[arg(short = 's', long, value_delimiter = ',', value_parser = parse_size,
          conflicts_with_all = ["min_bytes", "max_bytes", "factor"])]
    sizes: Vec<usize>,
    /// Timed iterations per size (default: about 256 MiB of traffic, 20 to 1000).
    #[arg(short = 'n', long = "iters", value_parser = parse_iters)]
    iters: Option<usize>,
    /// Warm-up iterations per size (default: a tenth of -n, at least 3).
    #[arg(short = 'w', long = "warmup_iters", visible_alias = "warmup")]
    warmup: Option<usize>,
    /// Check every rank's result against the serial reference: 1 (default) or 0.
    #[arg(short = 'c', long = "check", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    check: u8,
    /// Reduction operator of all_reduce and reduce_scatter: sum, prod, max,
    /// min or avg.
    #[arg(short = 'o', long = "op", id = "redop", default_value = "sum")]
    redop: String,
    /// Element type: f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64 (or
    /// nccl-tests' float, double, half, bfloat16, int32).
    #[arg(short = 'd', long = "datatype", visible_alias = "dtype", default_value = "f32")]
    dtype: String,
    /// Number of ranks (threads of this process; a job of processes has
    /// its own size).
    #[arg(long = "ranks", default_value_t = 2)]
    ranks: usize,
    /// Force the collective's algorithm (ring, halving_doubling, bruck, ...).
    #[arg(long)]
    algo: Option<String>,
    /// host, hccl or nccl.
    #[arg(long, default_value = "host")]
    backend: String,
    /// One JSON object per line instead of the table.
    #[arg(long)]
    json: bool,
    /// No progress lines on stderr.
    #[arg(short, long)]
    quiet: bool,
}

/// `-n`: a number of timed iterations, at least 1 (no row without a time).
fn parse_iters(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("a row needs at least 1 timed iteration".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of iterations")),
    }
}

fn config(cli: &Cli) -> Result<Config, String> {
    let op = match &cli.schedule {
        Some(name) => Op::Schedule(Schedule::parse(name)?),
        None => Op::parse(&cli.collective, parse_reduce_op(&cli.redop)?)?,
    };
    let algo = match (&cli.algo, op) {
        (None, _) => None,
        (Some(name), Op::Collective(c, _)) => Some(
            Algorithm::parse(name)
                .filter(|a| Algorithm::for_collective(c).contains(a))
                .ok_or_else(|| {
                    let names: Vec<_> = Algorithm::for_collective(c).iter().map(|a| a.name()).collect();
                    format!(
                        "`{name}` is not an algorithm of `{c}`; expected one of {}",
                        names.join(", ")
                    )
                })?,
        ),
        (Some(_), _) => return Err(format!("--algo applies to collectives, not to `{}`", op.name())),
    };
    if cli.ranks == 0 {
        return Err("--ranks must be at least 1".into());
    }
    Ok(Config {
        op,
        sizes: if cli.sizes.is_empty() {
            sweep(cli.min_bytes, cli.max_bytes, cli.factor)?
        } else {
            cli.sizes.clone()
        },
        ranks: cli.ranks,
        dtype: parse_dtype(&cli.dtype)?,
        algo,
        backend: BackendKind::parse(&cli.backend)
            .ok_or_else(|| format!("unknown backend `{}`; expected host, hccl or nccl", cli.backend))?,
        iters: cli.iters,
        warmup: cli.warmup,
        check: cli.check == 1,
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hcomm-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let sizes: Vec<String> = config.sizes.iter().map(|&b| format_size(b)).collect();
    let total = config.sizes.len();
    let start = Instant::now();
    let done = std::sync::atomic::AtomicUsize::new(0);
    // Called on rank 0 only: in a job of processes the others time their
    // part silently, header included.
    let on_row = |row: &Row| {
        let mut out = std::io::stdout().lock();
        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut text = String::new();
        if cli.json {
            text = row.to_json();
        } else {
            if k == 1 {
                text = format!(
                    "# hcomm-bench {}: {} ranks, {} backend, {}, sizes {}\n{}\n",
                    config.op.name(),
                    row.ranks,
                    config.backend,
                    config.dtype,
                    sizes.join(","),
                    Row::text_header()
                );
            }
            text.push_str(&row.to_text());
        }
        // A closed stdout (a pipe into `head`) is not worth a panic.
        let _ = writeln!(out, "{text}").and_then(|()| out.flush());
        if !cli.quiet && total > 1 {
            eprintln!(
                "hcomm-bench: {k}/{total} sizes done ({} B, {:.1} s elapsed)",
                row.bytes,
                start.elapsed().as_secs_f64()
            );
        }
    };
    match hcomm_bench::sweep(&config, &on_row) {
        Ok(rows) if rows.iter().all(|r| r.wrong().is_empty()) => ExitCode::SUCCESS,
        Ok(rows) => {
            for r in &rows {
                for (form, check) in r.wrong() {
                    eprintln!("hcomm-bench: {} bytes, {form}: {check}", r.bytes);
                }
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hcomm-bench: {}", hcomm_examples::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
