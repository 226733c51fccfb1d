//! Step 7: the postcondition, by symbolic execution (language reference, section 7, check 7).
//!
//! Every element of every parameter buffer starts as a distinct symbol
//! `(rank, buffer, index)`; scratch buffers start as "uninitialized", a
//! symbol that may be read and moved but fails the check if it reaches an
//! output.
//! Reductions (`accumulate`, `recv .. reduce`, reducing collectives) build
//! multisets of symbols, kept as a count plus two 64-bit additive hash
//! fingerprints (and a tree used only to describe a wrong value), so
//! combining is O(1) and comparing with the expected reduction is exact up to
//! a 2^-128 collision chance. Lengths are linear, so the data flow is
//! checked at concrete values of the length variables that together
//! decide every value (see [`points`]).
//!
//! One symbol stands for a group of elements that share their history:
//! the lengths' common factor, or a run (see `check::runs`) when the
//! groups would pass [`MAX_ELEMENTS`].
//!
//! The run uses eager sends (a send snapshots its data when posted); the
//! schedule is already known to be free of deadlock under rendezvous, hence
//! under eager sends too, and free of hazards, so the data each receive gets
//! does not depend on the order chosen. The order is the one in which the
//! deadlock simulation completed the events, replayed without scheduling.

use std::fmt::Write as _;

use crate::cexpr::{eval_c, CExpr};
use crate::compile::{CPost, CollKind};
use crate::contents::{Contents, Reduction, Value};
use crate::counts;
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{Op, PostKind, SpanId, StmtKind};
use crate::lin::{Lin, MAX_LEN_VARS};
use crate::trace::{EvKind, Reg, Unrolled, NONE};

use super::runs::{self, Cuts};

/// The hint of a run past [`MAX_ELEMENTS`].
const LIMIT_HINT: &str = "check fewer or smaller world sizes in `#[verify(world in ..)]`; a size outside the set \
                          is checked when the schedule runs, and fails the same way";

/// Symbolic runs are skipped above this many elements in all (the run-time
/// checker would otherwise allocate without bound).
const MAX_ELEMENTS: usize = 1 << 26;

/// A symbolic element value (a small `Copy` value: reductions live in an
/// arena, [`Exec::reds`]).
#[derive(Clone, Copy, Debug)]
enum Val {
    /// Element `idx` of parameter `buf` of `rank`, as it was at the start.
    Init { rank: u32, buf: u32, idx: u32 },
    /// Scratch data never written.
    Undef,
    /// A reduction of several contributions: index into the run's arena.
    Red(u32),
    /// Reduction `red` turned by `by` ranks (only in the replay of rank 0
    /// alone, see `check::symmetry`): every contribution's rank moved by
    /// `by` and its index by `by` units of its buffer. Its fingerprints
    /// are not kept; [`Exec::compare_turned`] reads its contributions.
    Turned { red: u32, by: u32 },
}

