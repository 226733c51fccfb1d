//! Reading a results folder of `bench/compare.sh` (hcomm-bench JSON lines,
//! the Open MPI baseline's TSV, memcpy bandwidth) and the comparison table.
//!
//! File names say what a file holds: `hcomm_<cfg>_run<k>.jsonl`,
//! `mpi_<cfg>_run<k>.tsv` and `memcpy_run<k>.tsv`, where `<cfg>` is `n2`,
//! `n4` (default Open MPI settings) or `n2nommap`, `n4nommap` (glibc malloc
//! told never to return memory, which removes Open MPI's per-call page
//! faults on its temporary buffers).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::report::{Row, Timing};
use crate::run::median_sorted;
use crate::scaling::{linear_fit, loglog_slope};
use crate::size::format_size;

/// Which implementation a measurement is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// hcomm-bench.
    Hcomm,
    /// Open MPI with its default settings.
    Mpi,
    /// Open MPI with malloc never returning memory to the system.
    MpiNommap,
}

impl Source {
    /// The label in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Source::Hcomm => "hcomm",
            Source::Mpi => "Open MPI",
            Source::MpiNommap => "Open MPI nommap",
        }
    }
}

/// `(source, op, ranks, bytes)`: one line of a plot.
pub type Key = (Source, String, usize, usize);

/// Every run's value of one measurement.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// busbw of each run, GB/s.
    pub busbw: Vec<f64>,
    /// Median time of each run, microseconds.
    pub time_us: Vec<f64>,
    /// Whether every run's correctness check passed.
    pub ok: bool,
}

/// Everything in a results folder.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Measurements of hcomm and Open MPI.
    pub runs: BTreeMap<Key, Runs>,
    /// memcpy bandwidth in GB/s copied per second, keyed by (threads, bytes per thread), every run.
    pub memcpy: BTreeMap<(usize, usize), Vec<f64>>,
}

/// The Open MPI baseline's op names as hcomm-bench writes them.
fn mpi_op(name: &str) -> Option<&'static str> {
    Some(match name {
        "allreduce" => "all_reduce",
        "allgather" => "all_gather",
        "alltoall" => "all_to_all",
        "reducescatter" => "reduce_scatter",
        "sendrecv" => "sendrecv",
        _ => return None,
    })
}

