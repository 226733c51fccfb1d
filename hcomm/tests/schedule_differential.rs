//! The schedule checker against execution: random schedules are checked
//! and run for real through hcomm's schedule executor, on the host backend
//! and on the HCCL stand-in. Accepted schedules must complete with exactly
//! the buffers the checker's symbolic execution predicts; rejected ones,
//! run without the run-time check, must fail (deadlocks and unmatched
//! operations by hanging until the timeout).
//!
//! `cargo test -p hcomm --test schedule_differential` runs a fixed-seed
//! sample. More:
//!
//! ```text
//! HCOMM_DIFF_CASES=50000 HCOMM_DIFF_SEED=7 cargo test --release -p hcomm \
//!     --test schedule_differential -- --nocapture
//! ```
//!
//! `HCOMM_DIFF_CASES` sets the number of cases (every rejected one is then
//! run, each hanging one costing a 200 ms timeout), `HCOMM_DIFF_SEED` the
//! seed, and `HCOMM_DIFF_CASE=i` runs case `i` alone. `HCOMM_POST_CASES`,
//! `HCOMM_LARGE_CASES`, `HCOMM_TWO_CASES` and `HCOMM_COUNT_CASES` set the
//! numbers of generated cases with postconditions (see each test).
//!
//! On the stand-in (a device backend) a schedule runs through the plan the
//! checker derives from it, so a rejected schedule fails there at once,
//! with the checker's message, instead of hanging.

mod differential;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use differential::build::{self as b, ACC, INP, OUT};
use differential::gen::{self, Case};
use differential::interp::Prologue;
use differential::{
    execute, execute_sized, hangs, initial, judge, prediction, prediction_at, Backend, Verdict, ACCEPTED_TIMEOUT,
};
use hcomm_schedule::ir::{Collective, Op};
use hcomm_schedule::DiagKind;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Figures of one run.
#[derive(Default, Debug)]
struct Figures {
    /// Cases per checker verdict.
    verdicts: BTreeMap<String, usize>,
    /// Runs per (backend, verdict, outcome).
    outcomes: BTreeMap<(String, String), usize>,
    hangs_skipped: usize,
    /// Accepted cases that receive tags in another order than sent.
    tag_reorder: usize,
    /// Accepted cases with a request in flight across a collective.
    inflight_collective: usize,
    disagreements: Vec<String>,
}

/// Judges cases `indices` of `seed` on four threads.
/// At most `hang_budget` cases that hang (a timeout each) run; the rest
/// are only checked.
fn sweep(seed: u64, indices: &[u64], hang_budget: usize) -> Figures {
    let figures = Mutex::new(Figures::default());
    let next = AtomicUsize::new(0);
    let hanging = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&index) = indices.get(i) else { break };
                let case = gen::case(seed, index);
                let p = prediction(&case);
                let label = match p.0 {
                    Verdict::Accepted => "accepted".to_owned(),
                    Verdict::Rejected(k) => format!("rejected: {k}"),
                };
                let run = !hangs(p.0) || hanging.fetch_add(1, Ordering::Relaxed) < hang_budget;
                let backends: &[Backend] = if run { &[Backend::Host, Backend::Standin] } else { &[] };
                let s: &'static _ = Box::leak(Box::new(case.schedule.clone()));
                let results: Vec<_> = backends.iter().map(|&b| (b, judge(&case, s, &p, b))).collect();
                let mut f = figures.lock().unwrap();
                *f.verdicts.entry(label.clone()).or_default() += 1;
                if p.0 == Verdict::Accepted {
                    f.tag_reorder += usize::from(case.tag_reorder);
                    f.inflight_collective += usize::from(case.inflight_collective);
                }
                f.hangs_skipped += usize::from(!run);
                for (b, r) in results {
                    match r {
                        Ok(outcome) => *f.outcomes.entry((format!("{b:?}: {label}"), outcome)).or_default() += 1,
                        Err(e) => f.disagreements.push(format!("case {index} (seed {seed}): {e}")),
                    }
                }
            });
        }
    });
    figures.into_inner().unwrap()
}