#[derive(Debug)]
struct Red {
    op: Op,
    count: u64,
    h1: u64,
    h2: u64,
    undef: bool,
    /// Mixes two different reduction operators.
    mixed: Option<Op>,
    a: Val,
    b: Val,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn sym_hash(rank: u32, buf: u32, idx: u32) -> (u64, u64) {
    let x = mix(mix(mix(u64::from(idx)) ^ u64::from(buf)) ^ u64::from(rank));
    (mix(x ^ 0x5151_5151), mix(x ^ 0xA7A7_0000_A7A7))
}

/// (count, h1, h2, undef, mixed) of a value as a contribution to `op`.
fn contribution(reds: &[Red], v: &Val, op: Op) -> (u64, u64, u64, bool, Option<Op>) {
    match v {
        Val::Init { rank, buf, idx } => {
            let (h1, h2) = sym_hash(*rank, *buf, *idx);
            (1, h1, h2, false, None)
        }
        Val::Undef => (1, 0, 0, true, None),
        Val::Red(i) | Val::Turned { red: i, .. } => {
            let r = &reds[*i as usize];
            let mixed = if r.op == op { r.mixed } else { Some(r.op) };
            (r.count, r.h1, r.h2, r.undef, mixed)
        }
    }
}

fn combine(reds: &mut Vec<Red>, a: &Val, b: &Val, op: Op) -> Val {
    let (ca, a1, a2, ua, ma) = contribution(reds, a, op);
    let (cb, b1, b2, ub, mb) = contribution(reds, b, op);
    let id = reds.len() as u32;
    reds.push(Red {
        op,
        count: ca.saturating_add(cb),
        h1: a1.wrapping_add(b1),
        h2: a2.wrapping_add(b2),
        undef: ua || ub,
        mixed: ma.or(mb),
        a: *a,
        b: *b,
    });
    Val::Red(id)
}

/// What an output element should hold.
#[derive(Clone, Copy)]
enum Expected {
    Sym { rank: u32, buf: u32, idx: u32 },
    Red { op: Op, count: u64, h1: u64, h2: u64 },
}

fn matches(reds: &[Red], v: &Val, e: &Expected) -> bool {
    match (v, e) {
        (
            Val::Init { rank, buf, idx },
            Expected::Sym {
                rank: r2,
                buf: b2,
                idx: i2,
            },
        ) => rank == r2 && buf == b2 && idx == i2,
        (Val::Red(i), Expected::Red { op, count, h1, h2 }) => {
            let r = &reds[*i as usize];
            if r.op != *op || r.undef || r.mixed.is_some() {
                return false;
            }
            if r.count == *count && r.h1 == *h1 && r.h2 == *h2 {
                return true;
            }
            // `max` and `min` are idempotent: a contribution may arrive more
            // than once; the distinct contributions must be the expected ones
            matches!(op, Op::Max | Op::Min) && r.count > *count && distinct_sum(reds, *i) == (*count, *h1, *h2)
        }
        _ => false,
    }
}

/// (count, h1, h2) of the distinct symbols that reduction `i` combines.
fn distinct_sum(reds: &[Red], i: u32) -> (u64, u64, u64) {
    let mut seen_reds = rustc_hash::FxHashSet::default();
    let mut seen_syms = rustc_hash::FxHashSet::default();
    let mut stack = vec![Val::Red(i)];
    let (mut count, mut h1, mut h2) = (0_u64, 0_u64, 0_u64);
    while let Some(v) = stack.pop() {
        match v {
            Val::Red(j) => {
                if seen_reds.insert(j) {
                    let r = &reds[j as usize];
                    stack.push(r.a);
                    stack.push(r.b);
                }
            }
            Val::Init { rank, buf, idx } => {
                if seen_syms.insert((rank, buf, idx)) {
                    let (a, b) = sym_hash(rank, buf, idx);
                    count += 1;
                    h1 = h1.wrapping_add(a);
                    h2 = h2.wrapping_add(b);
                }
            }
            Val::Undef | Val::Turned { .. } => return (u64::MAX, 0, 0),
        }
    }
    (count, h1, h2)
}

/// The first wrong output element of a failing postcondition (read by the
/// drawing in `timeline`).
pub(crate) struct Wrong {
    pub(crate) rank: u32,
    /// "output block 2", as the message says.
    pub(crate) place: String,
    /// The statement that last wrote it, or [`NONE`].
    pub(crate) writer: u32,
}

/// Checks the postcondition: the step-7 diagnostics, with the wrong
/// element when one is found.
pub(crate) fn check_located(un: &Unrolled<'_, '_>, order: &[u32]) -> (Vec<Diagnostic>, Option<Wrong>) {
    let Some(post) = un.prog.post.as_ref() else {
        return (Vec::new(), None);
    };
    if let Some(d) = shapes(un, post) {
        return (vec![d], None);
    }
    let cut = counts_undecided(un, post);
    let mut points = match points(un) {
        Ok(p) => p,
        Err(d) => return (vec![d], None),
    };
    if cut.is_some() {
        // count entries at samples 1 and 2 (see `counts::Values`): a wrong
        // element there is the better message
        for sample in 1..=2 {
            // (inside a bounded range's box)
            let names = &un.prog.len_names;
            let mut p: Vec<i64> = (0..MAX_LEN_VARS)
                .map(|i| {
                    let v = i as i64 + 2;
                    names.get(i).and_then(|n| n.side).map_or(v, |side| v.min(side))
                })
                .collect();
            p.push(sample);
            points.push(p);
        }
    }
    for point in &points {
        match run_tracked(un, post, point, order, false) {
            Ok(None) => {}
            Ok(Some(_)) => {
                // again, tracking writers to name the statement at fault
                match run_tracked(un, post, point, order, true) {
                    Ok(Some((d, w))) => return (vec![d], Some(w)),
                    Ok(None) => {}
                    Err(no) => return (vec![not_run(un, post, point, &no)], None),
                }
            }
            Err(no) => return (vec![not_run(un, post, point, &no)], None),
        }
    }
    (cut.into_iter().collect(), None)
}

/// At most this many values of each length variable are run (the
/// crossing points of the forms decide how many are needed).
const MAX_POINTS: i64 = 64;

/// At most this many points in all are run over several length variables
/// (64 values of each of two; 16 of each of three).
const MAX_RUNS: i64 = 4096;

/// The values of the length variables the symbolic execution runs at (the
/// checker's values `n' = n - LO + 1`, see [`crate::lin::LenVar`]).
///
/// * None: one run.
/// * One variable `n` that scales every length and bound (no constant
///   terms as written): the least `n >= 1` of its range alone, since the
///   run at `n = k` is the run at `n = 1` with every element split in `k`,
///   and at `n = 0` every region is empty.
/// * Every variable bounded (`n in LO..=HI`): every point of the declared
///   box, exact by enumeration.
/// * Otherwise every point of the box `1..=K` in each variable, `K` from
///   [`covering_bound`], which decides every value, a bounded variable cut
///   at its last value; a side past [`MAX_POINTS`] or a box past
///   [`MAX_RUNS`] points is an error naming it (never a sample).
fn points(un: &Unrolled<'_, '_>) -> Result<Vec<Vec<i64>>, Diagnostic> {
    let names = &un.prog.len_names;
    let span = un.prog.post.as_ref().map_or(un.prog.s.span, |p| p.span);
    let sit = || crate::situation::Situation::plain(un.prog, un.world, &un.scalars);
    if names.len() == 1 && homogeneous(un) {
        // the least n >= 1 of the range (n = 1 for `0..` and `1..`)
        return Ok(vec![vec![names[0].first_positive()]]);
    }
    let points = vec![vec![1_i64; names.len()]];
    if names.is_empty() {
        return Ok(points);
    }
    let bounded = names.iter().all(|v| v.side.is_some());
    let widest = names.iter().filter_map(|v| v.side).max().unwrap_or(1);
    let last = if bounded { widest } else { covering_bound(un, widest) };
    let sides: Vec<i64> = names
        .iter()
        .map(|v| v.side.map_or(last, |s| s.min(last)).max(1))
        .collect();
    let runs = sides
        .iter()
        .try_fold(1_i64, |acc, &x| acc.checked_mul(x))
        .unwrap_or(i64::MAX);
    let longest = sides.iter().copied().max().unwrap_or(1);
    if longest > MAX_POINTS || runs > MAX_RUNS {
        let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let (what, limit) = if let [name] = names.as_slice() {
            (
                format!("`{name}` takes a run at each `{name}` up to {}", name.value(last)),
                format!("at most {MAX_POINTS}"),
            )
        } else {
            let listed = listed.join(" and ");
            let shape = if bounded {
                format!("of their declared box ({runs} points) over")
            } else {
                format!("up to {last} in each of")
            };
            (
                format!("the length variables takes a run at every point {shape} {listed}"),
                format!("at most {MAX_POINTS} values of each and {MAX_RUNS} points in all"),
            )
        };
        let first = &names[0].name;
        let hint = if bounded {
            format!("narrow the ranges of the length variables in `#[verify]`, e.g. `{first} in 1..=16`")
        } else if names.len() == 1 {
            format!(
                "bound it: `#[verify(.., {first} in 1..=16)]` runs every value of that range; or keep the constants \
                 in lengths and region bounds small next to the length variable's coefficients"
            )
        } else {
            let each: Vec<String> = names.iter().map(|n| format!("{n} in 1..=8")).collect();
            format!(
                "bound them: `#[verify(.., {})]` runs every point of that box; or keep the constants and \
                 coefficients in lengths and region bounds small",
                each.join(", ")
            )
        };
        return Err(Diagnostic::new(
            DiagKind::EvaluationError,
            span,
            format!(
                "{}, the postcondition is not decided: deciding every value of {what}, and the checker runs {limit}",
                sit()
            ),
        )
        .with_hint(hint));
    }
    let mut all = points;
    for _ in 0..runs - 1 {
        let mut next = all.last().cloned().unwrap_or_default();
        // the next point of the box, the first variable turning slowest
        for (x, &side) in next.iter_mut().zip(&sides).rev() {
            if *x < side {
                *x += 1;
                break;
            }
            *x = 1;
        }
        all.push(next);
    }
    Ok(all)
}

/// A bound `K` such that running every point of the box `1..=K` in each
/// of the `k` length variables decides every value (the reference,
/// section 7, "For every length").
///
/// An output element's final value comes through a chain of data moves
/// (copies, messages, collectives); for a fixed chain, the values at which
/// some element takes it and ends wrong form a union of sets
/// `{v >= 1 : G_j(v) >= 0}`, each `G_j` the difference of two forms:
/// region bounds and buffer lengths shifted by the chain's partial sum of
/// shifts (destination start minus source start), and the expected
/// layout's block bounds. With `C` the largest constant term of a bound or
/// length, `D` the sum of the constant terms of every move's shift (a bound
/// on any partial sum) and `E` the largest constant term of an expected
/// block bound (the world size times the block length's for `all_gather`
/// and `reduce_scatter`, the length's for `all_to_all` and `all_gather` in
/// place, the longer length's for a block-wise `shift`, 0 for the
/// element-wise postconditions), every `G_j` has a constant of at most
/// `B = 2 max(C + D, E) + 1`; with `C'`, `D'`, `E'` the same sums of the
/// largest coefficient of a variable instead, every coefficient is at most
/// `A = 2 max(C' + D', E')`. A non-empty such set has an integer point
/// with every value at most `k! A^(k-1) (B + 1)` (a vertex by Cramer's
/// rule, plus the fractional part of at most `k` extreme rays), and `K =
/// k! A^(k-1) (B + 2)`: for one variable, `2 max(C + D, E) + 3`.
///
/// A bounded variable `n' <= side` adds the constraint `side - n' >= 0`:
/// `B` is at least `least` (the widest such side), and the point found
/// satisfies the constraint, so it lies in the box cut at `side`.
fn covering_bound(un: &Unrolled<'_, '_>, least: i64) -> i64 {
    // (|constant term|, largest |coefficient| of a variable)
    let k = |l: &Lin| -> (i128, i128) {
        let Some(c) = l.coefficients() else {
            // count entries: their constant at every entry 1
            let v = l.eval_at(&[0; MAX_LEN_VARS]).unwrap_or(i64::MAX);
            return (i128::from(v.unsigned_abs().min(1 << 62)), 0);
        };
        let coef = c[1..].iter().map(|x| i128::from(x.unsigned_abs())).max().unwrap_or(0);
        (i128::from(c[0].unsigned_abs()), coef)
    };
    let far = (1_i128 << 62, 1_i128 << 62);
    let add = |acc: &mut (i128, i128), x: (i128, i128)| {
        acc.0 += x.0;
        acc.1 += x.1;
    };
    let mut c = (0_i128, 0_i128);
    let mut d = (0_i128, 0_i128);
    let w = i128::from(un.world);
    for_each_form(un, |l| {
        let x = k(l);
        c = (c.0.max(x.0), c.1.max(x.1));
    });
    for t in &un.ranks {
        for cp in &t.copies {
            add(&mut d, cp.dst.start.sub(&cp.src.start).map_or(far, |x| k(&x)));
        }
        for o in t.ops.iter().filter(|o| !o.send) {
            let (q, j) = o.partner;
            let sent = un.ranks.get(q as usize).and_then(|t| t.ops.get(j as usize));
            if let (Some(a), Some(b)) = (
                un.regs.get(o.reg as usize),
                sent.and_then(|x| un.regs.get(x.reg as usize)),
            ) {
                add(&mut d, a.start.sub(&b.start).map_or(far, |x| k(&x)));
            }
        }
        for cl in &t.colls {
            // where the data lands against where it was: the regions'
            // starts, and block j of a blocked collective j blocks on
            let (Some(src), dst) = (cl.src.as_ref(), cl.dst.as_ref()) else {
                continue;
            };
            let to = dst.unwrap_or(src);
            add(&mut d, to.start.sub(&src.start).map_or(far, |x| k(&x)));
            let (s, o) = (k(&src.len()), k(&to.len()));
            add(
                &mut d,
                match cl.kind {
                    CollKind::AllGather | CollKind::AllGatherV => (w * s.0, w * s.1),
                    CollKind::ReduceScatter => (w * o.0, w * o.1),
                    CollKind::AllToAll | CollKind::AllToAllV => (s.0 + o.0, s.1 + o.1),
                    _ => (0, 0),
                },
            );
        }
    }
    let mut e = (0_i128, 0_i128);
    if let (Some(post), Some(t0)) = (un.prog.post.as_ref(), un.ranks.first()) {
        // the expected blocks start at multiples of a block length
        let len = |b: u32| t0.bufs.get(b as usize).map_or((0, 0), |x| k(&x.len));
        let (i, o) = (len(post.input), len(post.output));
        e = match post.kind {
            PostKind::AllGather { .. } if post.input == post.output => o,
            PostKind::AllGather { .. } => (w * i.0, w * i.1),
            PostKind::ReduceScatter { .. } => (w * o.0, w * o.1),
            PostKind::AllToAll { .. } => o,
            // block bounds `j * len / K` of both sides
            PostKind::Shift { .. } if post.shift_blocks.is_some() => (o.0.max(i.0), o.1.max(i.1)),
            _ => (0, 0),
        };
    }
    let b = (2 * (c.0 + d.0).max(e.0) + 1).max(i128::from(least));
    let a = (2 * (c.1 + d.1).max(e.1)).max(1);
    let vars = un.prog.len_names.len().max(1);
    let mut bound = b + 2;
    for i in 2..=vars {
        // k! A^(k-1): one more factor i and A per variable
        bound = bound
            .saturating_mul(a)
            .saturating_mul(i128::try_from(i).unwrap_or(i128::MAX));
    }
    i64::try_from(bound.max(3)).unwrap_or(i64::MAX)
}

/// Where the data of send statement `stmt` came from: its region
/// expression (the statement's span for anything else).
fn sent_from(un: &Unrolled<'_, '_>, stmt: u32) -> SpanId {
    match un.prog.stmts.get(stmt as usize).map(|i| &i.stmt.kind) {
        Some(StmtKind::Send { region, .. } | StmtKind::Isend { region, .. }) => region.span,
        _ => un.span(stmt),
    }
}

/// Why a symbolic run was not carried out.
enum NoRun {
    /// It needs this many symbolic elements (more than [`MAX_ELEMENTS`]).
    TooLarge(usize),
    /// Cutting the buffers into runs (see `check::runs`) passed
    /// [`MAX_ELEMENTS`] runs.
    TooManyRuns,
    /// A length or region did not evaluate, or the replay stopped (steps
    /// 1-6 rule both out).
    Stopped,
}

/// The diagnostic for a postcondition the run at `point` could not decide.
fn not_run(un: &Unrolled<'_, '_>, post: &CPost<'_>, point: &[i64], why: &NoRun) -> Diagnostic {
    let mut sit = crate::situation::Situation::plain(un.prog, un.world, &un.scalars).to_string();
    if crate::lin::point_named(point, &un.prog.len_names) {
        let _ = write!(sit, ", {}", crate::lin::point_text(point, &un.prog.len_names));
    }
    match why {
        NoRun::TooLarge(need) => Diagnostic::new(
            DiagKind::EvaluationError,
            post.span,
            format!(
                "{sit}, the postcondition is not decided: its symbolic run needs {need} elements in all \
                 (every rank's buffers, after dividing out the lengths' common factor), \
                 more than the checker's limit of {MAX_ELEMENTS} (2^26)"
            ),
        )
        .with_hint(LIMIT_HINT),
        NoRun::TooManyRuns => Diagnostic::new(
            DiagKind::EvaluationError,
            post.span,
            format!(
                "{sit}, the postcondition is not decided: its symbolic run needs more than {MAX_ELEMENTS} (2^26) \
                 runs of elements in all (every rank's buffers, cut where the regions its statements move start \
                 and end), the checker's limit"
            ),
        )
        .with_hint(LIMIT_HINT),
        NoRun::Stopped => Diagnostic::new(
            DiagKind::EvaluationError,
            post.span,
            format!("{sit}, the postcondition is not decided: its symbolic run could not replay the schedule's events"),
        ),
    }
}

/// A postcondition over count parameters that the run with every entry 1
/// does not decide for every value of the counts (see [`first_cut`]):
/// the region that cuts a part, named.
fn counts_undecided(un: &Unrolled<'_, '_>, post: &CPost<'_>) -> Option<Diagnostic> {
    if !has_counts(un) {
        return None;
    }
    let (r, buf, start, end) = first_cut(un)?;
    let names = &un.prog.len_names;
    let t = un.ranks.get(r)?;
    let bname = t.bufs.get(buf as usize).map_or("?", |b| b.name.as_str());
    let sit = crate::situation::Situation::plain(un.prog, un.world, &un.scalars);
    Some(
        Diagnostic::new(
            DiagKind::EvaluationError,
            post.span,
            format!(
                "{sit}, the postcondition is not decided for every value of the counts: rank {r} uses \
                 `{bname}[{}..{}]`, which is not a run of whole parts of the counts that lay out `{bname}`",
                start.display(names),
                end.display(names)
            ),
        )
        .with_hint("move whole parts (`.part(counts, i)`, or bounds that are prefix sums of the buffer's line of counts); other regions over counts are checked for bounds and overlaps, but their data flow is not decided"),
    )
}

/// Whether some buffer's length has count entries.
fn has_counts(un: &Unrolled<'_, '_>) -> bool {
    un.ranks.iter().any(|t| t.bufs.iter().any(|b| !b.len.count_free()))
}

/// Whether the run with every count entry 1 decides every value of the
/// counts: every region of a buffer laid out by a line of counts is a union
/// of whole consecutive parts of that line (its bounds are prefix sums of
/// the buffer's length), and the other buffers' regions have no counts.
/// Each part then moves as one unit, so a run at other values is the run at
/// 1 with each element stretched to its entry. When it does not: the first
/// region that breaks it (rank, buffer, start, end).
fn first_cut(un: &Unrolled<'_, '_>) -> Option<(usize, u32, Lin, Lin)> {
    let fits = |t: &crate::trace::RankTrace, r: &Reg| {
        let Some(b) = t.bufs.get(r.buf as usize) else {
            return true;
        };
        if b.len.count_free() {
            r.start.count_free() && r.end.count_free()
        } else {
            r.start.prefix_of(&b.len) && r.end.prefix_of(&b.len)
        }
    };
    let zero = Lin::constant(0);
    // per interned region: the buffer length it was found to fit (a
    // buffer's length may differ between ranks), so that each is decided
    // once and not once per operation
    let mut fitted: Vec<Option<Lin>> = vec![None; un.regs.len()];
    for (i, t) in un.ranks.iter().enumerate() {
        for (k, b) in t.bufs.iter().enumerate() {
            if !(b.len.count_free() || zero.prefix_of(&b.len) && b.len.prefix_of(&b.len)) {
                return Some((i, k as u32, zero, b.len));
            }
        }
        for o in &t.ops {
            let Some(r) = un.regs.get(o.reg as usize) else {
                continue;
            };
            let len = t.bufs.get(r.buf as usize).map(|b| b.len);
            if len.is_some() && fitted.get(o.reg as usize) == Some(&len) {
                continue;
            }
            if !fits(t, r) {
                return Some((i, r.buf, r.start, r.end));
            }
            if let Some(slot) = fitted.get_mut(o.reg as usize) {
                *slot = len;
            }
        }
        let regs = t
            .copies
            .iter()
            .flat_map(|c| [&c.src, &c.dst])
            .chain(t.colls.iter().flat_map(|c| c.src.iter().chain(c.dst.iter())));
        for r in regs {
            if !fits(t, r) {
                return Some((i, r.buf, r.start, r.end));
            }
        }
    }
    None
}

/// The values of count parameter `p` at `point` (a matrix row-major).
fn count_values(un: &Unrolled<'_, '_>, point: &[i64], p: u32) -> Vec<usize> {
    let values = match point.get(MAX_LEN_VARS) {
        Some(&s) if s > 0 => counts::Values::Sample(s.unsigned_abs()),
        _ => counts::Values::Ones,
    };
    let w = u64::try_from(un.world).unwrap_or(0);
    let matrix = un.prog.s.counts.get(p as usize).is_some_and(|c| c.matrix);
    let cells: Vec<u64> = if matrix {
        (0..w * w).map(|i| counts::matrix_cell(p, i / w, i % w)).collect()
    } else {
        (0..w).map(|i| counts::vector_cell(p, i)).collect()
    };
    cells
        .into_iter()
        .map(|c| usize::try_from(values.of(c)).unwrap_or(0))
        .collect()
}

/// The ends of consecutive parts of the given lengths (prefix sums), for
/// [`part_at`].
fn part_ends(parts: impl Iterator<Item = usize>) -> Vec<usize> {
    parts
        .scan(0_usize, |end, n| {
            *end += n;
            Some(*end)
        })
        .collect()
}

/// Where element `e` of a buffer laid out by parts ending at `ends` lies:
/// (part, offset in it); a binary search, since the postcondition asks it
/// for every element of every rank.
fn part_at(ends: &[usize], e: usize) -> Option<(usize, usize)> {
    let j = ends.partition_point(|&end| end <= e);
    let start = if j == 0 { 0 } else { *ends.get(j - 1)? };
    ends.get(j).map(|_| (j, e - start))
}

/// Whether every length and region bound, as written, is a multiple of the
/// one length variable `n`. Then the run at `n = k` is the run at `n = 1`
/// with every element split into `k` (chunk and block boundaries scale with
/// `n`), so the second point adds nothing, and at `n = 0` every region is
/// empty.
fn homogeneous(un: &Unrolled<'_, '_>) -> bool {
    let mut all = true;
    for_each_form(un, |l| all &= l.written_constant(&un.prog.len_names) == 0);
    all
}

/// Calls `f` on every linear form of the schedule at this world size: the
/// interned regions' bounds, every buffer length, and the bounds of every
/// `copy`/`accumulate` and collective region.
fn for_each_form(un: &Unrolled<'_, '_>, mut f: impl FnMut(&Lin)) {
    for r in &un.regs {
        f(&r.start);
        f(&r.end);
    }
    for t in &un.ranks {
        for b in &t.bufs {
            f(&b.len);
        }
        let copies = t.copies.iter().flat_map(|c| [&c.src, &c.dst]);
        for r in copies.chain(t.colls.iter().flat_map(|c| c.src.iter().chain(c.dst.iter()))) {
            f(&r.start);
            f(&r.end);
        }
    }
}

/// The slots an attribute expression reads: `world` and the scalars
/// (`rank` 0).
fn attr_env(un: &Unrolled<'_, '_>) -> Vec<i64> {
    let mut env = vec![0_i64; un.prog.nslots];
    env[crate::compile::WORLD as usize] = un.world;
    for (i, v) in un.scalars.iter().enumerate() {
        if let Some(s) = env.get_mut(crate::compile::FIRST_SCALAR as usize + i) {
            *s = *v;
        }
    }
    env
}

/// For `shift(.., from = E)`: per rank, per output block (one block for
/// whole buffers), the rank and the input block it ends with; else what is
/// wrong, naming the rank (and the block).
struct Sources {
    /// Output blocks per rank (`KO`; 1 for whole buffers).
    out_parts: usize,
    /// Input blocks per rank (`KI`; 1 for whole buffers).
    in_parts: usize,
    /// `(from rank, input block)` of rank `r`'s output block `j` at
    /// `r * out_parts + j`.
    at: Vec<(u32, u32)>,
}

fn shift_sources(un: &Unrolled<'_, '_>, post: &CPost<'_>) -> Result<Sources, String> {
    let mut env = attr_env(un);
    let w = un.world;
    let value = |e: &CExpr, env: &[i64], what: &str| eval_c(e, env).map_err(|_| format!("{what} has no value"));
    let Some(b) = &post.shift_blocks else {
        let Some(from) = &post.root else {
            return Err("`shift` has no `from` rank".to_owned());
        };
        let at =
            (0..w)
                .map(|r| {
                    env[crate::compile::RANK as usize] = r;
                    let q = value(from, &env, &format!("at rank {r} the `from` rank of `shift`"))?;
                    u32::try_from(q).ok().filter(|_| q < w).map(|q| (q, 0)).ok_or_else(|| {
                        format!("at rank {r} the `from` rank of `shift` is {q}, which is not in `0..{w}`")
                    })
                })
                .collect::<Result<_, _>>()?;
        return Ok(Sources {
            out_parts: 1,
            in_parts: 1,
            at,
        });
    };
    let parts = |e: &CExpr, side: &str| {
        let k = value(e, &env, &format!("the number of {side} blocks of `shift`"))?;
        usize::try_from(k)
            .ok()
            .filter(|&k| k >= 1)
            .ok_or_else(|| format!("the {side} of `shift` has {k} blocks, which is not at least 1"))
    };
    let (out_parts, in_parts) = (parts(&b.out_parts, "output")?, parts(&b.in_parts, "input")?);
    let mut at = Vec::with_capacity(w as usize * out_parts);
    for r in 0..w {
        env[crate::compile::RANK as usize] = r;
        for j in 0..out_parts {
            env[b.slot as usize] = j as i64;
            let q = value(
                &b.from,
                &env,
                &format!("at rank {r}, block {j} the `from` rank of `shift`"),
            )?;
            let g = value(
                &b.block,
                &env,
                &format!("at rank {r}, block {j} the input block of `shift`"),
            )?;
            let Some(q) = u32::try_from(q).ok().filter(|_| q < w) else {
                return Err(format!(
                    "at rank {r}, block {j} the `from` rank of `shift` is {q}, which is not in `0..{w}`"
                ));
            };
            let Some(g) = u32::try_from(g).ok().filter(|&g| (g as usize) < in_parts) else {
                return Err(format!(
                    "at rank {r}, block {j} the input block of `shift` is {g}, which is not in `0..{in_parts}`"
                ));
            };
            at.push((q, g));
        }
    }
    Ok(Sources {
        out_parts,
        in_parts,
        at,
    })
}

/// The buffer lengths the postcondition needs, compared as linear forms.
fn shapes(un: &Unrolled<'_, '_>, post: &CPost<'_>) -> Option<Diagnostic> {
    let t0 = un.ranks.first()?;
    let names = &un.prog.len_names;
    let w = un.world;
    let li = &t0.bufs.get(post.input as usize)?.len;
    let lo = &t0.bufs.get(post.output as usize)?.len;
    let in_name = &t0.bufs[post.input as usize].name;
    let out_name = &t0.bufs[post.output as usize].name;
    let need = |l: &Lin, k: i64| l.scale(k).ok();
    let problem = match post.kind {
        PostKind::AllGather { .. } if post.input == post.output => (!lo.divisible_by(w)).then(|| {
            format!(
                "`all_gather` in place needs `{out_name}` ({} elements) divisible by {w}",
                lo.display(names)
            )
        }),
        PostKind::AllGather { .. } => (need(li, w).as_ref() != Some(lo)).then(|| {
            format!(
                "`{out_name}` has {} elements, but `all_gather` of `{in_name}` ({} elements) over {w} ranks needs {}",
                lo.display(names),
                li.display(names),
                need(li, w).unwrap_or(*li).display(names)
            )
        }),
        PostKind::ReduceScatter { .. } => (need(lo, w).as_ref() != Some(li)).then(|| {
            format!(
                "`{in_name}` has {} elements, but `reduce_scatter` into `{out_name}` ({} elements) over {w} ranks needs {}",
                li.display(names),
                lo.display(names),
                need(lo, w).unwrap_or(*lo).display(names)
            )
        }),
        PostKind::AllToAll { .. } => (li != lo || !li.divisible_by(w)).then(|| {
            format!(
                "`all_to_all` needs `{in_name}` ({} elements) and `{out_name}` ({} elements) of equal length divisible by {w}",
                li.display(names),
                lo.display(names)
            )
        }),
        PostKind::AllReduce { .. } | PostKind::Reduce { .. } => (li != lo).then(|| {
            format!(
                "`{in_name}` has {} elements but `{out_name}` has {}",
                li.display(names),
                lo.display(names)
            )
        }),
        PostKind::AllGatherV { .. } | PostKind::AllToAllV { .. } => {
            let kind = if matches!(post.kind, PostKind::AllGatherV { .. }) {
                CollKind::AllGatherV
            } else {
                CollKind::AllToAllV
            };
            let mut problem = None;
            for (r, t) in un.ranks.iter().enumerate() {
                let (want_in, want_out) = crate::check::matching::v_shapes(un, kind, post.counts, r as u32)?;
                let (li, lo) = (&t.bufs.get(post.input as usize)?.len, &t.bufs.get(post.output as usize)?.len);
                if *li != want_in || *lo != want_out {
                    problem = Some(format!(
                        "rank {r}'s `{in_name}` has {} elements and `{out_name}` {}, but `{}` over its counts needs {} and {}",
                        li.display(names),
                        lo.display(names),
                        kind.name(),
                        want_in.display(names),
                        want_out.display(names)
                    ));
                    break;
                }
            }
            problem
        }
        PostKind::Shift { .. } => match shift_sources(un, post) {
            Err(e) => Some(e),
            Ok(src) if src.out_parts == 1 && src.in_parts == 1 => (li != lo).then(|| {
                format!(
                    "`shift` needs `{in_name}` ({} elements) and `{out_name}` ({} elements) of equal length",
                    li.display(names),
                    lo.display(names)
                )
            }),
            Ok(src) => {
                // blocks of one length: `li / KI == lo / KO`
                let (ki, ko) = (src.in_parts as i64, src.out_parts as i64);
                let equal = li.scale(ko).ok().is_some_and(|a| lo.scale(ki).ok() == Some(a));
                (!equal || !li.divisible_by(ki) || !lo.divisible_by(ko)).then(|| {
                    format!(
                        "a block-wise `shift` needs `{in_name}` ({} elements) in {ki} blocks and `{out_name}` ({} elements) in {ko} blocks, all of one length",
                        li.display(names),
                        lo.display(names)
                    )
                })
            }
        },
        PostKind::Broadcast { .. } => None,
    }?;
    let sit = crate::situation::Situation::plain(un.prog, un.world, &un.scalars);
    Some(Diagnostic::new(
        DiagKind::PostconditionViolated,
        post.span,
        format!("{sit}, {problem}"),
    ))
}

struct Exec<'u, 'p, 's> {
    un: &'u Unrolled<'p, 's>,
    point: &'u [i64],
    /// Every buffer of every rank, one after the other (see `bufs`).
    data: Vec<Val>,
    /// (offset in `data`, length) of each buffer, rank by rank.
    bufs: Vec<(usize, usize)>,
    /// Per rank: its first entry of `bufs` (one more entry at the end).
    buf_first: Vec<u32>,
    /// Whether `writer` is kept (only to name the statement at fault).
    track: bool,
    /// Parallel to `data` when tracking, else empty.
    writer: Vec<u32>,
    /// Parallel to `data` when tracking: for an element a receive wrote, the
    /// send it came from (numbered as `sent` is), else [`NONE`].
    via: Vec<u32>,
    /// Per op (rank by rank, from `op_first`): offset of a send's snapshot
    /// in `arena`, or NONE.
    sent: Vec<u32>,
    /// Per rank: index of its first op in `sent`.
    op_first: Vec<u32>,
    arena: Vec<Val>,
    /// The reductions built so far ([`Val::Red`] indexes it).
    reds: Vec<Red>,
    tmp: Vec<Val>,
    /// [`Unrolled::regs`] evaluated at `point`: (buffer, start, end).
    op_ranges: Vec<Option<(usize, usize, usize)>>,
    /// Per rank: its next event.
    pc: Vec<u32>,
    /// For the replay of rank 0 alone (see `check::symmetry`): per buffer,
    /// (length, shift per rank); a message from `q` is then rank 0's own
    /// snapshot of the partner's index, turned by `q`.
    turn: Option<Vec<(usize, usize)>>,
    /// How many elements one symbolic element stands for (see [`grain`]);
    /// 1 with `cuts`.
    grain: usize,
    /// When set, symbol `k` of the buffer in slot `s` (see `bufs`) stands
    /// for elements `cuts[s][k]..cuts[s][k + 1]` (see `check::runs`), and
    /// the symbols of a parameter buffer are named by the element offset
    /// where they start.
    cuts: Option<Cuts>,
}

