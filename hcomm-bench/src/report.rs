//! A result row, printed as an nccl-tests style table line or as one JSON
//! object per line.

use serde::{Deserialize, Serialize};

/// One size of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The collective computed (`all_reduce`, ..., `sendrecv`).
    pub op: String,
    /// The schedule that ran, for `--schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Size in bytes, as nccl-tests defines it for the op.
    pub bytes: usize,
    /// Elements in that size.
    pub count: usize,
    /// Number of ranks.
    pub ranks: usize,
    /// Element type.
    pub dtype: String,
    /// The algorithm that ran.
    pub algorithm: String,
    /// The backend.
    pub backend: String,
    /// Timed iterations.
    pub iters: usize,
    /// Median over iterations of the slowest rank's time, microseconds.
    pub time_us: f64,
    /// The fastest iteration's slowest rank, microseconds.
    pub min_us: f64,
    /// `bytes / time`, GB/s (1 GB = 1e9 B).
    pub algbw: f64,
    /// `algbw` times the op's bus factor, GB/s.
    pub busbw: f64,
    /// `"ok"` when every rank's result equals the serial reference.
    pub check: String,
}

impl Row {
    /// The row as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The column header of [`Row::to_text`].
    pub fn text_header() -> String {
        format!(
            "#{:>11} {:>11} {:>5} {:>20} {:>6} {:>11} {:>11} {:>11} {:>6}",
            "size", "count", "type", "algorithm", "iters", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check"
        )
    }

    /// The row as a table line under [`Row::text_header`].
    pub fn to_text(&self) -> String {
        format!(
            "{:>12} {:>11} {:>5} {:>20} {:>6} {:>11.2} {:>11.3} {:>11.3} {:>6}",
            self.bytes,
            self.count,
            self.dtype,
            self.algorithm,
            self.iters,
            self.time_us,
            self.algbw,
            self.busbw,
            self.check
        )
    }
}

pub(crate) fn shape_name(shape: crate::op::Shape) -> &'static str {
    use crate::op::Shape;
    match shape {
        Shape::AllReduce(_) | Shape::AllReduceInPlace(_) => "all_reduce",
        Shape::AllGather => "all_gather",
        Shape::ReduceScatter(_) => "reduce_scatter",
        Shape::AllToAll => "all_to_all",
        Shape::Broadcast => "broadcast",
        Shape::SendRecv => "sendrecv",
        Shape::Reduce(_) => "reduce",
    }
}
