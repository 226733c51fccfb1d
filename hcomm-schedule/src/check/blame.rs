//! Blame for a loop bound (language reference, section 8, "postcondition
//! violated"): when an output element of a failing postcondition was never
//! written, the `for` loop that, run one step longer, makes the schedule
//! pass every check at that world size is named at its bound.
//!
//! Each `for` of the schedule is tried in source order with its end moved
//! by one (`end + 1`; for a reversed loop, whose first value is the end's
//! predecessor, the start moved down by one); the first whose variant
//! passes steps 1 to 7 at the same world size and scalars is the one
//! reported. The variant is checked in full, so the note is a fact about
//! the schedule, never a guess: no loop is named when none passes.

use crate::ir::{BinOp, Expr, ExprKind, Schedule, SpanId, Stmt, StmtKind};

/// The worlds up to which the loops are tried (each try is a full check
/// at that size; above it the diagnostic keeps its other notes).
pub(crate) const MAX_WORLD: i64 = 1024;

/// The note for the first `for` whose one more step makes `s` pass at
/// `world` (`passes` runs steps 1 to 7 on a variant).
pub(crate) fn loop_bound(s: &Schedule, world: i64, passes: &dyn Fn(&Schedule) -> bool) -> Option<(SpanId, String)> {
    if world > MAX_WORLD {
        return None;
    }
    let total = count_loops(&s.body);
    for i in 0..total {
        let mut variant = s.clone();
        let (span, text, reverse) = lengthen(&mut variant.body, &mut { i })?;
        if passes(&variant) {
            let what = if reverse {
                "its start one lower"
            } else {
                "one more step"
            };
            return Some((
                span,
                format!(
                    "this bound stops the loop one step short: with {what} (`{text}`) the schedule passes every \
                     check at world = {world}"
                ),
            ));
        }
    }
    None
}

fn count_loops(body: &[Stmt]) -> usize {
    body.iter()
        .map(|st| match &st.kind {
            StmtKind::For { body, .. } => 1 + count_loops(body),
            StmtKind::Batch { body, .. } => count_loops(body),
            StmtKind::If { branches, else_body } => {
                branches.iter().map(|(_, b)| count_loops(b)).sum::<usize>()
                    + else_body.as_deref().map_or(0, count_loops)
            }
            _ => 0,
        })
        .sum()
}

/// Moves the bound of loop number `*k` (pre-order) of `body` by one step:
/// its span before the change, the new bound's text, and whether the loop
/// is reversed.
fn lengthen(body: &mut [Stmt], k: &mut usize) -> Option<(SpanId, String, bool)> {
    for st in body {
        match &mut st.kind {
            StmtKind::For {
                start,
                end,
                body,
                reverse,
                ..
            } => {
                if *k == 0 {
                    let bound = if *reverse { start } else { end };
                    let span = bound.span;
                    let op = if *reverse { BinOp::Sub } else { BinOp::Add };
                    let old = std::mem::replace(
                        bound,
                        Expr {
                            kind: ExprKind::Int(0),
                            span,
                        },
                    );
                    *bound = Expr {
                        kind: ExprKind::Binary(
                            op,
                            Box::new(old),
                            Box::new(Expr {
                                kind: ExprKind::Int(1),
                                span,
                            }),
                        ),
                        span,
                    };
                    return Some((span, bound.to_string(), *reverse));
                }
                *k -= 1;
                if let Some(found) = lengthen(body, k) {
                    return Some(found);
                }
            }
            StmtKind::Batch { body, .. } => {
                if let Some(found) = lengthen(body, k) {
                    return Some(found);
                }
            }
            StmtKind::If { branches, else_body } => {
                for (_, b) in branches.iter_mut() {
                    if let Some(found) = lengthen(b, k) {
                        return Some(found);
                    }
                }
                if let Some(b) = else_body.as_deref_mut() {
                    if let Some(found) = lengthen(b, k) {
                        return Some(found);
                    }
                }
            }
            _ => {}
        }
    }
    None
}