/// Aborts a run that cannot be carried out; the postcondition is then
/// reported as not decided.
enum Skip {
    /// The messages in flight need this many elements (more than
    /// [`MAX_ELEMENTS`]).
    TooLarge(usize),
    /// A region that does not evaluate, or an event out of turn (never
    /// expected after steps 1-6).
    Stopped,
}

/// Runs at one point: the first wrong output element, if any; `track`
/// keeps the writer of each element, to name the statement at fault.
/// Scratch data no statement wrote is a symbol of its own: reading it is
/// fine, but it reaching an output is wrong.
fn run_tracked(
    un: &Unrolled<'_, '_>,
    post: &CPost<'_>,
    point: &[i64],
    order: &[u32],
    track: bool,
) -> Result<Option<(Diagnostic, Wrong)>, NoRun> {
    let (ex, complete) = replayed(un, point, order, track, None)?;
    if !complete {
        return Err(NoRun::Stopped);
    }
    Ok(ex.compare(post))
}

/// The final contents of every rank's parameter buffers at `point` (see
/// `predict`); `None` when the run is skipped.
pub(crate) fn final_contents(un: &Unrolled<'_, '_>, point: &[i64], order: &[u32]) -> Option<Contents> {
    // element by element: the caller reads every index
    let (ex, complete) = replayed_in(un, point, order, false, None, 1, None).ok()?;
    if !complete {
        return None;
    }
    let value = |v: &Val| match *v {
        Val::Init { rank, buf, idx } => Value::Initial {
            rank,
            buffer: buf,
            index: idx,
        },
        Val::Undef => Value::Uninit,
        Val::Red(i) | Val::Turned { red: i, .. } => Value::Reduction(i),
    };
    let reductions = ex
        .reds
        .iter()
        .map(|r| Reduction {
            op: r.op,
            a: value(&r.a),
            b: value(&r.b),
        })
        .collect();
    let buffers = (0..un.ranks.len() as u32)
        .map(|r| {
            let t = &un.ranks[r as usize];
            (0..t.bufs.len())
                .filter(|&b| t.bufs[b].param.is_some())
                .map(|b| ex.buf_slice(r, b).unwrap_or(&[]).iter().map(value).collect())
                .collect()
        })
        .collect();
    Some(Contents { buffers, reductions })
}

