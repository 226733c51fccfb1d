//! Linear forms in the length variables: `c0 + c1 * n1 + c2 * n2 + ...`,
//! plus a term over the entries of count parameters ([`crate::counts`],
//! each entry `>= 0`).
//!
//! Region offsets and lengths are linear forms, so the checker can compare
//! them exactly for *every* value of the length variables. The variables
//! of the forms range over the integers `>= 1`: a length variable declared
//! `n in LO..` (or `LO..=HI`) is `n' + LO - 1` in them ([`LenVar`]), so
//! what holds for every `n' >= 1` holds for every `n >= LO`:
//!
//! * equality (matched lengths) is equality of coefficients;
//! * `f >= 0` for all `n >= 1` holds iff every coefficient of a variable is
//!   `>= 0` and `f(1, .., 1) >= 0`;
//! * `k` divides `f` for all `n` iff it divides every coefficient;
//! * overlap of two regions asks whether some `n >= 1` makes four forms
//!   positive: exact with one length variable (an interval of `n`), and
//!   with more by integer Fourier-Motzkin elimination (see
//!   [`positive_at`]).

use std::fmt;

use crate::counts;
use crate::eval::EvalError;

/// At most this many length variables per schedule (step 0 reports more).
pub(crate) const MAX_LEN_VARS: usize = 3;

/// `c[0] + c[1] * n_0 + c[2] * n_1 + c[3] * n_2 + k`, `k` an interned count
/// term ([`counts::NONE`] when there is none). A small `Copy` value: the
/// checker makes several per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lin {
    c: [i64; MAX_LEN_VARS + 1],
    k: u32,
}

impl Lin {
    /// A constant.
    pub(crate) const fn constant(v: i64) -> Self {
        let mut c = [0; MAX_LEN_VARS + 1];
        c[0] = v;
        Self { c, k: counts::NONE }
    }

    /// The count term `k` (an id of [`counts`]).
    pub(crate) fn count(k: u32) -> Self {
        Self {
            c: [0; MAX_LEN_VARS + 1],
            k,
        }
    }

    /// Whether it is a prefix sum of the line that `len` (a sum of count
    /// entries, nothing else) adds up: `0`, the first entry, the first
    /// two, ...
    pub(crate) fn prefix_of(&self, len: &Lin) -> bool {
        let pure = |l: &Lin| l.c.iter().all(|&x| x == 0);
        pure(self) && pure(len) && counts::is_prefix(len.k, self.k)
    }

    /// Whether no count entry occurs in it.
    pub(crate) fn count_free(&self) -> bool {
        self.k == counts::NONE
    }

    /// The length variable `index`, with coefficient 1 (an index past
    /// [`MAX_LEN_VARS`], which step 0 rejects, gives 0).
    pub(crate) fn var(index: usize) -> Self {
        let mut c = [0; MAX_LEN_VARS + 1];
        if index < MAX_LEN_VARS {
            c[index + 1] = 1;
        }
        Self { c, k: counts::NONE }
    }

    /// The constant term and one coefficient per length variable, when no
    /// count entry occurs in it.
    pub(crate) fn coefficients(&self) -> Option<[i64; MAX_LEN_VARS + 1]> {
        self.count_free().then_some(self.c)
    }

    /// The value when there are no length variables in it.
    #[inline]
    pub(crate) fn as_const(&self) -> Option<i64> {
        (self.k == counts::NONE && self.c[1..].iter().all(|&k| k == 0)).then_some(self.c[0])
    }

    #[inline]
    fn zip(&self, other: &Self, f: impl Fn(i64, i64) -> Option<i64>, k: u32) -> Result<Self, EvalError> {
        let mut c = [0; MAX_LEN_VARS + 1];
        for ((d, &a), &b) in c.iter_mut().zip(&self.c).zip(&other.c) {
            *d = f(a, b).ok_or(EvalError::Overflow)?;
        }
        Ok(Self { c, k })
    }

    /// `self + other`.
    #[inline]
    pub(crate) fn add(&self, other: &Self) -> Result<Self, EvalError> {
        let k = match (self.k, other.k) {
            (counts::NONE, k) | (k, counts::NONE) => k,
            (a, b) => counts::add(a, b).ok_or(EvalError::Overflow)?,
        };
        self.zip(other, i64::checked_add, k)
    }

