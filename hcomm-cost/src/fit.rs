//! Fitting a one-level machine whose ranks share one memory system (a
//! host: latency, the shared bandwidth of messages in a core's cache, in
//! the last-level cache and past it, reduction speed) to measured times: least squares on the
//! relative error over the features the model itself computes (rounds,
//! bytes through the busiest resources, bytes reduced), so a fit is the
//! model's own reading of the measurements. The board's one-shot samples
//! fit its synchronisation, and past the host's cores that of ranks
//! taking turns. Terms the data would make negative are left out
//! (latency and the board's, 0; the others make the fit fail).

use crate::builtin::Builtin;
use crate::error::{CostError, Result};
use crate::topology::{Board, Link, Machine};

/// One measured cell: an algorithm, a world size, a call size and its time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The algorithm.
    pub algorithm: Builtin,
    /// Ranks.
    pub world: usize,
    /// nccl-tests' size of the call, bytes.
    pub bytes: usize,
    /// Measured time, microseconds.
    pub us: f64,
}

/// A huge bandwidth: a term that costs nothing.
const FREE: f64 = 1e30;

/// Terms of the fit, in the order of [`features`].
const TERMS: usize = 7;

/// What each term describes, for messages.
const NAMES: [&str; TERMS] = [
    "latency",
    "board synchronisation",
    "oversubscribed board synchronisation",
    "messages up to `cached_bytes`",
    "messages up to `llc_bytes`",
    "larger messages",
    "reduction",
];

/// Terms that are left out (0) where the samples do not exercise them or
/// would make them negative: latency and the board's two.
const OPTIONAL: [usize; 3] = [0, 1, 2];

/// The message sizes that bound the bandwidth tiers of a host, and its
/// cores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tiers {
    /// Messages up to this many bytes stay in a core's cache.
    pub cached_bytes: f64,
    /// Larger ones up to this many bytes stay in the last-level cache
    /// (`None`: one bandwidth past `cached_bytes`).
    pub llc_bytes: Option<f64>,
    /// The host's cores: a board synchronisation of more ranks gets a
    /// term of its own (`None`: no such term).
    pub cores: Option<usize>,
    /// Whether to fit a per-message latency (`false`: 0, where the
    /// messages' rows are too large to tell it from their bandwidth).
    pub latency: bool,
}

/// A one-level switch machine whose ranks share its bandwidth, with the
/// tiers of `tiers` at these bandwidths (GB/s): cached, last-level cache,
/// memory; latency `lat[0]` us, a board synchronisation `lat[1]` us and
/// `lat[2]` us more past the cores; reduction `red` GB/s.
fn host(name: &str, tiers: Tiers, lat: [f64; 3], bw: [f64; 3], red: f64) -> Machine {
    let mut m = Machine::flat(name, Link::Switch, bw[2], lat[0], red);
    m.board = Some(Board {
        latency_us: lat[1],
        cores: tiers.cores,
        oversubscribed_us: tiers.cores.map(|_| lat[2]),
    });
    let l = &mut m.levels[0];
    "host".clone_into(&mut l.name);
    l.cached_bytes = Some(tiers.cached_bytes);
    l.cached_bandwidth_gbs = Some(bw[0]);
    l.llc_bytes = tiers.llc_bytes;
    l.llc_bandwidth_gbs = tiers.llc_bytes.map(|_| bw[1]);
    l.shared_gbs = Some(bw[2]);
    m
}

/// The model's features of a sample: rounds, board synchronisations (all,
/// and those past the cores), bytes through the busiest resources in
/// messages of each tier (cached, last-level cache, memory), and bytes
/// reduced by the busiest receiver (each summed over rounds).
fn features(s: &Sample, tiers: Tiers) -> Result<[f64; TERMS]> {
    // `transfer_us` is bytes / (GB/s * 1e3): 1e-3 GB/s reads out bytes.
    let f = |lat, bw, red| {
        s.algorithm
            .predict(&host("unit", tiers, lat, bw, red), s.world, s.bytes)
            .map(|p| p.us)
    };
    Ok([
        f([1.0, 0.0, 0.0], [FREE; 3], FREE)?,
        f([0.0, 1.0, 0.0], [FREE; 3], FREE)?,
        f([0.0, 0.0, 1.0], [FREE; 3], FREE)?,
        f([0.0; 3], [1e-3, FREE, FREE], FREE)?,
        f([0.0; 3], [FREE, 1e-3, FREE], FREE)?,
        f([0.0; 3], [FREE, FREE, 1e-3], FREE)?,
        f([0.0; 3], [FREE; 3], 1e-3)?,
    ])
}

