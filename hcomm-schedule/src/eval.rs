//! Exact integer semantics of schedule expressions.
//!
//! The checker evaluates on mathematical integers and reports any
//! intermediate result outside `i64` as an `evaluation error`; the run time
//! evaluates on `i64` and reports the same overflow as an error. Both use
//! these functions, so they agree by construction: every function is total
//! and returns [`EvalError`] instead of panicking or wrapping.

use std::fmt;

use crate::ir::{BinOp, Func, UnOp};

/// Why an expression has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// `/` or `%` by zero.
    DivisionByZero,
    /// `log2(x)` with `x < 1`.
    Log2NonPositive(i64),
    /// `ceil_log2(x)` with `x < 1`.
    CeilLog2NonPositive(i64),
    /// `pow2(k)` with `k < 0`.
    Pow2Negative(i64),
    /// `<<` or `>>` by a negative amount.
    NegativeShift(i64),
    /// A result outside `i64`.
    Overflow,
    /// Entry `index` of a line of `len` count entries (or the range
    /// `index..end`), outside it.
    CountIndex {
        /// The first index.
        index: i64,
        /// One past the last index, for a range.
        end: Option<i64>,
        /// The line's length.
        len: i64,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::DivisionByZero => f.write_str("division by zero"),
            EvalError::Log2NonPositive(x) => write!(f, "`log2` of {x}, which is not positive"),
            EvalError::CeilLog2NonPositive(x) => write!(f, "`ceil_log2` of {x}, which is not positive"),
            EvalError::Pow2Negative(k) => write!(f, "`pow2` of {k}, which is negative"),
            EvalError::NegativeShift(k) => write!(f, "shift by {k}, which is negative"),
            EvalError::Overflow => f.write_str("overflow past `i64`"),
            EvalError::CountIndex { index, end: None, len } => {
                write!(f, "count entry {index}, which is not in `0..{len}`")
            }
            EvalError::CountIndex {
                index,
                end: Some(end),
                len,
            } => write!(f, "the counts {index}..{end}, which are not inside `0..{len}`"),
        }
    }
}

impl std::error::Error for EvalError {}

/// `a / b` rounded toward negative infinity.
#[inline]
pub fn div_floor(a: i64, b: i64) -> Result<i64, EvalError> {
    // a positive divisor: flooring is the Euclidean quotient, which cannot
    // overflow
    if b > 0 {
        return Ok(a.div_euclid(b));
    }
    if b == 0 {
        return Err(EvalError::DivisionByZero);
    }
    let q = a.checked_div(b).ok_or(EvalError::Overflow)?;
    let r = a.checked_rem(b).ok_or(EvalError::Overflow)?;
    if r != 0 && ((r < 0) != (b < 0)) {
        q.checked_sub(1).ok_or(EvalError::Overflow)
    } else {
        Ok(q)
    }
}

/// `a % b`, Euclidean: the result is in `0..|b|`.
#[inline]
pub fn rem_euclid(a: i64, b: i64) -> Result<i64, EvalError> {
    // the idioms `(rank + k) % world` and `(rank - k) % world` stay within
    // one period: no division needed
    if b > 0 {
        if (0..b).contains(&a) {
            return Ok(a);
        }
        if a < 0 && a >= -b {
            return Ok(a + b);
        }
        return Ok(a.rem_euclid(b));
    }
    if b == 0 {
        return Err(EvalError::DivisionByZero);
    }
    // `i64::MIN.checked_rem_euclid(-1)` is `None` although the answer is 0.
    if b == -1 {
        return Ok(0);
    }
    a.checked_rem_euclid(b).ok_or(EvalError::Overflow)
}

/// `a << k` as `a * 2^k`, exact: an error when the product leaves `i64`
/// (`-1 << 63` is `i64::MIN`, `0 << k` is `0` for every `k >= 0`).
pub fn shl(a: i64, k: i64) -> Result<i64, EvalError> {
    if k < 0 {
        return Err(EvalError::NegativeShift(k));
    }
    if a == 0 {
        return Ok(0);
    }
    if k >= 64 {
        return Err(EvalError::Overflow);
    }
    // |a| <= 2^63 and k <= 63: the product fits in i128.
    i64::try_from(i128::from(a) << k).map_err(|_| EvalError::Overflow)
}

/// `a >> k` as `floor(a / 2^k)`.
pub fn shr(a: i64, k: i64) -> Result<i64, EvalError> {
    if k < 0 {
        return Err(EvalError::NegativeShift(k));
    }
    Ok(if k >= 63 {
        if a < 0 {
            -1
        } else {
            0
        }
    } else {
        a >> k
    })
}

