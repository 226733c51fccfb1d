//! `hcomm.Comm`: a communicator, its point-to-point operations and its
//! collectives on numpy arrays.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::array::{lend, typed, zeros_like};
use crate::cuda::Place;
use crate::errors::precondition;
use crate::exec::{run, start, start_request};
use crate::executor::{Lane, Req};
use crate::lent::{Lent, Raw};
use crate::ops::{peer, tag, Reduction};
use crate::request::Request;

/// A communicator: this rank's handle on a group of ranks.
#[pyclass(module = "hcomm", name = "Comm", frozen)]
pub(crate) struct Comm {
    pub(crate) inner: hcomm::Comm,
    /// The turn of the group's calls (see [`crate::executor::Lane`]).
    lane: Arc<Lane>,
}

impl Comm {
    pub(crate) fn wrap(inner: hcomm::Comm) -> Comm {
        let lane = crate::executor::lane(&inner);
        Comm { inner, lane }
    }

    /// Where this communicator's calls run.
    pub(crate) fn on(&self) -> (&hcomm::Comm, &Arc<Lane>) {
        (&self.inner, &self.lane)
    }

    /// Runs `job` to completion on this communicator.
    fn run<R, F>(&self, py: Python<'_>, lends: Vec<(Lent, bool)>, job: F) -> PyResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&hcomm::Comm, &[Raw]) -> hcomm::Result<R> + Send + 'static,
    {
        let comm = self.inner.clone();
        run(py, self.on(), lends, move |raws| job(&comm, raws))
    }

    /// Starts `job` and returns its request.
    fn post<F>(
        &self,
        lends: Vec<(Lent, bool)>,
        result: Option<Py<PyAny>>,
        what: &'static str,
        job: F,
    ) -> PyResult<Request>
    where
        F: FnOnce(&hcomm::Comm, &[Raw]) -> hcomm::Result<()> + Send + 'static,
    {
        let comm = self.inner.clone();
        let started = start(self.on(), lends, move |raws| job(&comm, raws))?;
        Ok(Request::new(started, result, what))
    }

    /// Posts a non-blocking operation on this communicator's executor and
    /// returns its request.
    fn post_request<F>(&self, lends: Vec<(Lent, bool)>, what: &'static str, post: F) -> PyResult<Request>
    where
        F: for<'s> FnOnce(&'s hcomm::Scope<'s, 'static>, &hcomm::Comm, &[Raw]) -> hcomm::Result<Req<'s>>
            + Send
            + 'static,
    {
        let comm = self.inner.clone();
        let started = start_request(&self.inner, &self.lane, lends, move |s, raws| post(s, &comm, raws))?;
        Ok(Request::new(started, None, what))
    }

    /// Either runs `job` (returning `result`) or posts it (returning a request).
    fn run_or_post<F>(
        &self,
        py: Python<'_>,
        async_op: bool,
        lends: Vec<(Lent, bool)>,
        result: Option<Py<PyAny>>,
        what: &'static str,
        job: F,
    ) -> PyResult<Py<PyAny>>
    where
        F: FnOnce(&hcomm::Comm, &[Raw]) -> hcomm::Result<()> + Send + 'static,
    {
        if async_op {
            return Ok(Py::new(py, self.post(lends, result, what, job)?)?.into_any());
        }
        self.run(py, lends, job)?;
        Ok(result.unwrap_or_else(|| py.None()))
    }

    fn dim0(lent: &Lent, what: &str) -> PyResult<usize> {
        lent.shape.first().copied().ok_or_else(|| {
            precondition(format!(
                "{what}: a 0-d array has no dimension 0 to split or concatenate along"
            ))
        })
    }

    /// A new array of `like`'s kind shaped like `lent` (lent from `like`)
    /// with dimension 0 of `rows`.
    fn with_rows<'py>(like: &Bound<'py, PyAny>, lent: &Lent, rows: usize) -> PyResult<Bound<'py, PyAny>> {
        let mut shape = lent.shape.clone();
        shape[0] = rows;
        zeros_like(like, lent.raw.dtype, &shape)
    }

    fn split_rows(&self, lent: &Lent, what: &str) -> PyResult<usize> {
        let rows = Self::dim0(lent, what)?;
        let w = self.inner.world();
        if rows % w != 0 {
            return Err(precondition(format!(
                "{what}: dimension 0 has {rows} rows, not a multiple of the {w} ranks (shape {:?})",
                lent.shape
            )));
        }
        Ok(rows / w)
    }
}

