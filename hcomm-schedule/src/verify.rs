//! The loop over world sizes and scalar values (language reference, sections 7 and 8), the
//! helpers the generated code needs at entry, and the run-time cache.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::check::{blame, completion, deadlock, hazards, matching, postcondition, symmetry};
use crate::compile::{compile, Prog};
use crate::diag::{DiagKind, Diagnostic};
use crate::eval::{binary, call, short_circuit, unary};
use crate::ir::{Expr, ExprKind, NameKind, Schedule, WorldSet};
use crate::situation::Situation;
use crate::unroll::unroll;

/// World-independent checks (step 0): names, linearity of lengths, scalar
/// parameters without a range, writes to read-only buffers, `over`
/// expressions that depend on `rank`, statements not allowed inside `batch`,
/// and a verify set holding sizes below 1.
pub fn check_static(s: &Schedule) -> Vec<Diagnostic> {
    compile(s).1
}

/// Steps 1 to 7 at one world size and one scalar combination (`scalars` in
/// the order of [`Schedule::scalars`]). Step-0 errors are returned instead
/// when there are any. `#[requires]` and the scalar ranges are not consulted:
/// the caller decides which combinations to check.
pub fn check_world(s: &Schedule, world: i64, scalars: &[i64]) -> Vec<Diagnostic> {
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return diags;
    }
    world_checks(&prog, world, scalars, true, true)
}

/// [`check_world`] without the rotation-symmetry reduction (every rank
/// checked in full): the reference the reduction is tested against. The
/// two give the same diagnostics.
#[doc(hidden)]
pub fn check_world_unreduced(s: &Schedule, world: i64, scalars: &[i64]) -> Vec<Diagnostic> {
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return diags;
    }
    world_checks(&prog, world, scalars, false, true)
}

/// Everything: [`check_static`], then every world size of the verify set in
/// increasing order with every scalar combination in its declared range,
/// skipping combinations that fail `#[requires]`. Large verify sets are
/// spread over the available cores (the result does not depend on it). Returns the diagnostics of
/// the first check (in the order of the language reference, section 7) that fails at the
/// smallest failing world size — at that size, of the first scalar
/// combination failing that check — at most one per statement and at most 8.
pub fn verify(s: &Schedule) -> Vec<Diagnostic> {
    let (prog, diags) = compile(s);
    if !diags.is_empty() {
        return diags;
    }
    let worlds: Vec<i64> = s.verify_worlds().into_iter().filter(|&w| w >= 1).collect();
    let d = check_worlds(&prog, &worlds);
    if !d.is_empty() {
        return d;
    }
    empty_set(s, &worlds).into_iter().collect()
}

/// Checks `worlds` in increasing order (spread over the available cores when
/// there are many); the diagnostics at the smallest failing size, or none.
fn check_worlds(prog: &Prog<'_>, worlds: &[i64]) -> Vec<Diagnostic> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if threads < 2 || worlds.len() < PARALLEL_MIN_WORLDS {
        return worlds
            .iter()
            .find_map(|&w| Some(check_one_world(prog, w)).filter(|d| !d.is_empty()))
            .unwrap_or_default();
    }
    // Worlds are handed out in increasing order, and a worker stops only past
    // the smallest failure found so far: every smaller world is checked, so
    // the answer is the same as the sequential loop's.
    let next = AtomicUsize::new(0);
    let first_fail = AtomicUsize::new(usize::MAX);
    let found: Mutex<Vec<(usize, Vec<Diagnostic>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(worlds.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= worlds.len() || i > first_fail.load(Ordering::Relaxed) {
                    break;
                }
                let d = check_one_world(prog, worlds[i]);
                if !d.is_empty() {
                    first_fail.fetch_min(i, Ordering::Relaxed);
                    found.lock().unwrap_or_else(PoisonError::into_inner).push((i, d));
                }
            });
        }
    });
    let found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    found
        .into_iter()
        .min_by_key(|(i, _)| *i)
        .map(|(_, d)| d)
        .unwrap_or_default()
}

