//! The `hcomm` Python package's native module, `hcomm._native`: `PyO3`
//! bindings of the hcomm runtime on numpy arrays and (through `DLPack`) torch
//! tensors. The pure-Python part of
//! the package (`python/hcomm/`) builds the documented API on top.

mod array;
mod comm;
mod cuda;
mod dlpack;
mod errors;
mod exec;
mod executor;
mod hugepages;
mod interrupt;
mod lent;
mod moe;
mod ops;
mod parallel;
mod request;
mod schedules;
mod text;
mod torch;

use pyo3::prelude::*;

use crate::comm::Comm;
use crate::errors::to_py;

/// Joins the job this process belongs to, as the launcher's variables
/// (hcomm-run's or torchrun's) describe it, on `backend` (`None`:
/// `HCOMM_BACKEND`, else `"host"`).
#[pyfunction]
#[pyo3(signature = (backend=None))]
fn init(py: Python<'_>, backend: Option<&str>) -> PyResult<Comm> {
    let kind = match backend {
        None => hcomm::BackendKind::from_env(),
        Some(name) => hcomm::BackendKind::parse(name).ok_or_else(|| hcomm::Error::Config {
            message: format!("`backend={name:?}` is not a backend; hint: use \"host\", \"hccl\" or \"nccl\""),
        }),
    }
    .map_err(|e| to_py(&e))?;
    let job = hcomm::JobEnv::from_env().map_err(|e| to_py(&e))?;
    let options = hcomm::CommOptions::from_env().map_err(|e| to_py(&e))?;
    // On the calling thread (the GIL released): the runtime binds the thread
    // that joins the job to its cores (`HCOMM_BIND`), and the calls that run
    // on the caller's thread (see `exec::run`) should run there, as a Rust
    // rank's do. The rendezvous is bounded by the job's timeout.
    let comm = py
        .detach(|| hcomm::init_job(kind, &job, &options))
        .map_err(|e| to_py(&e))?;
    Ok(Comm::wrap(comm))
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Comm>()?;
    m.add_class::<request::Request>()?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_class::<moe::Dispatch>()?;
    m.add_function(wrap_pyfunction!(moe::moe_dispatch, m)?)?;
    m.add_function(wrap_pyfunction!(moe::moe_combine, m)?)?;
    m.add_class::<parallel::Context>()?;
    m.add_function(wrap_pyfunction!(parallel::make_context, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::tp_op, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::pp_op, m)?)?;
    m.add_function(wrap_pyfunction!(schedules::run_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(schedules::schedule_names, m)?)?;
    m.add_class::<text::TextSchedule>()?;
    m.add_function(wrap_pyfunction!(text::parse_schedule, m)?)?;
    Ok(())
}