impl Results {
    /// Reads every known file of `dir`.
    pub fn read_dir(dir: &Path) -> Result<Results, String> {
        let mut results = Results::default();
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        names.sort();
        for path in names {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            let text = || std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()));
            let cfg = name.split('_').nth(1).unwrap_or_default();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if name.starts_with("hcomm_") && ext == "jsonl" {
                results.add_hcomm(&text()?).map_err(|e| format!("{name}: {e}"))?;
            } else if name.starts_with("mpi_") && ext == "tsv" {
                let source = match cfg {
                    "n2" | "n4" => Source::Mpi,
                    "n2nommap" | "n4nommap" => Source::MpiNommap,
                    _ => continue,
                };
                results.add_mpi(source, &text()?).map_err(|e| format!("{name}: {e}"))?;
            } else if name.starts_with("memcpy_") && ext == "tsv" {
                results.add_memcpy(&text()?).map_err(|e| format!("{name}: {e}"))?;
            }
        }
        Ok(results)
    }

    fn entry(&mut self, key: Key) -> &mut Runs {
        self.runs.entry(key).or_insert_with(|| Runs {
            ok: true,
            ..Runs::default()
        })
    }

    /// Adds hcomm-bench `--json` lines: each operation's usual form (out
    /// of place where hcomm has it, as the Open MPI baseline measures).
    /// Rows written before the in-place columns carry their one timing at
    /// the top level (the stored runs under `bench/results`); that timing
    /// is the usual form.
    pub fn add_hcomm(&mut self, text: &str) -> Result<(), String> {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let row: Row = serde_json::from_str(line).map_err(|e| format!("`{line}`: {e}"))?;
            let t = match row.primary() {
                Some(t) => t.clone(),
                None => serde_json::from_str::<Timing>(line).map_err(|_| {
                    format!("`{line}`: neither an out-of-place nor an in-place timing, nor one at the top level")
                })?,
            };
            let r = self.entry((Source::Hcomm, row.op, row.ranks, row.bytes));
            r.busbw.push(t.busbw);
            r.time_us.push(t.time_us);
            r.ok &= t.check == "ok";
        }
        Ok(())
    }

    /// Adds the Open MPI baseline's TSV lines (`op nranks bytes iters
    /// med_us min_us mean_us algbw busbw check`).
    pub fn add_mpi(&mut self, source: Source, text: &str) -> Result<(), String> {
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let f: Vec<&str> = line.split('\t').map(str::trim).collect();
            let bad = || format!("`{line}` is not a line of the Open MPI baseline");
            if f.len() < 10 {
                return Err(bad());
            }
            let op = mpi_op(f[0]).ok_or_else(bad)?;
            let num = |i: usize| f[i].parse::<f64>().map_err(|_| bad());
            let r = self.entry((source, op.into(), num(1)? as usize, num(2)? as usize));
            r.time_us.push(num(4)?);
            r.busbw.push(num(8)?);
            r.ok &= f[9] == "ok";
        }
        Ok(())
    }

    /// Adds `memcpy_bw`'s TSV lines (`threads bytes_per_thread reps med_us
    /// min_us copy_GBps_med ...`).
    pub fn add_memcpy(&mut self, text: &str) -> Result<(), String> {
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let f: Vec<&str> = line.split('\t').map(str::trim).collect();
            let parsed = (f.len() >= 6)
                .then(|| Some((f[0].parse().ok()?, f[1].parse().ok()?, f[5].parse::<f64>().ok()?)))
                .flatten();
            let (threads, bytes, copy) = parsed.ok_or_else(|| format!("`{line}` is not a line of memcpy_bw"))?;
            self.memcpy.entry((threads, bytes)).or_default().push(copy);
        }
        Ok(())
    }

    /// The median over runs of busbw, if measured.
    pub fn busbw(&self, source: Source, op: &str, ranks: usize, bytes: usize) -> Option<f64> {
        self.runs
            .get(&(source, op.to_owned(), ranks, bytes))
            .map(|r| median(&r.busbw))
    }

    /// The median over runs of the time, if measured.
    pub fn time_us(&self, source: Source, op: &str, ranks: usize, bytes: usize) -> Option<f64> {
        self.runs
            .get(&(source, op.to_owned(), ranks, bytes))
            .map(|r| median(&r.time_us))
    }

    /// The busbw no shared-memory implementation can beat for `op` on
    /// `ranks` ranks at `bytes` (the size as hcomm-bench counts it). Every
    /// byte of busbw is one byte each rank receives, so one copy, and the
    /// ranks share the machine's copy bandwidth: that of as many threads
    /// as there are ranks (or as many as were measured, fewer when the
    /// ranks outnumber the cores), each copying the buffers of all the
    /// ranks that share its core, so measured at the per-thread size
    /// closest to `bytes * ranks / threads` (4 ranks on 2 cores work on
    /// twice the memory of 2 ranks, which on a 32 MiB cache is the
    /// difference between copying in and out of it). An all-gather and an
    /// all-to-all also copy the rank's own block into the output, which
    /// busbw does not count (its factor is `(n - 1) / n`): their every
    /// byte of busbw costs `n / (n - 1)` bytes of copy.
    pub fn ceiling(&self, op: &str, ranks: usize, bytes: usize) -> Option<f64> {
        let threads = self.memcpy.keys().map(|k| k.0).filter(|&t| t <= ranks).max()?;
        let per_thread = bytes.saturating_mul(ranks).div_ceil(threads);
        let size = self
            .memcpy
            .keys()
            .filter(|k| k.0 == threads)
            .map(|k| k.1)
            .min_by(|&a, &b| log_distance(a, per_thread).total_cmp(&log_distance(b, per_thread)))?;
        let per_rank = median(&self.memcpy[&(threads, size)]) / ranks as f64;
        let own_block = matches!(op, "all_gather" | "all_to_all") && ranks > 1;
        Some(if own_block {
            per_rank * (ranks - 1) as f64 / ranks as f64
        } else {
            per_rank
        })
    }

    /// The (op, ranks, bytes) that hcomm was measured at, in order.
    pub fn hcomm_points(&self) -> Vec<(String, usize, usize)> {
        self.runs
            .keys()
            .filter(|k| k.0 == Source::Hcomm)
            .map(|k| (k.1.clone(), k.2, k.3))
            .collect()
    }

    /// The comparison as a markdown table: per op, ranks and size, hcomm's
    /// busbw and time, Open MPI's with both settings, hcomm over the better
    /// of them, and the memcpy ceiling.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| op | ranks | size | hcomm busbw | hcomm time us | Open MPI busbw | Open MPI nommap busbw | \
             hcomm / best MPI | memcpy ceiling | hcomm / ceiling |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let cell = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let mut points = self.hcomm_points();
        points.sort_by_key(|a| (op_order(&a.0), a.1, a.2));
        for (op, ranks, bytes) in points {
            let h = self.busbw(Source::Hcomm, &op, ranks, bytes);
            let m = self.busbw(Source::Mpi, &op, ranks, bytes);
            let mn = self.busbw(Source::MpiNommap, &op, ranks, bytes);
            let best = m.into_iter().chain(mn).reduce(f64::max);
            let ceiling = self.ceiling(&op, ranks, bytes);
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
                _ => "-".to_owned(),
            };
            let checks = [Source::Hcomm, Source::Mpi, Source::MpiNommap]
                .iter()
                .all(|&s| self.runs.get(&(s, op.clone(), ranks, bytes)).is_none_or(|r| r.ok));
            let _ = writeln!(
                out,
                "| {op}{} | {ranks} | {} | {} | {} | {} | {} | {} | {} | {} |",
                if checks { "" } else { " (WRONG RESULT)" },
                format_size(bytes),
                cell(h),
                self.time_us(Source::Hcomm, &op, ranks, bytes)
                    .map_or_else(|| "-".to_owned(), |t| format!("{t:.1}")),
                cell(m),
                cell(mn),
                ratio(h, best),
                cell(ceiling),
                match (h, ceiling) {
                    (Some(h), Some(c)) if c > 0.0 => format!("{:.0} %", h / c * 100.0),
                    _ => "-".to_owned(),
                },
            );
        }
        out
    }
}

