//! torch tensors lent by their own attributes (`is_cpu`, `is_contiguous()`,
//! `dtype`, `data_ptr()`, `shape`: under a microsecond together), the
//! fast path before `DLPack`'s `__dlpack__` (several microseconds a call in
//! torch 2.15). torch is never imported here: the tensor class is taken from
//! `sys.modules` once a caller passes something that is not a numpy array.
//! Large tensors lent again and again get huge pages (see
//! [`crate::hugepages`]).

use hcomm::DataType;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::errors::precondition;
use crate::lent::{Lent, Raw};

/// `torch.Tensor` and torch's element types with ours.
struct Torch {
    tensor: Py<PyType>,
    dtypes: Vec<(Py<PyAny>, DataType)>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

/// torch's classes, once torch has been imported by the program (looked up
/// again while it has not).
fn torch(py: Python<'_>) -> Option<&Torch> {
    TORCH
        .get_or_try_init(py, || -> Result<Torch, ()> {
            let module = py.import("sys").map_err(drop)?.getattr("modules").map_err(drop)?;
            let module = module.get_item("torch").map_err(drop)?;
            let tensor = module
                .getattr("Tensor")
                .map_err(drop)?
                .cast_into::<PyType>()
                .map_err(drop)?
                .unbind();
            let names = [
                ("float16", DataType::F16),
                ("bfloat16", DataType::Bf16),
                ("float32", DataType::F32),
                ("float64", DataType::F64),
                ("int8", DataType::I8),
                ("uint8", DataType::U8),
                ("int32", DataType::I32),
                ("uint32", DataType::U32),
                ("int64", DataType::I64),
                ("uint64", DataType::U64),
            ];
            let dtypes = names
                .iter()
                .filter_map(|(n, dt)| Some((module.getattr(*n).ok()?.unbind(), *dt)))
                .collect();
            Ok(Torch { tensor, dtypes })
        })
        .ok()
}

/// Lends `obj` when it is a torch tensor on the CPU (`None` otherwise:
/// another kind of object). `what` names the argument in errors.
pub(crate) fn lend(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Lent>> {
    match lend_any(obj, what)? {
        Some((_, Some(_))) => Err(precondition(format!(
            "`{what}` is on device {}, not the CPU; hint: the host backend communicates CPU tensors: pass `tensor.cpu()`",
            obj.getattr("device")?.str()?
        ))),
        Some((lent, None)) => Ok(Some(lent)),
        None => Ok(None),
    }
}

/// Lends `obj` when it is a torch tensor, on the CPU or on a CUDA device
/// (`None` otherwise: another kind of object), with the CUDA device's
/// index (`None`: the CPU). The caller decides whether device memory may
/// be used (see [`crate::cuda`]).
pub(crate) fn lend_any(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<(Lent, Option<i32>)>> {
    let py = obj.py();
    let Some(torch) = torch(py) else {
        return Ok(None);
    };
    if !obj.is_instance(torch.tensor.bind(py))? {
        return Ok(None);
    }
    let device = if obj.getattr(pyo3::intern!(py, "is_cpu"))?.is_truthy()? {
        None
    } else if obj.getattr(pyo3::intern!(py, "is_cuda"))?.is_truthy()? {
        let index: Option<i32> = obj.getattr("device")?.getattr("index")?.extract()?;
        Some(index.unwrap_or(0))
    } else {
        return Err(precondition(format!(
            "`{what}` is on device {}, neither the CPU nor a CUDA device; hint: pass `tensor.cpu()`",
            obj.getattr("device")?.str()?
        )));
    };
    let shape: Vec<usize> = obj.getattr(pyo3::intern!(py, "shape"))?.extract()?;
    if !obj.call_method0(pyo3::intern!(py, "is_contiguous"))?.is_truthy()? {
        let strides: Vec<i64> = obj.call_method0("stride")?.extract()?;
        return Err(precondition(format!(
            "`{what}` is not contiguous (shape {shape:?}, strides {strides:?} elements); hint: pass `tensor.contiguous()`, \
             and copy the result back for a receive"
        )));
    }
    let dtype_obj = obj.getattr(pyo3::intern!(py, "dtype"))?;
    let Some(dtype) = torch
        .dtypes
        .iter()
        .find(|(d, _)| d.bind(py).is(&dtype_obj))
        .map(|(_, dt)| *dt)
    else {
        return Err(precondition(format!(
            "`{what}` has element type {} that is not supported; hint: use float16, bfloat16, float32, float64, int8, \
             uint8, int32, uint32, int64 or uint64",
            dtype_obj.str()?
        )));
    };
    let addr: usize = obj.call_method0(pyo3::intern!(py, "data_ptr"))?.extract()?;
    let len = shape.iter().product();
    let raw = Raw::aligned(what, addr, len, dtype)?;
    if device.is_none() {
        crate::hugepages::collapse_if_reused(py, raw);
    }
    Ok(Some((
        Lent {
            raw,
            shape,
            owner: obj.clone().unbind(),
        },
        device,
    )))
}
