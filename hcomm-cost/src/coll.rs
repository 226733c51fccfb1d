//! The collectives the model knows, which the built-in algorithms
//! ([`crate::Builtin`]) and the shared board's one-shot pattern
//! implement.

/// The collective a built-in algorithm implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coll {
    /// All-reduce.
    AllReduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter.
    ReduceScatter,
    /// All-to-all.
    AllToAll,
    /// Broadcast (root 0).
    Broadcast,
    /// Reduce (root 0).
    Reduce,
}
