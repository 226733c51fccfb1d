//! Expert parallelism on numpy arrays (Rust `hcomm::moe`): top-k dispatch of
//! tokens to the ranks holding their experts, and the weighted combine back.

use hcomm::moe::Dispatch as RustDispatch;
use ndarray::{Array2, ArrayView2};
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::comm::Comm;
use crate::errors::precondition;
use crate::exec::run;

/// What `dispatch` returned, for each token element type `combine` takes.
enum Routed {
    F16(RustDispatch<half::f16>),
    F32(RustDispatch<f32>),
    F64(RustDispatch<f64>),
}

/// The result of `hcomm.moe.dispatch`: `tokens` (the rows routed to this
/// rank's experts, grouped by local expert) and `tokens_per_expert`; what
/// `combine` needs to send the experts' outputs home.
#[pyclass(module = "hcomm.moe", name = "Dispatch", frozen)]
pub(crate) struct Dispatch {
    routed: Routed,
    tokens: Py<PyAny>,
}

#[pymethods]
impl Dispatch {
    /// The tokens routed to this rank's experts, `[rows, H]`.
    #[getter]
    fn tokens(&self, py: Python<'_>) -> Py<PyAny> {
        self.tokens.clone_ref(py)
    }

    /// Rows of `tokens` per local expert, in expert order.
    #[getter]
    fn tokens_per_expert(&self) -> Vec<usize> {
        match &self.routed {
            Routed::F16(d) => d.tokens_per_expert.clone(),
            Routed::F32(d) => d.tokens_per_expert.clone(),
            Routed::F64(d) => d.tokens_per_expert.clone(),
        }
    }

    /// The number of tokens this rank dispatched (rows of `combine`'s result).
    #[getter]
    fn num_tokens(&self) -> usize {
        match &self.routed {
            Routed::F16(d) => d.num_tokens(),
            Routed::F32(d) => d.num_tokens(),
            Routed::F64(d) => d.num_tokens(),
        }
    }
}

fn ids(a: &ArrayView2<'_, i64>, num_experts: usize) -> Array2<usize> {
    // A negative id cannot be a `usize`: it becomes `num_experts`, out of
    // range, so the runtime reports it on every rank of the group.
    a.mapv(|e| usize::try_from(e).unwrap_or(num_experts))
}

fn dispatch_typed<'py, T>(
    py: Python<'py>,
    group: &Comm,
    tokens: &Bound<'py, PyAny>,
    topk_ids: Array2<usize>,
    topk_weights: Array2<f32>,
    num_experts: usize,
) -> PyResult<(RustDispatch<T>, Bound<'py, PyAny>)>
where
    T: hcomm::Element + numpy::Element,
{
    let tokens: PyReadonlyArray2<'py, T> = tokens
        .extract()
        .map_err(|_| precondition("moe.dispatch: `tokens` must be a 2-d array [T, H]"))?;
    let tokens = tokens.as_array().to_owned();
    let c = group.inner.clone();
    let d = run(py, group.on(), Vec::new(), move |_| {
        hcomm::moe::dispatch(&c, tokens.view(), topk_ids.view(), topk_weights.view(), num_experts)
    })?;
    let out = d.tokens.clone().into_pyarray(py).into_any();
    Ok((d, out))
}

/// `hcomm::moe::dispatch` over `group`. `topk_ids` and `topk_weights` are
/// `[T, k]`; `tokens` `[T, H]` of float16, float32 or float64.
#[pyfunction]
pub(crate) fn moe_dispatch(
    py: Python<'_>,
    group: &Comm,
    tokens: &Bound<'_, PyAny>,
    topk_ids: &Bound<'_, PyAny>,
    topk_weights: &Bound<'_, PyAny>,
    num_experts: usize,
) -> PyResult<Dispatch> {
    let topk_ids: PyReadonlyArray2<'_, i64> = topk_ids
        .extract()
        .map_err(|_| precondition("moe.dispatch: `topk_ids` must be a 2-d int64 array [T, k]"))?;
    let topk_weights: PyReadonlyArray2<'_, f32> = topk_weights
        .extract()
        .map_err(|_| precondition("moe.dispatch: `topk_weights` must be a 2-d float32 array [T, k]"))?;
    let i = ids(&topk_ids.as_array(), num_experts);
    let w = topk_weights.as_array().to_owned();
    let dtype = crate::array::dtype_of(
        tokens
            .cast()
            .map_err(|_| precondition("moe.dispatch: `tokens` must be a numpy array"))?,
    )?;
    let (routed, out) = match dtype {
        hcomm::DataType::F16 => {
            let (d, o) = dispatch_typed::<half::f16>(py, group, tokens, i, w, num_experts)?;
            (Routed::F16(d), o)
        }
        hcomm::DataType::F32 => {
            let (d, o) = dispatch_typed::<f32>(py, group, tokens, i, w, num_experts)?;
            (Routed::F32(d), o)
        }
        hcomm::DataType::F64 => {
            let (d, o) = dispatch_typed::<f64>(py, group, tokens, i, w, num_experts)?;
            (Routed::F64(d), o)
        }
        other => {
            return Err(precondition(format!(
                "moe.dispatch: tokens of {} cannot be combined; hint: use float16, float32 or float64",
                other.name()
            )))
        }
    };
    Ok(Dispatch {
        routed,
        tokens: out.unbind(),
    })
}

fn combine_typed<'py, T>(
    py: Python<'py>,
    group: &Comm,
    expert_output: &Bound<'py, PyAny>,
    d: &RustDispatch<T>,
) -> PyResult<Bound<'py, PyAny>>
where
    T: hcomm::Element + numpy::Element + num_traits::Float,
{
    let out: PyReadonlyArray2<'py, T> = expert_output.extract().map_err(|_| {
        precondition("moe.combine: `expert_output` must be a 2-d array of the dispatched tokens' element type")
    })?;
    let out = out.as_array().to_owned();
    let c = group.inner.clone();
    let d = d.clone();
    let back = run(py, group.on(), Vec::new(), move |_| {
        hcomm::moe::combine(&c, out.view(), &d)
    })?;
    Ok(PyArray2::from_owned_array(py, back).into_any())
}

/// `hcomm::moe::combine` over `group`: `[T, H]`, for every original token the
/// sum over its `k` experts of weight × expert output.
#[pyfunction]
pub(crate) fn moe_combine(
    py: Python<'_>,
    group: &Comm,
    expert_output: &Bound<'_, PyAny>,
    d: &Dispatch,
) -> PyResult<Py<PyAny>> {
    let got = match &d.routed {
        Routed::F16(d) => combine_typed(py, group, expert_output, d),
        Routed::F32(d) => combine_typed(py, group, expert_output, d),
        Routed::F64(d) => combine_typed(py, group, expert_output, d),
    }?;
    Ok(got.unbind())
}