impl Results {
    /// hcomm's time against message size per op and world size, with the
    /// exponent of the fitted power law and the least-squares line over the
    /// sizes from 1 MiB on (where bandwidth, not latency, dominates):
    /// microseconds per MiB and the equivalent GB/s of algorithm bandwidth.
    pub fn scaling_table(&self) -> String {
        let points = self.hcomm_points();
        let mut sizes: Vec<usize> = points.iter().map(|p| p.2).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut groups: Vec<(String, usize)> = points.iter().map(|p| (p.0.clone(), p.1)).collect();
        groups.sort_by_key(|g| (op_order(&g.0), g.1));
        groups.dedup();
        let mut out = format!(
            "| op | ranks | {} | slope (log t / log size) | us per MiB (>= 1M) | GB/s of that line |\n|---|---:|{}---:|---:|---:|\n",
            sizes.iter().map(|&b| format!("{} us", format_size(b))).collect::<Vec<_>>().join(" | "),
            "---:|".repeat(sizes.len())
        );
        for (op, ranks) in groups {
            let series: Vec<(f64, f64)> = sizes
                .iter()
                .filter_map(|&b| Some((b as f64, self.time_us(Source::Hcomm, &op, ranks, b)?)))
                .collect();
            let cells: Vec<String> = sizes
                .iter()
                .map(|&b| {
                    self.time_us(Source::Hcomm, &op, ranks, b)
                        .map_or_else(|| "-".to_owned(), |t| format!("{t:.1}"))
                })
                .collect();
            let large: Vec<(f64, f64)> = series.iter().copied().filter(|p| p.0 >= f64::from(1 << 20)).collect();
            let slope = loglog_slope(&large).map_or_else(|| "-".to_owned(), |k| format!("{k:.2}"));
            let (per_mib, gbps) = linear_fit(&large).map_or_else(
                || ("-".to_owned(), "-".to_owned()),
                |(_, b)| (format!("{:.1}", b * f64::from(1 << 20)), format!("{:.2}", 1e-3 / b)),
            );
            let _ = writeln!(
                out,
                "| {op} | {ranks} | {} | {slope} | {per_mib} | {gbps} |",
                cells.join(" | ")
            );
        }
        out
    }
}

/// The position of an op in tables and plots.
pub fn op_order(op: &str) -> usize {
    [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "sendrecv",
        "broadcast",
    ]
    .iter()
    .position(|&o| o == op)
    .unwrap_or(usize::MAX)
}

