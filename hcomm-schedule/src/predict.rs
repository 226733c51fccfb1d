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

pub use crate::contents::{Contents, Reduction, Value};

use crate::check::{deadlock, matching, postcondition};
use crate::compile::compile;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{LenRange, Schedule};
use crate::unroll::unroll;
use crate::verify::check_world;

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
    let ranges: Vec<(i64, Option<i64>)> = (0..s.len_vars.len()).map(|i| s.verify.len_range(i)).collect();
    let inside = |(&l, &(lo, hi)): (&i64, &(i64, Option<i64>))| l >= lo && hi.is_none_or(|hi| l <= hi);
    if lengths.len() != s.len_vars.len() || !lengths.iter().zip(&ranges).all(inside) {
        let each: Vec<String> = s
            .len_vars
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let range = s.verify.lengths.iter().find(|r| r.var == i);
                format!(
                    "`{}` in {}",
                    v.name,
                    range.map_or_else(|| "1..".to_owned(), LenRange::text)
                )
            })
            .collect();
        return Err(vec![Diagnostic::new(
            DiagKind::EvaluationError,
            s.span,
            format!(
                "`{}` has {} length variables ({}); given {lengths:?}",
                s.name,
                s.len_vars.len(),
                each.join(", ")
            ),
        )]);
    }
    // the checker's values `n' = n - LO + 1` (`crate::lin::LenVar`)
    let point: Vec<i64> = lengths.iter().zip(&ranges).map(|(&l, &(lo, _))| l - lo + 1).collect();
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
    Ok(postcondition::final_contents(&un, &point, &order))
}
