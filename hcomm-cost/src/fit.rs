//! Fitting a one-level machine whose ranks share one memory system (a
//! host: latency, the shared bandwidth of messages in and out of the
//! caches, reduction speed) to measured times: least squares on the
//! relative error over the features the model itself computes (rounds,
//! bytes through the busiest resources, bytes reduced), so a fit is the
//! model's own reading of the measurements. Terms the data would make
//! negative are left out (latency 0; the others make the fit fail).

use crate::builtin::Builtin;
use crate::error::{CostError, Result};
use crate::topology::{Link, Machine};

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

/// The model's features of a sample: rounds, bytes through the busiest
/// resources in messages up to `cached` bytes, the same above, and bytes
/// reduced by the busiest receiver (each summed over rounds).
fn features(s: &Sample, cached: f64) -> Result<[f64; 4]> {
    let unit = |lat, small, large, red| {
        let mut m = Machine::flat("unit", Link::Switch, large, lat, red);
        m.levels[0].cached_bytes = Some(cached);
        m.levels[0].cached_bandwidth_gbs = Some(small);
        m.levels[0].shared_gbs = Some(large);
        m
    };
    // `transfer_us` is bytes / (GB/s * 1e3): 1e-3 GB/s reads out bytes.
    let f = |m: Machine| s.algorithm.predict(&m, s.world, s.bytes).map(|p| p.us);
    Ok([
        f(unit(1.0, FREE, FREE, FREE))?,
        f(unit(0.0, 1e-3, FREE, FREE))?,
        f(unit(0.0, FREE, 1e-3, FREE))?,
        f(unit(0.0, FREE, FREE, 1e-3))?,
    ])
}

/// Fits a one-level switch machine named `name` to `samples`, messages up
/// to `cached_bytes` with a bandwidth of their own.
pub fn fit(name: &str, samples: &[Sample], cached_bytes: f64) -> Result<Machine> {
    let rows: Vec<([f64; 4], f64)> = samples
        .iter()
        .map(|s| features(s, cached_bytes).map(|f| (f.map(|x| x / s.us), 1.0)))
        .collect::<Result<_>>()?;
    let fail = |message: String| CostError::Unsupported {
        what: name.to_owned(),
        message,
    };
    // With the latency, then without it (0) if the data make it negative.
    let x = [vec![0, 1, 2, 3], vec![1, 2, 3]]
        .into_iter()
        .find_map(|terms| {
            let x = least_squares(&rows, &terms)?;
            x.iter().all(|&v| v > 0.0).then(|| {
                let mut full = [0.0; 4];
                for (t, v) in terms.iter().zip(x) {
                    full[*t] = v;
                }
                full
            })
        })
        .ok_or_else(|| {
            fail(format!(
                "{} samples give no fit with positive bandwidths and reduction. hint: give several sizes on both sides of {cached_bytes} bytes and an algorithm that reduces",
                samples.len()
            ))
        })?;
    let mut m = Machine::flat(name, Link::Switch, 1.0 / (x[2] * 1e3), x[0], 1.0 / (x[3] * 1e3));
    "host".clone_into(&mut m.levels[0].name);
    m.levels[0].cached_bytes = Some(cached_bytes);
    m.levels[0].cached_bandwidth_gbs = Some(1.0 / (x[1] * 1e3));
    m.levels[0].shared_gbs = Some(m.levels[0].bandwidth_gbs);
    m.validate()?;
    Ok(m)
}

/// Least squares over the columns `terms` of `rows` (normal equations,
/// Gaussian elimination with partial pivoting); `None` when singular.
fn least_squares(rows: &[([f64; 4], f64)], terms: &[usize]) -> Option<Vec<f64>> {
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

    /// Samples made by a known machine fit back to it.
    #[test]
    fn a_fit_recovers_the_machine_that_made_the_samples() {
        let mut truth = Machine::flat("t", Link::Switch, 7.0, 3.0, 2.0);
        truth.levels[0].cached_bytes = Some(65536.0);
        truth.levels[0].cached_bandwidth_gbs = Some(20.0);
        truth.levels[0].shared_gbs = Some(7.0);
        let mut samples = Vec::new();
        for algorithm in [
            Builtin::RingAllReduce,
            Builtin::DirectAllGather,
            Builtin::PairwiseAllToAll,
        ] {
            for world in [2, 4] {
                for bytes in [4096, 65536, 1 << 20, 16 << 20] {
                    let us = algorithm.predict(&truth, world, bytes).unwrap().us;
                    samples.push(Sample {
                        algorithm,
                        world,
                        bytes,
                        us,
                    });
                }
            }
        }
        let m = fit("t", &samples, 65536.0).unwrap();
        let l = &m.levels[0];
        assert!((l.latency_us - 3.0).abs() < 1e-6, "{l:?}");
        assert!((l.bandwidth_gbs - 7.0).abs() < 1e-6, "{l:?}");
        assert!((l.cached_bandwidth_gbs.unwrap() - 20.0).abs() < 1e-6, "{l:?}");
        assert!((m.reduce_gbs - 2.0).abs() < 1e-6, "{m:?}");
    }
}