    /// Whether `self == base + d` (exactly, without overflow), for a `d`
    /// without count terms. Cheaper than [`Lin::add`] and a comparison: the
    /// symmetry check asks it for every region of every rank.
    #[inline]
    pub(crate) fn is_moved(&self, base: &Self, d: &Self) -> bool {
        if self.k != base.k || d.k != counts::NONE {
            return false;
        }
        // exact in i128 (no overflow), and without `Option`s: the checker
        // also runs unoptimized, in the compiler
        let mut i = 0;
        while i <= MAX_LEN_VARS {
            if i128::from(base.c[i]) + i128::from(d.c[i]) != i128::from(self.c[i]) {
                return false;
            }
            i += 1;
        }
        true
    }

    /// `self - other`.
    #[inline]
    pub(crate) fn sub(&self, other: &Self) -> Result<Self, EvalError> {
        let k = match (self.k, other.k) {
            (k, counts::NONE) => k,
            (a, b) => counts::sub(a, b).ok_or(EvalError::Overflow)?,
        };
        self.zip(other, i64::checked_sub, k)
    }

    /// `self * k`.
    #[inline]
    pub(crate) fn scale(&self, k: i64) -> Result<Self, EvalError> {
        let mut c = [0; MAX_LEN_VARS + 1];
        for (d, &a) in c.iter_mut().zip(&self.c) {
            *d = a.checked_mul(k).ok_or(EvalError::Overflow)?;
        }
        let k = counts::scale(self.k, k).ok_or(EvalError::Overflow)?;
        Ok(Self { c, k })
    }

    /// `self / k` when `k` divides every coefficient.
    #[inline]
    pub(crate) fn div_exact(&self, k: i64) -> Option<Self> {
        if !self.divisible_by(k) {
            return None;
        }
        let mut c = [0; MAX_LEN_VARS + 1];
        for (d, &a) in c.iter_mut().zip(&self.c) {
            *d = a.checked_div(k)?;
        }
        Some(Self {
            c,
            k: counts::div_exact(self.k, k)?,
        })
    }

    /// The form with its count entries renamed by [`counts::rename`]: rank
    /// `by`'s image of a form of rank 0 in a rotation-symmetric schedule.
    pub(crate) fn renamed(&self, by: u64, world: u64) -> Option<Self> {
        Some(Self {
            c: self.c,
            k: counts::rename(self.k, by, world)?,
        })
    }

    /// Whether the form is one count entry and nothing else (`counts[i]`).
    pub(crate) fn is_one_entry(&self) -> bool {
        self.c.iter().all(|&x| x == 0) && counts::is_one_cell(self.k)
    }

    /// Whether `k` divides the form for every value of the variables.
    #[inline]
    pub(crate) fn divisible_by(&self, k: i64) -> bool {
        k != 0 && self.c.iter().all(|&x| x.checked_rem(k) == Some(0)) && counts::divisible_by(self.k, k)
    }

    /// The value at a point (`point[i]` is the value of variable `i`;
    /// missing ones count as 1). Count entries are 1, or sample `s` of
    /// [`counts::Values`] when `point[MAX_LEN_VARS] == s > 0`.
    pub(crate) fn eval_at(&self, point: &[i64]) -> Option<i64> {
        let mut v = i128::from(self.c[0]);
        for (i, &k) in self.c.iter().enumerate().skip(1) {
            let n = point.get(i - 1).copied().unwrap_or(1);
            v += i128::from(k) * i128::from(n);
        }
        if self.k != counts::NONE {
            let values = match point.get(MAX_LEN_VARS) {
                Some(&s) if s > 0 => counts::Values::Sample(s.unsigned_abs()),
                _ => counts::Values::Ones,
            };
            v += i128::from(counts::eval(self.k, values)?);
        }
        i64::try_from(v).ok()
    }

    /// Whether the form is `>= 0` for every value `>= 1` of the variables
    /// (and `>= 0` of the count entries).
    pub(crate) fn nonneg_always(&self) -> bool {
        if self.c[1..].iter().any(|&k| k < 0) || !counts::nonneg(self.k) {
            return false;
        }
        let at_one: i128 = self.c.iter().map(|&k| i128::from(k)).sum();
        at_one >= 0
    }

