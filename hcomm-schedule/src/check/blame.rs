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
//!
//! Likewise for a hard-coded operator: when a wrong element was written
//! and the postcondition claims a reduction, each operator written as a
//! keyword in a statement (`accumulate`, `recv .. reduce`, a reducing
//! collective) that differs from the claimed one is tried, in source
//! order, replaced by it; the first whose variant passes is named.

use crate::ir::{BinOp, Collective, Expr, ExprKind, OpExpr, PostKind, Schedule, SpanId, Stmt, StmtKind};

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

/// The note for the first operator keyword of a statement that, replaced
/// by the operator the postcondition claims, makes `s` pass at `world`
/// (`passes` runs steps 1 to 7 on a variant).
pub(crate) fn operator(
    s: &Schedule,
    world: i64,
    scalars: &[i64],
    passes: &dyn Fn(&Schedule) -> bool,
) -> Option<(SpanId, String)> {
    if world > MAX_WORLD {
        return None;
    }
    let claimed = match &s.postcondition.as_ref()?.kind {
        PostKind::AllReduce { op, .. } | PostKind::ReduceScatter { op, .. } | PostKind::Reduce { op, .. } => {
            op.resolve(scalars)?
        }
        _ => return None,
    };
    let total = {
        let mut counted = s.body.clone();
        let mut k = 0;
        for_each_op(&mut counted, &mut |op, _| k += usize::from(*op != OpExpr::Lit(claimed)));
        k
    };
    for i in 0..total {
        let mut variant = s.clone();
        let mut k = 0;
        let mut found = None;
        for_each_op(&mut variant.body, &mut |op, span| {
            if let OpExpr::Lit(was) = *op {
                if was != claimed {
                    if k == i {
                        *op = OpExpr::Lit(claimed);
                        found = Some((span, was));
                    }
                    k += 1;
                }
            }
        });
        let Some((span, was)) = found else { continue };
        if passes(&variant) {
            let (was, claimed) = (was.as_str(), claimed.as_str());
            return Some((
                span,
                format!(
                    "this statement reduces with `{was}` where the postcondition claims `{claimed}`: with \
                     `{claimed}` here the schedule passes every check at world = {world}"
                ),
            ));
        }
    }
    None
}

/// Calls `f` on every operator keyword of a statement of `body`, in
/// source order, with the statement's span.
fn for_each_op(body: &mut [Stmt], f: &mut dyn FnMut(&mut OpExpr, SpanId)) {
    for st in body {
        let span = st.span;
        match &mut st.kind {
            StmtKind::Recv { reduce: Some(op), .. }
            | StmtKind::Irecv { reduce: Some(op), .. }
            | StmtKind::Accumulate { op, .. }
            | StmtKind::Collective {
                kind:
                    Collective::AllReduce { op, .. } | Collective::ReduceScatter { op, .. } | Collective::Reduce { op, .. },
                ..
            } if matches!(op, OpExpr::Lit(_)) => f(op, span),
            StmtKind::For { body, .. } | StmtKind::Batch { body, .. } => for_each_op(body, f),
            StmtKind::If { branches, else_body } => {
                for (_, b) in branches.iter_mut() {
                    for_each_op(b, f);
                }
                if let Some(b) = else_body.as_deref_mut() {
                    for_each_op(b, f);
                }
            }
            _ => {}
        }
    }
}
