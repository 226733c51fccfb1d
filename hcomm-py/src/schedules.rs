//! `hcomm.schedules`: the runtime's built-in `comm_schedule!` schedules
//! (`hcomm::schedules`), each under its Rust name, on numpy arrays.

use hcomm::schedules as s;
use pyo3::prelude::*;

use crate::array::lend;
use crate::array::typed;
use crate::comm::Comm;
use crate::errors::precondition;
use crate::exec::run;
use crate::ops::{peer, Reduction};

/// How a schedule takes its arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `(input, output)`
    InOut,
    /// `(input, output, op)`
    InOutOp,
    /// `(buf, root)`
    BufRoot,
    /// `(buf, op)`
    BufOp,
    /// `(input, output, op, root)`
    InOutOpRoot,
}

/// Every built-in schedule and how it takes its arguments.
const SCHEDULES: [(&str, Shape); 20] = [
    ("ring_all_gather", Shape::InOut),
    ("recursive_doubling_all_gather", Shape::InOut),
    ("bruck_all_gather", Shape::InOut),
    ("direct_all_gather", Shape::InOut),
    ("pairwise_all_to_all", Shape::InOut),
    ("one_shot_all_gather", Shape::InOut),
    ("one_shot_all_to_all", Shape::InOut),
    ("one_shot_all_reduce", Shape::InOutOp),
    ("one_shot_reduce_scatter", Shape::InOutOp),
    ("direct_all_reduce", Shape::InOutOp),
    ("direct_reduce_scatter", Shape::InOutOp),
    ("recursive_halving_reduce_scatter", Shape::InOutOp),
    ("ring_reduce_scatter", Shape::InOutOp),
    ("binomial_broadcast", Shape::BufRoot),
    ("one_shot_broadcast", Shape::BufRoot),
    ("scatter_all_gather_broadcast", Shape::BufRoot),
    ("ring_all_reduce", Shape::BufOp),
    ("halving_doubling_all_reduce", Shape::BufOp),
    ("recursive_doubling_all_reduce", Shape::BufOp),
    ("binomial_reduce", Shape::InOutOpRoot),
];

/// The names of the built-in schedules.
#[pyfunction]
pub(crate) fn schedule_names() -> Vec<&'static str> {
    SCHEDULES.iter().map(|(n, _)| *n).collect()
}

/// Runs the built-in schedule `name` on `comm`. `a` is the input (or the
/// buffer of in-place schedules), `b` the output; `op` and `root` where the
/// schedule takes them.
#[pyfunction]
#[pyo3(signature = (name, comm, a, b=None, op="sum", root=0))]
pub(crate) fn run_schedule(
    py: Python<'_>,
    name: &str,
    comm: &Comm,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
    op: &str,
    root: i64,
) -> PyResult<()> {
    let Some(&(name, shape)) = SCHEDULES.iter().find(|(n, _)| *n == name) else {
        return Err(precondition(format!("`{name}` is not a built-in schedule")));
    };
    let world = comm.inner.world();
    let in_place = matches!(shape, Shape::BufRoot | Shape::BufOp);
    let first = lend(a, in_place, if in_place { "buf" } else { "x" })?;
    let red = Reduction::parse(op, first.raw.dtype)?;
    if red.average {
        return Err(precondition(format!(
            "{name}: `op=\"avg\"` is not an operator of the schedules"
        )));
    }
    let root = peer(root, world, name)?;
    let mut lends = vec![(first, in_place)];
    if !in_place {
        let out = b.ok_or_else(|| precondition(format!("{name}: the output array `out` is missing")))?;
        let out = lend(out, true, "out")?;
        if out.raw.dtype != lends[0].0.raw.dtype {
            return Err(precondition(format!(
                "{name}: `out` has element type {}, `x` {}",
                out.raw.dtype.name(),
                lends[0].0.raw.dtype.name()
            )));
        }
        lends.push((out, true));
    }
    let c = comm.inner.clone();
    run(py, comm.on(), lends, move |r| {
        let op = red.op;
        typed!(r[0].dtype, T => {
            if in_place {
                // SAFETY: lent for writing to this operation alone.
                let buf: &mut [T] = unsafe { r[0].slice_mut() };
                match name {
                    "binomial_broadcast" => s::binomial_broadcast(&c, buf, root),
                    "one_shot_broadcast" => s::one_shot_broadcast(&c, buf, root),
                    "scatter_all_gather_broadcast" => s::scatter_all_gather_broadcast(&c, buf, root),
                    "ring_all_reduce" => s::ring_all_reduce(&c, buf, op),
                    "halving_doubling_all_reduce" => s::halving_doubling_all_reduce(&c, buf, op),
                    _ => s::recursive_doubling_all_reduce(&c, buf, op),
                }
            } else {
                // SAFETY: both lent to this operation (checked distinct); the output alone written.
                let (x, out): (&[T], &mut [T]) = unsafe { (r[0].slice(), r[1].slice_mut()) };
                match name {
                    "ring_all_gather" => s::ring_all_gather(&c, x, out),
                    "recursive_doubling_all_gather" => s::recursive_doubling_all_gather(&c, x, out),
                    "bruck_all_gather" => s::bruck_all_gather(&c, x, out),
                    "direct_all_gather" => s::direct_all_gather(&c, x, out),
                    "pairwise_all_to_all" => s::pairwise_all_to_all(&c, x, out),
                    "one_shot_all_gather" => s::one_shot_all_gather(&c, x, out),
                    "one_shot_all_to_all" => s::one_shot_all_to_all(&c, x, out),
                    "one_shot_all_reduce" => s::one_shot_all_reduce(&c, x, out, op),
                    "one_shot_reduce_scatter" => s::one_shot_reduce_scatter(&c, x, out, op),
                    "direct_all_reduce" => s::direct_all_reduce(&c, x, out, op),
                    "direct_reduce_scatter" => s::direct_reduce_scatter(&c, x, out, op),
                    "recursive_halving_reduce_scatter" => s::recursive_halving_reduce_scatter(&c, x, out, op),
                    "ring_reduce_scatter" => s::ring_reduce_scatter(&c, x, out, op),
                    _ => s::binomial_reduce(&c, x, out, op, root),
                }
            }
        })
    })
}