/// Builds the symbolic state at `point` and replays `order` on it, with
/// whether the replay ran to the end, one symbolic element standing for
/// [`grain`] elements.
fn replayed<'u, 'p, 's>(
    un: &'u Unrolled<'p, 's>,
    point: &'u [i64],
    order: &[u32],
    track: bool,
    turn: Option<Vec<(usize, usize)>>,
) -> Result<(Exec<'u, 'p, 's>, bool), NoRun> {
    let g = grain(un, point, turn.as_deref());
    let rotated = turn.is_some();
    let turn = turn.map(|t| t.into_iter().map(|(l, u)| (l / g, u / g)).collect());
    match replayed_in(un, point, order, track, turn, g, None) {
        // too many groups of `g` elements: one symbol per run instead
        Err(NoRun::TooLarge(_)) if !rotated && !has_counts(un) => match runs::cuts(un, point, MAX_ELEMENTS) {
            Some(Ok(cuts)) => replayed_in(un, point, order, track, None, 1, Some(cuts)),
            Some(Err(_)) => Err(NoRun::TooManyRuns),
            None => replayed_in(un, point, order, track, None, g, None),
        },
        other => other,
    }
}

/// The largest common factor of every buffer length, region bound and
/// block length at `point` (and of the rotation's lengths and shifts): the
/// run then moves groups of that many consecutive elements as one, and
/// each group's elements have the same history, so a run with one symbol
/// per group decides the elements' (the expected values of the
/// postconditions are laid out in blocks that are multiples of it too).
/// 1 with count parameters (their entries are not known to share it).
fn grain(un: &Unrolled<'_, '_>, point: &[i64], turn: Option<&[(usize, usize)]>) -> usize {
    if has_counts(un) {
        return 1;
    }
    let mut g: u64 = 0;
    for_each_form(un, |l| g = gcd(g, l.eval_at(point).map_or(1, i64::unsigned_abs)));
    // a block of `len` elements split among `m`: its part, when whole
    let part = |len: i64, m: i64| {
        if m > 0 && len % m == 0 {
            (len / m).unsigned_abs()
        } else {
            1
        }
    };
    for t in &un.ranks {
        for c in &t.colls {
            // the blocks of `reduce_scatter` and `all_to_all`
            if matches!(c.kind, CollKind::ReduceScatter | CollKind::AllToAll) {
                let members = un.groups.get(c.group as usize).map_or(1, Vec::len);
                let len = c.src.as_ref().and_then(|r| r.len().eval_at(point)).unwrap_or(1);
                g = gcd(g, part(len, i64::try_from(members.max(1)).unwrap_or(1)));
            }
        }
    }
    if let (Some(post), Some(t0)) = (un.prog.post.as_ref(), un.ranks.first()) {
        // blocks of a world-th of the output: `all_to_all`, `all_gather` in place
        let blocked_out = match post.kind {
            PostKind::AllToAll { .. } => true,
            PostKind::AllGather { .. } => post.input == post.output,
            _ => false,
        };
        if blocked_out {
            let len = t0
                .bufs
                .get(post.output as usize)
                .and_then(|b| b.len.eval_at(point))
                .unwrap_or(1);
            g = gcd(g, part(len, un.world));
        }
        // the blocks of a block-wise `shift`
        let blockwise = matches!(post.kind, PostKind::Shift { .. }) && post.shift_blocks.is_some();
        if let Some(src) = blockwise
            .then(|| shift_sources(un, post).ok())
            .flatten()
            .map(|s| (s.out_parts, s.in_parts))
        {
            for (b, k) in [(post.output, src.0), (post.input, src.1)] {
                let len = t0.bufs.get(b as usize).and_then(|x| x.len.eval_at(point)).unwrap_or(1);
                g = gcd(g, part(len, i64::try_from(k).unwrap_or(1)));
            }
        }
    }
    for &(l, u) in turn.unwrap_or(&[]) {
        g = gcd(g, l as u64);
        g = gcd(g, u as u64);
    }
    usize::try_from(g.max(1)).unwrap_or(1)
}

