//! The symbolic contents of every rank's parameter buffers after a run:
//! what `predict` returns and the postcondition check judges.

use crate::ir::Op;

/// A symbolic element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// Element `index` of parameter `buffer` of rank `rank`, as it was at
    /// the start.
    Initial {
        /// The rank that held it.
        rank: u32,
        /// Index into [`crate::ir::Schedule::buffers`].
        buffer: u32,
        /// Element index.
        index: u32,
    },
    /// Scratch data that was never written.
    Uninit,
    /// Index into [`Contents::reductions`].
    Reduction(u32),
}

/// `a OP b`; both operands come before it in [`Contents::reductions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    /// The operator.
    pub op: Op,
    /// The element combined into.
    pub a: Value,
    /// The element combined with it.
    pub b: Value,
}

/// The final state of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contents {
    /// `buffers[rank][buffer][index]`: each parameter buffer of each rank at
    /// the end.
    pub buffers: Vec<Vec<Vec<Value>>>,
    /// The reductions [`Value::Reduction`] refers to.
    pub reductions: Vec<Reduction>,
}

impl Contents {
    /// The final buffers as concrete values: `initial(rank, buffer, index)`
    /// for each initial element and `combine(op, a, b)` for each reduction.
    /// `None` marks elements that depend on scratch data never written.
    pub fn evaluate<V: Copy>(
        &self,
        initial: impl Fn(u32, u32, u32) -> V,
        combine: impl Fn(Op, V, V) -> V,
    ) -> Vec<Vec<Vec<Option<V>>>> {
        let mut reduced: Vec<Option<V>> = Vec::with_capacity(self.reductions.len());
        let value = |v: &Value, reduced: &[Option<V>]| match *v {
            Value::Initial { rank, buffer, index } => Some(initial(rank, buffer, index)),
            Value::Uninit => None,
            Value::Reduction(i) => reduced.get(i as usize).copied().flatten(),
        };
        for r in &self.reductions {
            let v = match (value(&r.a, &reduced), value(&r.b, &reduced)) {
                (Some(a), Some(b)) => Some(combine(r.op, a, b)),
                _ => None,
            };
            reduced.push(v);
        }
        self.buffers
            .iter()
            .map(|rank| {
                rank.iter()
                    .map(|buf| buf.iter().map(|v| value(v, &reduced)).collect())
                    .collect()
            })
            .collect()
    }
}