fn report(f: &Figures) {
    eprintln!(
        "differential: {} cases ({} hanging ones only checked), {} disagreements",
        f.verdicts.values().sum::<usize>(),
        f.hangs_skipped,
        f.disagreements.len()
    );
    for (v, c) in &f.verdicts {
        eprintln!("  {v}: {c}");
    }
    eprintln!(
        "  accepted with tags received out of order: {}, with requests across a collective: {}",
        f.tag_reorder, f.inflight_collective
    );
    for ((v, o), c) in &f.outcomes {
        eprintln!("  {v} -> {o}: {c}");
    }
}

#[test]
fn the_checker_agrees_with_execution() {
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_DIFF_CASES");
    let indices: Vec<u64> = match env_u64("HCOMM_DIFF_CASE") {
        Some(i) => vec![i],
        None => (0..cases.unwrap_or(4000)).collect(),
    };
    let f = sweep(seed, &indices, if cases.is_some() { usize::MAX } else { 80 });
    report(&f);
    assert!(
        f.disagreements.is_empty(),
        "{} disagreements, first:\n{}",
        f.disagreements.len(),
        f.disagreements.join("\n\n")
    );
    // the sample exercises every verdict the generator aims at
    if indices.len() >= 1000 {
        for kind in [
            "accepted",
            "rejected: deadlock",
            "rejected: unmatched",
            "rejected: buffer hazard",
        ] {
            let n: usize = f
                .verdicts
                .iter()
                .filter(|(v, _)| v.starts_with(kind))
                .map(|(_, c)| c)
                .sum();
            assert!(n * 50 >= indices.len(), "only {n} cases `{kind}..`: {:?}", f.verdicts);
        }
    }
}

// ---- disagreements found, kept as fixed schedules ----

fn fixed(world: usize, body: Vec<hcomm_schedule::ir::Stmt>) -> Case {
    Case {
        schedule: b::schedule("fixed", world as i64, body),
        world,
        n: 2,
        flavor: gen::Flavor::Clean,
        tag_reorder: false,
        inflight_collective: false,
    }
}

/// Judges `case` on both backends; panics on a disagreement.
fn agree(case: &Case) -> Verdict {
    let p = prediction(case);
    let s: &'static _ = Box::leak(Box::new(case.schedule.clone()));
    for backend in [Backend::Host, Backend::Standin] {
        if let Err(e) = judge(case, s, &p, backend) {
            panic!("{e}");
        }
    }
    p.0
}

/// `reduce`'s output is used on the root only: a pending receive into the
/// same region on another rank is no hazard, for the checker and for the
/// executor alike (the executor once checked the output on every rank).
#[test]
fn reduce_output_off_the_root_is_free_for_pending_receives() {
    let case = fixed(
        2,
        vec![
            b::irecv(
                "h1",
                b::chunk(b::buf(OUT), b::left(b::int(1))),
                b::left(b::int(1)),
                0,
                None,
            ),
            b::isend("h2", b::chunk(b::buf(ACC), b::rank()), b::right(b::int(1)), 0),
            b::coll(
                Collective::Reduce {
                    src: b::chunk(b::buf(INP), b::int(0)),
                    dst: b::chunk(b::buf(OUT), b::int(0)),
                    op: Op::Prod.into(),
                    root: b::int(0),
                },
                None,
            ),
            b::wait(&["h1".to_owned(), "h2".to_owned()]),
        ],
    );
    assert_eq!(agree(&case), Verdict::Accepted);
}

/// `all_reduce(r -> r)` (out of place, input and output the same region)
/// is a hazard for the checker; the executor, which receives the in-place
/// form `all_reduce(r)` as the same two regions, cannot tell them apart and
/// runs it in place. The checker is the stricter side, as the language
/// says.
#[test]
fn identical_input_and_output_regions_are_rejected_but_run_in_place() {
    let region = || b::chunk(b::buf(OUT), b::int(1));
    let case = fixed(
        4,
        vec![b::coll(
            Collective::AllReduce {
                src: region(),
                dst: Some(region()),
                op: Op::Max.into(),
            },
            None,
        )],
    );
    let p = prediction(&case);
    assert_eq!(p.0, Verdict::Rejected(DiagKind::BufferHazard), "{:?}", p.1);
    let s: &'static _ = Box::leak(Box::new(case.schedule.clone()));
    let out = execute(Backend::Host, s, 4, 2, ACCEPTED_TIMEOUT, Prologue::Unchecked).unwrap();
    for (r, bufs) in out.iter().enumerate() {
        for (i, &v) in bufs[OUT].iter().enumerate() {
            let want = if (2..4).contains(&i) {
                (0..4).map(|q| initial(q, OUT as u32, i as u32)).max().unwrap()
            } else {
                initial(r as u32, OUT as u32, i as u32)
            };
            assert_eq!(v, want, "rank {r} out[{i}]");
        }
    }
}

