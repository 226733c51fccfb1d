//! CUDA tensors used in place: a torch CUDA tensor, or another object with
//! `__cuda_array_interface__` (cupy), on a communicator of the `nccl`
//! backend becomes an [`hcomm::ExternalDeviceBuffer`] for the length of the
//! operation. On every other backend such a tensor is a `ValueError`
//! (`hcomm.Precondition`) naming the argument and its device.
//!
//! The stream contract: when a call lends a CUDA tensor, hcomm first
//! synchronises the producer's stream (for torch: `torch.cuda.current_stream`
//! of the tensor's device; for `__cuda_array_interface__`: its `stream`
//! entry, none when absent), so every kernel enqueued before the call has
//! written the tensor; the NCCL backend then runs the collective on its own
//! stream and returns (or completes the request) only once that stream
//! drained, so kernels enqueued after the call (or after `wait()`) on any
//! stream see the result. Until then the caller must not touch the tensor.

use hcomm::{Element, ExternalDeviceBuffer};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::precondition;
use crate::lent::{Lent, Raw};

/// Where a lent tensor's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Host memory: read through slices.
    Host,
    /// CUDA device memory, on the device of this index when the producer
    /// says which.
    Cuda(Option<i32>),
}

/// Lends `obj` to an operation on `comm`: host arrays as [`crate::array::lend`]
/// does, CUDA tensors (after the stream synchronisation of the module
/// docs) when `comm` runs on the `nccl` backend. `what` names the
/// argument in errors.
pub(crate) fn lend(comm: &hcomm::Comm, obj: &Bound<'_, PyAny>, write: bool, what: &str) -> PyResult<(Lent, Place)> {
    let py = obj.py();
    if let Some((lent, device)) = crate::torch::lend_any(obj, what)? {
        let Some(device) = device else {
            return Ok((lent, Place::Host));
        };
        admit(comm, what, &format!("cuda:{device}"))?;
        py.import("torch.cuda")?
            .call_method1("current_stream", (device,))?
            .call_method0("synchronize")?;
        return Ok((lent, Place::Cuda(Some(device))));
    }
    if !obj.is_instance_of::<numpy::PyUntypedArray>() {
        if let Ok(cai) = obj.getattr(pyo3::intern!(py, "__cuda_array_interface__")) {
            let device = obj
                .getattr("device")
                .and_then(|d| d.getattr("id"))
                .and_then(|id| id.extract::<i32>())
                .ok();
            let named = device.map_or_else(|| "a CUDA device".to_owned(), |d| format!("cuda:{d}"));
            admit(comm, what, &named)?;
            let cai = cai
                .cast_into::<PyDict>()
                .map_err(|_| precondition(format!("`{what}`.__cuda_array_interface__ is not a dict")))?;
            let lent = interface(obj, &cai, write, what)?;
            synchronize(&cai, what)?;
            return Ok((lent, Place::Cuda(device)));
        }
    }
    Ok((crate::array::lend(obj, write, what)?, Place::Host))
}

/// Refuses device memory unless `comm` runs on the `nccl` backend.
fn admit(comm: &hcomm::Comm, what: &str, device: &str) -> PyResult<()> {
    let backend = comm.backend_name();
    if backend == "nccl" {
        return Ok(());
    }
    Err(precondition(format!(
        "`{what}` is a CUDA tensor on {device} but this communicator runs on the `{backend}` backend, which \
         communicates host memory; hint: initialise with backend=\"nccl\", or pass `tensor.cpu()`"
    )))
}

/// The element type of a `__cuda_array_interface__` `typestr`
/// (little-endian or single-byte).
fn dtype(typestr: &str) -> Option<hcomm::DataType> {
    use hcomm::DataType as D;
    let rest = typestr.strip_prefix(['<', '|', '='])?;
    Some(match rest {
        "f2" => D::F16,
        "f4" => D::F32,
        "f8" => D::F64,
        "i1" => D::I8,
        "u1" => D::U8,
        "i4" => D::I32,
        "u4" => D::U32,
        "i8" => D::I64,
        "u8" => D::U64,
        _ => return None,
    })
}