/// `log2(x)`: floor of the base-2 logarithm, `x >= 1`.
pub fn log2(x: i64) -> Result<i64, EvalError> {
    if x < 1 {
        return Err(EvalError::Log2NonPositive(x));
    }
    Ok(i64::from(x.ilog2()))
}

/// `ceil_log2(x)`: the least `k >= 0` with `2^k >= x`, `x >= 1`. The
/// result is at most 63, so it never overflows; `x < 1` is an error.
pub fn ceil_log2(x: i64) -> Result<i64, EvalError> {
    if x < 1 {
        return Err(EvalError::CeilLog2NonPositive(x));
    }
    // x - 1 >= 0: its bit length is the answer (0 for x = 1)
    Ok(i64::from(64 - (x - 1).leading_zeros()))
}

/// `pow2(k)`: `2^k`, `k >= 0`.
pub fn pow2(k: i64) -> Result<i64, EvalError> {
    if k < 0 {
        return Err(EvalError::Pow2Negative(k));
    }
    if k >= 63 {
        return Err(EvalError::Overflow);
    }
    Ok(1_i64 << k)
}

/// `is_pow2(x)`: `1` when `x` is a positive power of two, else `0`.
pub fn is_pow2(x: i64) -> i64 {
    i64::from(x > 0 && (x & (x - 1)) == 0)
}

/// A unary operator.
pub fn unary(op: UnOp, x: i64) -> Result<i64, EvalError> {
    match op {
        UnOp::Neg => x.checked_neg().ok_or(EvalError::Overflow),
        UnOp::Not => Ok(i64::from(x == 0)),
    }
}

/// A binary operator on two evaluated operands. `&&` and `||` are given both
/// operands here; short-circuiting is the caller's job (see
/// [`short_circuit`]).
#[inline]
pub fn binary(op: BinOp, a: i64, b: i64) -> Result<i64, EvalError> {
    let ovf = EvalError::Overflow;
    match op {
        BinOp::Add => a.checked_add(b).ok_or(ovf),
        BinOp::Sub => a.checked_sub(b).ok_or(ovf),
        BinOp::Mul => a.checked_mul(b).ok_or(ovf),
        BinOp::Div => div_floor(a, b),
        BinOp::Rem => rem_euclid(a, b),
        BinOp::BitXor => Ok(a ^ b),
        BinOp::BitAnd => Ok(a & b),
        BinOp::BitOr => Ok(a | b),
        BinOp::Shl => shl(a, b),
        BinOp::Shr => shr(a, b),
        BinOp::Eq => Ok(i64::from(a == b)),
        BinOp::Ne => Ok(i64::from(a != b)),
        BinOp::Lt => Ok(i64::from(a < b)),
        BinOp::Le => Ok(i64::from(a <= b)),
        BinOp::Gt => Ok(i64::from(a > b)),
        BinOp::Ge => Ok(i64::from(a >= b)),
        BinOp::And => Ok(i64::from(a != 0 && b != 0)),
        BinOp::Or => Ok(i64::from(a != 0 || b != 0)),
    }
}

/// For `&&` and `||`: the result when the left operand alone decides it
/// (`0 && _` is `0`, `x || _` is `1` for `x != 0`), else `None`.
pub fn short_circuit(op: BinOp, a: i64) -> Option<i64> {
    match op {
        BinOp::And if a == 0 => Some(0),
        BinOp::Or if a != 0 => Some(1),
        _ => None,
    }
}

