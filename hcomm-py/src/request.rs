//! `hcomm.Request`: a non-blocking operation started from Python.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::{precondition, to_py};
use crate::exec::{orphan, wait, Started};

/// A non-blocking operation. `wait(timeout=None)` blocks until it completes
/// and raises its error; `test()` says whether it completed. The arrays the
/// operation uses are kept alive until it has finished, even when this
/// object is dropped first.
#[pyclass(module = "hcomm", name = "Request")]
pub(crate) struct Request {
    started: Started,
    /// What `wait` returns: the new array of `all_gather`/`reduce_scatter`.
    result: Option<Py<PyAny>>,
    /// The operation, for messages.
    what: &'static str,
}

impl Request {
    pub(crate) fn new(started: Started, result: Option<Py<PyAny>>, what: &'static str) -> Request {
        Request { started, result, what }
    }

    /// A request completed by the same operation as `self` (one of a batch).
    pub(crate) fn sibling(&self) -> Request {
        Request {
            started: Started {
                slot: Arc::clone(&self.started.slot),
                keep: Vec::new(),
                comm: self.started.comm.clone(),
            },
            result: None,
            what: self.what,
        }
    }

    fn outcome(&mut self, py: Python<'_>, done: hcomm::Result<()>) -> PyResult<Option<Py<PyAny>>> {
        // Finished: the arrays are no longer in use.
        self.started.keep.clear();
        match done {
            Ok(()) => Ok(self.result.as_ref().map(|r| r.clone_ref(py))),
            Err(e) => Err(to_py(&e)),
        }
    }
}

#[pymethods]
impl Request {
    /// Blocks until the operation completes and raises its error. Returns the
    /// new array of an asynchronous `all_gather` or `reduce_scatter`, else
    /// `None`. With `timeout` (seconds), raises `hcomm.Timeout` when the
    /// operation is still in flight then (it stays pending).
    #[pyo3(signature = (timeout=None))]
    fn wait(&mut self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        let limit = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(precondition(format!(
                    "`timeout` must be a number of seconds >= 0, not {t}"
                )))
            }
        };
        let begun = Instant::now();
        match wait(py, &self.started, limit)? {
            Some(done) => self.outcome(py, done),
            None => Err(to_py(&hcomm::Error::Timeout {
                operation: format!("Request.wait of {}", self.what),
                rank: self.started.comm.rank(),
                waited: begun.elapsed(),
                limit: limit.unwrap_or_default(),
            })),
        }
    }

    /// Whether the operation completed; raises its error if it failed.
    fn test(&mut self, py: Python<'_>) -> PyResult<bool> {
        match self.started.slot.outcome() {
            None => Ok(false),
            Some(done) => self.outcome(py, done).map(|_| true),
        }
    }

    fn __repr__(&self) -> String {
        let state = match self.started.slot.outcome() {
            None => "pending",
            Some(Ok(())) => "done",
            Some(Err(_)) => "failed",
        };
        format!("<hcomm.Request {} {state}>", self.what)
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if self.started.slot.outcome().is_none() && !self.started.keep.is_empty() {
            orphan(Arc::clone(&self.started.slot), std::mem::take(&mut self.started.keep));
        }
    }
}