/// An `empty verify set` diagnostic saying why, when no (world, scalars)
/// combination of the verify set is checked: no world size, a scalar range
/// empty at every size, or `#[requires]` false everywhere.
fn empty_set(s: &Schedule, worlds: &[i64]) -> Option<Diagnostic> {
    let mut empty_range: Vec<Option<(i64, i64, i64)>> = vec![None; s.scalars.len()];
    let mut all_ranges_empty = true;
    for &w in worlds {
        let mut ranges = Vec::with_capacity(s.scalars.len());
        for (i, slot) in empty_range.iter_mut().enumerate() {
            let (lo, hi) = scalar_range(s, i, w).ok()?;
            if hi <= lo {
                slot.get_or_insert((w, lo, hi));
            }
            ranges.push((lo, hi));
        }
        if ranges.iter().all(|(lo, hi)| lo < hi) {
            all_ranges_empty = false;
            // a combination whose `#[requires]` holds is checked
            let mut combo: Vec<i64> = ranges.iter().map(|r| r.0).collect();
            loop {
                if requires_holds(s, w, &combo).ok()? {
                    return None;
                }
                let Some(k) = (0..combo.len()).rev().find(|&k| combo[k] + 1 < ranges[k].1) else {
                    break;
                };
                combo[k] += 1;
                for (c, r) in combo.iter_mut().zip(&ranges).skip(k + 1) {
                    *c = r.0;
                }
            }
        }
    }
    let sizes = world_list(worlds);
    let (span, why) = if worlds.is_empty() {
        (s.verify.span, "`#[verify]` holds no world size".to_owned())
    } else if all_ranges_empty {
        let (i, (w, lo, hi)) = empty_range
            .iter()
            .enumerate()
            .find_map(|(i, e)| e.map(|e| (i, e)))
            .unwrap_or((0, (worlds[0], 0, 0)));
        let span = s
            .verify
            .scalars
            .iter()
            .find(|r| r.scalar == i)
            .map_or(s.verify.span, |r| r.span);
        let name = s.scalars.get(i).map_or("?", |x| x.name.as_str());
        (
            span,
            format!("the range of `{name}` is empty at every world size of `#[verify]` ({sizes}), e.g. `{lo}..{hi}` at world = {w}"),
        )
    } else {
        let span = s.requires.first().map_or(s.verify.span, |r| r.span);
        let reqs: Vec<String> = s.requires.iter().map(ToString::to_string).collect();
        (
            span,
            format!(
                "`#[requires({})]` holds at none of the world sizes of `#[verify]` ({sizes}) with any scalar values in their ranges",
                reqs.join(", ")
            ),
        )
    };
    Some(
        Diagnostic::new(
            DiagKind::EmptyVerifySet,
            span,
            format!("{why}, so nothing would be checked"),
        )
        .with_hint("the verify set must leave at least one (world, scalars) combination to check"),
    )
}

/// "3, 5, 6" or "1, 2, 3, .., 64" for a long list.
fn world_list(worlds: &[i64]) -> String {
    let shown: Vec<String> = worlds.iter().take(6).map(i64::to_string).collect();
    match worlds.last() {
        Some(last) if worlds.len() > 6 => format!("{}, .., {last}", shown.join(", ")),
        _ => shown.join(", "),
    }
}

/// At most this many scalar combinations per world size.
const MAX_COMBINATIONS: u128 = 1 << 20;

/// Verify sets with fewer sizes are checked on the calling thread.
const PARALLEL_MIN_WORLDS: usize = 24;

/// All scalar combinations at one world size: the diagnostics of the
/// earliest failing check (first combination among equals), or none.
fn check_one_world(prog: &Prog<'_>, world: i64) -> Vec<Diagnostic> {
    let s = prog.s;
    let combos = match combinations(s, world) {
        Ok(c) => c,
        Err(d) => return vec![d],
    };
    let mut best: Option<(u8, Vec<Diagnostic>)> = None;
    for combo in combos {
        match requires_holds(s, world, &combo) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(d) => return vec![d],
        }
        let diags = world_checks(prog, world, &combo, true, true);
        let Some(step) = diags.iter().map(|d| d.kind.step()).min() else {
            continue;
        };
        if best.as_ref().is_none_or(|(b, _)| step < *b) {
            best = Some((step, diags));
        }
    }
    best.map(|(_, d)| d).unwrap_or_default()
}

