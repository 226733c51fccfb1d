//! What the SVG plots share: the canvas, the error naming the file, and
//! the legend drawn before the file is written.

use std::path::Path;

use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;

/// A drawing error as a message naming the file drawn into.
pub(crate) fn draw_error(path: &Path) -> impl Fn(DrawingAreaErrorKind<std::io::Error>) -> String + Copy + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// A white SVG canvas of `size` pixels that writes into `path`.
pub(crate) fn canvas(path: &Path, size: (u32, u32)) -> Result<DrawingArea<SVGBackend<'_>, Shift>, String> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error(path))?;
    Ok(root)
}

/// Draws the legend of `chart` (upper left, framed, on a light background)
/// and writes `root` into `path`.
pub(crate) fn legend_and_present<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    path: &Path,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error(path))?;
    root.present().map_err(draw_error(path))
}
