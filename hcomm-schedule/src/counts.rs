//! Count terms: the part of a linear form over the entries of count
//! parameters (`counts: &[usize; world]`, `sizes: &[[usize; world]; world]`).
//!
//! Every entry is a variable of its own (a *cell*) ranging over the integers
//! `>= 0`, so a form is `Σ k_c · c` over cells. Lengths over counts are sums
//! of consecutive entries (a prefix of a count vector, a row or a column of
//! a matrix), so a term is kept as sorted, disjoint *runs* of consecutive
//! cells with one coefficient each: `sum(counts[..r])` is one run whatever
//! the world size. Terms are interned per thread and named by a `u32`
//! ([`NONE`] is the empty term), which keeps [`crate::lin::Lin`] a small
//! `Copy` value and makes equality of terms equality of their ids.
//!
//! Facts "for every value of the counts" are exact and coefficient-wise:
//! a term is `>= 0` for all values iff every coefficient is, equal terms
//! have equal coefficients, and `k` divides a term for all values iff it
//! divides every coefficient.
//!
//! A cell is `(param << 40) | index`, where `index` is the entry of a vector
//! and `(row << 20) | column` for a matrix: a vector's entries and a matrix
//! row are consecutive cells, a column is one cell per row.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// The empty term.
pub(crate) const NONE: u32 = 0;

const PARAM_SHIFT: u32 = 40;
const ROW_SHIFT: u32 = 20;

/// The cell of entry `index` of vector parameter `param`.
pub(crate) fn vector_cell(param: u32, index: u64) -> u64 {
    (u64::from(param) << PARAM_SHIFT) | index
}

/// The cell of entry `[row][col]` of matrix parameter `param`.
pub(crate) fn matrix_cell(param: u32, row: u64, col: u64) -> u64 {
    (u64::from(param) << PARAM_SHIFT) | (row << ROW_SHIFT) | col
}

/// The largest world size whose cells the encoding holds.
pub(crate) const MAX_WORLD: i64 = 1 << ROW_SHIFT;

/// Cells `[lo, hi)`, each with coefficient `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Run {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    pub(crate) k: i64,
}

#[derive(Default)]
struct Table {
    terms: Vec<Rc<[Run]>>,
    ids: HashMap<Rc<[Run]>, u32>,
    /// [`line_part`]'s results: (parameter, line, from, to) → id.
    parts: HashMap<(u32, Line, u64, u64), u32>,
    /// For display: each count parameter's name and whether it is a matrix.
    params: Vec<(String, bool)>,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        terms: vec![Rc::from(Vec::new())],
        ..Table::default()
    });
}

/// Names the count parameters for [`display`] (the checker of one schedule
/// sets them before it unrolls).
pub(crate) fn set_params(params: Vec<(String, bool)>) {
    TABLE.with(|t| t.borrow_mut().params = params);
}

fn runs(id: u32) -> Rc<[Run]> {
    TABLE.with(|t| {
        t.borrow()
            .terms
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| Rc::from(Vec::new()))
    })
}

/// The id of canonical runs (sorted, disjoint, no zero coefficient, equal
/// neighbours merged).
fn intern(runs: Vec<Run>) -> u32 {
    if runs.is_empty() {
        return NONE;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if let Some(&id) = t.ids.get(&runs[..]) {
            return id;
        }
        let rc: Rc<[Run]> = Rc::from(runs);
        let id = t.terms.len() as u32;
        t.terms.push(rc.clone());
        t.ids.insert(rc, id);
        id
    })
}

/// Appends a run, merging it with the previous one when they touch with
/// the same coefficient.
fn push(out: &mut Vec<Run>, r: Run) {
    if r.k == 0 || r.lo >= r.hi {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.hi == r.lo && last.k == r.k {
            last.hi = r.hi;
            return;
        }
    }
    out.push(r);
}

/// The term of cells `cells` (each with coefficient 1).
#[cfg(test)]
fn of_cells(cells: impl IntoIterator<Item = u64>) -> u32 {
    let mut v: Vec<u64> = cells.into_iter().collect();
    v.sort_unstable();
    let mut out: Vec<Run> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut k = 1;
        let mut j = i + 1;
        while j < v.len() && v[j] == v[i] {
            k += 1;
            j += 1;
        }
        push(
            &mut out,
            Run {
                lo: v[i],
                hi: v[i] + 1,
                k,
            },
        );
        i = j;
    }
    intern(out)
}