/// Every scalar combination at `world`, in lexicographic order.
fn combinations(s: &Schedule, world: i64) -> Result<Vec<Vec<i64>>, Diagnostic> {
    let mut combos: Vec<Vec<i64>> = vec![Vec::new()];
    let mut count: u128 = 1;
    for i in 0..s.scalars.len() {
        let (lo, hi) = scalar_range(s, i, world)?;
        count = count.saturating_mul(u128::try_from(i128::from(hi) - i128::from(lo)).unwrap_or(0));
        if count > MAX_COMBINATIONS {
            let span = s
                .verify
                .scalars
                .iter()
                .find(|r| r.scalar == i)
                .map_or(s.span, |r| r.span);
            return Err(Diagnostic::new(
                DiagKind::EvaluationError,
                span,
                format!("with world = {world}, the scalar ranges give more than 2^20 combinations to check"),
            ));
        }
        let mut next = Vec::new();
        for c in &combos {
            for v in lo..hi {
                let mut c2 = c.clone();
                c2.push(v);
                next.push(c2);
            }
        }
        combos = next;
    }
    Ok(combos)
}

/// Steps 1-7 on a compiled program (first on rank 0 alone when `reduce` and
/// the schedule is rotation-symmetric); `blame` looks for a loop bound to
/// name when an output element was never written (see `check::blame`).
fn world_checks(prog: &Prog<'_>, world: i64, scalars: &[i64], reduce: bool, blame: bool) -> Vec<Diagnostic> {
    if scalars.len() != prog.s.scalars.len() {
        return vec![Diagnostic::new(
            DiagKind::EvaluationError,
            prog.s.span,
            format!(
                "`{}` takes {} scalar values, but {} were given",
                prog.s.name,
                prog.s.scalars.len(),
                scalars.len()
            ),
        )];
    }
    // A schedule that is the same on every rank up to a rotation is checked
    // on rank 0, which also reports a wrong `all_gather` or `all_to_all`
    // output as the full check would; anything else, or anything else
    // wrong, is decided (and reported) by the full check.
    if reduce {
        match symmetry::check(prog, world, scalars) {
            Some(postcondition::Rotated::Holds) => return Vec::new(),
            Some(postcondition::Rotated::Violated(d, wrong)) => {
                return blamed(prog, world, scalars, vec![d], Some(&wrong), blame);
            }
            None => {}
        }
    }
    full_checks(prog, world, scalars, blame)
}

/// Whether a variant of a schedule (see `check::blame`) passes steps 0 to
/// 7 at `world`.
fn variant_passes(s: &Schedule, world: i64, scalars: &[i64]) -> bool {
    let (prog, diags) = compile(s);
    diags.is_empty() && world_checks(&prog, world, scalars, true, false).is_empty()
}

/// Steps 1-7 on every rank (the caller has checked the number of scalars);
/// `blame` as for [`world_checks`].
pub(crate) fn full_checks(prog: &Prog<'_>, world: i64, scalars: &[i64], blame: bool) -> Vec<Diagnostic> {
    // The postcondition's root is evaluated with the statements (step 1) and
    // range-checked with them (step 2).
    let mut root_error = None;
    if let Some(root) = post_root(prog.s) {
        match eval_attr(root, world, scalars) {
            Err(d) => return vec![d],
            Ok(v) if !(0..world).contains(&v) => {
                let sit = Situation::plain(prog, world, scalars);
                root_error = Some(Diagnostic::new(
                    DiagKind::RankOutOfRange,
                    root.span,
                    format!("{sit}, the postcondition's root is {v}, which is not in `0..world`"),
                ));
            }
            Ok(_) => {}
        }
    }
    let mut un = match unroll(prog, world, scalars) {
        Ok(u) => u,
        Err(mut d) => {
            if d.iter().all(|x| x.kind.step() == 2) {
                d.extend(root_error);
            }
            return d;
        }
    };
    if let Some(d) = root_error {
        return vec![d];
    }
    let d = matching::check(&mut un);
    if !d.is_empty() {
        return d;
    }
    let order = match deadlock::lockstep(&un).map_or_else(|| deadlock::check(&un), Ok) {
        Ok(order) => order,
        Err(mut d) => {
            // the hazard check does not depend on the execution: report its
            // errors too, at other statements, up to the cap
            let mut spans: Vec<_> = d.iter().map(|x| x.span).collect();
            for h in hazards::check(&un) {
                if d.len() >= crate::diag::MAX_DIAGNOSTICS {
                    break;
                }
                if !spans.contains(&h.span) {
                    spans.push(h.span);
                    d.push(h);
                }
            }
            return d;
        }
    };
    let d = hazards::check(&un);
    if !d.is_empty() {
        return d;
    }
    let d = completion::check(&un);
    if !d.is_empty() {
        return d;
    }
    let (d, wrong) = postcondition::check_located(&un, &order);
    blamed(prog, world, scalars, d, wrong.as_ref(), blame)
}