    /// `self <= other` for every value of the variables.
    #[inline]
    pub(crate) fn le_always(&self, other: &Self) -> bool {
        match (self.as_const(), other.as_const()) {
            (Some(a), Some(b)) => a <= b,
            _ => other.sub(self).is_ok_and(|d| d.nonneg_always()),
        }
    }

    /// The constant term of the form written in the variables `n = n' +
    /// shift` (the checker's forms are in `n'`): `c - Σ k * shift`.
    pub(crate) fn written_constant(&self, names: &[LenVar]) -> i128 {
        let moved: i128 = self
            .c
            .iter()
            .skip(1)
            .zip(names)
            .map(|(&k, v)| i128::from(k) * i128::from(v.shift))
            .sum();
        i128::from(self.c[0]) - moved
    }

    /// [`Lin::coefficients`] of the form written in the variables `n = n' +
    /// shift`: the constant term moved by [`Lin::written_constant`].
    pub(crate) fn written_coefficients(&self, names: &[LenVar]) -> Option<[i64; MAX_LEN_VARS + 1]> {
        let mut c = self.coefficients()?;
        c[0] = i64::try_from(self.written_constant(names)).ok()?;
        Some(c)
    }

    /// One past the highest variable index with a non-zero coefficient.
    fn width(&self) -> usize {
        (1..=MAX_LEN_VARS).rev().find(|&i| self.c[i] != 0).unwrap_or(0)
    }

    /// Renders the form with the variables' names.
    pub(crate) fn display<'a>(&'a self, names: &'a [LenVar]) -> LinDisplay<'a> {
        LinDisplay { lin: self, names }
    }
}

/// Whether some assignment of the length variables (each `>= 1`) makes every
/// form strictly positive, decided exactly (see [`positive_at`]).
pub(crate) fn exists_positive(forms: &[Lin]) -> bool {
    let width = forms.iter().map(Lin::width).max().unwrap_or(0);
    if width < 2 || forms.iter().any(|f| !f.count_free()) {
        return positive_at(forms).is_some();
    }
    // no witness needed: the elimination alone (not decided: "yes")
    feasible(forms, width).unwrap_or(true)
}

/// With count terms: whether `[a1, b1)` and `[a2, b2)` are disjoint for
/// every value, i.e. one ends before the other starts, or one is empty, for
/// every value (exact coefficient-wise).
fn disjoint_always(a1: &Lin, b1: &Lin, a2: &Lin, b2: &Lin) -> bool {
    b1.le_always(a2) || b2.le_always(a1) || b1.le_always(a1) || b2.le_always(a2)
}

/// A length variable as the checker sees it: its name, and the shift
/// `LO - 1` of its range `LO..` (or `LO..=HI`): the checker's variable is
/// `n' = n - shift >= 1`, so that every decision below, made for `n' >= 1`,
/// holds for `n >= LO` (reference, section 7, "For every length"). Forms
/// and points are shown in `n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LenVar {
    pub(crate) name: String,
    pub(crate) shift: i64,
    /// The number of values `HI - LO + 1` of a bounded range: `n'` runs over
    /// `1..=side`.
    pub(crate) side: Option<i64>,
}

impl LenVar {
    /// The variable `name` ranging over `lo..` or `lo..=hi`.
    pub(crate) fn new(name: &str, (lo, hi): (i64, Option<i64>)) -> Self {
        Self {
            name: name.to_owned(),
            shift: lo.saturating_sub(1),
            side: hi.map(|hi| hi.saturating_sub(lo).saturating_add(1)),
        }
    }

    /// The value of `n` at the checker's value `n'`.
    pub(crate) fn value(&self, checker: i64) -> i64 {
        checker.saturating_add(self.shift)
    }

    /// The checker's value of the least `n >= 1` of the range (`n = 0`
    /// when the range holds no other value).
    pub(crate) fn first_positive(&self) -> i64 {
        let lo = self.shift.saturating_add(1);
        let n = match self.side {
            Some(side) if lo < 1 && side < 2 - lo => lo,
            _ => lo.max(1),
        };
        n.saturating_sub(self.shift)
    }
}