/// Fits a one-level switch machine named `name` to `samples`, each tier
/// of `tiers` with a bandwidth of its own.
pub fn fit(name: &str, samples: &[Sample], tiers: Tiers) -> Result<Machine> {
    let rows: Vec<([f64; TERMS], f64)> = samples
        .iter()
        .map(|s| features(s, tiers).map(|f| (f.map(|x| x / s.us), 1.0)))
        .collect::<Result<_>>()?;
    let fail = |message: String| CostError::Unsupported {
        what: name.to_owned(),
        message,
    };
    let unused = |t: usize| rows.iter().all(|r| r.0[t] < 1e-12);
    // The last-level cache's term only where it has a tier.
    let bandwidths: Vec<usize> = if tiers.llc_bytes.is_some() {
        vec![3, 4, 5, 6]
    } else {
        vec![3, 5, 6]
    };
    // A term no sample exercises (a tier no message falls in) has a column
    // of nothing but the free terms' rounding; fitting it would make up a
    // bandwidth.
    if let Some(&t) = bandwidths.iter().find(|&&t| unused(t)) {
        return Err(fail(format!(
            "no sample has {} ({tiers:?}). hint: give sizes in every tier and an algorithm that reduces",
            NAMES[t]
        )));
    }
    // Every subset of the optional terms the samples exercise, the largest
    // first; the first whose fit is all positive wins.
    let optional: Vec<usize> = OPTIONAL
        .into_iter()
        .filter(|&t| !unused(t) && (t != 0 || tiers.latency))
        .collect();
    let mut subsets: Vec<Vec<usize>> = (0..1usize << optional.len())
        .map(|mask| {
            let mut terms: Vec<usize> = (0..optional.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| optional[i])
                .collect();
            terms.extend(&bandwidths);
            terms
        })
        .collect();
    subsets.sort_by_key(|t| std::cmp::Reverse(t.len()));
    let x = subsets
        .into_iter()
        .find_map(|terms| {
            let x = least_squares(&rows, &terms)?;
            x.iter().all(|&v| v > 0.0).then(|| {
                let mut full = [0.0; TERMS];
                for (t, v) in terms.iter().zip(x) {
                    full[*t] = v;
                }
                full
            })
        })
        .ok_or_else(|| {
            fail(format!(
                "{} samples give no fit with positive bandwidths and reduction. hint: give several sizes in every tier ({tiers:?}) and an algorithm that reduces",
                samples.len()
            ))
        })?;
    // A term left out (the last-level cache without a tier) is 0: its
    // bandwidth is unused.
    let gbs = |v: f64| if v > 0.0 { 1.0 / (v * 1e3) } else { FREE };
    let mut m = host(
        name,
        tiers,
        [x[0], x[1], x[2]],
        [gbs(x[3]), gbs(x[4]), gbs(x[5])],
        gbs(x[6]),
    );
    if optional.iter().all(|&t| t == 0) {
        // No one-shot sample: nothing says what the board costs.
        m.board = None;
    }
    m.validate()?;
    Ok(m)
}

/// Least squares over the columns `terms` of `rows` (normal equations,
/// Gaussian elimination with partial pivoting); `None` when singular.
fn least_squares(rows: &[([f64; TERMS], f64)], terms: &[usize]) -> Option<Vec<f64>> {
    let k = terms.len();
    let mut a = vec![vec![0.0f64; k + 1]; k];
    for (f, t) in rows {
        for i in 0..k {
            for j in 0..k {
                a[i][j] += f[terms[i]] * f[terms[j]];
            }
            a[i][k] += f[terms[i]] * t;
        }
    }
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-300 {
            return None;
        }
        a.swap(c, p);
        for r in c + 1..k {
            let q = a[r][c] / a[c][c];
            let pivot = a[c].clone();
            for (x, p) in a[r].iter_mut().zip(pivot).skip(c) {
                *x -= q * p;
            }
        }
    }
    let mut x = vec![0.0; k];
    for c in (0..k).rev() {
        let s: f64 = (c + 1..k).map(|j| a[c][j] * x[j]).sum();
        x[c] = (a[c][k] - s) / a[c][c];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples made by a known machine, with and without a last-level
    /// cache tier, fit back to it.
    #[test]
    fn a_fit_recovers_the_machine_that_made_the_samples() {
        for llc_bytes in [None, Some(4.0 * 1_048_576.0)] {
            let tiers = Tiers {
                cached_bytes: 65536.0,
                llc_bytes,
                cores: Some(2),
                latency: true,
            };
            let truth = host("t", tiers, [3.0, 0.5, 4.0], [20.0, 11.0, 7.0], 2.0);
            let m = fit("t", &samples_of(&truth), tiers).unwrap();
            let l = &m.levels[0];
            assert!((l.latency_us - 3.0).abs() < 1e-6, "{l:?}");
            let b = m.board.as_ref().unwrap();
            assert!((b.latency_us - 0.5).abs() < 1e-6, "{b:?}");
            assert!((b.oversubscribed_us.unwrap() - 4.0).abs() < 1e-6, "{b:?}");
            assert!((l.bandwidth_gbs - 7.0).abs() < 1e-6, "{l:?}");
            assert!((l.cached_bandwidth_gbs.unwrap() - 20.0).abs() < 1e-6, "{l:?}");
            assert_eq!(
                l.llc_bandwidth_gbs.map(|b| (b - 11.0).abs() < 1e-6),
                llc_bytes.map(|_| true),
                "{l:?}"
            );
            assert!((m.reduce_gbs - 2.0).abs() < 1e-6, "{m:?}");
        }
    }

    /// A tier no sample reaches cannot be fitted: an error naming the
    /// tiers, not a bandwidth made up.
    #[test]
    fn a_tier_without_samples_is_an_error() {
        let tiers = Tiers {
            cached_bytes: 65536.0,
            llc_bytes: Some(1e12),
            cores: None,
            latency: true,
        };
        let truth = host("t", tiers, [3.0, 0.0, 0.0], [20.0, 11.0, 7.0], 2.0);
        let e = fit("t", &samples_of(&truth), tiers).unwrap_err().to_string();
        assert!(
            e.contains("no sample has larger messages") && e.contains("llc_bytes: Some"),
            "{e}"
        );
    }

    fn samples_of(truth: &Machine) -> Vec<Sample> {
        let mut samples = Vec::new();
        for algorithm in [
            Builtin::RingAllReduce,
            Builtin::DirectAllGather,
            Builtin::PairwiseAllToAll,
            Builtin::OneShotAllReduce,
            Builtin::OneShotAllToAll,
        ] {
            for world in [2, 4] {
                for bytes in [4096, 65536, 1 << 20, 16 << 20] {
                    let us = algorithm.predict(truth, world, bytes).unwrap().us;
                    samples.push(Sample {
                        algorithm,
                        world,
                        bytes,
                        us,
                    });
                }
            }
        }
        samples
    }
}