/// `d`, a failing postcondition's diagnostics, with a note at the loop
/// bound to blame when `blame` and the wrong element was never written,
/// or at the operator to blame when it was (see `check::blame`).
fn blamed(
    prog: &Prog<'_>,
    world: i64,
    scalars: &[i64],
    mut d: Vec<Diagnostic>,
    wrong: Option<&postcondition::Wrong>,
    blame: bool,
) -> Vec<Diagnostic> {
    let passes = |v: &Schedule| variant_passes(v, world, scalars);
    let note = match wrong {
        Some(w) if blame && w.writer == crate::trace::NONE => blame::loop_bound(prog.s, world, &passes),
        Some(_) if blame => blame::operator(prog.s, world, scalars, &passes),
        _ => None,
    };
    if let (Some((span, note)), Some(first)) = (note, d.first_mut()) {
        if span == first.span && first.hint.is_none() {
            // the statement at fault wrote the element: a note there would
            // repeat the error's place, so it is the hint
            first.hint = Some(note);
        } else {
            first.notes.push((span, note));
        }
    }
    d
}

fn post_root(s: &Schedule) -> Option<&Expr> {
    match &s.postcondition.as_ref()?.kind {
        crate::ir::PostKind::Broadcast { root, .. } | crate::ir::PostKind::Reduce { root, .. } => Some(root),
        _ => None,
    }
}

/// Evaluates an attribute expression (`#[requires]`, a scalar range bound, a
/// postcondition root) that may use `world` and scalars.
fn eval_attr(e: &Expr, world: i64, scalars: &[i64]) -> Result<i64, Diagnostic> {
    let err = |kind, msg: String| Diagnostic::new(kind, e.span, msg);
    match &e.kind {
        ExprKind::Int(v) => Ok(*v),
        ExprKind::Name(n) => match n.kind {
            NameKind::World => Ok(world),
            NameKind::Scalar(i) => scalars
                .get(i)
                .copied()
                .ok_or_else(|| err(DiagKind::UnknownName, format!("`{}` has no value here", n.text))),
            _ => Err(err(
                DiagKind::UnknownName,
                format!("`{}` cannot be used in an attribute", n.text),
            )),
        },
        ExprKind::Unary(op, x) => {
            let v = eval_attr(x, world, scalars)?;
            unary(*op, v).map_err(|x| err(DiagKind::EvaluationError, format!("with world = {world}, {x}")))
        }
        ExprKind::Binary(op, a, b) => {
            let va = eval_attr(a, world, scalars)?;
            if let Some(v) = short_circuit(*op, va) {
                return Ok(v);
            }
            let vb = eval_attr(b, world, scalars)?;
            binary(*op, va, vb).map_err(|x| err(DiagKind::EvaluationError, format!("with world = {world}, {x}")))
        }
        ExprKind::Call(f, args) => {
            let mut vals = [0_i64; 2];
            for (slot, a) in vals.iter_mut().zip(args) {
                *slot = eval_attr(a, world, scalars)?;
            }
            call(*f, &vals).map_err(|x| err(DiagKind::EvaluationError, format!("with world = {world}, {x}")))
        }
        ExprKind::Count(_) => Err(err(
            DiagKind::UnknownName,
            "a count cannot be used in an attribute".to_owned(),
        )),
    }
}

