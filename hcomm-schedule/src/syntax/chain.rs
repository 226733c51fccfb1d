//! Long flat chains of one associative operator (`a + b - c + ..`,
//! `a * b * ..`, `a && b && ..`), regrouped into a balanced tree.
//!
//! The parser reads a chain in a loop, but the tree it builds is as deep as
//! the chain is long, and every walker of expressions (lowering, name
//! resolution, evaluation, printing, the generated code) descends it by
//! recursion: a sum of 5000 terms would overflow their stacks. Regrouping
//! an associative chain leaves its value unchanged (`a - b - c` becomes
//! `a - (b + c)`: the same integer whenever no step overflows, and every
//! step is checked) and makes its depth logarithmic. Chains of at most
//! [`KEEP`] operators keep the tree as written, so messages quote them
//! unchanged.

use super::parse::Expr;
use crate::ir::BinOp;

/// Chains of at most this many operators are left as written.
pub(super) const KEEP: usize = 64;

/// The operators that regroup together: `+` with `-`, and each of `*`,
/// `&`, `|`, `^`, `&&`, `||` alone. `None` for the others (`/`, `%`, shifts,
/// comparisons), which always fold to the left.
fn family(op: BinOp) -> Option<BinOp> {
    match op {
        BinOp::Add | BinOp::Sub => Some(BinOp::Add),
        BinOp::Mul | BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::And | BinOp::Or => Some(op),
        _ => None,
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs),
    }
}

/// `first op₁ t₁ op₂ t₂ ..` with the meaning of the left fold: runs of more
/// than [`KEEP`] operators of one family are regrouped into a balanced tree
/// (operands stay in their order, so every node's span runs forwards).
pub(super) fn fold(first: Expr, rest: Vec<(BinOp, Expr)>) -> Expr {
    let mut acc = first;
    let mut rest = rest.into_iter().peekable();
    while let Some((op, e)) = rest.next() {
        let Some(fam) = family(op) else {
            acc = binary(op, acc, e);
            continue;
        };
        // the run of this family after `acc`: (subtracted, operand)
        let mut run = vec![(op == BinOp::Sub, e)];
        while let Some((op, e)) = rest.next_if(|(op, _)| family(*op) == Some(fam)) {
            run.push((op == BinOp::Sub, e));
        }
        acc = if run.len() > KEEP {
            balanced(fam, acc, run)
        } else {
            run.into_iter()
                .fold(acc, |acc, (sub, e)| binary(if sub { BinOp::Sub } else { fam }, acc, e))
        };
    }
    acc
}

/// How much deeper than its operands the tree [`fold`] builds from `rest`
/// is: one level per operator folded to the left, about log2 of the length
/// of a regrouped run.
pub(super) fn depth(rest: &[(BinOp, Expr)]) -> usize {
    let mut total = 0_usize;
    let mut i = 0;
    while let Some((op, _)) = rest.get(i) {
        let fam = family(*op);
        let len = match fam {
            None => 1,
            Some(f) => rest[i..].iter().take_while(|(op, _)| family(*op) == Some(f)).count(),
        };
        total += if len > KEEP {
            (usize::BITS - len.leading_zeros()) as usize
        } else {
            len
        };
        i += len;
    }
    total
}

/// Two neighbouring groups as one. A group is (whether its first operand is
/// subtracted, its expression with the signs of the others relative to the
/// first): `s·L` then `t·R` is `s·(L + R)` when `s = t` and `s·(L - R)`
/// otherwise.
fn pair(fam: BinOp, (s, l): (bool, Expr), (t, r): (bool, Expr)) -> (bool, Expr) {
    let op = if fam == BinOp::Add && s != t { BinOp::Sub } else { fam };
    (s, binary(op, l, r))
}

/// `first` and the run grouped in pairs, level by level (depth about
/// log2 of the run's length). `first` is added, so its group is the value.
fn balanced(fam: BinOp, first: Expr, mut run: Vec<(bool, Expr)>) -> Expr {
    let mut head = (false, first);
    while !run.is_empty() {
        let mut it = run.into_iter();
        if let Some(r) = it.next() {
            head = pair(fam, head, r);
        }
        let mut next = Vec::with_capacity(it.len().div_ceil(2));
        while let Some(l) = it.next() {
            next.push(match it.next() {
                Some(r) => pair(fam, l, r),
                None => l,
            });
        }
        run = next;
    }
    head.1
}