fn gcd(a: u64, b: u64) -> u64 {
    let (mut a, mut b) = (a, b);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// [`replayed`] with one symbol per `g` elements (`turn` already divided),
/// or per run of `cuts` (then `g` is 1).
fn replayed_in<'u, 'p, 's>(
    un: &'u Unrolled<'p, 's>,
    point: &'u [i64],
    order: &[u32],
    track: bool,
    turn: Option<Vec<(usize, usize)>>,
    g: usize,
    cuts: Option<Cuts>,
) -> Result<(Exec<'u, 'p, 's>, bool), NoRun> {
    let at = |l: &Lin| -> Result<usize, NoRun> {
        let v = usize::try_from(l.eval_at(point).ok_or(NoRun::Stopped)?).map_err(|_| NoRun::Stopped)?;
        if v % g == 0 {
            Ok(v / g)
        } else {
            Err(NoRun::Stopped)
        }
    };
    let mut total = 0_usize;
    let n = un.ranks.len();
    let mut bufs = Vec::with_capacity(un.ranks.iter().map(|t| t.bufs.len()).sum());
    let mut buf_first = Vec::with_capacity(n + 1);
    // parameter lengths are the same on every rank (unless counts make
    // them depend on it): evaluate them once
    let mut param_len: Vec<Option<usize>> = Vec::new();
    let same_lens = !un.prog.rank_lens;
    for t in &un.ranks {
        buf_first.push(bufs.len() as u32);
        for (b, info) in t.bufs.iter().enumerate() {
            let cached = if info.param.is_some() && same_lens {
                param_len.get(b).copied().flatten()
            } else {
                None
            };
            let len = if let Some(c) = &cuts {
                c.get(bufs.len()).map_or(0, |c| c.len().saturating_sub(1))
            } else if let Some(l) = cached {
                l
            } else {
                let l = at(&info.len)?;
                if info.param.is_some() && param_len.len() == b {
                    param_len.push(Some(l));
                }
                l
            };
            bufs.push((total, len));
            total = total.saturating_add(len);
        }
    }
    if total > MAX_ELEMENTS {
        return Err(NoRun::TooLarge(total));
    }
    buf_first.push(bufs.len() as u32);
    let mut data = Vec::with_capacity(total);
    for (r, t) in un.ranks.iter().enumerate() {
        for (k, info) in t.bufs.iter().enumerate() {
            let slot = buf_first[r] as usize + k;
            let len = bufs[slot].1;
            if let Some(p) = info.param {
                let starts = cuts.as_ref().and_then(|c| c.get(slot));
                data.extend((0..len).map(|i| Val::Init {
                    rank: r as u32,
                    buf: p,
                    idx: starts.and_then(|c| c.get(i)).map_or(i, |&x| x) as u32,
                }));
            } else {
                data.resize(data.len() + len, Val::Undef);
            }
        }
    }
    let writer = if track { vec![NONE; total] } else { Vec::new() };
    let via = writer.clone();
    let mut op_first = Vec::with_capacity(n + 1);
    let mut nops = 0_u32;
    for t in &un.ranks {
        op_first.push(nops);
        nops += t.ops.len() as u32;
    }
    op_first.push(nops);
    let mut ex = Exec {
        un,
        point,
        data,
        bufs,
        buf_first,
        writer,
        via,
        track,
        sent: vec![NONE; nops as usize],
        op_first,
        // most messages are of one element
        arena: Vec::with_capacity(nops as usize),
        reds: Vec::new(),
        tmp: Vec::new(),
        op_ranges: un
            .regs
            .iter()
            .map(|r| {
                let s = at(&r.start).ok()?;
                let e = at(&r.end).ok()?;
                (s <= e).then_some((r.buf as usize, s, e))
            })
            .collect(),
        pc: vec![0; n],
        turn,
        grain: g,
        cuts,
    };
    let complete = match ex.replay(order) {
        Ok(()) => (0..n).all(|r| ex.pc[r] as usize >= un.ranks[r].events.len()),
        Err(Skip::TooLarge(need)) => return Err(NoRun::TooLarge(need)),
        Err(Skip::Stopped) => false,
    };
    Ok((ex, complete))
}