/// `a * ka + b * kb`; `None` on overflow. One sweep over both sorted run
/// lists.
fn combine(a: u32, ka: i64, b: u32, kb: i64) -> Option<u32> {
    let (ra, rb) = (runs(a), runs(b));
    let mut cuts: Vec<u64> = Vec::with_capacity(2 * (ra.len() + rb.len()));
    let (mut i, mut j) = (0, 0);
    let bounds = |rs: &[Run], k: usize| rs.get(k / 2).map(|r| if k.is_multiple_of(2) { r.lo } else { r.hi });
    while let Some(c) = match (bounds(&ra, i), bounds(&rb, j)) {
        (Some(x), Some(y)) if x <= y => {
            i += 1;
            Some(x)
        }
        (_, Some(y)) => {
            j += 1;
            Some(y)
        }
        (Some(x), None) => {
            i += 1;
            Some(x)
        }
        (None, None) => None,
    } {
        if cuts.last() != Some(&c) {
            cuts.push(c);
        }
    }
    // the coefficient of each side on [cut, next cut)
    let (mut pa, mut pb) = (0, 0);
    let coeff = |rs: &[Run], p: &mut usize, at: u64| {
        while rs.get(*p).is_some_and(|r| r.hi <= at) {
            *p += 1;
        }
        rs.get(*p).filter(|r| r.lo <= at).map_or(0, |r| r.k)
    };
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        let (x, y) = (coeff(&ra, &mut pa, w[0]), coeff(&rb, &mut pb, w[0]));
        let k = x
            .checked_mul(ka)
            .zip(y.checked_mul(kb))
            .and_then(|(x, y)| x.checked_add(y))?;
        push(&mut out, Run { lo: w[0], hi: w[1], k });
    }
    Some(intern(out))
}

/// A line of a count parameter (see [`line_part`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Line {
    /// A count vector.
    Vector,
    /// Row `i` of a matrix.
    Row(u64),
    /// Column `j` of a matrix.
    Col(u64),
}

/// The sum of entries `from..to` of a line of parameter `param` (indices
/// below [`MAX_WORLD`]), memoized: a schedule names the same parts again
/// and again.
pub(crate) fn line_part(param: u32, line: Line, from: u64, to: u64) -> u32 {
    let key = (param, line, from, to);
    if let Some(id) = TABLE.with(|t| t.borrow().parts.get(&key).copied()) {
        return id;
    }
    let mut out = Vec::new();
    match line {
        Line::Vector => push(
            &mut out,
            Run {
                lo: vector_cell(param, from),
                hi: vector_cell(param, to),
                k: 1,
            },
        ),
        Line::Row(i) => push(
            &mut out,
            Run {
                lo: matrix_cell(param, i, from),
                hi: matrix_cell(param, i, to),
                k: 1,
            },
        ),
        Line::Col(j) => {
            for i in from..to {
                let c = matrix_cell(param, i, j);
                push(&mut out, Run { lo: c, hi: c + 1, k: 1 });
            }
        }
    }
    let id = intern(out);
    TABLE.with(|t| t.borrow_mut().parts.insert(key, id));
    id
}

/// `a + b`.
pub(crate) fn add(a: u32, b: u32) -> Option<u32> {
    match (a, b) {
        (NONE, x) | (x, NONE) => Some(x),
        _ => combine(a, 1, b, 1),
    }
}

/// `a - b`.
pub(crate) fn sub(a: u32, b: u32) -> Option<u32> {
    match (a, b) {
        (x, NONE) => Some(x),
        _ if a == b => Some(NONE),
        _ => combine(a, 1, b, -1),
    }
}

/// `a * k`.
pub(crate) fn scale(a: u32, k: i64) -> Option<u32> {
    match (a, k) {
        (NONE, _) | (_, 1) => Some(a),
        (_, 0) => Some(NONE),
        _ => combine(a, k, NONE, 0),
    }
}

