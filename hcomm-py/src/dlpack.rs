//! Tensors lent through `DLPack` (torch tensors and any other object with
//! `__dlpack__`): the producer's capsule is read, never consumed, so the
//! producer's own capsule destructor releases it; the capsule and the
//! tensor are kept alive for as long as an operation uses the memory.

use std::ffi::{c_void, CStr};

use hcomm::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::errors::precondition;
use crate::lent::{Lent, Raw};

/// `DLDevice` of the `DLPack` ABI.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType` of the `DLPack` ABI.
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor` of the `DLPack` ABI.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    /// Null: compact row-major.
    strides: *const i64,
    byte_offset: u64,
}

/// `DLManagedTensor` of the `DLPack` ABI (an unversioned `"dltensor"` capsule).
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `kDLCPU`.
const CPU: i32 = 1;
const CAPSULE: &CStr = c"dltensor";

/// The element type of a `DLPack` `(code, bits, lanes)`.
fn dtype(d: &DlDataType) -> Option<DataType> {
    if d.lanes != 1 {
        return None;
    }
    Some(match (d.code, d.bits) {
        (0, 8) => DataType::I8,
        (0, 32) => DataType::I32,
        (0, 64) => DataType::I64,
        (1, 8) => DataType::U8,
        (1, 32) => DataType::U32,
        (1, 64) => DataType::U64,
        (2, 16) => DataType::F16,
        (2, 32) => DataType::F32,
        (2, 64) => DataType::F64,
        (4, 16) => DataType::Bf16,
        _ => return None,
    })
}

/// The element types lent through `DLPack`, with torch's names.
const SUPPORTED: &str = "float16, bfloat16, float32, float64, int8, uint8, int32, uint32, int64, uint64";

/// `obj.__dlpack__()`, or the detached tensor's when `obj` requires a
/// gradient (torch refuses to export those; the detached tensor shares the
/// memory).
fn capsule<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    match obj.call_method0("__dlpack__") {
        Ok(c) => Ok(c),
        Err(e) => match obj.getattr("requires_grad").and_then(|g| g.is_truthy()) {
            Ok(true) => obj.call_method0("detach")?.call_method0("__dlpack__"),
            _ => Err(e),
        },
    }
}

/// Lends `obj` (an object with `__dlpack__`, on the CPU, C-contiguous) to an
/// operation. `what` names the argument in errors.
pub(crate) fn lend(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Lent> {
    let py = obj.py();
    let cap = capsule(obj)?;
    let cap = cap
        .cast::<PyCapsule>()
        .map_err(|_| precondition(format!("`{what}`.__dlpack__() did not return a capsule")))?;
    let ptr = cap.pointer_checked(Some(CAPSULE)).map_err(|_| {
        precondition(format!(
            "`{what}`.__dlpack__() returned a capsule that is not a \"dltensor\""
        ))
    })?;
    // SAFETY: a capsule named "dltensor" holds a `DLManagedTensor` (the
    // DLPack protocol), alive while the capsule is (we hold it); we only
    // read it and never call its deleter (the capsule's destructor does).
    let t = unsafe { &(*ptr.as_ptr().cast::<DlManagedTensor>()).dl_tensor };
    let ndim = usize::try_from(t.ndim).unwrap_or(0);
    let shape: Vec<usize> = if ndim == 0 || t.shape.is_null() {
        Vec::new()
    } else {
        // SAFETY: `shape` points at `ndim` sizes (DLPack).
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
            .iter()
            .map(|&n| usize::try_from(n).unwrap_or(0))
            .collect()
    };
    let strides: Option<Vec<i64>> = (!t.strides.is_null() && ndim > 0)
        // SAFETY: non-null `strides` points at `ndim` strides (DLPack).
        .then(|| unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec());
    if t.device.device_type != CPU {
        return Err(precondition(format!(
            "`{what}` is on device type {} (DLPack), not the CPU; hint: the host backend communicates CPU tensors: \
             pass `tensor.cpu()`",
            t.device.device_type
        )));
    }
    let dtype = dtype(&t.dtype).ok_or_else(|| {
        precondition(format!(
            "`{what}` has an element type (DLPack code {}, {} bits, {} lanes) that is not supported; hint: use one of {SUPPORTED}",
            t.dtype.code, t.dtype.bits, t.dtype.lanes
        ))
    })?;
    let len: usize = shape.iter().product();
    if let Some(strides) = &strides {
        if !row_major(&shape, strides) {
            return Err(precondition(format!(
                "`{what}` is not contiguous (shape {shape:?}, strides {strides:?} elements); hint: pass `tensor.contiguous()`, \
                 and copy the result back for a receive"
            )));
        }
    }
    let addr = (t.data as usize).wrapping_add(usize::try_from(t.byte_offset).unwrap_or(0));
    let raw = Raw::aligned(what, addr, len, dtype)?;
    Ok(Lent {
        raw,
        shape,
        owner: PyTuple::new(py, [obj.clone(), cap.clone().into_any()])?
            .into_any()
            .unbind(),
    })
}

/// Whether `strides` (in elements) are those of a compact row-major array of
/// `shape` (dimensions of length 1 may have any stride).
pub(crate) fn row_major(shape: &[usize], strides: &[i64]) -> bool {
    let mut expected: i64 = 1;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expected {
            return false;
        }
        expected = expected.saturating_mul(i64::try_from(n).unwrap_or(i64::MAX));
    }
    true
}
