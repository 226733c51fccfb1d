//! numpy arrays lent to the runtime: element type, layout and writability
//! checked, memory addressed in place (no copy), the array kept alive by a
//! reference for as long as an operation may use it.

use hcomm::DataType;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::precondition;
use crate::lent::{Lent, Raw};

/// Runs `$body` with `$T` the Rust type of the element type `$dt`. The one
/// place the element types are listed for this package.
macro_rules! typed {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            hcomm::DataType::F16 => {
                type $T = half::f16;
                $body
            }
            hcomm::DataType::Bf16 => {
                type $T = half::bf16;
                $body
            }
            hcomm::DataType::F32 => {
                type $T = f32;
                $body
            }
            hcomm::DataType::F64 => {
                type $T = f64;
                $body
            }
            hcomm::DataType::I8 => {
                type $T = i8;
                $body
            }
            hcomm::DataType::U8 => {
                type $T = u8;
                $body
            }
            hcomm::DataType::I32 => {
                type $T = i32;
                $body
            }
            hcomm::DataType::U32 => {
                type $T = u32;
                $body
            }
            hcomm::DataType::I64 => {
                type $T = i64;
                $body
            }
            hcomm::DataType::U64 => {
                type $T = u64;
                $body
            }
        }
    };
}
pub(crate) use typed;

/// The element types numpy arrays may have, with numpy's names.
const SUPPORTED: &str = "float16, float32, float64, int8, uint8, int32, uint32, int64, uint64";

/// The element type of a numpy dtype.
pub(crate) fn dtype_of(array: &Bound<'_, PyUntypedArray>) -> PyResult<DataType> {
    let py = array.py();
    let d = array.dtype();
    let table = [
        (numpy::dtype::<half::f16>(py), DataType::F16),
        (numpy::dtype::<f32>(py), DataType::F32),
        (numpy::dtype::<f64>(py), DataType::F64),
        (numpy::dtype::<i8>(py), DataType::I8),
        (numpy::dtype::<u8>(py), DataType::U8),
        (numpy::dtype::<i32>(py), DataType::I32),
        (numpy::dtype::<u32>(py), DataType::U32),
        (numpy::dtype::<i64>(py), DataType::I64),
        (numpy::dtype::<u64>(py), DataType::U64),
    ];
    for (candidate, dt) in table {
        if d.is_equiv_to(&candidate) {
            return Ok(dt);
        }
    }
    Err(precondition(format!(
        "element type `{}` is not supported; hint: use one of {SUPPORTED}",
        d.str().map_or_else(|_| "?".to_owned(), |s| s.to_string())
    )))
}

/// Lends `obj` (a numpy array, C-contiguous and aligned, writable where
/// `write`; a torch tensor, see [`crate::torch`]; or another CPU tensor
/// through `DLPack`, see [`crate::dlpack`]) to an operation. `what` names the argument in errors.
pub(crate) fn lend(obj: &Bound<'_, PyAny>, write: bool, what: &str) -> PyResult<Lent> {
    let Ok(array) = obj.cast::<PyUntypedArray>() else {
        if let Some(lent) = crate::torch::lend(obj, what)? {
            return Ok(lent);
        }
        if obj.hasattr(pyo3::intern!(obj.py(), "__dlpack__"))? {
            return crate::dlpack::lend(obj, what);
        }
        return Err(precondition(format!(
            "`{what}` must be a numpy array or a torch tensor, not `{}`",
            obj.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string())
        )));
    };
    let dtype = dtype_of(array)?;
    let shape = array.shape().to_vec();
    if !array.is_c_contiguous() {
        return Err(precondition(format!(
            "`{what}` is not C-contiguous (shape {shape:?}, strides {:?} bytes); hint: pass `numpy.ascontiguousarray(...)`, \
             and copy the result back for a receive",
            array.strides()
        )));
    }
    if !array.is_aligned() {
        return Err(precondition(format!(
            "`{what}` is not aligned for its element type {}",
            dtype.name()
        )));
    }
    // SAFETY: `as_array_ptr` points at the live array object `array` holds.
    let (data, flags) = unsafe {
        let a = &*array.as_array_ptr();
        (a.fields.data, a.fields.flags)
    };
    let writable = flags & numpy::npyffi::NPY_ARRAY_WRITEABLE != 0;
    if write && !writable {
        return Err(precondition(format!(
            "`{what}` is read-only but the operation writes into it"
        )));
    }
    Ok(Lent {
        raw: Raw {
            addr: data as usize,
            len: array.len(),
            dtype,
        },
        shape,
        owner: obj.clone().unbind(),
    })
}

/// A new C-contiguous array of `shape`, filled with zeros, of the kind and
/// element type of `like`: a numpy array for a numpy array, else
/// `like.new_zeros(shape)` (a torch tensor for a torch tensor).
pub(crate) fn zeros_like<'py>(
    like: &Bound<'py, PyAny>,
    dtype: DataType,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let py = like.py();
    if !like.is_instance_of::<PyUntypedArray>() {
        return like.call_method1(pyo3::intern!(py, "new_zeros"), (shape.to_vec(),));
    }
    typed!(dtype, T => {
        Ok(numpy::PyArray::<T, ndarray::IxDyn>::zeros(py, ndarray::IxDyn(shape), false).into_any())
    })
}