/// `a / k` when `k` divides every coefficient.
pub(crate) fn div_exact(a: u32, k: i64) -> Option<u32> {
    if a == NONE || k == 1 {
        return Some(a);
    }
    let rs = runs(a);
    let mut out = Vec::with_capacity(rs.len());
    for r in rs.iter() {
        if r.k.checked_rem(k) != Some(0) {
            return None;
        }
        push(
            &mut out,
            Run {
                k: r.k.checked_div(k)?,
                ..*r
            },
        );
    }
    Some(intern(out))
}

/// Whether `k` divides the term for every value of the counts.
pub(crate) fn divisible_by(a: u32, k: i64) -> bool {
    k != 0 && runs(a).iter().all(|r| r.k.checked_rem(k) == Some(0))
}

/// Whether the term is `>= 0` for every value of the counts.
pub(crate) fn nonneg(a: u32) -> bool {
    runs(a).iter().all(|r| r.k >= 0)
}

/// Whether `bound` is a prefix sum of `line`: `line` is a sum of distinct
/// cells with coefficient 1 (in cell order: a vector, a row, a column),
/// and `bound` the sum of its first few. Decided on the runs (both are
/// canonical: touching runs of one coefficient are merged), so it costs
/// the number of runs, not of cells: the postcondition asks it for every
/// region of every rank.
pub(crate) fn is_prefix(line: u32, bound: u32) -> bool {
    let (l, b) = (runs(line), runs(bound));
    if l.iter().chain(b.iter()).any(|r| r.k != 1) || b.len() > l.len() {
        return false;
    }
    // every run of `bound` but the last is the line's run of that rank; the
    // last starts where the line's does and ends within it
    b.iter().zip(l.iter()).enumerate().all(|(i, (rb, rl))| {
        if i + 1 == b.len() {
            rb.lo == rl.lo && rb.hi <= rl.hi
        } else {
            rb == rl
        }
    })
}

/// The term with every cell of a count vector renamed from entry `i` to
/// entry `(i + by) mod world`: rank `by`'s view of a term of rank 0 in a
/// schedule that is the same on every rank up to a rotation of the ranks
/// (see `check::symmetry`). Cells are read as vector entries: the caller
/// renames terms over count vectors only. `None` on an entry past `world`.
pub(crate) fn rename(a: u32, by: u64, world: u64) -> Option<u32> {
    if a == NONE || by.is_multiple_of(world.max(1)) {
        return Some(a);
    }
    let by = by % world;
    let mut moved: Vec<Run> = Vec::new();
    for r in runs(a).iter() {
        let base = r.lo & !((1 << PARAM_SHIFT) - 1);
        let (lo, hi) = (r.lo - base, r.hi - base);
        if hi > world {
            return None;
        }
        // entries `lo..hi` land on `lo + by..hi + by`, past `world` wrapped
        // to the front: at most two runs
        let (a0, a1) = (lo + by, hi + by);
        let mut piece = |from: u64, to: u64| {
            if from < to {
                moved.push(Run {
                    lo: base + from,
                    hi: base + to,
                    k: r.k,
                });
            }
        };
        piece(a0.min(world), a1.min(world));
        piece(a0.max(world) - world, a1.max(world) - world);
    }
    moved.sort_unstable_by_key(|r| r.lo);
    let mut out = Vec::with_capacity(moved.len());
    for r in moved {
        push(&mut out, r);
    }
    Some(intern(out))
}

/// Whether the term is one count entry with coefficient 1 (`counts[i]`):
/// its prefix sums, 0 and itself, stay its prefix sums under [`rename`].
pub(crate) fn is_one_cell(a: u32) -> bool {
    matches!(&runs(a)[..], [r] if r.k == 1 && r.hi == r.lo + 1)
}

/// The values of the counts a symbolic run uses: every entry 1, or a
/// sample numbered from 1 whose entries vary between 0 and 3 (samples 1
/// and 2 of a vector are `3, 0, 1, 2, ..` and `2, 3, 0, 1, ..`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Values {
    /// Every entry 1.
    Ones,
    /// Sample `s` (`s >= 1`).
    Sample(u64),
}

impl Values {
    /// The value of `cell`.
    pub(crate) fn of(self, cell: u64) -> i64 {
        match self {
            Values::Ones => 1,
            Values::Sample(s) => {
                let low = cell & ((1 << PARAM_SHIFT) - 1);
                let (row, col) = (low >> ROW_SHIFT, low & ((1 << ROW_SHIFT) - 1));
                ((col + 3 * row + 3 * s + (cell >> PARAM_SHIFT)) % 4) as i64
            }
        }
    }
}

