//! Space-time drawings of `comm_schedule!` schedules.
//!
//! A schedule's IR (`NAME::SCHEDULE`) at one world size and scalar
//! combination becomes a [`Timeline`] (the model, in `hcomm-schedule`), which
//! [`render()`] draws as SVG: one lane per rank, steps left to right in the
//! order of the checker's rendezvous simulation, an arrow per message
//! labelled with its region and length, batches as shaded boxes, collectives
//! as bars across their group, non-blocking operations as bars from post to
//! wait. A failing check draws too: a deadlock's wait-for cycle in red, an
//! unmatched message dangling, the first wrong element of a postcondition
//! marked, and the diagnostic's text below.
//!
//! ```
//! let svg = hcomm_viz::draw(&hcomm::schedules::ring_all_gather::SCHEDULE, 4, &[]).unwrap();
//! assert!(svg.contains("rank 3"));
//! ```
//!
//! [`draw_plan`] draws the device plan instead: the group calls a device
//! backend (HCCL, NCCL) issues for the schedule.
//!
//! The `hcomm-viz` binary draws any schedule of the [`catalog`] by name:
//! `hcomm-viz ring_all_gather --world 4 -o ring.svg` (`--plan` for the
//! device plan), or a schedule of a text file ([`from_text`]):
//! `hcomm-viz --file sched.rs ring --world 4 -o ring.svg`.

pub mod catalog;
pub mod gallery;
pub mod render;

use hcomm_schedule::ir::{Op, Scalar, Schedule};
pub use hcomm_schedule::timeline::{plan_timeline, timeline, Timeline};
use hcomm_schedule::{syntax, Diagnostic};
pub use render::{render, render_string};

/// Draws `schedule` at `world` with `scalars` (in the order of its scalar
/// parameters) as SVG text. `Err` when there is nothing to draw (see
/// [`timeline`]).
pub fn draw(schedule: &Schedule, world: i64, scalars: &[i64]) -> Result<String, Diagnostic> {
    Ok(render_string(&timeline(schedule, world, scalars)?))
}

/// Draws the device plan of `schedule` (how HCCL and NCCL backends issue
/// it: group calls, collectives, local steps) as SVG text; a schedule that
/// fails the checker there is drawn with its failure (see
/// [`plan_timeline`]).
pub fn draw_plan(schedule: &Schedule, world: i64, scalars: &[i64]) -> Result<String, Diagnostic> {
    Ok(render_string(&plan_timeline(schedule, world, scalars)?))
}

/// The schedules of a text (what goes between the braces of
/// `comm_schedule! { .. }`), parsed, lowered and resolved by the macro's own
/// front end, but not checked: a schedule that fails a check is drawn with
/// its failure. `Err` lists each parse or name error as
/// `"LINE:COLUMN: TEXT"`, with the texts the macro gives.
///
/// ```
/// let s = hcomm_viz::from_text("fn swap(x: &mut [T; n]) { copy x -> x; }").unwrap();
/// assert_eq!(s[0].name, "swap");
/// ```
pub fn from_text(src: &str) -> Result<Vec<Schedule>, Vec<String>> {
    let at = |sp: &syntax::Sp, text: &str| {
        let (line, column) = sp.line_column();
        format!("{line}:{column}: {text}")
    };
    let input = syntax::parse_str(src).map_err(|e| {
        e.into_iter()
            .map(|e| at(&syntax::Sp::one(e.span()), &e.to_string()))
            .collect::<Vec<_>>()
    })?;
    let mut schedules = Vec::new();
    let mut errors = Vec::new();
    for item in &input.items {
        match syntax::front(item) {
            Ok(front) => schedules.push(front.ir),
            Err(rejection) => errors.extend(rejection.errors.iter().map(|(sp, text)| at(sp, text))),
        }
    }
    if errors.is_empty() {
        Ok(schedules)
    } else {
        Err(errors)
    }
}

/// The value of scalar parameter `scalar` written as `text`: a number, or
/// for an operator parameter the operator's keyword (`sum`, `prod`, `max`,
/// `min`), whose value is its index in [`Op::ALL`].
///
/// ```
/// let s = &hcomm::schedules::ring_all_reduce::SCHEDULE;
/// let op = s.scalars.iter().find(|x| x.op).unwrap();
/// assert_eq!(hcomm_viz::scalar_value(op, "max"), Ok(2));
/// ```
pub fn scalar_value(scalar: &Scalar, text: &str) -> Result<i64, String> {
    if scalar.op {
        let index = Op::ALL.iter().position(|op| op.as_str() == text).ok_or_else(|| {
            format!(
                "`{}` is an operator parameter: its value is `sum`, `prod`, `max` or `min`, not `{text}`",
                scalar.name
            )
        })?;
        return Ok(index as i64);
    }
    text.parse()
        .map_err(|e| format!("value of `{}`: {e} (`{text}`)", scalar.name))
}