impl fmt::Display for LenVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A point (value of each variable up to the highest one used) where every
/// form is strictly positive: with one variable, its smallest value; with
/// more, the first point found in a small box (empty when the forms are
/// positive somewhere, but only past that box).
///
/// Exact for every form: with one variable the forms bound an interval of
/// `n`; with more, integer Fourier-Motzkin elimination ([`feasible`]) says
/// whether a point exists. When it cannot decide (an elimination without
/// a unit coefficient, which the forms of real schedules do not produce)
/// the answer is "some point", so that a check built on it errs towards
/// reporting.
pub(crate) fn positive_at(forms: &[Lin]) -> Option<Vec<i64>> {
    if forms.iter().any(|f| !f.count_free()) {
        // some value of the counts may make them positive: no point named
        return Some(Vec::new());
    }
    let width = forms.iter().map(Lin::width).max().unwrap_or(0);
    match width {
        0 => forms.iter().all(|f| f.c[0] > 0).then(Vec::new),
        1 => {
            // n >= lo and n <= hi
            let mut lo: i128 = 1;
            let mut hi: i128 = i128::MAX;
            for f in forms {
                // the common cases need no division
                match (f.c[0], f.c[1]) {
                    (c, d) if c >= 1 && d >= 0 => continue,
                    (0, d) if d >= 1 => continue,
                    (c, d) if c <= 0 && d <= 0 => return None,
                    _ => {}
                }
                let c = i128::from(f.c[0]);
                let d = i128::from(f.c[1]);
                // c + d n >= 1  <=>  d n >= 1 - c
                let rhs = 1 - c;
                if d > 0 {
                    lo = lo.max(rhs.div_euclid(d) + i128::from(rhs.rem_euclid(d) != 0));
                } else if d < 0 {
                    // (-d) n <= c - 1
                    let m = -d;
                    hi = hi.min((c - 1).div_euclid(m));
                } else if c <= 0 {
                    return None;
                }
            }
            (lo <= hi).then(|| vec![i64::try_from(lo).unwrap_or(i64::MAX)])
        }
        w => match feasible(forms, w) {
            Some(false) => None,
            // the witness from the box, else none named (positive past it,
            // or not decided)
            Some(true) | None => box_point(forms, w).or_else(|| Some(Vec::new())),
        },
    }
}

