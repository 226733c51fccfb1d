//! Differential testing of the schedule checker against execution: random
//! schedules ([`gen`]) go through the checker and its symbolic execution
//! (`hcomm_schedule::predict`) and are run for real through hcomm's
//! schedule executor ([`interp`]) on the host backend and on the HCCL
//! stand-in. [`judge`] says whether the two agree. [`postgen`],
//! [`largegen`], [`twogen`], [`rangegen`] and [`countgen`] write schedules
//! with postconditions as text, with planted bugs that show only at some
//! lengths, above 64 ranks, at some points of two lengths (under declared
//! length ranges, empty buffers included) or at non-uniform counts.
#![allow(dead_code, unreachable_pub)]

pub mod build;
pub mod countgen;
pub mod gen;
pub mod interp;
pub mod largegen;
pub mod postgen;
pub mod rangegen;
pub mod render;
pub mod twogen;

use std::sync::OnceLock;
use std::time::Duration;

use hcomm::hccl::Hccl;
use hcomm::{CommOptions, Error};
use hcomm_schedule::ir::{Op, Schedule};
use hcomm_schedule::predict::predict;
use hcomm_schedule::{DiagKind, Diagnostic};

use self::gen::Case;
use self::interp::Prologue;

/// Where a schedule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Threads of this process.
    Host,
    /// The HCCL backend through the stand-in library.
    Standin,
}

/// How long ranks of an accepted schedule may wait (generous: the machine
/// may be loaded; a correct run takes milliseconds).
pub const ACCEPTED_TIMEOUT: Duration = Duration::from_secs(20);

/// How long ranks of a rejected schedule wait before giving up.
pub const REJECTED_TIMEOUT: Duration = Duration::from_millis(200);

/// The checker's verdict on a case, for the statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Accepted.
    Accepted,
    /// Rejected; the kind of the first diagnostic.
    Rejected(DiagKind),
}

