//! Model parallelism on numpy arrays: the parallel context
//! (`hcomm::parallel::Context`), the tensor-parallel operations
//! (`hcomm::tp`) and the pipeline transfers (`hcomm::pp::Pipeline`).

use hcomm::parallel::{Context as RustContext, ParallelConfig};
use ndarray::{ArrayView, ArrayViewMut, IxDyn};
use pyo3::prelude::*;

use crate::array::typed;
use crate::array::{lend, zeros_like};
use crate::comm::Comm;
use crate::errors::precondition;
use crate::exec::run;
use crate::lent::Raw;

/// The groups of a tensor-, pipeline-, data- and expert-parallel layout
/// (Megatron-LM's: the tensor-parallel index varies fastest, then the
/// data-parallel one, then the pipeline stage).
#[pyclass(module = "hcomm", name = "Context", frozen)]
pub(crate) struct Context {
    inner: RustContext,
}

#[pymethods]
impl Context {
    /// The tensor-parallel group of this rank.
    #[getter]
    fn tp(&self) -> Comm {
        Comm::wrap(self.inner.tp().clone())
    }

    /// The pipeline group (one rank per stage; its rank is the stage).
    #[getter]
    fn pp(&self) -> Comm {
        Comm::wrap(self.inner.pp().clone())
    }

    /// The data-parallel group.
    #[getter]
    fn dp(&self) -> Comm {
        Comm::wrap(self.inner.dp().clone())
    }

    /// The expert-parallel group (carved out of the data-parallel axis).
    #[getter]
    fn ep(&self) -> Comm {
        Comm::wrap(self.inner.ep().clone())
    }

    /// The communicator the context was built from.
    #[getter]
    fn world(&self) -> Comm {
        Comm::wrap(self.inner.world().clone())
    }

    /// Whether this rank is on the first pipeline stage.
    #[getter]
    fn is_first_stage(&self) -> bool {
        self.inner.is_first_stage()
    }

    /// Whether this rank is on the last pipeline stage.
    #[getter]
    fn is_last_stage(&self) -> bool {
        self.inner.is_last_stage()
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!("<hcomm.Context tp {} pp {} dp {} ep {}>", c.tp, c.pp, c.dp, c.ep)
    }
}

fn size(n: i64, what: &str) -> PyResult<usize> {
    usize::try_from(n).map_err(|_| precondition(format!("`{what}={n}` must be a size >= 1")))
}

/// Lays out `comm`'s ranks in groups; collective over `comm`.
#[pyfunction]
pub(crate) fn make_context(py: Python<'_>, comm: &Comm, tp: i64, pp: i64, dp: i64, ep: i64) -> PyResult<Context> {
    let config = ParallelConfig {
        tp: size(tp, "tp_size")?,
        pp: size(pp, "pp_size")?,
        dp: size(dp, "dp_size")?,
        ep: size(ep, "ep_size")?,
        ..ParallelConfig::default()
    };
    let c = comm.inner.clone();
    let inner = run(py, comm.on(), Vec::new(), move |_| RustContext::init(&c, config))?;
    Ok(Context { inner })
}

/// A view of the lent array `raw` of `shape`.
///
/// # Safety
///
/// As for [`Raw::slice`].
unsafe fn view<'a, T>(raw: Raw, shape: &[usize]) -> hcomm::Result<ArrayView<'a, T, IxDyn>> {
    // SAFETY: forwarded from the caller.
    let data: &[T] = unsafe { raw.slice() };
    ArrayView::from_shape(IxDyn(shape), data).map_err(|e| hcomm::Error::Precondition {
        message: format!("array of shape {shape:?}: {e}"),
    })
}

/// As [`view`], mutable.
///
/// # Safety
///
/// As for [`Raw::slice_mut`].
unsafe fn view_mut<'a, T>(raw: Raw, shape: &[usize]) -> hcomm::Result<ArrayViewMut<'a, T, IxDyn>> {
    // SAFETY: forwarded from the caller.
    let data: &mut [T] = unsafe { raw.slice_mut() };
    ArrayViewMut::from_shape(IxDyn(shape), data).map_err(|e| hcomm::Error::Precondition {
        message: format!("array of shape {shape:?}: {e}"),
    })
}

/// The axis `dim` names in an array of `ndim` dimensions (negative: from the end).
fn axis(dim: i64, ndim: usize, what: &str) -> PyResult<usize> {
    let n = ndim as i64;
    let a = if dim < 0 { dim + n } else { dim };
    if (0..n).contains(&a) {
        Ok(a as usize)
    } else {
        Err(precondition(format!(
            "{what}: dimension {dim} is out of range for an array of {ndim} dimensions"
        )))
    }
}

