//! Argument parsing shared by the bindings: reduction operators, peers,
//! tags.

use hcomm::{DataType, ReduceOp};
use pyo3::prelude::*;

use crate::errors::precondition;

/// A reduction as Python names it: an hcomm operator, and whether the
/// result is then divided by the number of ranks (`"avg"`).
#[derive(Clone, Copy)]
pub(crate) struct Reduction {
    pub(crate) op: ReduceOp,
    pub(crate) average: bool,
}

impl Reduction {
    /// Parses `"sum"`, `"prod"`, `"max"`, `"min"` or `"avg"`. `avg` is for
    /// floating-point arrays only (the mean of integers is not an integer).
    pub(crate) fn parse(name: &str, dtype: DataType) -> PyResult<Reduction> {
        let (op, average) = match name {
            "sum" => (ReduceOp::Sum, false),
            "prod" => (ReduceOp::Prod, false),
            "max" => (ReduceOp::Max, false),
            "min" => (ReduceOp::Min, false),
            "avg" => (ReduceOp::Sum, true),
            other => {
                return Err(precondition(format!(
                    "`op={other:?}` is not a reduction; hint: use \"sum\", \"prod\", \"max\", \"min\" or \"avg\""
                )))
            }
        };
        if average && !matches!(dtype, DataType::F16 | DataType::Bf16 | DataType::F32 | DataType::F64) {
            return Err(precondition(format!(
                "`op=\"avg\"` needs a floating-point array, not {}; hint: reduce with \"sum\" and divide",
                dtype.name()
            )));
        }
        Ok(Reduction { op, average })
    }

    /// Divides `raw`'s elements by `world` when this is an average.
    ///
    /// # Safety
    ///
    /// As for [`crate::lent::Raw::slice_mut`].
    pub(crate) unsafe fn finish(self, raw: crate::lent::Raw, world: usize) {
        if !self.average {
            return;
        }
        match raw.dtype {
            // SAFETY: forwarded from the caller; the type is `raw`'s.
            DataType::F16 => unsafe { divide::<half::f16>(raw.slice_mut(), world) },
            // SAFETY: as above.
            DataType::Bf16 => unsafe { divide::<half::bf16>(raw.slice_mut(), world) },
            // SAFETY: as above.
            DataType::F32 => unsafe { divide::<f32>(raw.slice_mut(), world) },
            // SAFETY: as above.
            DataType::F64 => unsafe { divide::<f64>(raw.slice_mut(), world) },
            _ => {}
        }
    }
}

fn divide<T: num_traits::Float>(xs: &mut [T], world: usize) {
    if let Some(n) = T::from(world) {
        for x in xs {
            *x = *x / n;
        }
    }
}

/// A message tag from Python.
pub(crate) fn tag(tag: i64) -> PyResult<hcomm::Tag> {
    hcomm::Tag::try_from(tag).map_err(|_| precondition(format!("`tag={tag}` must be in 0..=4294967295")))
}

/// A rank from Python, checked against a group of `world` ranks.
pub(crate) fn peer(rank: i64, world: usize, what: &str) -> PyResult<usize> {
    usize::try_from(rank).ok().filter(|&r| r < world).ok_or_else(|| {
        precondition(format!(
            "{what}: rank {rank} is out of range for a communicator of {world} ranks"
        ))
    })
}