// ---- postconditions of the newer forms ----

/// Whether `out` ends as `pc`'s postcondition says on every rank when the
/// schedule runs on the host backend at `n`.
fn runs_to(pc: &differential::postgen::PostCase, n: i64, prologue: Prologue) -> hcomm::Result<bool> {
    let s: &'static _ = Box::leak(Box::new(pc.case.schedule.clone()));
    execute(Backend::Host, s, pc.case.world, n, ACCEPTED_TIMEOUT, prologue).map(|out| {
        out.iter()
            .enumerate()
            .all(|(r, bufs)| bufs[OUT] == pc.reference(r, n as usize))
    })
}

/// The checker's verdict on `pc` and, when execution disagrees with it,
/// how: an accepted case must run to the checker's prediction and to the
/// serial reference at its `n`; a case rejected for its postcondition
/// must run, unchecked, to something else than the reference at some `n`
/// of `ns`, and carry a planted bug; a planted case rejected otherwise
/// must fail as [`judge`] expects.
fn post_verdict(
    pc: &differential::postgen::PostCase,
    ns: std::ops::RangeInclusive<i64>,
) -> (Verdict, &'static str, Option<String>) {
    let p = prediction(&pc.case);
    let (label, wrong) = post_outcome(pc, &p, ns);
    (p.0, label, wrong)
}

/// [`post_verdict`]'s judgement of `pc` given the checker's prediction `p`.
fn post_outcome(
    pc: &differential::postgen::PostCase,
    p: &differential::Prediction,
    ns: std::ops::RangeInclusive<i64>,
) -> (&'static str, Option<String>) {
    let s: &'static _ = Box::leak(Box::new(pc.case.schedule.clone()));
    match p.0 {
        Verdict::Accepted => {
            let agree = judge(&pc.case, s, p, Backend::Host).err();
            let exact = match runs_to(pc, pc.case.n, Prologue::Checked) {
                Ok(true) => None,
                Ok(false) => Some("accepted, but `out` differs from the postcondition's reference".to_owned()),
                Err(e) => Some(format!("accepted, but the run failed: {e}")),
            };
            ("accepted", agree.or(exact))
        }
        Verdict::Rejected(DiagKind::PostconditionViolated) => {
            let first = p.1.first().map(ToString::to_string).unwrap_or_default();
            let wrong_somewhere = ns
                .clone()
                .any(|n| matches!(runs_to(pc, n, Prologue::Unchecked), Ok(false)));
            let clean = pc
                .planted
                .is_none()
                .then(|| format!("a bug-free case is rejected: {first}"));
            let strict =
                (!wrong_somewhere).then(|| format!("rejected ({first}), but every n of {ns:?} runs to the reference"));
            ("rejected: postcondition violated", clean.or(strict))
        }
        // a planted bug may make a hazard (receiving over the block a
        // batch sends): the run must then fail as for the other generated
        // cases
        Verdict::Rejected(_) if pc.planted.is_some() => {
            ("rejected otherwise", judge(&pc.case, s, p, Backend::Host).err())
        }
        Verdict::Rejected(k) => (
            "rejected otherwise",
            Some(format!(
                "a bug-free case is rejected: {k}: {:?}",
                p.1.first().map(ToString::to_string)
            )),
        ),
    }
}

