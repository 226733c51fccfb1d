//! `hcomm-cost`: fit a machine to hcomm-bench runs and print predicted
//! tables (`hcomm-bench-predicted` compares a machine with runs, per cell,
//! and plots it).
//!
//! ```text
//! hcomm-cost fit NAME CACHED[,LLC] [--no-latency] [--cores N] RUN.jsonl...  # TOML of the fitted machine
//! hcomm-cost table MACHINE [RANKS,..] [BYTES]  # predicted time per algorithm
//! ```
//!
//! MACHINE is a preset name or a TOML file. RUN files hold `hcomm-bench
//! --json` rows; cells are the median of their runs. CACHED and LLC are
//! the message sizes (like `1M,8M`) up to which a message stays in a
//! core's cache and in the last-level cache: each tier gets a bandwidth.
//! With `--cores N`, a board synchronisation of more than N ranks gets a
//! term of its own; `--no-latency` leaves the per-message latency at 0.

use std::fmt::Write as _;
use std::process::ExitCode;

use hcomm_cost::{argmin, fit, measured, Builtin, Coll, Machine, Tiers};

fn machine(arg: &str) -> Result<Machine, String> {
    hcomm_cost::machine(arg).map_err(|e| e.to_string())
}

fn to_toml(m: &Machine, command: &str) -> String {
    let mut s = format!(
        "name = \"{}\"\nsource = \"fitted by `{command}`\"\nreduce_gbs = {:.4}\n",
        m.name, m.reduce_gbs
    );
    if let Some(b) = &m.board {
        let _ = write!(s, "\n[board]\nlatency_us = {:.4}\n", b.latency_us);
        if let (Some(c), Some(o)) = (b.cores, b.oversubscribed_us) {
            let _ = write!(s, "cores = {c}\noversubscribed_us = {o:.4}\n");
        }
    }
    for l in &m.levels {
        let _ = write!(
            s,
            "\n[[level]]\nname = \"{}\"\nlink = \"switch\"\nbandwidth_gbs = {:.4}\nlatency_us = {:.4}\n",
            l.name, l.bandwidth_gbs, l.latency_us
        );
        if let (Some(b), Some(bw)) = (l.cached_bytes, l.cached_bandwidth_gbs) {
            let _ = write!(s, "cached_bytes = {b:.1}\ncached_bandwidth_gbs = {bw:.4}\n");
        }
        if let (Some(b), Some(bw)) = (l.llc_bytes, l.llc_bandwidth_gbs) {
            let _ = write!(s, "llc_bytes = {b:.1}\nllc_bandwidth_gbs = {bw:.4}\n");
        }
        if let Some(g) = l.shared_gbs {
            let _ = writeln!(s, "shared_gbs = {g:.4}");
        }
    }
    s
}

fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mul) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .map(|n| n * mul)
        .map_err(|_| format!("`{s}` is not a size like 64M"))
}

fn table(m: &Machine, ranks: &[usize], bytes: usize) {
    println!(
        "{}: predicted time of a {bytes}-byte call, us (algorithm: time)\n",
        m.name
    );
    for c in [Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll] {
        println!(
            "| {c:?} ranks | {} |",
            ranks.iter().map(ToString::to_string).collect::<Vec<_>>().join(" | ")
        );
        println!("|---|{}", "---|".repeat(ranks.len()));
        for b in Builtin::ALL.into_iter().filter(|b| b.collective() == c) {
            let row: Vec<String> = ranks
                .iter()
                .map(|&w| {
                    b.predict(m, w, bytes)
                        .map_or("-".to_owned(), |p| format!("{:.0}", p.us))
                })
                .collect();
            println!("| {} | {} |", b.schedule_name(), row.join(" | "));
        }
        println!();
    }
    println!("Fastest message algorithm by call size (1 KiB to 1 GiB, powers of two; one-shot left out):\n");
    for c in [Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll] {
        // The board's reach is its size, which the model does not know;
        // the policy takes one-shot first within it and these past it.
        let candidates: Vec<Builtin> = Builtin::ALL
            .into_iter()
            .filter(|b| b.collective() == c && !b.is_one_shot())
            .collect();
        for &w in ranks {
            let mut runs: Vec<(usize, usize, Builtin)> = Vec::new();
            for shift in 10..=30 {
                let bytes = 1usize << shift;
                let Some((best, _)) = argmin(m, &candidates, w, bytes) else {
                    continue;
                };
                match runs.last_mut() {
                    Some(last) if last.2 == best => last.1 = bytes,
                    _ => runs.push((bytes, bytes, best)),
                }
            }
            let text: Vec<String> = runs
                .iter()
                .map(|(lo, hi, b)| format!("{} {}..{}", b.schedule_name(), size_text(*lo), size_text(*hi)))
                .collect();
            println!("* {c:?}, {w} ranks: {}", text.join(", "));
        }
    }
    println!();
}

fn size_text(b: usize) -> String {
    match b {
        b if b >= 1 << 30 => format!("{}G", b >> 30),
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b => format!("{}K", b >> 10),
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let usage =
        "usage: hcomm-cost fit NAME CACHED_BYTES[,LLC_BYTES] [--no-latency] [--cores N] RUN.jsonl.. | table MACHINE [RANKS,..] [BYTES]";
    match args {
        [cmd, name, sizes, files @ ..] if cmd == "fit" && !files.is_empty() => {
            let (cached, llc) = match sizes.split_once(',') {
                Some((c, l)) => (c, Some(l)),
                None => (sizes.as_str(), None),
            };
            let (latency, files) = match files {
                [flag, rest @ ..] if flag == "--no-latency" => (false, rest),
                _ => (true, files),
            };
            let (cores, files) = match files {
                [flag, n, rest @ ..] if flag == "--cores" && !rest.is_empty() => (
                    Some(
                        n.parse::<usize>()
                            .ok()
                            .filter(|&c| c >= 1)
                            .ok_or_else(|| format!("`--cores {n}` is not a number of cores >= 1"))?,
                    ),
                    rest,
                ),
                _ => (None, files),
            };
            let tiers = Tiers {
                cached_bytes: parse_size(cached)? as f64,
                llc_bytes: llc.map(parse_size).transpose()?.map(|b| b as f64),
                cores,
                latency,
            };
            let m = fit(name, &measured(files).map_err(|e| e.to_string())?, tiers).map_err(|e| e.to_string())?;
            print!("{}", to_toml(&m, &format!("hcomm-cost {}", args.join(" "))));
            Ok(())
        }
        [cmd, m, rest @ ..] if cmd == "table" && rest.len() <= 2 => {
            let ranks = match rest.first() {
                Some(r) => r
                    .split(',')
                    .map(|x| x.parse().map_err(|_| format!("`{x}` is not a number of ranks")))
                    .collect::<Result<Vec<usize>, String>>()?,
                None => vec![8, 64, 512, 4096],
            };
            let bytes = rest.get(1).map_or(Ok(64 << 20), |b| parse_size(b))?;
            table(&machine(m)?, &ranks, bytes);
            Ok(())
        }
        _ => Err(usage.to_owned()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hcomm-cost: {e}");
            ExitCode::FAILURE
        }
    }
}
