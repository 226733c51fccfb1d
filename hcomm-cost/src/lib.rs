//! A cost model for hcomm's collectives, evaluated over the schedules the
//! checker proves.
//!
//! A [`Machine`] is a list of link levels (devices of a node on a switch,
//! mesh or ring; nodes on a fabric), each with a per-message latency
//! (alpha) and a bandwidth (beta is its inverse), and a reduction speed
//! (gamma's inverse). The messages of one round that cross the same
//! resource share its bandwidth. A schedule's
//! rounds are the columns of the checker's rendezvous simulation
//! ([`predict_schedule`], any `comm_schedule!` program); hcomm's built-in
//! algorithms also have round patterns ([`Builtin`]) that cost one block
//! of ranks per round, which predicts 4096 ranks in milliseconds; the
//! one-shot collectives on hcomm's shared board are a publish copy, one
//! synchronisation and the reads of the peers' pages ([`Board`]).
//!
//! Assumptions: rounds run one after another (a round ends with its
//! slowest message); local copies cost nothing; a rank's messages of one
//! round go out at once; bandwidth is shared evenly on a resource; a
//! receiver reduces after the transfer, without overlap.

mod builtin;
mod coll;
mod error;
mod fit;
mod one_shot;
mod preset;
mod round;
mod rows;
mod schedule;
mod topology;

pub use builtin::Builtin;
pub use coll::Coll;
pub use error::{CostError, Result};
pub use fit::{fit, Sample, Tiers};
pub use preset::{machine, preset, PRESETS};
pub use rows::measured;
pub use schedule::{predict_schedule, Prediction};
pub use topology::{Board, Level, Link, Machine};

/// The cheapest of `candidates` for a call of `bytes` on `world` ranks,
/// with its prediction; `None` when none runs there.
pub fn argmin(machine: &Machine, candidates: &[Builtin], world: usize, bytes: usize) -> Option<(Builtin, Prediction)> {
    candidates
        .iter()
        .filter_map(|&b| b.predict(machine, world, bytes).ok().map(|p| (b, p)))
        .min_by(|a, b| a.1.us.total_cmp(&b.1.us))
}