/// Generated schedules with postconditions (`all_gather(out)` in place,
/// `shift` over `wait all`, the block-wise `shift`, a `broadcast` over
/// `ceil_log2(world)` rounds), half with a planted bug that shows only at
/// some `n`, some worlds or some blocks, at worlds 1 to 12 and `n` 1 to 5.
/// An accepted case runs on the host backend to the checker's prediction
/// and to the serial reference of its postcondition; a case rejected for
/// its postcondition runs, unchecked, to something else than the reference
/// at some `n` of 1 to 5; a bug-free case is accepted. Anything else is a
/// disagreement. `HCOMM_POST_CASES` sets the number of cases (default 400).
#[test]
fn generated_postconditions_hold_exactly_when_the_checker_accepts() {
    use differential::postgen;
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_POST_CASES").unwrap_or(400);
    let next = AtomicUsize::new(0);
    let counts = Mutex::new(BTreeMap::<String, usize>::new());
    let disagreements = Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed) as u64;
                if index >= cases {
                    break;
                }
                let pc = postgen::case(seed, index);
                let (_, label, wrong) = post_verdict(&pc, 1..=5);
                *counts
                    .lock()
                    .unwrap()
                    .entry(format!(
                        "{label}, {}",
                        if pc.planted.is_some() { "planted" } else { "clean" }
                    ))
                    .or_default() += 1;
                if let Some(w) = wrong {
                    disagreements.lock().unwrap().push(format!(
                        "{w}\ncase {index} (seed {seed}), world {}, n {}, planted: {:?}\n{}",
                        pc.case.world, pc.case.n, pc.planted, pc.source
                    ));
                }
            });
        }
    });
    let counts = counts.into_inner().unwrap();
    let disagreements = disagreements.into_inner().unwrap();
    eprintln!("postconditions: {counts:?}, {} disagreements", disagreements.len());
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
    for kind in ["accepted, clean", "rejected: postcondition violated, planted"] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) * 8 >= cases as usize,
            "too few `{kind}`: {counts:?}"
        );
    }
}

// ---- bugs that show only at large worlds, counts and lengths ----

/// Generated schedules ([`differential::largegen`]) whose planted bug
/// shows only above 64 ranks (a loop capped at 63 steps or 6 rounds, a
/// guard `rank < 64`, a block index or a peer wrapping at 64), verified
/// at a small world and at `W` of 64 to 72: every planted case is rejected
/// for its postcondition and runs, unchecked, to wrong data at `W` (the
/// wrapping peer: rejected as unmatched, and its unchecked run hangs until
/// the timeout or fails); every clean case is accepted
/// and runs on `W` host threads to the checker's prediction and the serial
/// reference. Verified at the small world only, the same schedule is
/// checked at run time at `W`: a planted case gives `Err(Schedule)` at the
/// call, a clean one runs to the reference. `HCOMM_LARGE_CASES` sets the
/// number of cases (default 15).
#[test]
fn bugs_that_show_only_above_64_ranks_are_rejected_exactly() {
    use differential::largegen;
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_LARGE_CASES").unwrap_or(15);
    let mut counts = BTreeMap::<String, usize>::new();
    let mut disagreements = Vec::new();
    for index in 0..cases {
        let pc = largegen::case(seed, index);
        let (verdict, label, wrong) = post_verdict(&pc, 1..=1);
        let unmatched = [DiagKind::UnmatchedSend, DiagKind::UnmatchedRecv, DiagKind::Deadlock].map(Verdict::Rejected);
        let right = match pc.planted {
            None => verdict == Verdict::Accepted,
            Some(largegen::PEER_WRAP) => unmatched.contains(&verdict),
            Some(_) => verdict == Verdict::Rejected(DiagKind::PostconditionViolated),
        };
        let verdict = (!right).then(|| format!("the checker's verdict is {verdict:?}"));
        // verified at the small world only, `W` is checked at the call
        let late = largegen::case_verified_small(seed, index);
        let at_call = match (runs_to(&late, late.case.n, Prologue::Checked), pc.planted) {
            (Ok(true), None) | (Err(hcomm::Error::Schedule { .. }), Some(_)) => None,
            (got, planted) => Some(format!(
                "verified at the small world only, the run at world {} gives {got:?} (planted: {planted:?})",
                late.case.world
            )),
        };
        *counts.entry(format!("{label}, {:?}", pc.planted)).or_default() += 1;
        if let Some(w) = wrong.or(verdict).or(at_call) {
            disagreements.push(format!(
                "{w}\ncase {index} (seed {seed}), world {}, n {}, planted: {:?}\n{}",
                pc.case.world, pc.case.n, pc.planted, pc.source
            ));
        }
    }
    eprintln!("large worlds: {counts:?}, {} disagreements", disagreements.len());
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
}