/// `hcomm::tp` on `group`: `"all_reduce"` (sum in place), `"all_gather"` and
/// `"reduce_scatter"` along `dim` (a new array).
#[pyfunction]
#[pyo3(signature = (kind, group, x, dim=-1))]
pub(crate) fn tp_op(py: Python<'_>, kind: &str, group: &Comm, x: &Bound<'_, PyAny>, dim: i64) -> PyResult<Py<PyAny>> {
    let w = group.inner.world();
    let c = group.inner.clone();
    if kind == "all_reduce" {
        let lent = lend(x, true, "x")?;
        let shape = lent.shape.clone();
        run(py, group.on(), vec![(lent, true)], move |r| {
            typed!(r[0].dtype, T => {
                // SAFETY: lent for writing to this operation alone.
                hcomm::tp::all_reduce(&c, unsafe { view_mut::<T>(r[0], &shape)? })
            })
        })?;
        return Ok(x.clone().unbind());
    }
    let lent = lend(x, false, "x")?;
    let a = axis(dim, lent.shape.len(), &format!("tp.{kind}"))?;
    let mut out_shape = lent.shape.clone();
    let gather = match kind {
        "all_gather" => true,
        "reduce_scatter" => false,
        other => return Err(precondition(format!("`{other}` is not a tensor-parallel operation"))),
    };
    if gather {
        out_shape[a] *= w;
    } else {
        // A length that does not divide is reported by the runtime, on every rank.
        out_shape[a] /= w.max(1);
    }
    let out = zeros_like(x, lent.raw.dtype, &out_shape)?;
    let out_lent = lend(&out, true, "output")?;
    let shape = lent.shape.clone();
    run(py, group.on(), vec![(lent, false), (out_lent, true)], move |r| {
        typed!(r[0].dtype, T => {
            // SAFETY: both lent to this operation; the output alone written.
            let input = unsafe { view::<T>(r[0], &shape)? };
            let got = if gather {
                hcomm::tp::all_gather(&c, input, dim as isize)?
            } else {
                hcomm::tp::reduce_scatter(&c, input, dim as isize)?
            };
            // SAFETY: as above.
            let mut o = unsafe { view_mut::<T>(r[1], &out_shape)? };
            if o.shape() != got.shape() {
                return Err(hcomm::Error::Precondition {
                    message: format!("tp: result of shape {:?}, expected {:?}", got.shape(), o.shape()),
                });
            }
            o.assign(&got);
            Ok(())
        })
    })?;
    Ok(out.unbind())
}

/// `hcomm::pp::Pipeline` over `group`: `kind` is the method's name; `b` the
/// second array of the paired forms.
#[pyfunction]
#[pyo3(signature = (kind, group, a, b=None))]
pub(crate) fn pp_op(
    py: Python<'_>,
    kind: &str,
    group: &Comm,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let writes_a = match kind {
        "send_forward" | "send_backward" | "send_forward_recv_backward" | "send_backward_recv_forward" => false,
        "recv_forward" | "recv_backward" => true,
        other => return Err(precondition(format!("`{other}` is not a pipeline transfer"))),
    };
    let paired = kind.contains("_recv_");
    let mut lends = vec![(lend(a, writes_a, "a")?, writes_a)];
    if paired {
        let b = b.ok_or_else(|| precondition(format!("pp.{kind} needs two arrays")))?;
        lends.push((lend(b, true, "b")?, true));
        if lends[1].0.raw.dtype != lends[0].0.raw.dtype {
            return Err(precondition(format!(
                "pp.{kind}: the two arrays have different element types"
            )));
        }
    }
    let pipe = hcomm::pp::Pipeline::new(&group.inner);
    let kind = kind.to_owned();
    run(py, group.on(), lends, move |r| {
        typed!(r[0].dtype, T => {
            // SAFETY: every array is lent to this operation; the written ones
            // to it alone, and they are distinct from the others (registry).
            unsafe {
                match kind.as_str() {
                    "send_forward" => pipe.send_forward(r[0].slice::<T>()),
                    "send_backward" => pipe.send_backward(r[0].slice::<T>()),
                    "recv_forward" => pipe.recv_forward(r[0].slice_mut::<T>()),
                    "recv_backward" => pipe.recv_backward(r[0].slice_mut::<T>()),
                    "send_forward_recv_backward" => pipe.send_forward_recv_backward(r[0].slice::<T>(), r[1].slice_mut::<T>()),
                    _ => pipe.send_backward_recv_forward(r[0].slice::<T>(), r[1].slice_mut::<T>()),
                }
            }
        })
    })
}
