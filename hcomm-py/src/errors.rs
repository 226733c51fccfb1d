//! `hcomm::Error` as Python exceptions: the classes live in
//! `hcomm._errors` (pure Python, so `Precondition` can also be a
//! `ValueError`); every variant maps to one class and the message is the
//! Rust error's text.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The Python exception for `e`.
pub(crate) fn to_py(e: &hcomm::Error) -> PyErr {
    Python::attach(|py| build(py, e).unwrap_or_else(|fail| fail))
}

fn build(py: Python<'_>, e: &hcomm::Error) -> PyResult<PyErr> {
    let errors = py.import("hcomm._errors")?;
    let message = e.to_string();
    let exc = match e {
        hcomm::Error::PeerFailed { rank, .. } => errors.getattr("PeerFailed")?.call1((message, *rank))?,
        // A rank interrupted by Ctrl-C aborts the communicator: to the
        // others that rank failed.
        hcomm::Error::Aborted { reason } if interrupted_rank(reason).is_some() => errors
            .getattr("PeerFailed")?
            .call1((format!("peer failed: {reason}"), interrupted_rank(reason)))?,
        hcomm::Error::Schedule { schedule, .. } => {
            errors
                .getattr("ScheduleError")?
                .call1((message, Vec::<Py<PyAny>>::new(), schedule.clone()))?
        }
        other => errors.getattr(class_name(other))?.call1((message,))?,
    };
    Ok(PyErr::from_value(exc))
}

const INTERRUPTED: &str = " was interrupted by a signal (Ctrl-C) during a blocking call";

/// The reason a rank interrupted during a call aborts its communicator with.
pub(crate) fn interrupted_reason(rank: usize) -> String {
    format!("rank {rank}{INTERRUPTED}")
}

/// The rank an abort reason of [`interrupted_reason`] names.
fn interrupted_rank(reason: &str) -> Option<usize> {
    reason.strip_suffix(INTERRUPTED)?.strip_prefix("rank ")?.parse().ok()
}

/// The class of every variant but those with attributes.
fn class_name(e: &hcomm::Error) -> &'static str {
    match e {
        hcomm::Error::BufferLength { .. } => "BufferLength",
        hcomm::Error::Precondition { .. } => "Precondition",
        hcomm::Error::Evaluation { .. } => "EvaluationError",
        hcomm::Error::Timeout { .. } => "Timeout",
        hcomm::Error::Mismatch { .. } => "Mismatch",
        hcomm::Error::Aborted { .. } => "Aborted",
        hcomm::Error::Panicked { .. } => "Panicked",
        hcomm::Error::Backend { .. } => "BackendError",
        hcomm::Error::Config { .. } => "ConfigError",
        // `PeerFailed` and `Schedule` are built by `build`; `hcomm::Error` is
        // non-exhaustive: a variant added later is still an `hcomm.Error`.
        _ => "Error",
    }
}

/// `hcomm.Precondition(message)`.
pub(crate) fn precondition(message: impl Into<String>) -> PyErr {
    to_py(&hcomm::Error::Precondition {
        message: message.into(),
    })
}

/// An internal failure that is not an `hcomm::Error` (a lock poisoned by
/// a panic).
pub(crate) fn internal(message: &str) -> PyErr {
    PyRuntimeError::new_err(format!("hcomm internal error: {message}"))
}

/// What a panic in an operation becomes.
pub(crate) fn panicked(p: &(dyn std::any::Any + Send)) -> hcomm::Error {
    hcomm::Error::Backend {
        backend: "hcomm-py",
        message: format!(
            "the operation panicked: {}",
            p.downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        ),
    }
}