/// Generated broadcasts over two length variables
/// ([`differential::twogen`]) whose planted bug leaves a gap only where
/// one variable passes the other by a margin: every planted case is
/// rejected for its postcondition with the point named, and runs,
/// unchecked, to wrong data at some `(n, m)` of `1..=7` squared (and to
/// right data at `n = m = 1`, where a sampler starts); every clean case
/// is accepted and runs to the checker's prediction and the serial
/// reference at its `(n, m)`. `HCOMM_TWO_CASES` sets the number of cases
/// (default 60).
#[test]
fn bugs_that_show_only_at_some_points_of_two_lengths_are_rejected_exactly() {
    use differential::twogen;
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_TWO_CASES").unwrap_or(60);
    let mut counts = BTreeMap::<String, usize>::new();
    let mut disagreements = Vec::new();
    for index in 0..cases {
        let tc = twogen::case(seed, index);
        let (n, m) = (tc.case.n, tc.m);
        let p = prediction_at(&tc.case, &[n, m]);
        let first = p.1.first().map(ToString::to_string).unwrap_or_default();
        let wrong = match (&tc.planted, p.0) {
            (None, Verdict::Accepted) => accepted_two_run(&tc, &p, n, m),
            (Some(_), Verdict::Rejected(DiagKind::PostconditionViolated)) => {
                let right = |n, m| two_right(&tc, n, m, Prologue::Unchecked).unwrap_or(false);
                let named = first.contains("n = ") && first.contains("m = ");
                if !right(1, 1) {
                    Some("the planted bug shows at n = m = 1 already".to_owned())
                } else if (1..=7).all(|n| (1..=7).all(|m| right(n, m))) {
                    Some(format!(
                        "rejected ({first}), but every (n, m) of 1..=7 runs to the reference"
                    ))
                } else {
                    (!named).then(|| format!("the diagnostic names no point (n, m): {first}"))
                }
            }
            (planted, v) => Some(format!("planted {planted:?}, but the checker says {v:?}: {first}")),
        };
        *counts
            .entry(format!("{:?}, planted {}", p.0, tc.planted.is_some()))
            .or_default() += 1;
        if let Some(w) = wrong {
            disagreements.push(format!(
                "{w}\ncase {index} (seed {seed}), world {}, n {n}, m {m}, planted: {:?}\n{}",
                tc.case.world, tc.planted, tc.source
            ));
        }
    }
    eprintln!(
        "two length variables: {counts:?}, {} disagreements",
        disagreements.len()
    );
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
}

/// Runs a [`TwoCase`](differential::twogen::TwoCase) at `(n, m)` on the
/// host backend.
fn run_two(
    tc: &differential::twogen::TwoCase,
    n: i64,
    m: i64,
    prologue: Prologue,
) -> hcomm::Result<Vec<Vec<Vec<u64>>>> {
    let s: &'static _ = Box::leak(Box::new(tc.case.schedule.clone()));
    execute_sized(
        Backend::Host,
        s,
        tc.case.world,
        &[n, m],
        &tc.sizes(n, m),
        ACCEPTED_TIMEOUT,
        prologue,
    )
}

/// Whether every rank's `out` ends as `tc`'s serial reference at `(n, m)`.
fn two_right(tc: &differential::twogen::TwoCase, n: i64, m: i64, prologue: Prologue) -> hcomm::Result<bool> {
    run_two(tc, n, m, prologue).map(|out| out.iter().all(|bufs| bufs[OUT] == tc.reference(n, m)))
}

/// What is wrong with an accepted `tc` run, checked, at `(n, m)`: the run
/// fails, or a rank's `out` differs from the checker's prediction `p` (at
/// that point) or from the serial reference.
fn accepted_two_run(
    tc: &differential::twogen::TwoCase,
    p: &differential::Prediction,
    n: i64,
    m: i64,
) -> Option<String> {
    match run_two(tc, n, m, Prologue::Checked) {
        Err(e) => Some(format!("accepted, but the run failed: {e}")),
        Ok(out) => out.iter().enumerate().find_map(|(r, bufs)| {
            let predicted = p.2.as_ref().map(|v| &v[r][OUT]);
            let differs =
                predicted.is_some_and(|want| want.iter().zip(&bufs[OUT]).any(|(w, g)| w.is_some_and(|w| w != *g)));
            if differs {
                Some(format!("rank {r}'s `out` differs from the checker's prediction"))
            } else {
                (bufs[OUT] != tc.reference(n, m)).then(|| format!("rank {r}'s `out` differs from the serial reference"))
            }
        }),
    }
}