impl Exec<'_, '_, '_> {
    /// (offset in `data`, length) of buffer `b` of rank `r`.
    #[inline]
    fn buf(&self, r: u32, b: usize) -> Option<(usize, usize)> {
        let first = *self.buf_first.get(r as usize)? as usize;
        let end = *self.buf_first.get(r as usize + 1)? as usize;
        if first + b >= end {
            return None;
        }
        self.bufs.get(first + b).copied()
    }

    /// The elements of buffer `b` of rank `r` (empty when there is none).
    fn buf_slice(&self, r: u32, b: usize) -> Option<&[Val]> {
        let (off, len) = self.buf(r, b)?;
        self.data.get(off..off + len)
    }

    /// The symbol of buffer `b` of rank `r` that starts at element offset
    /// `x` (the end of the buffer for its length).
    #[inline]
    fn symbol_at(&self, r: u32, b: usize, x: usize) -> Result<usize, Skip> {
        match &self.cuts {
            Some(cuts) => {
                let slot = *self.buf_first.get(r as usize).ok_or(Skip::Stopped)? as usize + b;
                let starts = cuts.get(slot).ok_or(Skip::Stopped)?;
                starts.binary_search(&x).map_err(|_| Skip::Stopped)
            }
            None if x.is_multiple_of(self.grain) => Ok(x / self.grain),
            None => Err(Skip::Stopped),
        }
    }

    /// Where symbol `k` of buffer `b` of rank `r` starts, in the units the
    /// postcondition's expectations count in: elements with runs, else
    /// symbols.
    #[inline]
    fn index_of(&self, r: u32, b: usize, k: usize) -> usize {
        match &self.cuts {
            Some(cuts) => self
                .buf_first
                .get(r as usize)
                .and_then(|&f| cuts.get(f as usize + b))
                .and_then(|c| c.get(k))
                .copied()
                .unwrap_or(k),
            None => k,
        }
    }

    /// Elements per unit of [`Exec::index_of`].
    fn unit(&self) -> usize {
        if self.cuts.is_some() {
            1
        } else {
            self.grain
        }
    }

    /// The absolute range in `data` of `reg` on rank `r`.
    fn range(&self, r: u32, reg: &Reg) -> Result<(usize, usize), Skip> {
        let at = |l: &Lin| -> Result<usize, Skip> {
            let v = usize::try_from(l.eval_at(self.point).ok_or(Skip::Stopped)?).map_err(|_| Skip::Stopped)?;
            self.symbol_at(r, reg.buf as usize, v)
        };
        let (s, e) = (at(&reg.start)?, at(&reg.end)?);
        let (off, len) = self.buf(r, reg.buf as usize).unwrap_or((0, 0));
        if s > e || e > len {
            return Err(Skip::Stopped);
        }
        Ok((off + s, off + e))
    }

    /// The absolute range in `data` of an interned region, checked against
    /// rank `r`'s buffer.
    #[inline]
    fn op_range(&self, r: u32, reg: u32) -> Result<(usize, usize), Skip> {
        let (b, s, e) = self
            .op_ranges
            .get(reg as usize)
            .copied()
            .flatten()
            .ok_or(Skip::Stopped)?;
        let (s, e) = if self.cuts.is_some() {
            (self.symbol_at(r, b, s)?, self.symbol_at(r, b, e)?)
        } else {
            (s, e)
        };
        let (off, len) = self.buf(r, b).unwrap_or((0, 0));
        if e > len {
            return Err(Skip::Stopped);
        }
        Ok((off + s, off + e))
    }

    fn read(&self, r: u32, reg: &Reg) -> Result<Vec<Val>, Skip> {
        let (s, e) = self.range(r, reg)?;
        Ok(self.data[s..e].to_vec())
    }

    fn write(&mut self, r: u32, reg: &Reg, vals: &[Val], op: Option<Op>, stmt: u32) -> Result<(), Skip> {
        let (s, e) = self.range(r, reg)?;
        if vals.len() != e - s {
            return Err(Skip::Stopped);
        }
        let reds = &mut self.reds;
        let dst = &mut self.data[s..e];
        match op {
            None => dst.copy_from_slice(vals),
            Some(op) => {
                for (d, v) in dst.iter_mut().zip(vals) {
                    *d = combine(reds, d, v, op);
                }
            }
        }
        if self.track {
            self.writer[s..e].fill(stmt);
            self.via[s..e].fill(NONE);
        }
        Ok(())
    }

    /// `copy`/`accumulate` within one rank (through `tmp`, no allocation).
    fn local(&mut self, r: u32, c: &crate::trace::LocalCopy, stmt: u32) -> Result<(), Skip> {
        let (src, dst, op) = (&c.src, &c.dst, c.op);
        let (s, e) = self.range(r, src)?;
        let mut tmp = std::mem::take(&mut self.tmp);
        tmp.clear();
        tmp.extend_from_slice(&self.data[s..e]);
        let res = self.write(r, dst, &tmp, op, stmt);
        self.tmp = tmp;
        res
    }

    /// Snapshots the data of send `i` of rank `r` (a receive: nothing).
    #[inline]
    fn snapshot(&mut self, r: u32, i: u32) -> Result<(), Skip> {
        let o = &self.un.ranks[r as usize].ops[i as usize];
        if o.send {
            let (s, e) = self.op_range(r, o.reg)?;
            if self.arena.len() + (e - s) > MAX_ELEMENTS {
                return Err(Skip::TooLarge(self.data.len() + self.arena.len() + (e - s)));
            }
            let at = self.op_first[r as usize] as usize + i as usize;
            self.sent[at] = self.arena.len() as u32;
            if e == s + 1 {
                self.arena.push(self.data[s]);
            } else {
                self.arena.extend_from_slice(&self.data[s..e]);
            }
        }
        Ok(())
    }

    /// The snapshot offset of op `j` of rank `q`, or [`NONE`].
    #[inline]
    fn sent_of(&self, q: u32, j: u32) -> u32 {
        self.op_first
            .get(q as usize)
            .and_then(|&f| self.sent.get(f as usize + j as usize))
            .copied()
            .unwrap_or(NONE)
    }

    fn deliver(&mut self, r: u32, i: u32) -> Result<(), Skip> {
        let o = &self.un.ranks[r as usize].ops[i as usize];
        let (q, j) = o.partner;
        let off = self.sent_of(if self.turn.is_some() { 0 } else { q }, j);
        if off == NONE {
            return Err(Skip::Stopped);
        }
        let off = off as usize;
        let (s, e) = self.op_range(r, o.reg)?;
        let o = &self.un.ranks[r as usize].ops[i as usize];
        let src = self.arena.get(off..off + (e - s)).ok_or(Skip::Stopped)?;
        let reds = &mut self.reds;
        let dst = &mut self.data[s..e];
        if let Some(turn) = &self.turn {
            for (d, v) in dst.iter_mut().zip(src) {
                let v = turned(*v, q, self.un.world, turn).ok_or(Skip::Stopped)?;
                *d = match o.reduce {
                    None => v,
                    Some(op) => combine(reds, d, &v, op),
                };
            }
        } else {
            match o.reduce {
                None if dst.len() == 1 => dst[0] = src[0],
                None => dst.copy_from_slice(src),
                Some(op) => {
                    for (d, v) in dst.iter_mut().zip(src) {
                        *d = combine(reds, d, v, op);
                    }
                }
            }
        }
        if self.track {
            self.writer[s..e].fill(o.stmt);
            // rank 0 alone: its own receive, whose partner names the sender
            let from = if self.turn.is_some() {
                i
            } else {
                self.op_first.get(q as usize).map_or(NONE, |f| f + j)
            };
            self.via[s..e].fill(from);
        }
        Ok(())
    }

    /// Replays the execution order of the deadlock simulation (the rank of
    /// each completed event, in order): a send's data is taken when its rank
    /// reaches it, a receive's data is delivered when its event completes, a
    /// collective is carried out when its first member completes it (every
    /// member stands at it then). The data each receive gets does not depend
    /// on the order (see the module documentation).
    fn replay(&mut self, order: &[u32]) -> Result<(), Skip> {
        let un = self.un;
        let mut performed = vec![0_u32; un.groups.len()];
        for r in 0..un.ranks.len() as u32 {
            self.arrive(r)?;
        }
        for &r in order {
            let ri = r as usize;
            let t = un.ranks.get(ri).ok_or(Skip::Stopped)?;
            let ev = t.events.get(self.pc[ri] as usize).ok_or(Skip::Stopped)?;
            match ev.kind {
                EvKind::Copy(ci) => {
                    let c = &t.copies[ci as usize];
                    self.local(r, c, ev.stmt)?;
                }
                EvKind::Post(_) => {}
                EvKind::Blocking(i) => {
                    if !t.ops[i as usize].send {
                        self.deliver(r, i)?;
                    }
                }
                EvKind::Batch(a, b) => {
                    for i in a..b {
                        if !t.ops[i as usize].send {
                            self.deliver(r, i)?;
                        }
                    }
                }
                EvKind::Wait(a, b) => {
                    for &i in &t.wait_ops[a as usize..b as usize] {
                        if !t.ops[i as usize].send {
                            self.deliver(r, i)?;
                        }
                    }
                }
                EvKind::Coll(ci) => {
                    let c = &t.colls[ci as usize];
                    let done = performed.get_mut(c.group as usize).ok_or(Skip::Stopped)?;
                    if *done == c.seq {
                        *done += 1;
                        self.perform(c.group)?;
                    } else if *done < c.seq {
                        return Err(Skip::Stopped);
                    }
                }
            }
            self.pc[ri] += 1;
            self.arrive(r)?;
        }
        Ok(())
    }

    /// Rank `r` reaches its next event: the data of its sends there is
    /// taken.
    #[inline]
    fn arrive(&mut self, r: u32) -> Result<(), Skip> {
        let t = &self.un.ranks[r as usize];
        match t.events.get(self.pc[r as usize] as usize).map(|e| e.kind) {
            Some(EvKind::Post(i) | EvKind::Blocking(i)) if t.ops[i as usize].send => self.snapshot(r, i),
            Some(EvKind::Batch(a, b)) => {
                for i in a..b {
                    if t.ops[i as usize].send {
                        self.snapshot(r, i)?;
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Carries out the collective every member of `group` stands at.
    fn perform(&mut self, group: u32) -> Result<(), Skip> {
        let un = self.un;
        let members = un.groups.get(group as usize).ok_or(Skip::Stopped)?;
        let g = members.len();
        let mut calls = Vec::with_capacity(g);
        for &m in members {
            let t = &un.ranks[m as usize];
            let ev = t.events.get(self.pc[m as usize] as usize).ok_or(Skip::Stopped)?;
            let EvKind::Coll(ci) = ev.kind else {
                return Err(Skip::Stopped);
            };
            calls.push((m, &t.colls[ci as usize], ev.stmt));
        }
        let (_, c0, _) = calls[0];
        let op = c0.op.unwrap_or(Op::Sum);
        let inputs: Vec<Vec<Val>> = calls
            .iter()
            .map(|(m, c, _)| c.src.as_ref().map_or(Ok(Vec::new()), |s| self.read(*m, s)))
            .collect::<Result<_, _>>()?;
        let reduce_all = |reds: &mut Vec<Red>, vals: &[&[Val]]| -> Vec<Val> {
            let mut acc = vals[0].to_vec();
            for v in &vals[1..] {
                for (a, b) in acc.iter_mut().zip(v.iter()) {
                    *a = combine(reds, a, b, op);
                }
            }
            acc
        };
        match c0.kind {
            CollKind::Barrier => {}
            CollKind::AllReduce => {
                let refs: Vec<&[Val]> = inputs.iter().map(Vec::as_slice).collect();
                let res = reduce_all(&mut self.reds, &refs);
                for (m, c, st) in &calls {
                    let dst = c.dst.as_ref().or(c.src.as_ref()).ok_or(Skip::Stopped)?;
                    self.write(*m, dst, &res, None, *st)?;
                }
            }
            CollKind::AllGather => {
                let all: Vec<Val> = inputs.concat();
                for (m, c, st) in &calls {
                    self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &all, None, *st)?;
                }
            }
            CollKind::ReduceScatter => {
                let blen = inputs[0].len() / g;
                for (i, (m, c, st)) in calls.iter().enumerate() {
                    let blocks: Vec<&[Val]> = inputs
                        .iter()
                        .map(|v| v.get(i * blen..(i + 1) * blen).ok_or(Skip::Stopped))
                        .collect::<Result<_, _>>()?;
                    let res = reduce_all(&mut self.reds, &blocks);
                    self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &res, None, *st)?;
                }
            }
            CollKind::AllToAll => {
                let blen = inputs[0].len() / g;
                for (i, (m, c, st)) in calls.iter().enumerate() {
                    let mut out = Vec::with_capacity(blen * g);
                    for v in &inputs {
                        out.extend_from_slice(v.get(i * blen..(i + 1) * blen).ok_or(Skip::Stopped)?);
                    }
                    self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &out, None, *st)?;
                }
            }
            CollKind::Broadcast => {
                let root = usize::try_from(c0.root.unwrap_or(0)).map_err(|_| Skip::Stopped)?;
                let data = inputs.get(root).ok_or(Skip::Stopped)?.clone();
                for (i, (m, c, st)) in calls.iter().enumerate() {
                    if i != root {
                        self.write(*m, c.src.as_ref().ok_or(Skip::Stopped)?, &data, None, *st)?;
                    }
                }
            }
            CollKind::Reduce => {
                let root = usize::try_from(c0.root.unwrap_or(0)).map_err(|_| Skip::Stopped)?;
                let refs: Vec<&[Val]> = inputs.iter().map(Vec::as_slice).collect();
                let res = reduce_all(&mut self.reds, &refs);
                let (m, c, st) = calls.get(root).ok_or(Skip::Stopped)?;
                self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &res, None, *st)?;
            }
            CollKind::AllGatherV => {
                // whole communicator: members in rank order
                let all: Vec<Val> = inputs.concat();
                for (m, c, st) in &calls {
                    self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &all, None, *st)?;
                }
            }
            CollKind::AllToAllV => {
                let sizes = count_values(un, self.point, c0.counts.ok_or(Skip::Stopped)?);
                for (i, (m, c, st)) in calls.iter().enumerate() {
                    let mut out = Vec::new();
                    for (j, v) in inputs.iter().enumerate() {
                        // rank j's part for rank i, in the layout of row j
                        let row = sizes.get(j * g..(j + 1) * g).ok_or(Skip::Stopped)?;
                        let start: usize = row[..i].iter().sum();
                        out.extend_from_slice(v.get(start..start + row[i]).ok_or(Skip::Stopped)?);
                    }
                    self.write(*m, c.dst.as_ref().ok_or(Skip::Stopped)?, &out, None, *st)?;
                }
            }
        }
        Ok(())
    }

    /// Compares the final outputs with the postcondition.
    fn compare(&self, post: &CPost<'_>) -> Option<(Diagnostic, Wrong)> {
        let un = self.un;
        // the world size: every rank is here, or rank 0 alone (see
        // `rotated_verdict`)
        let w = usize::try_from(un.world).ok()?;
        let inp = post.input;
        let outp = post.output;
        // in the units of `index_of`
        let len_in = self.index_of(0, inp as usize, self.buf(0, inp as usize)?.1);
        let len_out = self.index_of(0, outp as usize, self.buf(0, outp as usize)?.1);
        let op = post.op.as_ref().and_then(|o| o.resolve(&un.scalars)).unwrap_or(Op::Sum);
        let root = match &post.root {
            Some(e) => {
                let v = eval_c(e, &attr_env(un)).ok()?;
                Some(u32::try_from(v).ok().filter(|&x| (x as usize) < w)?)
            }
            None => None,
        };
        // expected reduction fingerprints per input index
        let red_of = |idx: usize| -> Expected {
            if w == 1 {
                return Expected::Sym {
                    rank: 0,
                    buf: inp,
                    idx: idx as u32,
                };
            }
            let (mut h1, mut h2) = (0_u64, 0_u64);
            for q in 0..w as u32 {
                let (a, b) = sym_hash(q, inp, idx as u32);
                h1 = h1.wrapping_add(a);
                h2 = h2.wrapping_add(b);
            }
            Expected::Red {
                op,
                count: w as u64,
                h1,
                h2,
            }
        };
        // with runs, only where a run starts (a few of the elements)
        let reduced = matches!(
            post.kind,
            PostKind::AllReduce { .. } | PostKind::Reduce { .. } | PostKind::ReduceScatter { .. }
        );
        let reds: Vec<Expected> = if reduced && self.cuts.is_none() {
            (0..len_in).map(red_of).collect()
        } else {
            Vec::new()
        };
        let red_at = |idx: usize| -> Option<Expected> {
            if self.cuts.is_some() {
                (idx < len_in).then(|| red_of(idx))
            } else {
                reds.get(idx).copied()
            }
        };
        let vcounts = post.counts.map(|p| count_values(un, self.point, p));
        // checked by `shapes` before any run
        let sources = match post.kind {
            PostKind::Shift { .. } => Some(shift_sources(un, post).ok()?),
            _ => None,
        };
        // part ends: of the count vector, and per row of the matrix
        // (`w + 1` prefix sums each)
        let gv_ends = match (post.kind, &vcounts) {
            (PostKind::AllGatherV { .. }, Some(c)) => part_ends(c.iter().copied()),
            _ => Vec::new(),
        };
        let row_before: Vec<usize> = match (post.kind, &vcounts) {
            (PostKind::AllToAllV { .. }, Some(sizes)) => sizes
                .chunks(w.max(1))
                .flat_map(|row| std::iter::once(0).chain(part_ends(row.iter().copied())))
                .collect(),
            _ => Vec::new(),
        };
        for r in 0..un.ranks.len() as u32 {
            if let (PostKind::Reduce { .. }, Some(root)) = (post.kind, root) {
                if r != root {
                    continue;
                }
            }
            let col_ends = match (post.kind, &vcounts) {
                (PostKind::AllToAllV { .. }, Some(sizes)) => part_ends((0..w).map(|k| sizes[k * w + r as usize])),
                _ => Vec::new(),
            };
            let out = self.buf_slice(r, outp as usize)?;
            for (k, v) in out.iter().enumerate() {
                let e = self.index_of(r, outp as usize, k);
                let exp = match post.kind {
                    PostKind::AllGather { .. } | PostKind::AllToAll { .. } => {
                        Blocks::new(post, w, r as usize, len_in, len_out)?.at(e)
                    }
                    PostKind::Broadcast { .. } => Expected::Sym {
                        rank: root.unwrap_or(0),
                        buf: inp,
                        idx: e as u32,
                    },
                    PostKind::Shift { .. } => {
                        let src = sources.as_ref()?;
                        let b = (len_out / src.out_parts).max(1);
                        let (q, g) = *src.at.get(r as usize * src.out_parts + e / b)?;
                        Expected::Sym {
                            rank: q,
                            buf: inp,
                            idx: (g as usize * b + e % b) as u32,
                        }
                    }
                    PostKind::AllReduce { .. } | PostKind::Reduce { .. } => red_at(e)?,
                    PostKind::ReduceScatter { .. } => red_at(r as usize * len_out + e)?,
                    PostKind::AllGatherV { .. } => {
                        let (j, o) = part_at(&gv_ends, e)?;
                        Expected::Sym {
                            rank: j as u32,
                            buf: inp,
                            idx: o as u32,
                        }
                    }
                    PostKind::AllToAllV { .. } => {
                        // column r: part j comes from rank j's part r of its row
                        let (j, o) = part_at(&col_ends, e)?;
                        let before = *row_before.get(j * (w + 1) + r as usize)?;
                        Expected::Sym {
                            rank: j as u32,
                            buf: inp,
                            idx: (before + o) as u32,
                        }
                    }
                };
                if !matches(&self.reds, v, &exp) {
                    return Some(self.violation(post, r, (e, k), v, &exp, len_in, len_out));
                }
            }
        }
        None
    }

    /// Whether every rank's output holds what `post` (an `all_gather` or
    /// an `all_to_all`) expects, from rank 0's; `None` when that cannot be
    /// told this way.
    ///
    /// Rank `r`'s output element `(e + r * u_out) mod len_out` is rank 0's
    /// element `e` turned: label `(q, B, i)` becomes `(q + r mod world, B,
    /// i + r * u_B mod len B)`. With blocks of `b` elements, rank 0's
    /// element `e = j * b + k` should hold `(j, input, k)` after an
    /// `all_gather` and `(j, input, k)` after an `all_to_all` too (rank 0's
    /// own input block 0); rank `r`'s element `(j + r) * b + k` (mod
    /// `len_out`), `(j + r, input, k)` and `(j + r, input, r * b + k)`
    /// respectively. These are the images of rank 0's expectations exactly
    /// when the output turns by one block (`u_out = b`) and the input by
    /// nothing (`all_gather`: `r * u_in = 0 mod len_in`) or by one block
    /// (`all_to_all`: `u_in = b`). Turning labels is a bijection, so then
    /// every rank's output is right exactly when rank 0's is; other units
    /// give `None`. An `all_reduce` whose input and output turn alike is
    /// decided on rank 0's output alone, its contributions read through
    /// their turns ([`Exec::every_rank_once`]).
    fn compare_turned(&self, post: &CPost<'_>) -> Option<bool> {
        let w = usize::try_from(self.un.world).ok()?;
        let turn = self.turn.as_deref()?;
        let (len_in, u_in) = *turn.get(post.input as usize)?;
        let (len_out, u_out) = *turn.get(post.output as usize)?;
        let out = self.buf_slice(0, post.output as usize)?;
        if len_out == 0 || out.len() != len_out {
            return Some(len_out == 0 && out.is_empty());
        }
        if let PostKind::AllReduce { .. } = post.kind {
            // rank q's element i is rank 0's element i - q u_out turned by
            // q: the reduction of every rank's element i - q u_out + q u_in,
            // which is i when the two buffers turn alike
            if len_in != len_out || u_in % len_in != u_out % len_out {
                return None;
            }
            let op = post.op.as_ref().and_then(|o| o.resolve(&self.un.scalars))?;
            let mut seen = vec![false; w];
            return Some(
                out.iter()
                    .enumerate()
                    .all(|(i, v)| self.every_rank_once(v, op, post.input, i, turn, &mut seen)),
            );
        }
        if let PostKind::AllGatherV { .. } = post.kind {
            // run with every count 1: part `j` is element `j`, rank `j`'s
            // one input element, and the output turns by one element
            let ones = self.point.get(MAX_LEN_VARS).is_none_or(|&s| s <= 0);
            if !ones || len_in != 1 || len_out != w || u_in != 0 || u_out != 1 {
                return None;
            }
            return Some(out.iter().enumerate().all(|(j, v)| {
                let e = Expected::Sym {
                    rank: j as u32,
                    buf: post.input,
                    idx: 0,
                };
                matches(&self.reds, v, &e)
            }));
        }
        let mut exp = Blocks::new(post, w, 0, len_in, len_out)?;
        // in place, rank 0's `(j, buf, j * b + k)` turns into `(j + r, buf,
        // (j + r) * b + k)`: the buffer turns by one block, as an
        // `all_to_all`'s input does
        let equivariant = u_out == exp.block
            && match post.kind {
                PostKind::AllGather { .. } if post.input != post.output => len_in == 0 || u_in % len_in == 0,
                _ => u_in == exp.block,
            };
        if !equivariant {
            return None;
        }
        Some(out.iter().all(|v| matches(&self.reds, v, &exp.next_expected())))
    }

    /// Whether `v` (in the replay of rank 0 alone, `turn` its buffers'
    /// (length, unit)) is the `op` of element `idx` of input `inp` of every
    /// rank, each once (`max` and `min` may take one more than once): its
    /// contributions are read with their turns, at most a few per rank.
    fn every_rank_once(
        &self,
        v: &Val,
        op: Op,
        inp: u32,
        idx: usize,
        turn: &[(usize, usize)],
        seen: &mut [bool],
    ) -> bool {
        let (Val::Red(root) | Val::Turned { red: root, .. }) = *v else {
            return false;
        };
        let r = &self.reds[root as usize];
        let w = seen.len() as u64;
        let idempotent = matches!(op, Op::Max | Op::Min);
        if r.op != op || r.undef || r.mixed.is_some() || r.count < w || !idempotent && r.count != w {
            return false;
        }
        // a wrong schedule may build a large tree: past this, the full
        // check decides
        let mut budget = w.saturating_mul(8);
        seen.fill(false);
        let mut stack = vec![(*v, 0_u32)];
        while let Some((v, by)) = stack.pop() {
            if budget == 0 {
                return false;
            }
            budget -= 1;
            match v {
                Val::Red(j) | Val::Turned { red: j, .. } => {
                    let by = match v {
                        Val::Turned { by: b, .. } => turned_by(by, b, seen.len()),
                        _ => by,
                    };
                    let x = &self.reds[j as usize];
                    stack.push((x.a, by));
                    stack.push((x.b, by));
                }
                Val::Init { .. } => {
                    let Some(Val::Init { rank, buf, idx: i }) = turned(v, by, self.un.world, turn) else {
                        return false;
                    };
                    let Some(s) = seen.get_mut(rank as usize) else {
                        return false;
                    };
                    if buf != inp || i as usize != idx || *s && !idempotent {
                        return false;
                    }
                    *s = true;
                }
                Val::Undef => return false,
            }
        }
        seen.iter().all(|&s| s)
    }

    /// For element `at` (in symbols) of buffer `b` of rank `r`, which no
    /// statement wrote: the nearest element some statement wrote (the lower
    /// of two at the same distance) and that statement.
    fn nearest_written(&self, r: u32, b: usize, at: usize) -> Option<(usize, u32)> {
        let (off, len) = self.buf(r, b)?;
        let writers = self.writer.get(off..off + len)?;
        let below = writers.get(..at)?.iter().rposition(|&w| w != NONE);
        let above = writers.get(at..)?.iter().position(|&w| w != NONE).map(|k| at + k);
        let k = match (below, above) {
            (Some(lo), Some(hi)) => {
                if at - lo <= hi - at {
                    lo
                } else {
                    hi
                }
            }
            (lo, hi) => lo.or(hi)?,
        };
        Some((k, writers[k]))
    }

    /// For element `at` (in symbols) of buffer `b` of rank `r`, last written
    /// by a receive: the rank and the statement of the send it came from.
    fn sender(&self, r: u32, b: usize, at: usize) -> Option<(u32, u32)> {
        let (off, _) = self.buf(r, b)?;
        let id = *self.via.get(off + at)?;
        if id == NONE {
            return None;
        }
        if self.turn.is_some() {
            let (q, j) = self.un.ranks.first()?.ops.get(id as usize)?.partner;
            return Some((q, self.un.ranks.first()?.ops.get(j as usize)?.stmt));
        }
        // the rank whose ops hold `id`: the last with its first op at or
        // before it
        let q = self.op_first.partition_point(|&f| f <= id).checked_sub(1)?;
        let first = *self.op_first.get(q)?;
        let op = self.un.ranks.get(q)?.ops.get((id - first) as usize)?;
        Some((u32::try_from(q).ok()?, op.stmt))
    }

    /// The message for rank `r`'s wrong output element `e` (in the units
    /// of [`Exec::index_of`]), symbol `k`.
    fn violation(
        &self,
        post: &CPost<'_>,
        r: u32,
        (e, k): (usize, usize),
        v: &Val,
        exp: &Expected,
        len_in: usize,
        len_out: usize,
    ) -> (Diagnostic, Wrong) {
        let un = self.un;
        let w = usize::try_from(un.world).unwrap_or(1);
        // the first element of the wrong group, in elements
        let g = self.unit();
        let writer_at = k;
        let (e, len_in, len_out) = (e * g, len_in * g, len_out * g);
        let t0 = &un.ranks[0];
        let bname = |b: u32| {
            t0.bufs
                .get(b as usize)
                .map_or_else(|| "?".to_owned(), |x| x.name.clone())
        };
        let out_name = bname(post.output);
        // block length of the output and of the input, for block-structured
        // collectives
        let (out_block, in_block) = match post.kind {
            PostKind::AllGather { .. } if post.input == post.output => {
                let b = (len_out / w).max(1);
                (Some(b), Some(b))
            }
            PostKind::AllGather { .. } => (Some(len_in.max(1)), Some(len_in.max(1))),
            PostKind::AllToAll { .. } => {
                let b = (len_out / w).max(1);
                (Some(b), Some(b))
            }
            PostKind::ReduceScatter { .. } => (None, Some(len_out.max(1))),
            _ => (None, None),
        };
        let place = |name: &str, idx: usize, block: Option<usize>| match block {
            Some(1) => format!("{name} block {idx}"),
            Some(b) => format!("{name} block {} element {}", idx / b, idx % b),
            None => format!("{name} element {idx}"),
        };
        let sym = |rank: u32, buf: u32, idx: u32| {
            let idx = idx as usize * g;
            let block = if buf == post.input { in_block } else { out_block };
            let initial = if buf == post.input && post.input != post.output {
                ""
            } else {
                "initial "
            };
            format!("rank {rank}'s {initial}{}", place(&bname(buf), idx, block))
        };
        let actual = match v {
            Val::Init { rank, buf, idx } => sym(*rank, *buf, *idx),
            Val::Undef => "uninitialized scratch data".to_owned(),
            Val::Red(i) | Val::Turned { red: i, .. } => describe_red(&self.reds, &self.reds[*i as usize], &sym),
        };
        let expected = match (exp, post.kind) {
            (Expected::Sym { rank, .. }, PostKind::AllGather { .. }) if len_in == 1 && post.input != post.output => {
                format!("rank {rank}'s {}", bname(post.input))
            }
            (Expected::Sym { rank, buf, idx }, _) => sym(*rank, *buf, *idx),
            (Expected::Red { op, .. }, _) => {
                let what = match post.kind {
                    PostKind::ReduceScatter { .. } => place(&bname(post.input), r as usize * len_out + e, in_block),
                    _ => place(&bname(post.input), e, None),
                };
                format!("the `{}` of every rank's {what}, each once", op.as_str())
            }
        };
        let mut sit = crate::situation::Situation::plain(un.prog, un.world, &un.scalars).to_string();
        if crate::lin::point_named(self.point, &un.prog.len_names) {
            let _ = write!(sit, ", {}", crate::lin::point_text(self.point, &un.prog.len_names));
        }
        if !un.prog.s.counts.is_empty() {
            for (p, c) in un.prog.s.counts.iter().enumerate() {
                let _ = write!(sit, ", {} = {:?}", c.name, count_values(un, self.point, p as u32));
            }
        }
        let writer = self
            .buf(r, post.output as usize)
            .and_then(|(off, _)| self.writer.get(off + writer_at))
            .copied()
            .unwrap_or(NONE);
        let span: SpanId = if writer == NONE { post.span } else { un.span(writer) };
        let at = place(&out_name, e, out_block);
        let mut d = Diagnostic::new(
            DiagKind::PostconditionViolated,
            span,
            format!("{sit}, rank {r} ends with {at} = {actual}, expected {expected}"),
        );
        if writer == NONE {
            if let Some((near, stmt)) = self.nearest_written(r, post.output as usize, writer_at) {
                // the element of that symbol next to the wrong one: the
                // last of one below, the first of one above
                let outb = post.output as usize;
                let elem = if near < writer_at {
                    (self.index_of(r, outb, near + 1) * g).saturating_sub(1)
                } else {
                    self.index_of(r, outb, near) * g
                };
                d = d.with_note(
                    un.span(stmt),
                    format!(
                        "no statement wrote it; the nearest element written, {}, was written here",
                        place(&out_name, elem, out_block)
                    ),
                );
            }
        }
        if let Some((q, stmt)) = self.sender(r, post.output as usize, writer_at) {
            d = d.with_note(sent_from(un, stmt), format!("rank {q} sent it from here"));
        }
        if writer != NONE {
            d = d.with_note(post.span, "the postcondition is declared here");
        }
        (
            d,
            Wrong {
                rank: r,
                place: at,
                writer,
            },
        )
    }
}

