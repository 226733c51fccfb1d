//! Ranges of length variables in `#[verify]` (`n in 0..`, `n in 1..=16`):
//! which entries name a length variable, and their constant bounds.
//!
//! The lowering cannot tell a bounded length range from a scalar range (it
//! does not know the length variables): it writes `LO..` as a
//! [`LenRange`] and `LO..HI` as a [`ScalarRange`]. Here every scalar range
//! whose name is a length variable becomes a [`LenRange`], and each one is
//! checked: a length variable, integer constant bounds, `LO >= 0`, a
//! non-empty range, one range per variable.

use super::{suggest, Resolver, UNRESOLVED};
use crate::diag::DiagKind;
use crate::eval;
use crate::ir::{Expr, ExprKind, LenRange, ScalarRange, Schedule};

/// The value of an integer constant expression (literals, operators,
/// functions; no name): a bound of a length variable's range.
pub(crate) fn constant(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Unary(op, a) => eval::unary(*op, constant(a)?).ok(),
        ExprKind::Binary(op, a, b) => eval::binary(*op, constant(a)?, constant(b)?).ok(),
        ExprKind::Call(f, args) => {
            let args: Option<Vec<i64>> = args.iter().map(constant).collect();
            eval::call(*f, &args?).ok()
        }
        ExprKind::Name(_) | ExprKind::Count(_) => None,
    }
}

/// The message and hint of a length range whose bound is not a constant.
pub(crate) fn not_constant(name: &str) -> (String, String) {
    (
        format!("the bounds of the range of length variable `{name}` in `#[verify]` must be integer constants"),
        format!("write e.g. `{name} in 1..=16` or `{name} in 0..`"),
    )
}

impl Resolver {
    /// Moves the scalar ranges of length variables to
    /// [`crate::ir::VerifySpec::lengths`] and resolves every length range.
    pub(super) fn len_ranges(&mut self, s: &mut Schedule) {
        let (lens, scalars): (Vec<ScalarRange>, Vec<ScalarRange>) = std::mem::take(&mut s.verify.scalars)
            .into_iter()
            .partition(|r| self.scalar(&r.name.name).is_none() && self.len_var(&r.name.name).is_some());
        s.verify.scalars = scalars;
        for r in lens {
            self.begin();
            let bounds = constant(&r.lo).zip(constant(&r.hi));
            let Some((lo, hi)) = bounds else {
                let (message, hint) = not_constant(&r.name.name);
                self.report(DiagKind::SyntaxError, r.span, message, Some(hint));
                continue;
            };
            s.verify.lengths.push(LenRange {
                var: UNRESOLVED,
                name: r.name,
                lo,
                hi: Some(if r.inclusive { hi } else { hi.saturating_sub(1) }),
                span: r.span,
            });
        }
        let mut seen = vec![false; self.len_vars.len()];
        let mut kept = Vec::with_capacity(s.verify.lengths.len());
        for mut r in std::mem::take(&mut s.verify.lengths) {
            self.begin();
            let name = r.name.name.clone();
            let Some(var) = self.len_var(&name) else {
                let message = if self.scalar(&name).is_some() {
                    format!("the range of scalar parameter `{name}` has no upper bound")
                } else {
                    format!("`{name}` is not a length variable; an open range `LO..` in `#[verify]` is for one")
                };
                let candidates: Vec<String> = self.len_vars.iter().map(|v| v.name.clone()).collect();
                let hint = suggest(&name, candidates.iter().map(String::as_str))
                    .map(super::did_you_mean)
                    .or_else(|| Some(format!("write `{name} in LO..HI` with both bounds")));
                self.report(DiagKind::SyntaxError, r.span, message, hint);
                continue;
            };
            let problem = if seen[var] {
                Some(format!("`{name}` has two ranges in `#[verify]`"))
            } else if r.lo < 0 {
                Some(format!(
                    "the range `{}` of length variable `{name}` starts below 0",
                    r.text()
                ))
            } else if r.hi.is_some_and(|hi| hi < r.lo) {
                Some(format!(
                    "the range `{}` of length variable `{name}` holds no value",
                    r.text()
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                self.report(
                    DiagKind::SyntaxError,
                    r.span,
                    problem,
                    Some(format!(
                        "a length variable takes one range of values >= 0, e.g. `{name} in 0..` or `{name} in 1..=16`"
                    )),
                );
                continue;
            }
            seen[var] = true;
            r.var = var;
            kept.push(r);
        }
        s.verify.lengths = kept;
    }

    /// The index of length variable `name`.
    fn len_var(&self, name: &str) -> Option<usize> {
        self.len_vars.iter().position(|v| v.name == name)
    }
}