/// The two-length broadcasts under declared ranges
/// ([`differential::rangegen`]: `n in 0..`, `LO..=HI`, `LO..HI` or the
/// default, for each of `n` and `m`). The checker is exact for the
/// declared ranges: a case is rejected for its postcondition, naming a
/// point `(n, m)`, exactly when its planted gap shows at some point of the
/// ranges, and its unchecked run there is wrong; every other case, planted
/// or not, is accepted, runs to the serial reference at every point of
/// the ranges (unbounded ones up to 3 past their least value, empty
/// buffers included) and to the checker's prediction at its own point,
/// and a checked call just outside a declared range is
/// `Err(Precondition)`. `HCOMM_RANGE_CASES` sets the number of cases
/// (default 40).
#[test]
fn bugs_inside_declared_length_ranges_are_rejected_exactly() {
    use differential::rangegen;
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_RANGE_CASES").unwrap_or(40);
    let mut counts = BTreeMap::<String, usize>::new();
    let mut disagreements = Vec::new();
    for index in 0..cases {
        let rc = rangegen::case(seed, index);
        let tc = &rc.two;
        let (n, m) = (tc.case.n, tc.m);
        let p = prediction_at(&tc.case, &[n, m]);
        let first = p.1.first().map(ToString::to_string).unwrap_or_default();
        let right = |n, m, prologue| two_right(tc, n, m, prologue);
        let wrong = match (rc.witness(), p.0) {
            (Some((wn, wm)), Verdict::Rejected(DiagKind::PostconditionViolated)) => {
                let named = first.contains("n = ") && first.contains("m = ");
                if right(wn, wm, Prologue::Unchecked).unwrap_or(true) {
                    Some(format!(
                        "rejected ({first}), but the run at n = {wn}, m = {wm} is right"
                    ))
                } else {
                    (!named).then(|| format!("the diagnostic names no point (n, m): {first}"))
                }
            }
            (None, Verdict::Accepted) => {
                let [sn, sm] = rc.spans;
                let off = sn
                    .values(3)
                    .flat_map(|a| sm.values(3).map(move |b| (a, b)))
                    .find_map(|(a, b)| match right(a, b, Prologue::Checked) {
                        Ok(true) => None,
                        got => Some(format!("accepted, but the run at n = {a}, m = {b} gives {got:?}")),
                    });
                let outside = (sn.outside().into_iter().map(|a| (a, sm.lo)))
                    .chain(sm.outside().into_iter().map(|b| (sn.lo, b)))
                    .find_map(|(a, b)| match run_two(tc, a, b, Prologue::Checked) {
                        Err(hcomm::Error::Precondition { .. }) => None,
                        got => Some(format!(
                            "n = {a}, m = {b} lies outside the ranges, but the call gives {:?}",
                            got.map(|_| "Ok")
                        )),
                    });
                accepted_two_run(tc, &p, n, m).or(off).or(outside)
            }
            (witness, v) => Some(format!(
                "the gap shows at {witness:?} of the ranges, but the checker says {v:?}: {first}"
            )),
        };
        let kind = match (tc.gap.is_some(), p.0) {
            (true, Verdict::Accepted) => "planted, right for its ranges, accepted".to_owned(),
            (planted, v) => format!("{v:?}, planted {planted}"),
        };
        *counts.entry(kind).or_default() += 1;
        if let Some(w) = wrong {
            disagreements.push(format!(
                "{w}\ncase {index} (seed {seed}), world {}, n {n}, m {m}, spans {:?}, planted: {:?}\n{}",
                tc.case.world, rc.spans, tc.planted, tc.source
            ));
        }
    }
    eprintln!("length ranges: {counts:?}, {} disagreements", disagreements.len());
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
    for kind in [
        "Accepted, planted false",
        "Rejected(PostconditionViolated), planted true",
        "planted, right for its ranges, accepted",
    ] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) * 8 >= cases as usize,
            "too few `{kind}`: {counts:?}"
        );
    }
}