/// The value of a term with the counts at `values`.
pub(crate) fn eval(a: u32, values: Values) -> Option<i64> {
    let mut v: i128 = 0;
    for r in runs(a).iter() {
        let sum: i128 = match values {
            Values::Ones => i128::from(r.hi - r.lo),
            Values::Sample(_) => (r.lo..r.hi).map(|c| i128::from(values.of(c))).sum(),
        };
        v += i128::from(r.k) * sum;
    }
    i64::try_from(v).ok()
}

/// Writes the term with the count parameters' names (`counts[2]`,
/// `sum(counts[0..3])`, `sizes[1][0]`), each with its coefficient; `first`
/// says whether nothing was written before it.
pub(crate) fn display(a: u32, f: &mut fmt::Formatter<'_>, first: &mut bool) -> fmt::Result {
    let params = TABLE.with(|t| t.borrow().params.clone());
    for r in runs(a).iter() {
        let p = (r.lo >> PARAM_SHIFT) as usize;
        let (name, matrix) = params.get(p).map_or(("?", false), |(n, m)| (n.as_str(), *m));
        let low = |c: u64| c & ((1 << PARAM_SHIFT) - 1);
        let (lo, hi) = (low(r.lo), low(r.hi - 1) + 1);
        let text = match (matrix, hi - lo) {
            (false, 1) => format!("{name}[{lo}]"),
            (false, _) => format!("sum({name}[{lo}..{hi}])"),
            (true, 1) => format!("{name}[{}][{}]", lo >> ROW_SHIFT, lo & ((1 << ROW_SHIFT) - 1)),
            (true, _) => format!(
                "sum({name}[{}][{}..{}])",
                lo >> ROW_SHIFT,
                lo & ((1 << ROW_SHIFT) - 1),
                ((hi - 1) & ((1 << ROW_SHIFT) - 1)) + 1
            ),
        };
        let mag = r.k.unsigned_abs();
        match (*first, r.k < 0) {
            (true, true) => f.write_str("-")?,
            (true, false) => {}
            (false, true) => f.write_str(" - ")?,
            (false, false) => f.write_str(" + ")?,
        }
        if mag == 1 {
            f.write_str(&text)?;
        } else {
            write!(f, "{mag} * {text}")?;
        }
        *first = false;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(r: u64) -> u32 {
        line_part(0, Line::Vector, 0, r)
    }

    #[test]
    fn prefix_sums_are_one_run_and_compare_coefficient_wise() {
        let (p2, p3) = (prefix(2), prefix(3));
        assert_eq!(runs(p3).len(), 1);
        // sum(counts[..3]) - sum(counts[..2]) = counts[2]
        let c2 = sub(p3, p2).unwrap();
        assert_eq!(c2, of_cells([vector_cell(0, 2)]));
        assert!(nonneg(c2));
        assert!(!nonneg(sub(p2, p3).unwrap()));
        assert_eq!(add(p2, c2).unwrap(), p3);
        assert_eq!(sub(p3, p3).unwrap(), NONE);
        assert!(divisible_by(scale(p3, 4).unwrap(), 2));
        assert!(!divisible_by(p3, 2));
        assert_eq!(div_exact(scale(p3, 4).unwrap(), 4), Some(p3));
    }

    #[test]
    fn rows_and_columns_share_cells() {
        let w = 3;
        let row1 = line_part(1, Line::Row(1), 0, w);
        let col2 = line_part(1, Line::Col(2), 0, w);
        assert_eq!(col2, of_cells((0..w).map(|i| matrix_cell(1, i, 2))));
        // the part [1][2] of row 1 is the part [1] of column 2
        let cell = of_cells([matrix_cell(1, 1, 2)]);
        assert_eq!(line_part(1, Line::Row(1), 2, 3), cell);
        assert_eq!(line_part(1, Line::Col(2), 1, 2), cell);
        let both = add(row1, col2).unwrap();
        assert_eq!(runs(both).iter().filter(|r| r.k == 2).count(), 1);
        assert_eq!(eval(both, Values::Ones), Some(6));
    }

    proptest::proptest! {
        /// "For every value >= 0" decided coefficient-wise agrees with
        /// trying every value in 0..3 of every cell (a linear form is
        /// negative somewhere iff it is at a corner of that box).
        #[test]
        fn nonneg_and_equality_agree_with_brute_force(
            a in proptest::collection::vec(-2_i64..3, 4),
            b in proptest::collection::vec(-2_i64..3, 4),
        ) {
            let term = |k: &[i64]| -> u32 {
                let mut t = NONE;
                for (i, &c) in k.iter().enumerate() {
                    let one = of_cells([vector_cell(0, i as u64)]);
                    t = add(t, scale(one, c).unwrap()).unwrap();
                }
                t
            };
            let (ta, tb) = (term(&a), term(&b));
            let d = sub(ta, tb).unwrap();
            let value = |k: &[i64], x: &[i64]| k.iter().zip(x).map(|(c, v)| c * v).sum::<i64>();
            let mut always = true;
            for code in 0..81 {
                let x: Vec<i64> = (0..4).map(|i| (code / 3_i64.pow(i)) % 3).collect();
                always &= value(&a, &x) >= value(&b, &x);
            }
            proptest::prop_assert_eq!(nonneg(d), always);
            proptest::prop_assert_eq!(ta == tb, a == b);
        }
    }

    proptest::proptest! {
        /// Deciding prefixes on runs agrees with comparing the lists of
        /// cells.
        #[test]
        fn prefix_on_runs_agrees_with_cells(
            line in proptest::collection::btree_set(0_u64..12, 0..8),
            bound in proptest::collection::btree_set(0_u64..12, 0..8),
            take in 0_usize..9,
            twice in proptest::bool::ANY,
        ) {
            let line: Vec<u64> = line.into_iter().collect();
            let prefix: Vec<u64> = line.iter().copied().take(take).collect();
            let other: Vec<u64> = bound.into_iter().collect();
            let l = of_cells(line.iter().copied());
            let doubled = if twice { scale(l, 2).unwrap() } else { l };
            for cells in [&prefix, &other] {
                let b = of_cells(cells.iter().copied());
                // twice an empty line is the empty line
                let ones = !twice || line.is_empty();
                proptest::prop_assert_eq!(is_prefix(doubled, b), ones && line.starts_with(cells));
            }
        }
    }

    proptest::proptest! {
        /// Renaming agrees with moving each cell on its own, and renaming
        /// by `by` and then by `world - by` is the identity.
        #[test]
        fn rename_moves_each_cell(
            cells in proptest::collection::vec(0_u64..7, 0..10),
            by in 0_u64..9,
            k in -2_i64..3,
        ) {
            let world = 7;
            let a = scale(of_cells(cells.iter().map(|&c| vector_cell(1, c))), k).unwrap();
            let moved = scale(of_cells(cells.iter().map(|&c| vector_cell(1, (c + by) % world))), k).unwrap();
            let renamed = rename(a, by, world).unwrap();
            proptest::prop_assert_eq!(renamed, moved);
            proptest::prop_assert_eq!(rename(renamed, world - by % world, world), Some(a));
        }
    }

    #[test]
    fn rename_keeps_the_whole_line_and_single_cells() {
        let whole = prefix(5);
        assert_eq!(rename(whole, 3, 5), Some(whole));
        let c4 = of_cells([vector_cell(0, 4)]);
        assert!(is_one_cell(c4));
        assert_eq!(rename(c4, 2, 5), Some(of_cells([vector_cell(0, 1)])));
        assert!(is_one_cell(rename(c4, 2, 5).unwrap()));
        assert!(!is_one_cell(prefix(2)));
        assert!(!is_one_cell(scale(c4, 2).unwrap()));
        // an entry past the world size is not a vector of that world
        assert_eq!(rename(prefix(6), 1, 5), None);
    }

    #[test]
    fn samples_vary_and_include_zero() {
        let vals: Vec<i64> = (0..8).map(|i| Values::Sample(1).of(vector_cell(0, i))).collect();
        assert!(vals.contains(&0) && vals.iter().any(|&v| v > 1));
        assert_ne!(
            vals,
            (0..8)
                .map(|i| Values::Sample(2).of(vector_cell(0, i)))
                .collect::<Vec<_>>()
        );
        assert_eq!(eval(prefix(4), Values::Sample(1)), Some(vals[..4].iter().sum()));
    }
}
