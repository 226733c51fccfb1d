//! Measured times from `hcomm-bench --json` runs: one [`Sample`] per cell
//! (op, algorithm, ranks, size) that the model predicts, with the median of
//! the cell's rows (a collective's out-of-place time, where a row also has
//! an in-place one).

use std::collections::BTreeMap;
use std::path::Path;

use crate::builtin::Builtin;
use crate::error::{CostError, Result};
use crate::fit::Sample;

/// Rows of one cell: `(op, algorithm, ranks, bytes)`.
type Cell = (String, String, usize, usize);

/// The samples of the rows in `files`: each cell's median measured time,
/// for the cells whose algorithm is a [`Builtin`] on at least 2 ranks. A
/// row that is not JSON or lacks a field is [`CostError::Rows`] naming the
/// file and line.
pub fn measured(files: &[impl AsRef<Path>]) -> Result<Vec<Sample>> {
    let mut cells: BTreeMap<Cell, Vec<f64>> = BTreeMap::new();
    for file in files {
        let file = file.as_ref();
        let bad = |line: usize, message: String| CostError::Rows {
            file: file.display().to_string(),
            line,
            message,
        };
        let text = std::fs::read_to_string(file).map_err(|e| bad(0, format!("cannot read it: {e}")))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let row: serde_json::Value =
                serde_json::from_str(line).map_err(|e| bad(i + 1, format!("not a JSON row: {e}")))?;
            // A row of a collective times its out-of-place form in an
            // object of its own; other rows carry their timing inline.
            let timing = row.get("out_of_place").unwrap_or(&row);
            let field = |k: &str| {
                row.get(k)
                    .or_else(|| timing.get(k))
                    .ok_or_else(|| bad(i + 1, format!("no field `{k}`")))
            };
            let text_of = |k: &str| field(k).map(|v| v.as_str().unwrap_or_default().to_owned());
            let number = |k: &str| field(k).map(|v| v.as_u64().map_or(0, |n| usize::try_from(n).unwrap_or(0)));
            let cell = (
                text_of("op")?,
                text_of("algorithm")?,
                number("ranks")?,
                number("bytes")?,
            );
            let us = field("time_us")?.as_f64().unwrap_or(0.0);
            cells.entry(cell).or_default().push(us);
        }
    }
    Ok(cells
        .into_iter()
        .filter_map(|((op, algorithm, world, bytes), mut times)| {
            times.sort_by(f64::total_cmp);
            let us = times[times.len() / 2];
            let algorithm = Builtin::from_row(&op, &algorithm)?;
            (world >= 2 && us > 0.0).then_some(Sample {
                algorithm,
                world,
                bytes,
                us,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_take_the_median_and_bad_rows_name_their_line() {
        let dir = std::env::temp_dir().join(format!("hcomm-cost-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.jsonl");
        let row =
            |us: f64| format!(r#"{{"op":"all_gather","algorithm":"ring","ranks":4,"bytes":4096,"time_us":{us}}}"#);
        let nested = |us: f64| {
            format!(
                r#"{{"op":"all_gather","ranks":4,"bytes":4096,"out_of_place":{{"algorithm":"ring","time_us":{us}}},"in_place":{{"algorithm":"ring","time_us":1.0}}}}"#
            )
        };
        std::fs::write(&good, [row(30.0), row(10.0), nested(20.0), nested(25.0)].join("\n")).unwrap();
        let samples = measured(&[&good]).unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!((samples[0].world, samples[0].bytes, samples[0].us), (4, 4096, 25.0));
        let bad = dir.join("bad.jsonl");
        std::fs::write(&bad, format!("{}\n{{\"op\":\"all_gather\"}}\n", row(1.0))).unwrap();
        let e = measured(&[&bad]).unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl") && e.contains("line 2") && e.contains("no field `algorithm`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
