//! Per-communicator settings and the environment variables that set them.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::header::Collective;
use crate::select::{Algorithm, AlgorithmTable};
use crate::topology::Topology;

/// The default wait limit when `HCOMM_TIMEOUT` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The longest wait limit: one year. Longer limits (from `HCOMM_TIMEOUT`,
/// [`CommOptions::with_timeout`], [`crate::Comm::set_timeout`]) are capped to
/// it, so that a deadline `now + limit` is always a time the clock can
/// represent.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 86_400);

/// `timeout`, at most [`MAX_TIMEOUT`].
pub(crate) fn cap_timeout(timeout: Duration) -> Duration {
    timeout.min(MAX_TIMEOUT)
}

/// The instant `timeout` from now, `timeout` capped to [`MAX_TIMEOUT`]:
/// never overflows, whatever the limit.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(cap_timeout(timeout))
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}

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
            topology: Topology::Detected,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
        }
    }
}

impl CommOptions {
    /// Defaults overridden by `HCOMM_TIMEOUT` (seconds, may be fractional;
    /// capped to [`MAX_TIMEOUT`]), `HCOMM_ALGO`
    /// (`all_reduce=ring,all_gather=bruck`), `HCOMM_TOPOLOGY` (`detect`, the
    /// default, `full_mesh`, `ring`, `custom:<group size>`, `preset:<name>`), `HCOMM_TOPOLOGY_FILE`
    /// (a topology file of the cost model) and `HCOMM_SEGMENT_BYTES`. An empty
    /// variable counts as unset; a value that does not parse, or is not
    /// UTF-8, is an [`Error::Config`] naming the variable.
    pub fn from_env() -> Result<CommOptions> {
        CommOptions::from_vars(|name| std::env::var_os(name))
    }

    /// [`CommOptions::from_env`] over the variables `get` returns.
    pub(crate) fn from_vars(get: impl Fn(&str) -> Option<OsString>) -> Result<CommOptions> {
        let env = |name: &str| text(name, get(name));
        let mut options = CommOptions::default();
        if let Some(v) = env("HCOMM_TIMEOUT")? {
            options.timeout = parse_timeout(&v).ok_or_else(|| Error::Config {
                message: format!(
                    "`HCOMM_TIMEOUT={v}` is not a positive number of seconds (at least a nanosecond; at most {} \
                     seconds are used)",
                    MAX_TIMEOUT.as_secs()
                ),
            })?;
        }
        if let Some(v) = env("HCOMM_ALGO")? {
            options.algorithms = AlgorithmTable::parse(&v).map_err(|message| Error::Config {
                message: format!("`HCOMM_ALGO={v}`: {message}"),
            })?;
        }
        if let Some(v) = env("HCOMM_TOPOLOGY")? {
            options.topology = Topology::parse(&v).ok_or_else(|| Error::Config {
                message: format!(
                    "`HCOMM_TOPOLOGY={v}`: expected `detect`, `full_mesh`, `ring`, `custom:<group size>` or `preset:<name>` \
                     (presets: {})",
                    hcomm_cost::PRESETS.map(|(n, _)| n).join(", ")
                ),
            })?;
        }
        if let Some(v) = env("HCOMM_TOPOLOGY_FILE")? {
            if env("HCOMM_TOPOLOGY")?.is_some() {
                return Err(Error::Config {
                    message: "`HCOMM_TOPOLOGY` and `HCOMM_TOPOLOGY_FILE` are both set. hint: unset one".to_owned(),
                });
            }
            options.topology = Topology::from_file(std::path::Path::new(v.trim()), "HCOMM_TOPOLOGY_FILE")?;
        }
        if let Some(v) = env("HCOMM_SEGMENT_BYTES")? {
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

    /// These options with a different timeout, at most [`MAX_TIMEOUT`].
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = cap_timeout(timeout);
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

/// Seconds as a wait limit: positive, finite, at least a nanosecond;
/// capped to [`MAX_TIMEOUT`].
fn parse_timeout(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    if !(secs.is_finite() && secs > 0.0) {
        return None;
    }
    let capped = secs.min(MAX_TIMEOUT.as_secs_f64());
    Duration::try_from_secs_f64(capped).ok().filter(|d| !d.is_zero())
}

/// The value of environment variable `name` as read (`raw`): `None` when
/// unset or blank, the text otherwise, an [`Error::Config`] naming the
/// variable when it is not UTF-8 (never taken for unset).
pub(crate) fn text(name: &str, raw: Option<OsString>) -> Result<Option<String>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match raw.into_string() {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(raw) => Err(Error::Config {
            message: format!(
                "`{name}` is not UTF-8 text ({}); hint: set it to plain text or unset it",
                raw.as_os_str().to_string_lossy()
            ),
        }),
    }
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
        for huge in ["1e19", "1e20", "18446744073709551615", "1e308"] {
            assert_eq!(parse_timeout(huge), Some(MAX_TIMEOUT), "{huge}");
        }
        for bad in ["NaN", "inf", "-inf", "-0", "1e-12", "", " "] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
    }

    #[test]
    fn deadlines_never_overflow() {
        let now = Instant::now();
        let far = deadline_after(Duration::MAX);
        assert_eq!(far.duration_since(now).as_secs() / 86_400, 365);
        assert!(deadline_after(Duration::ZERO) >= now);
        assert_eq!(cap_timeout(Duration::from_secs(5)), Duration::from_secs(5));
        assert_eq!(CommOptions::default().with_timeout(Duration::MAX).timeout, MAX_TIMEOUT);
    }
}
