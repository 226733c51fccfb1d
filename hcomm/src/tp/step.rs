//! What one direction of a Megatron-LM mapping does ([`Step`]), along which
//! dimension ([`Dim`]): the vocabulary of the table on
//! [`Mapping`](super::Mapping), for code that runs the steps on memory of
//! its own (device tensors of a framework) rather than through
//! [`Mapping::forward`](super::Mapping::forward).

/// The dimension a [`Step`] splits or joins, in Megatron-LM's activation
/// layout `[sequence, batch, hidden]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dim {
    /// The first dimension: the sequence (sequence parallelism).
    First,
    /// The last dimension: the hidden one (tensor parallelism).
    Last,
}

impl Dim {
    /// The index of this dimension in an array of `ndim` dimensions;
    /// `None` when `ndim` is 0 (a scalar has no dimension to split or join).
    pub const fn index(self, ndim: usize) -> Option<usize> {
        match (self, ndim) {
            (_, 0) => None,
            (Dim::First, _) => Some(0),
            (Dim::Last, n) => Some(n - 1),
        }
    }

    /// This dimension as the `dim` argument of [`split`](super::split),
    /// [`all_gather`](super::all_gather) and
    /// [`reduce_scatter`](super::reduce_scatter) (negative counts from the
    /// end).
    pub(super) const fn signed(self) -> isize {
        match self {
            Dim::First => 0,
            Dim::Last => -1,
        }
    }
}

/// What one direction (the forward or the backward) of a
/// [`Mapping`](super::Mapping) does to a tensor; every rank of the group
/// takes the step with a tensor of the same shape. The ones that
/// communicate are collective over the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Step {
    /// The tensor as it is; no communication.
    Identity,
    /// The sum over the group, on every rank
    /// ([`all_reduce`](super::all_reduce)).
    AllReduce,
    /// This rank's slice along the dimension: slice `rank` of
    /// `world` equal slices ([`split`](super::split)); no communication.
    Split(Dim),
    /// Every rank's tensor, concatenated along the dimension in group-rank
    /// order ([`all_gather`](super::all_gather)).
    AllGather(Dim),
    /// The sum over the group, of which this rank keeps its slice along the
    /// dimension ([`reduce_scatter`](super::reduce_scatter)).
    ReduceScatter(Dim),
}