fn log_distance(a: usize, b: usize) -> f64 {
    ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).abs()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    median_sorted(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MPI: &str = "# mpi_coll_bench nranks=2 lib=\"Open MPI\"\n\
        # op\tnranks\tbytes\titers\tmed_us\tmin_us\tmean_us\talgbw_GBps\tbusbw_GBps\tcheck\n\
        allreduce\t2\t4096\t1000\t1.50\t1.20\t1.60\t2.731\t2.731\tok\n\
        allreduce\t2\t67108864\t20\t70000.00\t69000.00\t71000.00\t0.959\t0.959\tok\n";
    const MEMCPY: &str = "# memcpy_bw ncpu=2\n\
        # threads\tbytes_per_thread\treps\tmed_us\tmin_us\tcopy_GBps_med\trw_GBps_med\tcopy_GBps_best\trw_GBps_best\n\
        1\t67108864\t64\t8000\t7900\t8.300\t16.600\t8.500\t17.000\n\
        2\t67108864\t64\t9900\t9800\t13.500\t27.000\t13.700\t27.400\n\
        2\t1048576\t2000\t50\t45\t40.000\t80.000\t45.000\t90.000\n";

    fn hcomm_line(bytes: usize, busbw: f64) -> String {
        format!(
            "{{\"op\":\"all_reduce\",\"bytes\":{bytes},\"count\":1,\"ranks\":2,\"dtype\":\"f32\",\
             \"backend\":\"host\",\"out_of_place\":{{\"algorithm\":\"ring\",\"iters\":20,\"time_us\":1.0,\
             \"min_us\":1.0,\"algbw\":{busbw},\"busbw\":{busbw},\"check\":\"ok\"}}}}\n"
        )
    }

    #[test]
    fn the_table_puts_hcomm_beside_both_mpi_settings_and_the_ceiling() {
        let mut r = Results::default();
        r.add_mpi(Source::Mpi, MPI).unwrap();
        r.add_mpi(Source::MpiNommap, &MPI.replace("0.959\tok", "2.000\tok"))
            .unwrap();
        r.add_memcpy(MEMCPY).unwrap();
        r.add_hcomm(&(hcomm_line(4096, 1.0) + &hcomm_line(64 << 20, 4.0) + &hcomm_line(64 << 20, 5.0)))
            .unwrap();
        assert_eq!(r.busbw(Source::Hcomm, "all_reduce", 2, 64 << 20), Some(4.5));
        // Two ranks share 13.5 GB/s of two-thread copy bandwidth.
        assert!((r.ceiling("all_reduce", 2, 64 << 20).unwrap() - 6.75).abs() < 1e-9);
        assert!((r.ceiling("all_reduce", 2, 4096).unwrap() - 20.0).abs() < 1e-9);
        let table = r.table();
        assert!(
            table.contains("| all_reduce | 2 | 64M | 4.50 | 1.0 | 0.96 | 2.00 | 2.25x | 6.75 | 67 % |"),
            "{table}"
        );
        assert!(table.contains("| all_reduce | 2 | 4K | 1.00 |"), "{table}");
    }

    /// 4 ranks on 2 threads: each thread copies for two ranks, so the
    /// ceiling of 16 MiB per rank comes from the 32 MiB measurement; an
    /// all-to-all's own block costs a copy that busbw does not count.
    #[test]
    fn the_ceiling_follows_the_working_set_and_the_own_block() {
        let mut r = Results::default();
        r.add_memcpy(
            "2\t16777216\t256\t1300\t1200\t24.000\t48.000\t27.000\t54.000\n\
             2\t33554432\t128\t4000\t3900\t12.000\t24.000\t13.000\t26.000\n\
             1\t16777216\t256\t1300\t1200\t13.000\t26.000\t14.000\t28.000\n",
        )
        .unwrap();
        let at = |op, ranks, bytes| r.ceiling(op, ranks, bytes).unwrap();
        assert!((at("sendrecv", 2, 16 << 20) - 12.0).abs() < 1e-9);
        assert!((at("sendrecv", 4, 16 << 20) - 3.0).abs() < 1e-9);
        assert!((at("all_to_all", 4, 16 << 20) - 2.25).abs() < 1e-9);
        assert!((at("all_gather", 2, 16 << 20) - 6.0).abs() < 1e-9);
        assert!((at("reduce_scatter", 2, 16 << 20) - 12.0).abs() < 1e-9);
        // One rank: one thread measured, nothing to receive.
        assert!((at("all_to_all", 1, 16 << 20) - 13.0).abs() < 1e-9);
    }

    #[test]
    fn malformed_lines_are_errors_that_quote_them() {
        let mut r = Results::default();
        assert!(r
            .add_mpi(Source::Mpi, "allreduce\t2\n")
            .unwrap_err()
            .contains("allreduce\t2"));
        assert!(r.add_memcpy("x\ty\n").unwrap_err().contains("memcpy_bw"));
        assert!(r.add_hcomm("{}").is_err());
        let no_timing =
            "{\"op\":\"all_reduce\",\"bytes\":4096,\"count\":1,\"ranks\":2,\"dtype\":\"f32\",\"backend\":\"host\"}";
        assert!(r.add_hcomm(no_timing).unwrap_err().contains("neither an out-of-place"));
    }

    /// A row of the earlier format (one timing at the top level, as the
    /// stored runs have it) counts as the operation's usual form.
    #[test]
    fn rows_from_before_the_in_place_columns_are_read() {
        let mut r = Results::default();
        r.add_hcomm(
            "{\"op\":\"all_reduce\",\"bytes\":4096,\"count\":1024,\"ranks\":2,\"dtype\":\"f32\",\
             \"algorithm\":\"one_shot\",\"backend\":\"host\",\"iters\":1000,\"time_us\":0.69,\
             \"min_us\":0.5,\"algbw\":5.9,\"busbw\":5.9,\"check\":\"ok\"}\n",
        )
        .unwrap();
        assert_eq!(r.busbw(Source::Hcomm, "all_reduce", 2, 4096), Some(5.9));
    }
}
