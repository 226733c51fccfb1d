//! `hcomm.Schedule(source)`: a schedule read from text by the checker's
//! parser (`hcomm::checker::parse_schedules`), checked when it is made
//! (`hcomm.ScheduleError` with the macro's diagnostics otherwise) and run on
//! a communicator with the arrays given in the order of its parameters.

use hcomm::checker::TextDiagnostic;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::array::{lend, typed};
use crate::comm::Comm;
use crate::errors::precondition;
use crate::exec::run;
use crate::ops::Reduction;

/// A checked schedule (the native half of `hcomm.Schedule`).
#[pyclass(module = "hcomm", name = "TextSchedule", frozen)]
pub(crate) struct TextSchedule {
    inner: hcomm::checker::TextSchedule,
}

/// `hcomm.ScheduleError` for the diagnostics of a rejected text.
fn schedule_error(py: Python<'_>, diagnostics: &[TextDiagnostic]) -> PyResult<PyErr> {
    let errors = py.import("hcomm._errors")?;
    let class = errors.getattr("Diagnostic")?;
    let list = PyList::empty(py);
    for d in diagnostics {
        let message = match &d.hint {
            Some(hint) => format!("{}\nhint: {hint}", d.message),
            None => d.message.clone(),
        };
        list.append(class.call1((d.kind.as_str(), d.world, d.line, d.column, message))?)?;
    }
    let text: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    let message = format!("schedule rejected by the checker:\n{}", text.join("\n"));
    let exc = errors.getattr("ScheduleError")?.call1((message, list, ""))?;
    Ok(PyErr::from_value(exc))
}

/// Parses and checks `source` (one `fn` item, attributes included).
#[pyfunction]
pub(crate) fn parse_schedule(py: Python<'_>, source: &str) -> PyResult<TextSchedule> {
    match hcomm::checker::parse_schedules(source) {
        Ok(items) => match items.as_slice() {
            [one] => Ok(TextSchedule { inner: *one }),
            _ => Err(precondition(format!(
                "the source holds {} schedules; hint: pass exactly one `fn` item to hcomm.Schedule",
                items.len()
            ))),
        },
        Err(diagnostics) => Err(schedule_error(py, &diagnostics)?),
    }
}

/// What a keyword argument of a call binds.
enum Keyword {
    Scalar(String, usize),
    Op(String, hcomm::ReduceOp),
    Counts(String, Vec<usize>),
}

#[pymethods]
impl TextSchedule {
    /// The function's name.
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// The buffer parameters in order: `(name, writable)`.
    fn buffers(&self) -> Vec<(String, bool)> {
        self.inner
            .ir()
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.writable))
            .collect()
    }

    /// Runs the schedule on `comm`: `arrays` bind the buffer parameters in
    /// order; `keywords` bind scalars (ints), operators (`"sum"`, ...) and
    /// count parameters (lists of ints) by name.
    #[allow(clippy::needless_pass_by_value, reason = "PyO3 passes extracted arguments by value")]
    fn run(
        &self,
        py: Python<'_>,
        comm: &Comm,
        arrays: Vec<Bound<'_, PyAny>>,
        keywords: &Bound<'_, PyDict>,
    ) -> PyResult<()> {
        let ir = self.inner.ir();
        let name = self.inner.name();
        if arrays.len() != ir.buffers.len() {
            let names: Vec<&str> = ir.buffers.iter().map(|b| b.name.as_str()).collect();
            return Err(precondition(format!(
                "`{name}` takes {} arrays ({}), not {}",
                names.len(),
                names.join(", "),
                arrays.len()
            )));
        }
        let mut lends = Vec::with_capacity(arrays.len());
        for (a, b) in arrays.iter().zip(&ir.buffers) {
            lends.push((lend(a, b.writable, &b.name)?, b.writable));
        }
        let dtype = match lends.first() {
            Some((l, _)) => l.raw.dtype,
            None => hcomm::DataType::U8,
        };
        if let Some((l, _)) = lends.iter().find(|(l, _)| l.raw.dtype != dtype) {
            return Err(precondition(format!(
                "`{name}`: the arrays have different element types ({} and {}); hint: a schedule has one element type `T`",
                dtype.name(),
                l.raw.dtype.name()
            )));
        }
        let mut bound = Vec::with_capacity(keywords.len());
        for (key, value) in keywords.iter() {
            let key: String = key.extract()?;
            let is_op = ir.scalars.iter().any(|s| s.op && s.name == key);
            let is_counts = ir.counts.iter().any(|c| c.name == key);
            bound.push(if is_op {
                let op: String = value.extract()?;
                let red = Reduction::parse(&op, dtype)?;
                if red.average {
                    return Err(precondition(format!(
                        "`{name}`: `{key}=\"avg\"` is not an operator of the schedules"
                    )));
                }
                Keyword::Op(key, red.op)
            } else if is_counts {
                Keyword::Counts(key, value.extract()?)
            } else {
                let v: i64 = value.extract()?;
                let v = usize::try_from(v)
                    .map_err(|_| precondition(format!("`{name}`: scalar `{key}={v}` must be >= 0")))?;
                Keyword::Scalar(key, v)
            });
        }
        let schedule = self.inner;
        let writable: Vec<(String, bool)> = self.buffers();
        let c = comm.inner.clone();
        run(py, comm.on(), lends, move |r| {
            typed!(dtype, T => {
                let mut call = schedule.call::<T>(&c);
                for ((buf, write), raw) in writable.iter().zip(r) {
                    call = if *write {
                        // SAFETY: lent for writing to this operation alone
                        // (the registry refuses overlapping arguments).
                        call.output(buf, unsafe { raw.slice_mut::<T>() })
                    } else {
                        // SAFETY: lent to this operation, not written by it.
                        call.input(buf, unsafe { raw.slice::<T>() })
                    };
                }
                for k in &bound {
                    call = match k {
                        Keyword::Scalar(n, v) => call.scalar(n, *v),
                        Keyword::Op(n, op) => call.op(n, *op),
                        Keyword::Counts(n, v) => call.counts(n, v),
                    };
                }
                call.run()
            })
        })
    }
}