/// Posts a send of `raw` (inside a scope, so a send to this rank itself can
/// complete) and waits for it.
fn send_raw(comm: &hcomm::Comm, raw: Raw, dst: usize, tag: hcomm::Tag) -> hcomm::Result<()> {
    typed!(raw.dtype, T => {
        // SAFETY: `raw` is lent to this operation (registered, kept alive).
        let buf: &[T] = unsafe { raw.slice() };
        hcomm::scope(|s| comm.isend_tagged(s, buf, dst, tag)?.wait())
    })
}

/// Posts a send of `raw` in the executor's scope `s`.
fn post_send<'s>(
    s: &'s hcomm::Scope<'s, 'static>,
    comm: &hcomm::Comm,
    raw: Raw,
    dst: usize,
    tag: hcomm::Tag,
) -> hcomm::Result<Req<'s>> {
    typed!(raw.dtype, T => {
        // SAFETY: `raw` is lent to this operation (registered, kept alive
        // until the executor has completed the request).
        let buf: &'s [T] = unsafe { raw.slice() };
        comm.isend_tagged(s, buf, dst, tag)
    })
}

/// Posts a receive into `raw` in the executor's scope `s`.
fn post_recv<'s>(
    s: &'s hcomm::Scope<'s, 'static>,
    comm: &hcomm::Comm,
    raw: Raw,
    src: usize,
    tag: hcomm::Tag,
) -> hcomm::Result<Req<'s>> {
    typed!(raw.dtype, T => {
        // SAFETY: `raw` is lent for writing to this operation alone (kept
        // alive until the executor has completed the request).
        let buf: &'s mut [T] = unsafe { raw.slice_mut() };
        comm.irecv_tagged(s, buf, src, tag)
    })
}

fn recv_raw(comm: &hcomm::Comm, raw: Raw, src: usize, tag: hcomm::Tag) -> hcomm::Result<()> {
    typed!(raw.dtype, T => {
        // SAFETY: `raw` is lent for writing to this operation alone.
        let buf: &mut [T] = unsafe { raw.slice_mut() };
        hcomm::scope(|s| comm.irecv_tagged(s, buf, src, tag)?.wait())
    })
}

#[pymethods]
impl Comm {
    /// This rank, in `0..size()`.
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The number of ranks in the group.
    fn size(&self) -> usize {
        self.inner.world()
    }

