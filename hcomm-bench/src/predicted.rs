//! Measured against predicted: every cell of `hcomm-bench --json` runs that
//! the cost model predicts (`hcomm_cost::measured`), as a table of ratios
//! and as one log-log SVG scatter (predicted time against measured time,
//! one colour per collective, the line of equality and the ±25 % band).

use std::path::Path;

use hcomm_cost::{Coll, Machine, Sample};
use plotters::prelude::*;

use crate::chart::{canvas, draw_error, legend_and_present};

/// One cell: what was measured and what the model predicts for it.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    /// The measured cell.
    pub sample: Sample,
    /// The model's time, microseconds.
    pub predicted_us: f64,
}

impl Cell {
    /// `(predicted - measured) / measured`.
    pub fn error(&self) -> f64 {
        (self.predicted_us - self.sample.us) / self.sample.us
    }
}

/// The cells of `samples` that `machine` predicts (an algorithm the model
/// cannot cost at that world is left out).
pub fn cells(machine: &Machine, samples: &[Sample]) -> Vec<Cell> {
    samples
        .iter()
        .filter_map(|s| {
            let p = s.algorithm.predict(machine, s.world, s.bytes).ok()?;
            Some(Cell {
                sample: *s,
                predicted_us: p.us,
            })
        })
        .collect()
}

/// How many of `cells` are within `tolerance` (0.25: ±25 %) of the
/// measured time.
pub fn within(cells: &[Cell], tolerance: f64) -> usize {
    cells.iter().filter(|c| c.error().abs() <= tolerance).count()
}

const COLOURS: [(Coll, &str, RGBColor); 4] = [
    (Coll::AllReduce, "all_reduce", RGBColor(200, 30, 30)),
    (Coll::AllGather, "all_gather", RGBColor(30, 80, 200)),
    (Coll::ReduceScatter, "reduce_scatter", RGBColor(30, 150, 60)),
    (Coll::AllToAll, "all_to_all", RGBColor(150, 60, 170)),
];

/// Draws `cells` into `path`: predicted against measured time (log-log),
/// with the line of equality and the ±25 % band; `machine` names the model.
pub fn plot(cells: &[Cell], machine: &str, path: &Path) -> Result<(), String> {
    let times = || cells.iter().flat_map(|c| [c.sample.us, c.predicted_us]);
    let (Some(lo), Some(hi)) = (times().reduce(f64::min), times().reduce(f64::max)) else {
        return Err("no cell to plot: no measured row names an algorithm the model predicts".to_owned());
    };
    let (lo, hi) = (lo.max(1e-3) * 0.7, hi * 1.4);
    let err = draw_error(path);
    let root = canvas(path, (720, 640))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "predicted against measured ({machine}): {} of {} cells within ±25 %",
                within(cells, 0.25),
                cells.len()
            ),
            ("sans-serif", 18),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("measured time (us)")
        .y_desc("predicted time (us)")
        .draw()
        .map_err(err)?;
    let line = |factor: f64, style: ShapeStyle| LineSeries::new([(lo, lo * factor), (hi, hi * factor)], style);
    chart
        .draw_series(line(1.0, BLACK.stroke_width(1)))
        .map_err(err)?
        .label("predicted = measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], BLACK));
    for factor in [0.75, 1.25] {
        chart
            .draw_series(line(factor, BLACK.mix(0.35).stroke_width(1)))
            .map_err(err)?;
    }
    for (coll, name, colour) in COLOURS {
        let style = colour.filled();
        chart
            .draw_series(
                cells
                    .iter()
                    .filter(|c| c.sample.algorithm.collective() == coll)
                    .map(|c| Circle::new((c.sample.us, c.predicted_us), 3, style)),
            )
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 11, y), 3, style));
    }
    legend_and_present(&mut chart, &root, path)
}
