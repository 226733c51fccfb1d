//! A result row, printed as an nccl-tests style table line (out-of-place
//! columns, then in-place columns) or as one JSON object per line.

use serde::{Deserialize, Serialize};

/// One form (out of place or in place) of one size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// The algorithm that ran.
    pub algorithm: String,
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
    /// The cost model's prediction for this algorithm, size and world on
    /// this host's fitted preset (`host`, or `host-processes` for a job of
    /// processes), microseconds; absent where the model has no pattern for
    /// the algorithm (the device libraries, a one-shot barrier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_us: Option<f64>,
    /// `"ok"` when every rank's result equals the serial reference,
    /// `"unchecked"` under `-c 0`, else which ranks were wrong and where.
    pub check: String,
}

/// One size of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The collective computed (`all_reduce`, ..., `sendrecv`).
    pub op: String,
    /// The schedule that ran, for `--schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The reduction operator, for the operations that reduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redop: Option<String>,
    /// Size in bytes, as nccl-tests defines it for the op.
    pub bytes: usize,
    /// Elements in that size.
    pub count: usize,
    /// Number of ranks.
    pub ranks: usize,
    /// Element type.
    pub dtype: String,
    /// The backend.
    pub backend: String,
    /// Separate input and output buffers, where hcomm has that form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_place: Option<Timing>,
    /// Output over the input, where hcomm has that form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place: Option<Timing>,
}

impl Row {
    /// The operation's usual form: out of place where hcomm has it, else
    /// in place.
    pub fn primary(&self) -> Option<&Timing> {
        self.out_of_place.as_ref().or(self.in_place.as_ref())
    }

    /// The forms whose result was wrong, with their check.
    pub fn wrong(&self) -> Vec<(&'static str, &str)> {
        [("out-of-place", &self.out_of_place), ("in-place", &self.in_place)]
            .into_iter()
            .filter_map(|(name, t)| t.as_ref().map(|t| (name, t.check.as_str())))
            .filter(|(_, check)| *check != "ok" && *check != "unchecked")
            .collect()
    }

    /// The row as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The column header of [`Row::to_text`]: two lines, nccl-tests' groups
    /// of columns.
    pub fn text_header() -> String {
        let group = |name: &str| format!("{name:^44}");
        let cols = || {
            format!(
                "{:>10} {:>11} {:>11} {:>9}",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check"
            )
        };
        format!(
            "#{:63} {} {}\n#{:>11} {:>11} {:>5} {:>5} {:>20} {:>6} {} {}",
            "",
            group("out-of-place"),
            group("in-place"),
            "size",
            "count",
            "type",
            "redop",
            "algorithm",
            "iters",
            cols(),
            cols()
        )
    }

    /// The row as a table line under [`Row::text_header`]; `n/a` where hcomm
    /// has no such form of the operation.
    pub fn to_text(&self) -> String {
        let cols = |t: &Option<Timing>| match t {
            Some(t) => format!(
                "{:>10.2} {:>11.3} {:>11.3} {:>9}",
                t.time_us,
                t.algbw,
                t.busbw,
                short_check(&t.check)
            ),
            None => format!("{:>10} {:>11} {:>11} {:>9}", "n/a", "n/a", "n/a", "n/a"),
        };
        let (algorithm, iters) = self.primary().map_or(("none", 0), |t| (t.algorithm.as_str(), t.iters));
        format!(
            "{:>12} {:>11} {:>5} {:>5} {:>20} {:>6} {} {}",
            self.bytes,
            self.count,
            self.dtype,
            self.redop.as_deref().unwrap_or("none"),
            algorithm,
            iters,
            cols(&self.out_of_place),
            cols(&self.in_place)
        )
    }
}

/// The check as a table cell: `ok`, `unchecked` or `wrong` (the details go
/// to stderr and the JSON).
fn short_check(check: &str) -> &str {
    if check == "ok" || check == "unchecked" {
        check
    } else {
        "wrong"
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