/// Generated all-gathervs ([`differential::countgen`]) whose planted bug
/// places one part at `sum(counts[0..j]) - counts[i] + counts[k]`, right
/// for every uniform count vector and wrong otherwise: every planted case
/// is rejected (for its postcondition at a non-uniform sample, naming the
/// counts, or as not decided for every count), and the serial model of
/// the scratch shape confirms the bug: right at uniform counts, wrong at
/// the case's. Every clean case is accepted and runs, read as text, on the
/// host backend at non-uniform counts (zeros included) to the serial
/// reference on every rank. `HCOMM_COUNT_CASES` sets the number of cases
/// (default 40).
#[test]
fn bugs_that_show_only_at_non_uniform_counts_are_rejected_exactly() {
    use differential::countgen;
    use hcomm::checker::parse_schedules;
    let seed = env_u64("HCOMM_DIFF_SEED").unwrap_or(0x5eed);
    let cases = env_u64("HCOMM_COUNT_CASES").unwrap_or(40);
    let contribution =
        |r: usize, len: usize| -> Vec<u64> { (0..len as u32).map(|i| initial(r as u32, 0, i)).collect() };
    let mut counts = BTreeMap::<String, usize>::new();
    let mut disagreements = Vec::new();
    for index in 0..cases {
        let cc = countgen::case(seed, index);
        let world = cc.world;
        let wrong = match (cc.planted, parse_schedules(&cc.source)) {
            (None, Ok(mut parsed)) => {
                let schedule = parsed.remove(0);
                let c = &cc.counts;
                let reference: Vec<u64> = (0..world).flat_map(|r| contribution(r, c[r])).collect();
                let run = hcomm::host::run(world, |comm| {
                    let x = contribution(comm.rank(), c[comm.rank()]);
                    let mut out = vec![0_u64; c.iter().sum()];
                    schedule
                        .call(comm)
                        .counts("counts", c)
                        .input("x", &x[..])
                        .output("out", &mut out[..])
                        .run()?;
                    Ok(out)
                });
                match run {
                    Err(e) => Some(format!("accepted, but the run at counts {c:?} failed: {e}")),
                    Ok(out) => out
                        .iter()
                        .position(|o| *o != reference)
                        .map(|r| format!("accepted, but rank {r}'s `out` at counts {c:?} differs from the reference")),
                }
            }
            (Some(bug), Err(diags)) => {
                let first = diags.first().map(ToString::to_string).unwrap_or_default();
                let kind = diags.first().map(|d| d.kind);
                let named = match kind {
                    Some(DiagKind::PostconditionViolated) => first.contains("counts = ["),
                    Some(DiagKind::EvaluationError) => first.contains("not a run of whole"),
                    _ => false,
                };
                // the scratch shape's serial model: right at uniform counts,
                // wrong once `counts[i]` and `counts[k]` differ
                let model_right = |c: &[usize]| {
                    let parts: Vec<_> = (0..world).map(|r| contribution(r, c[r])).collect();
                    let want: Vec<Option<u64>> = parts.concat().into_iter().map(Some).collect();
                    cc.scratch_model(c, &parts) == want
                };
                let mut apart = vec![1; world];
                apart[bug.k] = 3;
                let model_shows_bug = cc.order.is_empty() || (model_right(&vec![2; world]) && !model_right(&apart));
                if named {
                    (!model_shows_bug)
                        .then(|| format!("planted {bug:?}: the serial model does not show the bug as planted"))
                } else {
                    Some(format!(
                        "planted {bug:?}, rejected with an unexpected diagnostic: {first}"
                    ))
                }
            }
            (planted, Ok(_)) => Some(format!("planted {planted:?}, but the checker accepts")),
            (None, Err(d)) => Some(format!(
                "a bug-free case is rejected: {}",
                d.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
            )),
        };
        *counts
            .entry(format!(
                "planted {}, {}",
                cc.planted.is_some(),
                if cc.order.is_empty() { "ring" } else { "scratch" }
            ))
            .or_default() += 1;
        if let Some(w) = wrong {
            disagreements.push(format!(
                "{w}\ncase {index} (seed {seed}), counts {:?}\n{}",
                cc.counts, cc.source
            ));
        }
    }
    eprintln!("counts: {counts:?}, {} disagreements", disagreements.len());
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
}