/// Reads a `__cuda_array_interface__` (versions 2 and 3): address, shape,
/// element type, compact row-major layout, writability.
fn interface(obj: &Bound<'_, PyAny>, cai: &Bound<'_, PyDict>, write: bool, what: &str) -> PyResult<Lent> {
    let py = obj.py();
    let entry = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        cai.get_item(key)?
            .ok_or_else(|| precondition(format!("`{what}`.__cuda_array_interface__ has no `{key}`")))
    };
    let (addr, read_only): (usize, bool) = entry("data")?.extract()?;
    if write && read_only {
        return Err(precondition(format!(
            "`{what}` is read-only but the operation writes into it"
        )));
    }
    let shape: Vec<usize> = entry("shape")?.extract()?;
    let typestr: String = entry("typestr")?.extract()?;
    let dtype = dtype(&typestr).ok_or_else(|| {
        precondition(format!(
            "`{what}` has element type `{typestr}` that is not supported; hint: use float16, float32, float64, int8, \
             uint8, int32, uint32, int64 or uint64"
        ))
    })?;
    if let Some(strides) = cai.get_item("strides")?.filter(|s| !s.is_none()) {
        let bytes: Vec<i64> = strides.extract()?;
        let size = dtype.size() as i64;
        let elements: Vec<i64> = bytes
            .iter()
            .map(|&b| if b % size == 0 { b / size } else { -1 })
            .collect();
        if !crate::dlpack::row_major(&shape, &elements) {
            return Err(precondition(format!(
                "`{what}` is not contiguous (shape {shape:?}, strides {bytes:?} bytes); hint: pass a contiguous copy, \
                 and copy the result back for a receive"
            )));
        }
    }
    let len: usize = shape.iter().product();
    let raw = Raw::aligned(what, addr, len, dtype)?;
    Ok(Lent {
        raw,
        shape,
        owner: PyTuple::new(py, [obj.clone()])?.into_any().unbind(),
    })
}

/// Synchronises the `stream` entry of a `__cuda_array_interface__` (none
/// when it is absent or `None`) through the CUDA runtime.
fn synchronize(cai: &Bound<'_, PyDict>, what: &str) -> PyResult<()> {
    let Some(stream) = cai.get_item("stream")?.filter(|s| !s.is_none()) else {
        return Ok(());
    };
    let handle: usize = stream.extract()?;
    let cuda = hcomm_sys::CudaApi::get().map_err(|e| {
        precondition(format!(
            "`{what}` names CUDA stream {handle:#x} to synchronise but the CUDA runtime did not load: {e}; hint: set \
             HCOMM_CUDART_LIB"
        ))
    })?;
    let code = cai.py().detach(|| {
        // SAFETY: `handle` is the producer's live stream (the interface's
        // contract: valid while the object is, and we hold the object);
        // `cudaStreamSynchronize` only waits on it.
        unsafe { (cuda.cudaStreamSynchronize)(handle as hcomm_sys::cudaStream_t) }
    });
    if code.is_success() {
        return Ok(());
    }
    Err(precondition(format!(
        "synchronising the stream {handle:#x} of `{what}` failed: {}",
        cuda.error_string(code)
            .unwrap_or_else(|| format!("cuda error {}", code.0))
    )))
}

/// `raw`, lent from a CUDA tensor at `place`, as a device buffer of `comm`
/// (an error when the tensor is on another device than `comm`).
///
/// # Safety
///
/// `raw` was lent by [`lend`] with a `Place::Cuda` to the running operation
/// alone: `raw.len` elements of `T` in device memory that stay allocated
/// and untouched (the stream contract of the module docs) until the
/// buffer is dropped.
pub(crate) unsafe fn buffer<T: Element>(
    comm: &hcomm::Comm,
    raw: Raw,
    place: Place,
) -> hcomm::Result<ExternalDeviceBuffer<T>> {
    // SAFETY: forwarded from the caller.
    let buf = unsafe { ExternalDeviceBuffer::from_raw_parts(comm, raw.addr as *mut T, raw.len)? };
    match place {
        Place::Cuda(Some(device)) if device != buf.device() => Err(hcomm::Error::Precondition {
            message: format!(
                "the tensor is on cuda:{device} but this communicator runs on cuda:{}; hint: move the tensor with \
                 `tensor.to(\"cuda:{}\")`",
                buf.device(),
                buf.device()
            ),
        }),
        _ => Ok(buf),
    }
}
