//! Per-communicator settings and the environment variables that set them.

use std::time::Duration;

use crate::collective::{Algorithm, AlgorithmTable, Collective};
use crate::error::{Error, Result};
use crate::topology::Topology;

/// The default wait limit when `HCOMM_TIMEOUT` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The default size of one pipelined segment of a large transfer.
pub const DEFAULT_SEGMENT_BYTES: usize = 1 << 20;

/// Settings a communicator is created with.
#[derive(Clone, Debug)]
pub struct CommOptions {
    /// How long any wait may block before it returns [`Error::Timeout`].
    pub timeout: Duration,
    /// Forced algorithm per collective (unset entries are chosen by policy).
    pub algorithms: AlgorithmTable,
    /// The links between ranks, for algorithm choice.
    pub topology: Topology,
    /// Large transfers of ring algorithms move in segments of this many bytes.
    pub segment_bytes: usize,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions {
            timeout: DEFAULT_TIMEOUT,
            algorithms: AlgorithmTable::default(),
            topology: Topology::FullMesh,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
        }
    }
}

impl CommOptions {
    /// Defaults overridden by `HCOMM_TIMEOUT` (seconds, may be fractional),
    /// `HCOMM_ALGO` (`all_reduce=ring,all_gather=bruck`), `HCOMM_TOPOLOGY`
    /// (`full_mesh`, `ring`, `custom:<group size>`) and `HCOMM_SEGMENT_BYTES`.
    pub fn from_env() -> Result<CommOptions> {
        let mut options = CommOptions::default();
        if let Some(v) = env("HCOMM_TIMEOUT") {
            options.timeout = parse_timeout(&v).ok_or_else(|| Error::Config {
                message: format!("`HCOMM_TIMEOUT={v}` is not a positive number of seconds"),
            })?;
        }
        if let Some(v) = env("HCOMM_ALGO") {
            options.algorithms = AlgorithmTable::parse(&v).map_err(|message| Error::Config {
                message: format!("`HCOMM_ALGO={v}`: {message}"),
            })?;
        }
        if let Some(v) = env("HCOMM_TOPOLOGY") {
            options.topology = Topology::parse(&v).ok_or_else(|| Error::Config {
                message: format!("`HCOMM_TOPOLOGY={v}`: expected `full_mesh`, `ring` or `custom:<group size>`"),
            })?;
        }
        if let Some(v) = env("HCOMM_SEGMENT_BYTES") {
            options.segment_bytes = v
                .trim()
                .parse()
                .ok()
                .filter(|&b: &usize| b > 0)
                .ok_or_else(|| Error::Config {
                    message: format!("`HCOMM_SEGMENT_BYTES={v}` is not a positive integer"),
                })?;
        }
        Ok(options)
    }

    /// These options with a different timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// These options with `algorithm` forced for `collective`.
    #[must_use]
    pub fn with_algorithm(mut self, collective: Collective, algorithm: Algorithm) -> Self {
        self.algorithms.set(collective, Some(algorithm));
        self
    }

    /// These options with another topology.
    #[must_use]
    pub fn with_topology(mut self, topology: Topology) -> Self {
        self.topology = topology;
        self
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_timeout(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_positive_seconds() {
        assert_eq!(parse_timeout("2.5"), Some(Duration::from_millis(2500)));
        assert_eq!(parse_timeout("0"), None);
        assert_eq!(parse_timeout("-1"), None);
        assert_eq!(parse_timeout("soon"), None);
    }
}
