//! One SVG per op: bus bandwidth against size (log scale), hcomm beside
//! Open MPI with both settings and the memcpy ceiling, for every measured
//! world size. Drawn with `plotters`' SVG backend.

use std::path::Path;

use plotters::prelude::*;

use crate::chart::{canvas, draw_error, legend_and_present};

use crate::compare::{Results, Source};
use crate::size::format_size;

type Series = (String, ShapeStyle, Vec<(f64, f64)>);

fn series(results: &Results, op: &str) -> Vec<Series> {
    let mut ranks: Vec<usize> = results.runs.keys().filter(|k| k.1 == op).map(|k| k.2).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut out = Vec::new();
    let sources = [
        (Source::Hcomm, RGBColor(200, 30, 30)),
        (Source::Mpi, RGBColor(30, 80, 200)),
        (Source::MpiNommap, RGBColor(30, 150, 60)),
    ];
    for (i, &n) in ranks.iter().enumerate() {
        let width = if i == 0 { 2 } else { 1 };
        for (source, color) in sources {
            let mut points: Vec<(f64, f64)> = results
                .runs
                .keys()
                .filter(|k| k.0 == source && k.1 == op && k.2 == n)
                .filter_map(|k| Some((k.3 as f64, results.busbw(source, op, n, k.3)?)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !points.is_empty() {
                let style = color.mix(if i == 0 { 1.0 } else { 0.55 }).stroke_width(width);
                out.push((format!("{}, {n} ranks", source.label()), style, points));
            }
        }
        let mut sizes: Vec<usize> = out.iter().flat_map(|s| s.2.iter().map(|p| p.0 as usize)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let ceiling: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|&b| Some((b as f64, results.ceiling(op, n, b)?)))
            .collect();
        if !ceiling.is_empty() {
            let style = BLACK.mix(if i == 0 { 0.8 } else { 0.4 }).stroke_width(1);
            out.push((format!("memcpy ceiling, {n} ranks"), style, ceiling));
        }
    }
    out
}

/// Draws `op`'s plot into `path`.
pub fn plot_op(results: &Results, op: &str, path: &Path) -> Result<(), String> {
    let all = series(results, op);
    let points = || all.iter().flat_map(|s| s.2.iter());
    let (Some(xmin), Some(xmax)) = (
        points().map(|p| p.0).reduce(f64::min),
        points().map(|p| p.0).reduce(f64::max),
    ) else {
        return Err(format!("no measurement of `{op}` to plot"));
    };
    let ymax = points().map(|p| p.1).fold(0.0, f64::max) * 1.1 + 1e-3;
    let err = draw_error(path);
    let root = canvas(path, (860, 520))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{op}: bus bandwidth against size"), ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((xmin * 0.8..xmax * 1.25).log_scale(), 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("size (bytes, nccl-tests definition)")
        .y_desc("busbw (GB/s)")
        .x_label_formatter(&|v| format_size(v.round() as usize))
        .draw()
        .map_err(err)?;
    for (label, style, pts) in &all {
        let style = *style;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, style.filled())))
            .map_err(err)?;
    }
    legend_and_present(&mut chart, &root, path)
}