/// What the elements of rank `r`'s output hold, one after the other,
/// after an `all_gather` or an `all_to_all` of `inp` over `w` ranks.
struct Blocks {
    inp: u32,
    /// Elements per block.
    block: usize,
    /// Where the expected block starts in the input.
    base: usize,
    /// How far the expected block moves in the input per output block:
    /// one block for an in-place `all_gather` (block `j` is rank `j`'s
    /// initial block `j`), else 0.
    stride: usize,
    /// The block (= the rank it comes from) and the offset in it.
    at: (usize, usize),
}

impl Blocks {
    fn new(post: &CPost<'_>, w: usize, r: usize, len_in: usize, len_out: usize) -> Option<Self> {
        let (block, base, stride) = match post.kind {
            PostKind::AllGather { .. } if post.input == post.output => {
                let b = (len_out / w).max(1);
                (b, 0, b)
            }
            PostKind::AllGather { .. } => (len_in.max(1), 0, 0),
            PostKind::AllToAll { .. } => {
                let b = (len_out / w).max(1);
                (b, r * b, 0)
            }
            _ => return None,
        };
        Some(Self {
            inp: post.input,
            block,
            base,
            stride,
            at: (0, 0),
        })
    }

    /// Element `e`'s expectation (from the start, without moving on).
    fn at(&self, e: usize) -> Expected {
        let blk = e / self.block;
        Expected::Sym {
            rank: blk as u32,
            buf: self.inp,
            idx: (self.base + blk * self.stride + e % self.block) as u32,
        }
    }