    /// The backend's name: `"host"`, `"hccl"` or `"nccl"`.
    fn backend(&self) -> &'static str {
        self.inner.backend_name()
    }

    /// Ranks passing the same `color` form a new communicator, ordered by
    /// `key` then rank; `color=None` joins none and returns `None`.
    /// Collective over this communicator.
    #[pyo3(signature = (color, key=0))]
    fn split(&self, py: Python<'_>, color: Option<u32>, key: i64) -> PyResult<Option<Comm>> {
        let got = self.run(py, Vec::new(), move |c, _| c.split(color, key))?;
        Ok(got.map(Comm::wrap))
    }

    /// The communicator of `ranks` (index = new rank), or `None` on a rank
    /// not among them. Every member calls it with the same list; no message
    /// is exchanged.
    #[allow(clippy::needless_pass_by_value, reason = "PyO3 passes extracted arguments by value")]
    fn subgroup(&self, ranks: Vec<i64>) -> PyResult<Option<Comm>> {
        let w = self.inner.world();
        let members = ranks
            .iter()
            .map(|&r| peer(r, w, "subgroup"))
            .collect::<PyResult<Vec<usize>>>()?;
        if !members.contains(&self.inner.rank()) {
            return Ok(None);
        }
        let comm = self
            .inner
            .subgroup("python", &members)
            .map_err(|e| crate::errors::to_py(&e))?;
        Ok(Some(Comm::wrap(comm)))
    }

    /// Returns once every rank has entered it.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Vec::new(), |c, _| c.barrier())
    }

    /// Fails every pending and future operation of the group on this
    /// process with `hcomm.Aborted`.
    #[pyo3(signature = (reason="aborted from Python"))]
    fn abort(&self, reason: &str) {
        self.inner.abort(reason);
    }

    /// Changes how long any wait on this communicator may block (seconds).
    fn set_timeout(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(precondition(format!(
                "`seconds` must be a positive number, not {seconds}"
            )));
        }
        self.inner.set_timeout(std::time::Duration::from_secs_f64(seconds));
        Ok(())
    }

    /// Sends `tensor` to `dst`; returns once it was received.
    #[pyo3(signature = (tensor, dst, tag=0))]
    fn send(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, dst: i64, tag: i64) -> PyResult<()> {
        let (dst, tag) = (peer(dst, self.inner.world(), "send")?, crate::ops::tag(tag)?);
        let lent = lend(tensor, false, "tensor")?;
        self.run(py, vec![(lent, false)], move |c, r| send_raw(c, r[0], dst, tag))
    }

    /// Receives into `tensor` from `src`.
    #[pyo3(signature = (tensor, src, tag=0))]
    fn recv(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, src: i64, tag: i64) -> PyResult<()> {
        let (src, tag) = (peer(src, self.inner.world(), "recv")?, crate::ops::tag(tag)?);
        let lent = lend(tensor, true, "tensor")?;
        self.run(py, vec![(lent, true)], move |c, r| recv_raw(c, r[0], src, tag))
    }

    /// Starts sending `tensor` to `dst`.
    #[pyo3(signature = (tensor, dst, tag=0))]
    fn isend(&self, tensor: &Bound<'_, PyAny>, dst: i64, tag: i64) -> PyResult<Request> {
        let (dst, tag) = (peer(dst, self.inner.world(), "isend")?, crate::ops::tag(tag)?);
        let lent = lend(tensor, false, "tensor")?;
        self.post_request(vec![(lent, false)], "isend", move |s, c, r| {
            post_send(s, c, r[0], dst, tag)
        })
    }

    /// Starts receiving into `tensor` from `src`.
    #[pyo3(signature = (tensor, src, tag=0))]
    fn irecv(&self, tensor: &Bound<'_, PyAny>, src: i64, tag: i64) -> PyResult<Request> {
        let (src, tag) = (peer(src, self.inner.world(), "irecv")?, crate::ops::tag(tag)?);
        let lent = lend(tensor, true, "tensor")?;
        self.post_request(vec![(lent, true)], "irecv", move |s, c, r| {
            post_recv(s, c, r[0], src, tag)
        })
    }

    /// Posts every `hcomm.P2POp` of `ops` together (so exchanges cannot
    /// deadlock) and returns one request per op; they complete together.
    fn batch_isend_irecv(&self, py: Python<'_>, ops: &Bound<'_, PyList>) -> PyResult<Vec<Py<Request>>> {
        let w = self.inner.world();
        let mut lends = Vec::new();
        let mut plan = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let kind: String = op.getattr("op")?.extract()?;
            let send = match kind.as_str() {
                "isend" | "send" => true,
                "irecv" | "recv" => false,
                other => {
                    return Err(precondition(format!(
                        "ops[{i}]: `{other}` is not \"isend\" or \"irecv\""
                    )))
                }
            };
            let p = peer(op.getattr("peer")?.extract()?, w, &format!("ops[{i}]"))?;
            let t = tag(op.getattr("tag")?.extract()?)?;
            lends.push((lend(&op.getattr("tensor")?, !send, &format!("ops[{i}].tensor"))?, !send));
            plan.push((send, p, t));
        }
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        let first = self.post(lends, None, "batch_isend_irecv", move |c, raws| {
            c.batch(|b| {
                for (&(send, p, t), &raw) in plan.iter().zip(raws) {
                    typed!(raw.dtype, T => {
                        if send {
                            // SAFETY: lent to this operation (registered, kept alive).
                            let buf: &[T] = unsafe { raw.slice() };
                            b.send_tagged(buf, p, t)
                        } else {
                            // SAFETY: lent for writing to this operation alone.
                            let buf: &mut [T] = unsafe { raw.slice_mut() };
                            b.recv_tagged(buf, p, t)
                        }
                    })?;
                }
                Ok(())
            })
        })?;
        let mut out = Vec::with_capacity(ops.len());
        for _ in 1..ops.len() {
            out.push(Py::new(py, first.sibling())?);
        }
        out.insert(0, Py::new(py, first)?);
        Ok(out)
    }

    /// Combines `tensor` over every rank, in place. `op`: `"sum"`,
    /// `"prod"`, `"max"`, `"min"`, `"avg"` (floating point only: the sum
    /// divided by the number of ranks).
    #[pyo3(signature = (tensor, op="sum", async_op=false))]
    fn all_reduce(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, op: &str, async_op: bool) -> PyResult<Py<PyAny>> {
        let (lent, place) = crate::cuda::lend(&self.inner, tensor, true, "tensor")?;
        let red = Reduction::parse(op, lent.raw.dtype)?;
        let result = Some(tensor.clone().unbind());
        self.run_or_post(py, async_op, vec![(lent, true)], result, "all_reduce", move |c, r| {
            let raw = r[0];
            if place != Place::Host {
                let op = if red.average { hcomm::ReduceOp::Avg } else { red.op };
                return typed!(raw.dtype, T => {
                    // SAFETY: lent from a CUDA tensor to this operation alone.
                    let mut buf = unsafe { crate::cuda::buffer::<T>(c, raw, place)? };
                    c.all_reduce_in_place(&mut buf, op)
                });
            }
            typed!(raw.dtype, T => {
                // SAFETY: lent for writing to this operation alone.
                let buf: &mut [T] = unsafe { raw.slice_mut() };
                c.all_reduce_in_place(buf, red.op)
            })?;
            // SAFETY: as above; the slice above is gone.
            unsafe { red.finish(raw, c.world()) };
            Ok(())
        })
    }

    /// Every rank's `tensor`, concatenated along dimension 0 in rank order.
    #[pyo3(signature = (tensor, async_op=false))]
    fn all_gather(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, async_op: bool) -> PyResult<Py<PyAny>> {
        let (lent, place) = crate::cuda::lend(&self.inner, tensor, false, "tensor")?;
        let rows = Self::dim0(&lent, "all_gather")?;
        let out = Self::with_rows(tensor, &lent, rows * self.inner.world())?;
        let (out_lent, out_place) = crate::cuda::lend(&self.inner, &out, true, "output")?;
        let lends = vec![(lent, false), (out_lent, true)];
        self.run_or_post(py, async_op, lends, Some(out.unbind()), "all_gather", move |c, r| {
            if place != Place::Host {
                return typed!(r[0].dtype, T => {
                    // SAFETY: both lent from CUDA tensors to this operation; the output alone written.
                    let (send, mut recv) = unsafe {
                        (crate::cuda::buffer::<T>(c, r[0], place)?, crate::cuda::buffer::<T>(c, r[1], out_place)?)
                    };
                    c.all_gather(&send, &mut recv)
                });
            }
            typed!(r[0].dtype, T => {
                // SAFETY: both lent to this operation; the output alone written.
                let (send, recv): (&[T], &mut [T]) = unsafe { (r[0].slice(), r[1].slice_mut()) };
                c.all_gather(send, recv)
            })
        })
    }

    /// Combines `tensor` over every rank and returns this rank's block of
    /// dimension 0 (which must divide by the number of ranks).
    #[pyo3(signature = (tensor, op="sum", async_op=false))]
    fn reduce_scatter(
        &self,
        py: Python<'_>,
        tensor: &Bound<'_, PyAny>,
        op: &str,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let lent = lend(tensor, false, "tensor")?;
        let red = Reduction::parse(op, lent.raw.dtype)?;
        let rows = self.split_rows(&lent, "reduce_scatter")?;
        let out = Self::with_rows(tensor, &lent, rows)?;
        let out_lent = lend(&out, true, "output")?;
        let lends = vec![(lent, false), (out_lent, true)];
        self.run_or_post(
            py,
            async_op,
            lends,
            Some(out.unbind()),
            "reduce_scatter",
            move |c, r| {
                typed!(r[0].dtype, T => {
                    // SAFETY: both lent to this operation; the output alone written.
                    let (send, recv): (&[T], &mut [T]) = unsafe { (r[0].slice(), r[1].slice_mut()) };
                    c.reduce_scatter(send, recv, red.op)
                })?;
                // SAFETY: the output, lent for writing; the slices above are gone.
                unsafe { red.finish(r[1], c.world()) };
                Ok(())
            },
        )
    }

    /// Block `j` of dimension 0 goes to rank `j`; the result holds, in rank
    /// order, the block every rank sent here.
    fn all_to_all(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let lent = lend(tensor, false, "tensor")?;
        self.split_rows(&lent, "all_to_all")?;
        let out = Self::with_rows(tensor, &lent, lent.shape[0])?;
        let out_lent = lend(&out, true, "output")?;
        let lends = vec![(lent, false), (out_lent, true)];
        self.run(py, lends, |c, r| {
            typed!(r[0].dtype, T => {
                // SAFETY: both lent to this operation; the output alone written.
                let (send, recv): (&[T], &mut [T]) = unsafe { (r[0].slice(), r[1].slice_mut()) };
                c.all_to_all(send, recv)
            })
        })?;
        Ok(out.unbind())
    }

    /// `send_counts[j]` rows of `tensor` (in rank order) go to rank `j`; the
    /// result holds the rows every rank sent here, in rank order.
    #[allow(clippy::needless_pass_by_value, reason = "PyO3 passes extracted arguments by value")]
    fn all_to_all_v(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, send_counts: Vec<i64>) -> PyResult<Py<PyAny>> {
        let lent = lend(tensor, false, "tensor")?;
        let rows = Self::dim0(&lent, "all_to_all_v")?;
        let w = self.inner.world();
        if send_counts.len() != w || send_counts.iter().any(|&n| n < 0) {
            return Err(precondition(format!(
                "all_to_all_v: `send_counts` must hold {w} counts >= 0 (one per rank), not {send_counts:?}"
            )));
        }
        let sent: i64 = send_counts.iter().sum();
        if usize::try_from(sent).ok() != Some(rows) {
            return Err(precondition(format!(
                "all_to_all_v: `send_counts` sum to {sent} rows but `tensor` has {rows} (shape {:?})",
                lent.shape
            )));
        }
        let row: usize = lent.shape[1..].iter().product();
        let counts: Vec<u64> = send_counts.iter().map(|&n| n as u64).collect();
        let recv_rows = self.run(py, Vec::new(), move |c, _| {
            let mut got = vec![0u64; counts.len()];
            c.all_to_all(&counts, &mut got)?;
            Ok(got)
        })?;
        let total: u64 = recv_rows.iter().sum();
        let out = Self::with_rows(tensor, &lent, total as usize)?;
        let out_lent = lend(&out, true, "output")?;
        let send_elems: Vec<usize> = send_counts.iter().map(|&n| n as usize * row).collect();
        let recv_elems: Vec<usize> = recv_rows.iter().map(|&n| n as usize * row).collect();
        self.run(py, vec![(lent, false), (out_lent, true)], move |c, r| {
            typed!(r[0].dtype, T => {
                // SAFETY: both lent to this operation; the output alone written.
                let (send, recv): (&[T], &mut [T]) = unsafe { (r[0].slice(), r[1].slice_mut()) };
                c.all_to_allv(send, &send_elems, recv, &recv_elems)
            })
        })?;
        Ok(out.unbind())
    }

    /// Copies `root`'s `tensor` into every rank's `tensor`.
    fn broadcast(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, root: i64) -> PyResult<()> {
        let root = peer(root, self.inner.world(), "broadcast")?;
        let (lent, place) = crate::cuda::lend(&self.inner, tensor, true, "tensor")?;
        self.run(py, vec![(lent, true)], move |c, r| {
            typed!(r[0].dtype, T => {
                if place != Place::Host {
                    // SAFETY: lent from a CUDA tensor to this operation alone.
                    let mut buf = unsafe { crate::cuda::buffer::<T>(c, r[0], place)? };
                    return c.broadcast(&mut buf, root);
                }
                // SAFETY: lent for writing to this operation alone.
                let buf: &mut [T] = unsafe { r[0].slice_mut() };
                c.broadcast(buf, root)
            })
        })
    }

    /// Combines every rank's `tensor` into `root`'s `tensor` (in place on
    /// the root; the others' are left as they were).
    #[pyo3(signature = (tensor, root, op="sum"))]
    fn reduce(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, root: i64, op: &str) -> PyResult<()> {
        let root = peer(root, self.inner.world(), "reduce")?;
        let lent = lend(tensor, true, "tensor")?;
        let red = Reduction::parse(op, lent.raw.dtype)?;
        self.run(py, vec![(lent, true)], move |c, r| {
            let raw = r[0];
            typed!(raw.dtype, T => {
                // SAFETY: lent for writing to this operation alone.
                let buf: &mut [T] = unsafe { raw.slice_mut() };
                let send = buf.to_vec();
                if c.rank() == root {
                    c.reduce(&send, buf, red.op, root)
                } else {
                    c.reduce(&send, &mut [] as &mut [T], red.op, root)
                }
            })?;
            if c.rank() == root {
                // SAFETY: as above; the slice above is gone.
                unsafe { red.finish(raw, c.world()) };
            }
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "<hcomm.Comm rank {} of {} ({})>",
            self.inner.rank(),
            self.inner.world(),
            self.inner.backend_name()
        )
    }
}
