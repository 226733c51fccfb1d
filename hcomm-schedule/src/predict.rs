//! What a checked schedule computes: every rank's parameter buffers at the
//! end, from the checker's own symbolic execution (the one the
//! postcondition is judged on).
//!
//! Each element of each parameter buffer starts as the symbol
//! [`Value::Initial`] `(rank, buffer, index)`; copies and messages move
//! symbols, reductions build [`Reduction`] nodes. [`Contents::evaluate`]
//! turns the result into concrete values for any choice of initial values,
//! so a test can fill real buffers with values that encode
//! `(rank, buffer, index)`, run the schedule, and compare.

use crate::check::{deadlock, matching, postcondition};
use crate::compile::compile;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{Op, Schedule};
use crate::unroll::unroll;
use crate::verify::check_world;

/// A symbolic element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// Element `index` of parameter `buffer` of rank `rank`, as it was at
    /// the start.
    Initial {
        /// The rank that held it.
        rank: u32,
        /// Index into [`Schedule::buffers`].
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

/// Checks `s` at `world` with `scalars` (as [`check_world`]) and, when it is
/// accepted, runs it symbolically with the length variables at `lengths`
/// (in the order of [`Schedule::len_vars`]). `Err` holds the checker's
/// diagnostics; `Ok(None)` means the run was too large to carry out (more
/// than 2^26 elements).
pub fn predict(
    s: &Schedule,
    world: i64,
    scalars: &[i64],
    lengths: &[i64],
) -> Result<Option<Contents>, Vec<Diagnostic>> {
    let diags = check_world(s, world, scalars);
    if !diags.is_empty() {
        return Err(diags);
    }
    if lengths.len() != s.len_vars.len() || lengths.iter().any(|&l| l < 1) {
        return Err(vec![Diagnostic::new(
            DiagKind::EvaluationError,
            s.span,
            format!(
                "`{}` has {} length variables, each at least 1; given {lengths:?}",
                s.name,
                s.len_vars.len()
            ),
        )]);
    }
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return Err(diags);
    }
    let mut un = unroll(&prog, world, scalars)?;
    let diags = matching::check(&mut un);
    if !diags.is_empty() {
        return Err(diags);
    }
    let order = deadlock::check(&un)?;
    Ok(postcondition::final_contents(&un, lengths, &order))
}