    /// The next element's expectation.
    fn next_expected(&mut self) -> Expected {
        let (blk, k) = self.at;
        self.at = if k + 1 == self.block {
            (blk + 1, 0)
        } else {
            (blk, k + 1)
        };
        Expected::Sym {
            rank: blk as u32,
            buf: self.inp,
            idx: (self.base + blk * self.stride + k) as u32,
        }
    }
}

/// `v` (a value of rank 0) as rank `by` holds it in a rotation-symmetric
/// schedule: its rank and its index in its buffer turned by `by` (`turn`:
/// per buffer, length and shift per rank). `None` for a reduction.
fn turned(v: Val, by: u32, world: i64, turn: &[(usize, usize)]) -> Option<Val> {
    match v {
        Val::Init { rank, buf, idx } => {
            let (len, unit) = *turn.get(buf as usize)?;
            let w = u64::try_from(world).ok()?;
            let idx = if len == 0 {
                idx
            } else {
                u32::try_from((idx as usize + (by as usize % len) * (unit % len)) % len).ok()?
            };
            Some(Val::Init {
                rank: u32::try_from((u64::from(rank) + u64::from(by)) % w).ok()?,
                buf,
                idx,
            })
        }
        Val::Undef => Some(Val::Undef),
        Val::Red(red) | Val::Turned { red, by: 0 } => {
            let by = u32::try_from(u64::from(by) % u64::try_from(world).ok()?).ok()?;
            Some(if by == 0 {
                Val::Red(red)
            } else {
                Val::Turned { red, by }
            })
        }
        Val::Turned { red, by: b0 } => {
            let by = u32::try_from((u64::from(b0) + u64::from(by)) % u64::try_from(world).ok()?).ok()?;
            Some(if by == 0 {
                Val::Red(red)
            } else {
                Val::Turned { red, by }
            })
        }
    }
}

/// Two turns one after the other, in `0..w`.
fn turned_by(a: u32, b: u32, w: usize) -> u32 {
    u32::try_from((u64::from(a) + u64::from(b)) % (w.max(1) as u64)).unwrap_or(0)
}

/// Step 7 for a rotation-symmetric schedule (see `check::symmetry`) whose
/// unrolling `un` holds rank 0 alone and whose postcondition, if any, is an
/// `all_gather`, an `all_to_all` or an `all_reduce` (or an `all_gatherv`
/// whose regions are whole parts): rank 0 replayed in `order`, each
/// rank's output (rank 0's, turned) compared with the expectation at every
/// point the full check uses. `units`: per buffer, its shift per rank.
///
/// `Some(Holds)` when it holds; `Some(Violated(..))` with rank 0's first wrong
/// element when rank 0's output is wrong after an `all_gather` or an
/// `all_to_all` whose expectations turn with the ranks: that is the full
/// check's first wrong element too (it compares rank 0 first, and rank 0's
/// state is the same in both runs), with the same message and notes; `None`
/// when this replay cannot tell (the full check decides).
pub(crate) fn rotated_verdict(un: &Unrolled<'_, '_>, order: &[u32], units: &[Option<Lin>]) -> Option<Rotated> {
    let Some(post) = un.prog.post.as_ref() else {
        return Some(Rotated::Holds);
    };
    // the bound on the values of a length variable reads every rank's
    // moves, which rank 0 alone does not hold: homogeneous schedules only
    // (their single run at 1 needs no bound), the others take the full check
    // with counts, an `all_gatherv` whose regions are whole parts: decided
    // by the run with every entry 1 alone (see `first_cut`)
    let fixed = matches!(
        post.kind,
        PostKind::AllGather { .. } | PostKind::AllToAll { .. } | PostKind::AllReduce { .. }
    );
    let parts = matches!(post.kind, PostKind::AllGatherV { .. }) && first_cut(un).is_none();
    if !(fixed && !has_counts(un) || parts)
        || shapes(un, post).is_some()
        || !(un.prog.len_names.is_empty() || un.prog.len_names.len() == 1 && homogeneous(un))
    {
        return None;
    }
    let points = points(un).ok()?;
    for point in &points {
        if run_rotated(un, post, point, order, units)? {
            continue;
        }
        if !matches!(post.kind, PostKind::AllGather { .. } | PostKind::AllToAll { .. }) {
            return None;
        }
        // again, tracking writers to name the statement at fault
        let (ex, complete) = replayed(un, point, order, true, Some(turns(un, point, units)?)).ok()?;
        let out = ex.buf_slice(0, post.output as usize)?;
        // a reduction's leaves are read unturned here: the full check
        // describes it
        if !complete || out.iter().any(|v| matches!(v, Val::Red(_) | Val::Turned { .. })) {
            return None;
        }
        let (d, wrong) = ex.compare(post)?;
        return Some(Rotated::Violated(d, wrong));
    }
    Some(Rotated::Holds)
}

/// What rank 0's replay of a rotation-symmetric schedule decides (see
/// [`rotated_verdict`]).
pub(crate) enum Rotated {
    /// Every rank's output is right.
    Holds,
    /// Rank 0's first wrong element, as the full check reports it.
    Violated(Diagnostic, Wrong),
}

/// [`holds_rotated`] at one point; `None` when the run cannot be carried out.
fn run_rotated(
    un: &Unrolled<'_, '_>,
    post: &CPost<'_>,
    point: &[i64],
    order: &[u32],
    units: &[Option<Lin>],
) -> Option<bool> {
    let (ex, complete) = replayed(un, point, order, false, Some(turns(un, point, units)?)).ok()?;
    if !complete {
        return None;
    }
    ex.compare_turned(post)
}

/// Per buffer of rank 0 at `point`: its length and its shift per rank.
fn turns(un: &Unrolled<'_, '_>, point: &[i64], units: &[Option<Lin>]) -> Option<Vec<(usize, usize)>> {
    let t0 = un.ranks.first()?;
    let turn = t0
        .bufs
        .iter()
        .zip(units)
        .map(|(b, u)| {
            let len = usize::try_from(b.len.eval_at(point)?).ok()?;
            let unit = match u {
                Some(u) => usize::try_from(u.eval_at(point)?).ok()?,
                None => 0,
            };
            Some((len, unit))
        })
        .collect::<Option<Vec<_>>>()?;
    (turn.len() == t0.bufs.len()).then_some(turn)
}

/// "a `sum` of rank 0's input element 1 and rank 1's input element 1"
/// (up to a few contributions), with what is wrong about it.
fn describe_red(reds: &[Red], red: &Red, sym: &dyn Fn(u32, u32, u32) -> String) -> String {
    const SHOWN: usize = 4;
    let mut leaves: Vec<String> = Vec::new();
    let mut undef = 0_u64;
    let mut stack: Vec<&Val> = vec![&red.b, &red.a];
    // the tree may share subtrees (a DAG); visit a bounded part of it
    let mut budget = 4096_u32;
    while let Some(v) = stack.pop() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        match v {
            Val::Init { rank, buf, idx } => {
                if leaves.len() < SHOWN {
                    leaves.push(sym(*rank, *buf, *idx));
                }
            }
            Val::Undef => undef += 1,
            Val::Red(i) | Val::Turned { red: i, .. } => {
                let r = &reds[*i as usize];
                stack.push(&r.b);
                stack.push(&r.a);
            }
        }
    }
    let count = red.count;
    let mut s = format!("a `{}` of {count} contributions", red.op.as_str());
    if !leaves.is_empty() {
        s.push_str(" (");
        s.push_str(&leaves.join(", "));
        if count as usize > leaves.len() {
            s.push_str(", ...");
        }
        s.push(')');
    }
    if undef > 0 || red.undef {
        s.push_str(" including uninitialized scratch data");
    }
    if let Some(m) = red.mixed {
        let _ = write!(s, " that mixes `{}` with `{}`", red.op.as_str(), m.as_str());
    }
    s
}
