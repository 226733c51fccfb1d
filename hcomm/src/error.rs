//! The one error type of the runtime.

use std::time::Duration;

/// The result of every fallible hcomm operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a communication call.
///
/// Each variant carries the facts a caller can match on; `Display` says what
/// happened and, where known, what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A buffer does not have the length the operation needs.
    #[error("buffer length: `{buffer}` has {actual} elements, expected {expected}")]
    BufferLength {
        /// Which buffer (argument name or role).
        buffer: String,
        /// Its length.
        actual: usize,
        /// The length the operation needs, in words (e.g. `4` or `n * world`).
        expected: String,
    },
    /// A precondition on the arguments does not hold (rank out of range,
    /// scalar outside its declared range, `#[requires]` false, ...).
    #[error("precondition: {message}")]
    Precondition {
        /// What does not hold.
        message: String,
    },
    /// A `comm_schedule!` schedule failed its checks for this world size.
    #[error("schedule `{schedule}`: {message}")]
    Schedule {
        /// The schedule's function name.
        schedule: String,
        /// The message the compiler would have printed.
        message: String,
    },
    /// Integer evaluation inside a schedule failed at run time (overflow,
    /// division by zero, `log2` of a non-positive value).
    #[error("evaluation error: {message}")]
    Evaluation {
        /// What failed.
        message: String,
    },
    /// A peer failed (panicked, returned an error, exited, or its process died)
    /// while this rank waited on it.
    #[error("peer failed: rank {rank}: {reason}")]
    PeerFailed {
        /// The failed peer's rank in the communicator the operation used.
        rank: usize,
        /// What happened to it.
        reason: String,
    },
    /// A wait ran out of time.
    #[error("timeout: {operation} on rank {rank} waited {waited:?} (limit {limit:?}); hint: check that every rank calls the matching operation, or raise `HCOMM_TIMEOUT`")]
    Timeout {
        /// The operation that waited.
        operation: String,
        /// The waiting rank.
        rank: usize,
        /// How long it waited.
        waited: Duration,
        /// The communicator's timeout.
        limit: Duration,
    },
    /// Ranks called a collective (or a matched send/recv pair) with arguments
    /// that do not agree.
    #[error("mismatch: {message}")]
    Mismatch {
        /// Which ranks disagree on what.
        message: String,
    },
    /// The communicator was aborted with [`crate::Comm::abort`].
    #[error("aborted: {reason}")]
    Aborted {
        /// Why.
        reason: String,
    },
    /// A rank panicked inside [`crate::host::run`].
    #[error("rank {rank} panicked: {message}")]
    Panicked {
        /// The rank whose closure panicked.
        rank: usize,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// The backend (a device library, the operating system) reported an error.
    #[error("backend {backend}: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// The library's own words.
        message: String,
    },
    /// A configuration value (an environment variable, an option) is malformed.
    #[error("configuration: {message}")]
    Config {
        /// What is wrong and where it came from.
        message: String,
    },
}

impl Error {
    pub(crate) fn precondition(message: impl Into<String>) -> Self {
        Error::Precondition {
            message: message.into(),
        }
    }

    pub(crate) fn mismatch(message: impl Into<String>) -> Self {
        Error::Mismatch {
            message: message.into(),
        }
    }

    pub(crate) fn buffer_length(buffer: &str, actual: usize, expected: impl std::fmt::Display) -> Self {
        Error::BufferLength {
            buffer: buffer.to_owned(),
            actual,
            expected: expected.to_string(),
        }
    }

    /// Whether this error is a consequence of another rank's failure rather
    /// than a root cause of its own.
    pub fn is_secondary(&self) -> bool {
        matches!(self, Error::PeerFailed { .. } | Error::Aborted { .. })
    }
}

/// An [`Error`] as a program's `main` reports it: its `Debug` form is the
/// error's `Display` form followed by its causes, one per line, so that
/// `fn main() -> Result<(), hcomm::Report>` prints `Error: timeout: ...`
/// rather than the variant's fields.
///
/// ```
/// let e: hcomm::Report = hcomm::Error::Config { message: "`HCOMM_BIND=x`: expected `core` or `none`".into() }.into();
/// assert_eq!(format!("{e:?}"), "configuration: `HCOMM_BIND=x`: expected `core` or `none`");
/// ```
pub struct Report(pub Error);

impl From<Error> for Report {
    fn from(e: Error) -> Report {
        Report(e)
    }
}

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(&self.0);
        while let Some(c) = cause {
            write!(f, "\ncaused by: {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}