/// The value rank `rank` starts with at `index` of parameter `buffer`:
/// distinct for distinct triples (an invertible mix of the packed triple),
/// odd so that products never collapse to zero.
pub fn initial(rank: u32, buffer: u32, index: u32) -> u64 {
    let mut z = (u64::from(rank) << 40) | (u64::from(buffer) << 32) | u64::from(index);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// What `op` computes on two `u64` elements (hcomm's integer reductions
/// wrap).
pub fn combine(op: Op, a: u64, b: u64) -> u64 {
    match op {
        Op::Sum => a.wrapping_add(b),
        Op::Prod => a.wrapping_mul(b),
        Op::Max => a.max(b),
        Op::Min => a.min(b),
    }
}

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Runs `s` on `world` ranks of `backend`, each rank's buffers filled with
/// [`initial`]; returns every rank's buffers at the end.
pub fn execute(
    backend: Backend,
    s: &'static Schedule,
    world: usize,
    n: i64,
    timeout: Duration,
    prologue: Prologue,
) -> hcomm::Result<Vec<Vec<Vec<u64>>>> {
    let len = usize::try_from(n).unwrap_or(0) * world;
    execute_sized(backend, s, world, &[n], &vec![len; s.buffers.len()], timeout, prologue)
}

/// Runs `s` on `world` ranks of `backend` at the length variables
/// `lengths`, buffer `b` of `sizes[b]` elements filled with [`initial`];
/// returns every rank's buffers at the end.
pub fn execute_sized(
    backend: Backend,
    s: &'static Schedule,
    world: usize,
    lengths: &[i64],
    sizes: &[usize],
    timeout: Duration,
    prologue: Prologue,
) -> hcomm::Result<Vec<Vec<Vec<u64>>>> {
    let options = CommOptions::default().with_timeout(timeout);
    let body = |comm: &hcomm::Comm| {
        let r = comm.rank() as u32;
        let mut buffers: Vec<Vec<u64>> = (0..s.buffers.len() as u32)
            .map(|b| (0..sizes[b as usize] as u32).map(|i| initial(r, b, i)).collect())
            .collect();
        interp::run(comm, s, &[], lengths, &mut buffers, prologue)?;
        Ok(buffers)
    };
    match backend {
        Backend::Host => hcomm::host::run_with(world, &options, body),
        Backend::Standin => hccl().run(world, &options, body),
    }
}

/// The checker's verdict on `case` and, when accepted, the predicted final
/// buffers (`None` elements depend on scratch data never written).
pub type Prediction = (Verdict, Vec<Diagnostic>, Option<Vec<Vec<Vec<Option<u64>>>>>);

/// Checks `case` (at its world size) and runs the symbolic execution.
pub fn prediction(case: &Case) -> Prediction {
    prediction_at(case, &[case.n])
}

/// Checks `case` (at its world size) and runs the symbolic execution at
/// the length variables `lengths`.
pub fn prediction_at(case: &Case, lengths: &[i64]) -> Prediction {
    match predict(&case.schedule, case.world as i64, &[], lengths) {
        Ok(contents) => (
            Verdict::Accepted,
            Vec::new(),
            contents.map(|c| c.evaluate(initial, combine)),
        ),
        Err(d) => (
            d.first().map_or(Verdict::Rejected(DiagKind::EvaluationError), |x| {
                Verdict::Rejected(x.kind)
            }),
            d,
            None,
        ),
    }
}

/// Whether a rejected verdict's run ends by waiting (so it costs a timeout).
pub fn hangs(v: Verdict) -> bool {
    matches!(
        v,
        Verdict::Rejected(
            DiagKind::Deadlock | DiagKind::UnmatchedSend | DiagKind::UnmatchedRecv | DiagKind::CollectiveMismatch
        )
    )
}

/// Runs `case` on `backend` and compares with the checker: `Ok` says how
/// the run ended (`completed`, `hung`, `failed: KIND`), `Err` describes a
/// disagreement.
pub fn judge(case: &Case, s: &'static Schedule, predicted: &Prediction, backend: Backend) -> Result<String, String> {
    let (verdict, diags, values) = predicted;
    let first = diags.first().map(ToString::to_string).unwrap_or_default();
    let ctx = || {
        format!(
            "on {backend:?}, world {}, n {}, checker: {}\n{}",
            case.world,
            case.n,
            if first.is_empty() { "accepted" } else { &first },
            render::render(s)
        )
    };
    if *verdict == Verdict::Accepted {
        let out = execute(backend, s, case.world, case.n, ACCEPTED_TIMEOUT, Prologue::Checked)
            .map_err(|e| format!("accepted schedule failed: {e}\n{}", ctx()))?;
        let Some(values) = values else {
            return Ok("completed (too large to predict)".into());
        };
        for (r, (got, want)) in out.iter().zip(values).enumerate() {
            for (b, (gb, wb)) in got.iter().zip(want).enumerate() {
                for (i, (g, w)) in gb.iter().zip(wb).enumerate() {
                    if let Some(w) = w {
                        if g != w {
                            return Err(format!(
                                "rank {r} buffer `{}` element {i}: ran to {}, the checker predicts {}\n{}",
                                build::NAMES[b],
                                describe(*g, case),
                                describe(*w, case),
                                ctx()
                            ));
                        }
                    }
                }
            }
        }
        return Ok("completed".into());
    }
    let Verdict::Rejected(kind) = *verdict else {
        return Ok("completed".into());
    };
    let res = execute(backend, s, case.world, case.n, REJECTED_TIMEOUT, Prologue::Unchecked);
    let e = match res {
        Ok(_) if kind == DiagKind::BatchRule => return Ok("completed".into()),
        Ok(_) => return Err(format!("rejected schedule ran to completion\n{}", ctx())),
        Err(e) => e,
    };
    // A fault the executor detects itself (a later step of the checker's
    // order, met earlier in time) may stop the run before it hangs.
    let own_fault = matches!(
        e,
        Error::Precondition { .. } | Error::Evaluation { .. } | Error::Schedule { .. }
    );
    let expected = match kind {
        DiagKind::Deadlock => own_fault || matches!(e, Error::Timeout { .. } | Error::PeerFailed { .. }),
        // device backends pair messages by posting order and see the tags differ
        DiagKind::UnmatchedSend | DiagKind::UnmatchedRecv => {
            own_fault
                || matches!(
                    e,
                    Error::Timeout { .. } | Error::PeerFailed { .. } | Error::Mismatch { .. }
                )
        }
        DiagKind::BufferHazard => e.to_string().contains("hazard") || !matches!(e, Error::Precondition { .. }),
        _ => true,
    };
    if expected {
        Ok(match e {
            Error::Timeout { .. } | Error::PeerFailed { .. } => "hung".to_owned(),
            Error::Precondition { message } if message.contains("hazard") => "failed: buffer hazard".to_owned(),
            e => format!("failed: {}", error_kind(&e)),
        })
    } else {
        Err(format!("{kind}: the run failed otherwise: {e}\n{}", ctx()))
    }
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::BufferLength { .. } => "buffer length",
        Error::Precondition { .. } => "precondition",
        Error::Schedule { .. } => "schedule",
        Error::Evaluation { .. } => "evaluation",
        Error::Mismatch { .. } => "mismatch",
        _ => "other",
    }
}

/// A runtime value as the initial element it is, when it is one.
fn describe(v: u64, case: &Case) -> String {
    let len = case.n as u32 * case.world as u32;
    for r in 0..case.world as u32 {
        for b in 0..3 {
            for i in 0..len {
                if initial(r, b, i) == v {
                    return format!("rank {r}'s initial `{}`[{i}]", build::NAMES[b as usize]);
                }
            }
        }
    }
    format!("{v:#x}")
}