/// A built-in function; `args` must have [`Func::arity`] elements (missing
/// ones count as 0).
pub fn call(f: Func, args: &[i64]) -> Result<i64, EvalError> {
    let a = args.first().copied().unwrap_or(0);
    let b = args.get(1).copied().unwrap_or(0);
    match f {
        Func::Log2 => log2(a),
        Func::CeilLog2 => ceil_log2(a),
        Func::Pow2 => pow2(a),
        Func::IsPow2 => Ok(is_pow2(a)),
        Func::Min => Ok(a.min(b)),
        Func::Max => Ok(a.max(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_division() {
        assert_eq!(div_floor(7, 2), Ok(3));
        assert_eq!(div_floor(-7, 2), Ok(-4));
        assert_eq!(div_floor(7, -2), Ok(-4));
        assert_eq!(div_floor(-7, -2), Ok(3));
        assert_eq!(div_floor(-8, 2), Ok(-4));
        assert_eq!(div_floor(1, 0), Err(EvalError::DivisionByZero));
        assert_eq!(div_floor(i64::MIN, -1), Err(EvalError::Overflow));
    }

    #[test]
    fn euclidean_remainder() {
        assert_eq!(rem_euclid(-1, 4), Ok(3));
        assert_eq!(rem_euclid(-5, 4), Ok(3));
        assert_eq!(rem_euclid(5, 4), Ok(1));
        assert_eq!(rem_euclid(-1, -4), Ok(3));
        assert_eq!(rem_euclid(3, 0), Err(EvalError::DivisionByZero));
        assert_eq!(rem_euclid(i64::MIN, -1), Ok(0));
        // the ring idiom `(rank - 1) % world`
        assert_eq!(binary(BinOp::Rem, -1, 3), Ok(2));
    }

    #[test]
    fn overflow_is_an_error() {
        assert_eq!(binary(BinOp::Add, i64::MAX, 1), Err(EvalError::Overflow));
        assert_eq!(binary(BinOp::Mul, 1 << 32, 1 << 31), Err(EvalError::Overflow));
        assert_eq!(unary(UnOp::Neg, i64::MIN), Err(EvalError::Overflow));
        assert_eq!(shl(1, 63), Err(EvalError::Overflow));
        assert_eq!(shl(3, 62), Err(EvalError::Overflow));
        assert_eq!(shl(0, 100), Ok(0));
        assert_eq!(shl(-1, 62), Ok(-(1 << 62)));
        assert_eq!(shl(-1, 63), Ok(i64::MIN));
        assert_eq!(shl(-2, 62), Ok(i64::MIN));
        assert_eq!(shl(0, 64), Ok(0));
        assert_eq!(shl(1, 64), Err(EvalError::Overflow));
        assert_eq!(shl(-1, 64), Err(EvalError::Overflow));
        assert_eq!(pow2(63), Err(EvalError::Overflow));
        assert_eq!(pow2(62), Ok(1 << 62));
    }

    #[test]
    fn logs_and_powers() {
        assert_eq!(log2(0), Err(EvalError::Log2NonPositive(0)));
        assert_eq!(log2(-3), Err(EvalError::Log2NonPositive(-3)));
        assert_eq!(log2(1), Ok(0));
        assert_eq!(log2(7), Ok(2));
        assert_eq!(log2(8), Ok(3));
        assert_eq!(ceil_log2(0), Err(EvalError::CeilLog2NonPositive(0)));
        assert_eq!(ceil_log2(i64::MIN), Err(EvalError::CeilLog2NonPositive(i64::MIN)));
        assert_eq!(ceil_log2(1), Ok(0));
        assert_eq!(ceil_log2(2), Ok(1));
        assert_eq!(ceil_log2(3), Ok(2));
        assert_eq!(ceil_log2(8), Ok(3));
        assert_eq!(ceil_log2(9), Ok(4));
        assert_eq!(ceil_log2(1 << 62), Ok(62));
        assert_eq!(ceil_log2((1 << 62) + 1), Ok(63));
        assert_eq!(ceil_log2(i64::MAX), Ok(63));
        // the least k with 2^k >= x, against a serial search
        for x in 1..=1025_i64 {
            let k = (0..63).find(|&k| (1_i64 << k) >= x).unwrap();
            assert_eq!(ceil_log2(x), Ok(k), "ceil_log2({x})");
        }
        assert_eq!(call(Func::CeilLog2, &[5]), Ok(3));
        assert_eq!(pow2(-1), Err(EvalError::Pow2Negative(-1)));
        assert_eq!(is_pow2(0), 0);
        assert_eq!(is_pow2(1), 1);
        assert_eq!(is_pow2(6), 0);
        assert_eq!(is_pow2(64), 1);
        assert_eq!(is_pow2(i64::MIN), 0);
        assert_eq!(call(Func::Min, &[3, -2]), Ok(-2));
        assert_eq!(call(Func::Max, &[3, -2]), Ok(3));
    }

    #[test]
    fn shifts_and_logic() {
        assert_eq!(shr(-5, 1), Ok(-3));
        assert_eq!(shr(-5, 100), Ok(-1));
        assert_eq!(shr(5, 100), Ok(0));
        assert_eq!(shr(1, -1), Err(EvalError::NegativeShift(-1)));
        assert_eq!(binary(BinOp::BitXor, 6, 3), Ok(5));
        assert_eq!(unary(UnOp::Not, 0), Ok(1));
        assert_eq!(unary(UnOp::Not, 5), Ok(0));
        assert_eq!(short_circuit(BinOp::And, 0), Some(0));
        assert_eq!(short_circuit(BinOp::Or, 2), Some(1));
        assert_eq!(short_circuit(BinOp::Or, 0), None);
    }
}