/// Whether every `#[requires]` holds at `world` with these scalars (in the
/// order of [`Schedule::scalars`]). An expression that cannot be evaluated
/// gives its diagnostic.
pub fn requires_holds(s: &Schedule, world: i64, scalars: &[i64]) -> Result<bool, Diagnostic> {
    for r in &s.requires {
        if eval_attr(r, world, scalars)? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The values of scalar `index` checked at `world`: the half-open range
/// `lo..hi` (empty when `hi <= lo`). Scalars are `usize`, so `lo` is raised
/// to 0. A scalar without a range gives a `missing range` diagnostic.
pub fn scalar_range(s: &Schedule, index: usize, world: i64) -> Result<(i64, i64), Diagnostic> {
    if s.scalars.get(index).is_some_and(|x| x.op) {
        return Ok((0, crate::ir::Op::ALL.len() as i64));
    }
    let Some(r) = s.verify.scalars.iter().find(|r| r.scalar == index) else {
        let (name, span) = s
            .scalars
            .get(index)
            .map_or(("?", s.span), |x| (x.name.as_str(), x.span));
        return Err(Diagnostic::new(
            DiagKind::MissingRange,
            span,
            format!("scalar parameter `{name}` has no range in `#[verify]`"),
        ));
    };
    let lo = eval_attr(&r.lo, world, &[])?;
    let hi = eval_attr(&r.hi, world, &[])?;
    let hi = if r.inclusive { hi.saturating_add(1) } else { hi };
    Ok((lo.max(0), hi))
}

impl Schedule {
    /// Whether `world` is one of the sizes `#[verify]` checks at compile
    /// time (if not, the generated code checks it at run time).
    pub fn verify_set_contains(&self, world: i64) -> bool {
        match &self.verify.world {
            WorldSet::Range { lo, hi, inclusive } => world >= *lo && (world < *hi || (*inclusive && world == *hi)),
            WorldSet::List(l) => l.contains(&world),
        }
    }

    /// The sizes of the verify set, increasing, without duplicates (at most
    /// the first 2^16 of a range: step 0 rejects larger sets).
    pub fn verify_worlds(&self) -> Vec<i64> {
        match &self.verify.world {
            WorldSet::Range { lo, hi, inclusive } => {
                let end = if *inclusive { *hi } else { hi.saturating_sub(1) };
                if end < *lo {
                    Vec::new()
                } else {
                    (*lo..=end).take(crate::compile::MAX_WORLDS).collect()
                }
            }
            WorldSet::List(l) => {
                let mut v = l.clone();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }
}

/// A cached verdict: `Err` holds the full text of the first diagnostic.
type Verdict = Result<(), String>;

/// The verdicts by (world size, scalars); each key's cell is filled once.
type Verdicts = BTreeMap<(i64, Vec<i64>), Arc<OnceLock<Verdict>>>;

/// Run-time verification cache for one schedule: the generated code keeps
/// one per schedule for the life of the process and calls
/// [`VerifyCache::check`] when `comm.world()` is outside the verify set, so
/// each (world size, scalars) is checked once per process.
///
/// Ranks that run as threads of one process share the check: the first
/// caller of a key runs it and the others wait for its verdict (a panic
/// while checking lets the next waiter run it again). The generated code
/// verifies before the schedule's first communication, so no rank of the
/// process has started waiting on a peer while the check runs; ranks in
/// other processes check the same key at the same time, and their start
/// differs only by the difference between the two checks' durations.
#[derive(Debug)]
pub struct VerifyCache {
    map: Mutex<Verdicts>,
    /// How many checks ran (for tests).
    runs: AtomicUsize,
}

impl VerifyCache {
    /// An empty cache (usable in a `static`).
    pub const fn new() -> Self {
        Self {
            map: Mutex::new(BTreeMap::new()),
            runs: AtomicUsize::new(0),
        }
    }

    /// How many checks this cache has run.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.load(Ordering::Relaxed)
    }

    /// Checks `s` at `world` with `scalars` (steps 0-7, as
    /// [`check_world`]), once per distinct argument pair; concurrent callers
    /// with the same pair wait for the one that checks. `Err` carries the
    /// first diagnostic's full text, the message the compiler would have
    /// printed.
    pub fn check(&self, s: &Schedule, world: i64, scalars: &[i64]) -> Result<(), String> {
        let cell = Arc::clone(
            self.map
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((world, scalars.to_vec()))
                .or_default(),
        );
        // checked without the map's lock held: other keys do not wait
        cell.get_or_init(|| {
            self.runs.fetch_add(1, Ordering::Relaxed);
            match check_world(s, world, scalars).first() {
                Some(d) => Err(d.to_string()),
                None => Ok(()),
            }
        })
        .clone()
    }
}

impl Default for VerifyCache {
    fn default() -> Self {
        Self::new()
    }
}
