//! Latency and bandwidth against message size, log–log, ours beside the
//! floor of the same run and any peer curves the report carries, as SVG.

use crate::error::BenchError;
use crate::report::{Report, Series};
use plotters::prelude::*;
use std::path::Path;

/// The quantity names of [`Series::quantity`].
pub const LATENCY: &str = "latency_us";
/// See [`LATENCY`].
pub const BANDWIDTH: &str = "bandwidth_mb_s";

/// The curves to draw: ours, the floor, then the peers, per quantity.
pub fn curves(r: &Report) -> Vec<Series> {
    let mut v = Vec::new();
    if !r.latency.is_empty() {
        v.push(Series {
            name: format!("marrow {} t_typical", r.bench),
            quantity: LATENCY.into(),
            points: r.latency.iter().map(|l| (l.bytes, l.t.t_typical_us)).collect(),
        });
        v.push(Series {
            name: format!("floor: {}", r.latency_floor),
            quantity: LATENCY.into(),
            points: r.latency.iter().map(|l| (l.bytes, l.floor_t_typical_us)).collect(),
        });
    }
    if !r.bandwidth.is_empty() {
        v.push(Series {
            name: format!("marrow {} BW average", r.bench),
            quantity: BANDWIDTH.into(),
            points: r.bandwidth.iter().map(|b| (b.bytes, b.bw_average_mb_s)).collect(),
        });
        v.push(Series {
            name: format!("floor: {}", r.bandwidth_floor),
            quantity: BANDWIDTH.into(),
            points: r.bandwidth.iter().map(|b| (b.bytes, b.floor_bw_average_mb_s)).collect(),
        });
    }
    v.extend(r.peers.iter().cloned());
    v
}

/// Draw `r` into `path` (SVG). Refuses a report without size rows.
pub fn svg(r: &Report, path: &Path) -> Result<(), BenchError> {
    let all = curves(r);
    if all.iter().all(|s| s.points.is_empty()) {
        return Err(BenchError::BadInput(format!(
            "{}: nothing to plot: the report has no size rows (run the sweep, `-a`)",
            path.display()
        )));
    }
    let fail = |e: &dyn std::fmt::Display| BenchError::Plot { path: path.to_owned(), detail: e.to_string() };
    let root = SVGBackend::new(path, (1280, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let panels = root.split_evenly((1, 2));
    let kinds = [(LATENCY, "latency [usec] (median)"), (BANDWIDTH, "bandwidth [MB/sec] (average)")];
    for (panel, (quantity, label)) in panels.iter().zip(kinds) {
        // Only what can be drawn on log axes: a peer's table of zeros or
        // `inf` (a clock perftest could not calibrate) adds nothing.
        let series: Vec<&Series> =
            all.iter().filter(|s| s.quantity == quantity && s.points.iter().any(|p| p.0 > 0 && p.1 > 0.0)).collect();
        if series.is_empty() {
            continue;
        }
        let pts = || series.iter().flat_map(|s| s.points.iter());
        let (x0, x1) = (pts().map(|p| p.0).min().unwrap_or(1).max(1), pts().map(|p| p.0).max().unwrap_or(2));
        let (y0, y1) = pts().filter(|p| p.1 > 0.0).fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let (y0, y1) = if y0 <= y1 { (y0 / 2.0, y1 * 2.0) } else { (0.1, 1.0) };
        let mut chart = ChartBuilder::on(panel)
            .caption(label, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1.max(x0 + 1)).log_scale(), (y0..y1).log_scale())
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc("message size [bytes]")
            .y_desc(label)
            .x_label_formatter(&|b| size_label(*b))
            .draw()
            .map_err(|e| fail(&e))?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(u64, f64)> = s.points.iter().copied().filter(|p| p.1 > 0.0 && p.0 > 0).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| fail(&e))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled()))).map_err(|e| fail(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(if quantity == LATENCY {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::LowerRight
            })
            .draw()
            .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}