/// The first point of the box `1..=side` per variable (side 64 with two
/// variables, 16 with three), by increasing sum, where every form is
/// positive.
fn box_point(forms: &[Lin], w: usize) -> Option<Vec<i64>> {
    let side: i64 = if w == 2 { 64 } else { 16 };
    let w = w.min(MAX_LEN_VARS);
    // every point with coordinates summing to `sum`, smallest sums first
    for sum in (w as i64)..=(side * w as i64) {
        let mut p = vec![1_i64; w];
        let mut found = None;
        visit_sum(&mut p, 0, sum, side, &mut |p| {
            if found.is_none() && forms.iter().all(|f| f.eval_at(p).is_some_and(|v| v > 0)) {
                found = Some(p.to_vec());
            }
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Calls `f` on every point with `p[i..]` in `1..=side` summing to `left`.
fn visit_sum(p: &mut Vec<i64>, i: usize, left: i64, side: i64, f: &mut dyn FnMut(&[i64])) {
    if i + 1 == p.len() {
        if (1..=side).contains(&left) {
            p[i] = left;
            f(p);
        }
        return;
    }
    let rest = (p.len() - i - 1) as i64;
    for v in 1..=side.min(left - rest) {
        p[i] = v;
        visit_sum(p, i + 1, left - v, side, f);
    }
}

/// A constraint `c[0] + c[1] * n_0 + c[2] * n_1 + c[3] * n_2 >= 0`.
type Row = [i128; MAX_LEN_VARS + 1];

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether some integer point with the first `w` variables `>= 1` makes
/// every form `>= 1`: `None` when not decided.
///
/// Fourier-Motzkin elimination over the integers (the Omega test's exact
/// case): each constraint is divided by the gcd of its variables'
/// coefficients, rounding its constant down (no integer point is lost); a
/// variable is eliminated by combining each lower bound `a x >= L` with
/// each upper bound `b x <= U` into `b L <= a U`, which is exact over the
/// integers when `a = 1` or `b = 1` for every pair (then `x = L` or
/// `x = floor(U / b)` is an integer witness). A variable bounded on one
/// side only drops out with its constraints. When no variable can be
/// eliminated exactly, one is eliminated over the rationals: a
/// contradiction still proves that no point exists, but a system that
/// survives is `None` (not decided).
fn feasible(forms: &[Lin], w: usize) -> Option<bool> {
    let mut rows: Vec<Row> = Vec::with_capacity(forms.len() + w);
    for f in forms {
        let mut r = [0_i128; MAX_LEN_VARS + 1];
        for (d, &c) in r.iter_mut().zip(&f.c) {
            *d = i128::from(c);
        }
        r[0] -= 1;
        rows.push(r);
    }
    for v in 1..=w.min(MAX_LEN_VARS) {
        let mut r = [0_i128; MAX_LEN_VARS + 1];
        r[0] = -1;
        r[v] = 1;
        rows.push(r);
    }
    // whether every elimination so far was exact over the integers
    let mut exact_all = true;
    // at most one elimination per variable
    for _ in 0..=MAX_LEN_VARS {
        let mut kept = Vec::with_capacity(rows.len());
        for mut r in rows {
            let g = r[1..].iter().fold(0, |g, &c| gcd(g, c));
            if g == 0 {
                if r[0] < 0 {
                    return Some(false);
                }
                continue;
            }
            if g > 1 {
                r[0] = r[0].div_euclid(g);
                for c in &mut r[1..] {
                    *c /= g;
                }
            }
            if !kept.contains(&r) {
                kept.push(r);
            }
        }
        rows = kept;
        if rows.is_empty() {
            return exact_all.then_some(true);
        }
        // a variable that is eliminated exactly, with the fewest pairs
        // (else the fewest pairs: the rational shadow still refutes)
        let mut best: Option<(usize, usize)> = None;
        let mut fallback: Option<(usize, usize)> = None;
        for v in 1..=MAX_LEN_VARS {
            let lows = rows.iter().filter(|r| r[v] > 0);
            let ups = rows.iter().filter(|r| r[v] < 0);
            let (nl, nu) = (lows.clone().count(), ups.clone().count());
            if nl + nu == 0 {
                continue;
            }
            let exact = lows.clone().all(|l| ups.clone().all(|u| l[v] == 1 || u[v] == -1));
            if exact && best.is_none_or(|(_, n)| nl * nu < n) {
                best = Some((v, nl * nu));
            }
            if fallback.is_none_or(|(_, n)| nl * nu < n) {
                fallback = Some((v, nl * nu));
            }
        }
        let (v, _) = if let Some(b) = best {
            b
        } else {
            exact_all = false;
            fallback?
        };
        let (with, mut rest): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| r[v] != 0);
        for l in with.iter().filter(|r| r[v] > 0) {
            for u in with.iter().filter(|r| r[v] < 0) {
                let (a, b) = (l[v], -u[v]);
                let mut r = [0_i128; MAX_LEN_VARS + 1];
                for (i, d) in r.iter_mut().enumerate() {
                    *d = b.checked_mul(l[i])?.checked_add(a.checked_mul(u[i])?)?;
                }
                rest.push(r);
            }
        }
        rows = rest;
    }
    None
}

/// "n = 1" / "n = 1, m = 2" for a point of [`positive_at`] (the checker's
/// values, shown as the values of the variables).
pub(crate) fn point_text(point: &[i64], names: &[LenVar]) -> String {
    let parts: Vec<String> = names
        .iter()
        .zip(point)
        .map(|(n, &v)| format!("{n} = {}", n.value(v)))
        .collect();
    parts.join(", ")
}

/// Whether a point of the checker's values is worth naming in a message:
/// some variable is not 1.
pub(crate) fn point_named(point: &[i64], names: &[LenVar]) -> bool {
    names.iter().zip(point).any(|(n, &v)| n.value(v) != 1)
}

/// When some value of the length variables breaks `lo <= hi` (for each
/// pair), the smallest such point with one variable; `None` when every
/// pair holds for every value.
pub(crate) fn first_violation(pairs: &[(&Lin, &Lin)]) -> Option<Vec<i64>> {
    pairs
        .iter()
        .filter_map(|(lo, hi)| {
            if !(lo.count_free() && hi.count_free()) {
                return (!lo.le_always(hi)).then(Vec::new);
            }
            // hi - lo < 0  <=>  lo - hi > 0
            let d = lo.sub(hi).ok()?;
            positive_at(&[d])
        })
        .min()
}

/// Whether `[a1, b1)` and `[a2, b2)` share an element for some value of the
/// length variables.
pub(crate) fn overlaps(a1: &Lin, b1: &Lin, a2: &Lin, b2: &Lin) -> bool {
    if let (Some(a1), Some(b1), Some(a2), Some(b2)) = (a1.as_const(), b1.as_const(), a2.as_const(), b2.as_const()) {
        return a1 < b1 && a2 < b2 && a1 < b2 && a2 < b1;
    }
    if [a1, b1, a2, b2].iter().any(|f| !f.count_free()) {
        return !disjoint_always(a1, b1, a2, b2);
    }
    let (Ok(l1), Ok(l2), Ok(x), Ok(y)) = (b1.sub(a1), b2.sub(a2), b2.sub(a1), b1.sub(a2)) else {
        return true;
    };
    exists_positive(&[l1, l2, x, y])
}

/// For regions that [`overlaps`] says share an element: a point where they
/// do, when they do not at every point (they are disjoint at large values
/// of the length variables), e.g. an overlap only when `n = 1`.
pub(crate) fn overlap_only_at(a1: &Lin, b1: &Lin, a2: &Lin, b2: &Lin) -> Option<Vec<i64>> {
    if [a1, b1, a2, b2].iter().any(|f| !f.count_free()) {
        return None;
    }
    let (Ok(l1), Ok(l2), Ok(x), Ok(y)) = (b1.sub(a1), b2.sub(a2), b2.sub(a1), b1.sub(a2)) else {
        return None;
    };
    let forms = [l1, l2, x, y];
    let width = forms.iter().map(Lin::width).max().unwrap_or(0);
    let large = vec![1 << 20; width];
    if width == 0 || forms.iter().all(|f| f.eval_at(&large).is_some_and(|v| v > 0)) {
        return None;
    }
    positive_at(&forms)
}

/// [`Lin::display`].
pub(crate) struct LinDisplay<'a> {
    lin: &'a Lin,
    names: &'a [LenVar],
}

impl fmt::Display for LinDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (i, &k) in self.lin.c.iter().enumerate().skip(1) {
            if k == 0 {
                continue;
            }
            let name = self.names.get(i - 1).map_or("?", |v| v.name.as_str());
            let mag = k.unsigned_abs();
            if first {
                if k < 0 {
                    f.write_str("-")?;
                }
            } else if k < 0 {
                f.write_str(" - ")?;
            } else {
                f.write_str(" + ")?;
            }
            if mag == 1 {
                f.write_str(name)?;
            } else {
                write!(f, "{mag} * {name}")?;
            }
            first = false;
        }
        counts::display(self.lin.k, f, &mut first)?;
        let c = self.lin.written_constant(self.names);
        if first {
            write!(f, "{c}")
        } else if c > 0 {
            write!(f, " + {c}")
        } else if c < 0 {
            write!(f, " - {}", c.unsigned_abs())
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lin(c: &[i64]) -> Lin {
        let mut a = [0; MAX_LEN_VARS + 1];
        a[..c.len()].copy_from_slice(c);
        Lin { c: a, k: counts::NONE }
    }

    #[test]
    fn canonical_equality_and_display() {
        let n = Lin::var(0);
        let two_n = n.add(&n).unwrap();
        assert_eq!(two_n, lin(&[0, 2]));
        assert_eq!(two_n.sub(&two_n).unwrap(), Lin::constant(0));
        let names = vec![LenVar::new("n", (1, None)), LenVar::new("m", (1, None))];
        assert_eq!(lin(&[3, 2]).display(&names).to_string(), "2 * n + 3");
        assert_eq!(lin(&[-3, -1, 1]).display(&names).to_string(), "-n + m - 3");
        assert_eq!(lin(&[0, 1]).display(&names).to_string(), "n");
        assert_eq!(lin(&[5]).display(&names).to_string(), "5");
    }

    #[test]
    fn always_facts() {
        assert!(lin(&[-1, 1]).nonneg_always()); // n - 1 >= 0
        assert!(!lin(&[-2, 1]).nonneg_always());
        assert!(!lin(&[100, -1]).nonneg_always());
        assert!(lin(&[0, 4]).divisible_by(4));
        assert!(!lin(&[2, 4]).divisible_by(4));
        assert_eq!(lin(&[0, 4]).div_exact(2), Some(lin(&[0, 2])));
        assert!(lin(&[0, 1]).le_always(&lin(&[0, 2])));
    }

    #[test]
    fn overlap_of_chunks() {
        let n = |k: i64| lin(&[0, k]);
        assert!(!overlaps(&n(0), &n(1), &n(1), &n(2)));
        assert!(overlaps(&n(0), &n(2), &n(1), &n(3)));
        // [0, 2) and [n, n + 1): overlap only for n = 1
        assert!(overlaps(&lin(&[0]), &lin(&[2]), &lin(&[0, 1]), &lin(&[1, 1])));
        // [0, 1) and [n, 2n): never
        assert!(!overlaps(&lin(&[0]), &lin(&[1]), &n(1), &n(2)));
        // empty regions never overlap
        assert!(!overlaps(&n(1), &n(1), &n(0), &n(2)));
        // two variables: [n, n + m) and [2n, 2n + m) overlap when m > n
        assert!(overlaps(
            &lin(&[0, 1]),
            &lin(&[0, 1, 1]),
            &lin(&[0, 2]),
            &lin(&[0, 2, 1])
        ));
        // [m, m + 1) and [n - 1, n) share an element when m = n - 1, which
        // none of the old sample points (all 1, all 2, one at 1024) hit
        let (m1, m2, n1, n2) = (lin(&[0, 0, 1]), lin(&[1, 0, 1]), lin(&[-1, 1]), lin(&[0, 1]));
        assert!(overlaps(&m1, &m2, &n1, &n2));
        assert_eq!(
            positive_at(&[
                m2.sub(&m1).unwrap(),
                n2.sub(&n1).unwrap(),
                n2.sub(&m1).unwrap(),
                m2.sub(&n1).unwrap()
            ]),
            Some(vec![2, 1])
        );
        // [2n, 2n + 1) and [2m + 1, 2m + 2): an even and an odd element, never
        assert!(!overlaps(
            &lin(&[0, 2]),
            &lin(&[1, 2]),
            &lin(&[1, 0, 2]),
            &lin(&[2, 0, 2])
        ));
        // [0, n) and [2m + 3n, 2m + 3n + 1): never, for any size
        assert!(!overlaps(&lin(&[0]), &lin(&[0, 1]), &lin(&[0, 3, 2]), &lin(&[1, 3, 2])));
        // only past the witness box: [1000, 1001) and [n + m, n + m + 1)
        assert!(overlaps(
            &lin(&[1000]),
            &lin(&[1001]),
            &lin(&[0, 1, 1]),
            &lin(&[1, 1, 1])
        ));
    }

    proptest::proptest! {
        /// With one variable, the witness points are the smallest values
        /// found by trying `n = 1, 2, ..` (the forms' sign changes before
        /// 64 with these coefficients).
        #[test]
        fn witnesses_agree_with_brute_force(
            a1 in -8_i64..8, k1 in -3_i64..4, b1 in -8_i64..8, l1 in -3_i64..4,
            a2 in -8_i64..8, k2 in -3_i64..4, b2 in -8_i64..8, l2 in -3_i64..4,
        ) {
            let (s1, e1, s2, e2) = (lin(&[a1, k1]), lin(&[b1, l1]), lin(&[a2, k2]), lin(&[b2, l2]));
            let at = |f: &Lin, n: i64| f.eval_at(&[n]).unwrap();
            let share = |n: i64| {
                let (x1, y1, x2, y2) = (at(&s1, n), at(&e1, n), at(&s2, n), at(&e2, n));
                x1 < y1 && x2 < y2 && x1 < y2 && x2 < y1
            };
            let first = (1..64).find(|&n| share(n));
            proptest::prop_assert_eq!(overlaps(&s1, &e1, &s2, &e2), first.is_some());
            let only = overlap_only_at(&s1, &e1, &s2, &e2);
            if let Some(p) = &only {
                proptest::prop_assert_eq!(Some(p[0]), first);
                proptest::prop_assert!(!share(1 << 20));
            } else if first.is_some() && s1.width() + e1.width() + s2.width() + e2.width() > 0 {
                proptest::prop_assert!(share(1 << 20));
            }
            // `lo <= hi` broken first at the smallest `n` where it fails
            let broken = (1..64).find(|&n| at(&s1, n) > at(&e1, n));
            let v = first_violation(&[(&s1, &e1)]).map(|p| p.first().copied().unwrap_or(1));
            proptest::prop_assert_eq!(v, broken);
        }

        /// A variable ranging from `lo` (0, 1 or 2) is `n' + lo - 1` in the
        /// checker's forms: overlaps and broken bounds over `n' >= 1` are
        /// those found by trying `n = lo, lo + 1, ..`, the first broken
        /// bound is named in `n`, and the forms display as written.
        #[test]
        fn shifted_variables_agree_with_brute_force(
            a1 in -8_i64..8, k1 in -3_i64..4, b1 in -8_i64..8, l1 in -3_i64..4,
            a2 in -8_i64..8, k2 in -3_i64..4, b2 in -8_i64..8, l2 in -3_i64..4,
            lo in 0_i64..3,
        ) {
            let var = LenVar::new("n", (lo, None));
            let names = [var.clone()];
            // `c + k n` with `n = n' + shift`
            let moved = |c: i64, k: i64| lin(&[c + k * var.shift, k]);
            let (s1, e1, s2, e2) = (moved(a1, k1), moved(b1, l1), moved(a2, k2), moved(b2, l2));
            let at = |c: i64, k: i64, n: i64| c + k * n;
            let share = |n: i64| {
                let (x1, y1, x2, y2) = (at(a1, k1, n), at(b1, l1, n), at(a2, k2, n), at(b2, l2, n));
                x1 < y1 && x2 < y2 && x1 < y2 && x2 < y1
            };
            proptest::prop_assert_eq!(overlaps(&s1, &e1, &s2, &e2), (lo..64).any(share));
            let broken = (lo..64).find(|&n| at(a1, k1, n) > at(b1, l1, n));
            let v = first_violation(&[(&s1, &e1)]).map(|p| var.value(p.first().copied().unwrap_or(1)));
            proptest::prop_assert_eq!(v, broken);
            proptest::prop_assert_eq!(
                s1.display(&names).to_string(),
                lin(&[a1, k1]).display(&[LenVar::new("n", (1, None))]).to_string()
            );
        }

        /// With two and three variables, the exact decision agrees with a
        /// search (the last variable solved exactly for each value of the
        /// others up to 40; the forms' crossings lie below that with these
        /// coefficients), and a named point is a true witness.
        #[test]
        fn several_variables_agree_with_brute_force(
            f in proptest::collection::vec((-6_i64..6, -2_i64..3, -2_i64..3, -1_i64..2), 4),
            three in proptest::bool::ANY,
        ) {
            let forms: Vec<Lin> = f
                .iter()
                .map(|&(c, a, b, d)| lin(&[c, a, b, if three { d } else { 0 }]))
                .collect();
            let w = forms.iter().map(Lin::width).max().unwrap_or(0);
            proptest::prop_assume!(w >= 2);
            // the forms in the last variable alone, the others fixed
            let last = |fixed: &[i64]| -> Vec<Lin> {
                forms
                    .iter()
                    .map(|g| {
                        let mut c = g.c[0];
                        for (i, &v) in fixed.iter().enumerate() {
                            c += g.c[i + 1] * v;
                        }
                        lin(&[c, g.c[w]])
                    })
                    .collect()
            };
            let side = 40;
            let mut any = false;
            for x in 1..=side {
                for y in 1..=(if w == 3 { side } else { 1 }) {
                    let fixed: &[i64] = if w == 3 { &[x, y] } else { &[x] };
                    any |= positive_at(&last(fixed)).is_some();
                }
            }
            let got = positive_at(&forms);
            proptest::prop_assert_eq!(got.is_some(), any);
            if let Some(p) = got.filter(|p| !p.is_empty()) {
                proptest::prop_assert!(forms.iter().all(|g| g.eval_at(&p).unwrap() > 0));
            }
        }
    }
}
