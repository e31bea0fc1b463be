//! `zen plot RESULTS… --out FILE.svg`: draw a figure from `zen reproduce`'s
//! `results.json` files (one figure; several files are pooled as more
//! repetitions).
//!
//! Bars (one group per x point) or lines (numeric x), each of our points at
//! the median of its repetitions with an error bar from the minimum to the
//! maximum; the paper's values (`value` claims of the figure file) are drawn
//! beside ours as hollow diamonds in the series' colour. Log axes where the
//! figure file says the paper uses them. A `timeseries` figure draws each
//! series' time series (its runs' measured intervals, repetitions combined
//! interval by interval) over the seconds of the run. The legend has its own column right
//! of the plot, so it never covers data.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::commands::reproduce::figure::{Chart, Claim, Figure};
use crate::commands::reproduce::results::{Cell, OverTime, Results, cells, over_time};
use crate::commands::reproduce::verdict::{fmt_num, paper_name};
use crate::error::{CliError, CliResult};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 560;
const LEGEND_WIDTH: u32 = 230;

/// Distinct colours, readable on white (Okabe–Ito).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

/// The paper's value: a hollow diamond in the series' colour, outlined thick.
macro_rules! diamond {
    ($x:expr, $y:expr, $colour:expr) => {
        EmptyElement::at(($x, $y))
            + PathElement::new(
                vec![(0, -8), (8, 0), (0, 8), (-8, 0), (0, -8)],
                $colour.stroke_width(3),
            )
    };
}
pub fn plot(results: &[PathBuf], out: &Path) -> CliResult {
    let read: Vec<Results> = results.iter().map(|p| Results::read(p)).collect::<Result<_, _>>()?;
    draw(&read, out)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

fn plot_error(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("drawing: {e}"))
}

/// Draw the figure of `results` (all of one figure) into the SVG file `out`.
pub fn draw(results: &[Results], out: &Path) -> CliResult {
    let Some(first) = results.first() else {
        return Err(CliError::usage("no results file given"));
    };
    if let Some(other) = results.iter().find(|r| r.figure.id != first.figure.id) {
        return Err(CliError::usage(format!(
            "the results are of different figures ({} and {}); plot one figure at a time",
            first.figure.id, other.figure.id
        )));
    }
    let f = &first.figure;
    let points: Vec<String> = {
        let mut ran: Vec<String> = Vec::new();
        for r in results {
            for p in f.points(&r.scale) {
                if !ran.contains(&p.label) {
                    ran.push(p.label.clone());
                }
            }
        }
        // File order.
        f.x.points.iter().map(|p| p.label.clone()).filter(|l| ran.contains(l)).collect()
    };
    let cells = cells(results);
    let paper: Vec<(String, String, f64)> = f
        .claims
        .iter()
        .filter_map(|c| match c {
            Claim::Value { series, point, value, .. } if points.contains(point) => {
                Some((series.clone(), point.clone(), *value))
            }
            _ => None,
        })
        .collect();
    let series_lines = if f.chart == Chart::Timeseries { over_time(results) } else { Vec::new() };
    let all_values: Vec<f64> = cells
        .values()
        .flat_map(|c| c.values.iter().copied())
        .chain(series_lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.3)))
        .chain(paper.iter().map(|p| p.2))
        .filter(|v| v.is_finite())
        .collect();
    let (lo, hi) = y_range(&all_values, f.y.log);
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::Failed(format!("{}: {e}", parent.display())))?;
    }
    let root = SVGBackend::new(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let caption = format!(
        "{} {}: {} (scale {})",
        paper_name(&f.paper),
        f.figure,
        f.title,
        results.iter().map(|r| r.scale.as_str()).collect::<Vec<_>>().join("+")
    );
    let ctx = Ctx { f, points: &points, cells: &cells, paper: &paper };
    match (f.chart, f.y.log) {
        (Chart::Bars, false) => bars(&plot_area, &caption, &ctx, lo..hi)?,
        (Chart::Bars, true) => bars(&plot_area, &caption, &ctx, (lo..hi).log_scale())?,
        (Chart::Line, log_y) => lines(&plot_area, &caption, &ctx, lo, hi, log_y)?,
        (Chart::Timeseries, false) => timeseries(&plot_area, &caption, f, &series_lines, lo..hi)?,
        (Chart::Timeseries, true) => {
            timeseries(&plot_area, &caption, f, &series_lines, (lo..hi).log_scale())?
        }
    }
    legend(&legend_area, f, !paper.is_empty())?;
    root.present().map_err(plot_error)?;
    Ok(())
}

/// How a bar chart's group labels are set: their font size, whether they
/// are turned a quarter (read bottom to top), and the height of their area.
/// Labels that fit their group's width at 14 px stay level; longer ones get
/// a smaller font down to 11 px; past that they are turned, which gives each
/// the plot's height instead of its group's width (sixteen labels like
/// "WH θ0.99 2t" overlapped level).
fn group_labels(n: usize, labels: &[String]) -> (u32, bool, u32) {
    // Plot width less the margins and the y label area, per group.
    let slot = (f64::from(WIDTH - LEGEND_WIDTH) - 2.0 * 12.0 - 80.0) / n.max(1) as f64;
    let chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(1) as f64;
    // About 0.6 em per character of a sans-serif font, with a 10 % gap.
    let fit = 0.9 * slot / (0.6 * chars);
    if fit >= 14.0 {
        (14, false, 56)
    } else if fit >= 11.0 {
        (fit as u32, false, 56)
    } else {
        (12, true, (0.6 * 12.0 * chars) as u32 + 40)
    }
}

/// The caption's font size: 18, smaller for a caption that would not fit the
/// plot's width at 18 (at most about 0.48 em per character of a sans-serif font).
fn caption_size(caption: &str) -> u32 {
    let width = f64::from(WIDTH - LEGEND_WIDTH) - 20.0;
    let fit = width / (0.48 * caption.chars().count() as f64);
    fit.clamp(10.0, 18.0) as u32
}

struct Ctx<'a> {
    f: &'a Figure,
    points: &'a [String],
    cells: &'a std::collections::BTreeMap<(String, String), Cell>,
    paper: &'a [(String, String, f64)],
}

impl Ctx<'_> {
    fn cell(&self, series: &str, point: &str) -> Option<&Cell> {
        self.cells.get(&(series.to_string(), point.to_string())).filter(|c| !c.values.is_empty())
    }
}

/// The y range: from 0 (linear) or a decade below the smallest value (log) to above the largest.
fn y_range(values: &[f64], log: bool) -> (f64, f64) {
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let max = if max > 0.0 { max } else { 1.0 };
    if log {
        let min = values.iter().copied().filter(|v| *v > 0.0).fold(f64::MAX, f64::min);
        let min = if min < f64::MAX { min } else { max / 10.0 };
        (10f64.powf(min.log10().floor()), 10f64.powf(max.log10().ceil()).max(max * 1.5))
    } else {
        (0.0, max * 1.12)
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn bars<'a, Y>(area: &Area<'a>, caption: &str, ctx: &Ctx<'_>, y: Y) -> CliResult
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    // Group i is centred on x = i; with n labels over a width of n the mesh's
    // key points are exactly the integers.
    let n = ctx.points.len();
    let (label_px, turned, label_area) = group_labels(n, ctx.points);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", caption_size(caption)))
        .margin(12)
        .x_label_area_size(label_area)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, y)
        .map_err(plot_error)?;
    let labels = ctx.points.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_desc(ctx.f.x.label.as_str())
        .y_desc(ctx.f.y.label.as_str())
        .x_label_formatter(&|x| {
            let i = x.round();
            if turned || (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            labels.get(i as usize).cloned().unwrap_or_default()
        })
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style(("sans-serif", 14))
        .x_label_style(("sans-serif", label_px))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(plot_error)?;
    if turned {
        // The mesh centres a label on its tick whatever its turn (half of
        // it would cover the bars): drawn here, anchored at its end just
        // below the axis, it hangs down from its tick.
        let style = ("sans-serif", label_px)
            .into_font()
            .transform(FontTransform::Rotate270)
            .into_text_style(area)
            .pos(Pos::new(HPos::Right, VPos::Center));
        let (ox, oy) = area.get_base_pixel();
        for (i, label) in ctx.points.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64, chart.y_range().start));
            area.draw(&Text::new(label.as_str(), (x - ox, y - oy + 8), &style))
                .map_err(plot_error)?;
        }
    }
    let k = ctx.f.series.len() as f64;
    let group = 0.8;
    let width = group / k;
    let base = chart.y_range().start;
    for (si, s) in ctx.f.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        for (pi, p) in ctx.points.iter().enumerate() {
            let x0 = pi as f64 - group / 2.0 + si as f64 * width;
            let mid = x0 + width / 2.0;
            if let Some(cell) = ctx.cell(&s.name, p) {
                let (m, lo, hi) = stats(cell);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0 + width * 0.08, base), (x0 + width * 0.92, m)],
                        colour.mix(0.85).filled(),
                    )))
                    .map_err(plot_error)?;
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        mid,
                        lo,
                        m,
                        hi,
                        BLACK.stroke_width(1),
                        6,
                    )))
                    .map_err(plot_error)?;
            }
            for (_, _, v) in ctx.paper.iter().filter(|(ps, pp, _)| *ps == s.name && pp == p) {
                chart
                    .draw_series(std::iter::once(diamond!(mid, *v, colour)))
                    .map_err(plot_error)?;
            }
        }
    }
    Ok(())
}

fn lines(
    area: &Area<'_>,
    caption: &str,
    ctx: &Ctx<'_>,
    lo: f64,
    hi: f64,
    log_y: bool,
) -> CliResult {
    let xs: Vec<f64> = ctx
        .points
        .iter()
        .filter_map(|p| ctx.f.x.points.iter().find(|q| &q.label == p).and_then(|q| q.value))
        .collect();
    let (xmin, xmax) =
        match (xs.iter().copied().reduce(f64::min), xs.iter().copied().reduce(f64::max)) {
            (Some(a), Some(b)) => (a, b),
            _ => (1.0, 10.0),
        };
    let (x0, x1) = if ctx.f.x.log {
        (xmin / 1.5, xmax * 1.5)
    } else {
        let pad = ((xmax - xmin) * 0.05).max(0.5);
        (xmin - pad, xmax + pad)
    };
    let x_at = |p: &str| ctx.f.x.points.iter().find(|q| q.label == p).and_then(|q| q.value);
    // Four coordinate kinds; one generic body.
    macro_rules! body {
        ($xr:expr, $yr:expr) => {{
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", caption_size(caption)))
                .margin(12)
                .x_label_area_size(56)
                .y_label_area_size(80)
                .build_cartesian_2d($xr, $yr)
                .map_err(plot_error)?;
            chart
                .configure_mesh()
                .x_desc(ctx.f.x.label.as_str())
                .y_desc(ctx.f.y.label.as_str())
                .x_label_formatter(&|v| fmt_num(*v))
                .y_label_formatter(&|v| fmt_num(*v))
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 15))
                .draw()
                .map_err(plot_error)?;
            for (si, s) in ctx.f.series.iter().enumerate() {
                let colour = COLOURS[si % COLOURS.len()];
                let ours: Vec<(f64, f64, f64, f64)> = ctx
                    .points
                    .iter()
                    .filter_map(|p| {
                        let (m, lo, hi) = stats(ctx.cell(&s.name, p)?);
                        Some((x_at(p)?, m, lo, hi))
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(
                        ours.iter().map(|o| (o.0, o.1)),
                        colour.stroke_width(2),
                    ))
                    .map_err(plot_error)?;
                chart
                    .draw_series(ours.iter().map(|o| Circle::new((o.0, o.1), 4, colour.filled())))
                    .map_err(plot_error)?;
                chart
                    .draw_series(ours.iter().map(|o| {
                        ErrorBar::new_vertical(o.0, o.2, o.1, o.3, colour.stroke_width(1), 8)
                    }))
                    .map_err(plot_error)?;
                let theirs: Vec<(f64, f64)> = ctx
                    .paper
                    .iter()
                    .filter(|(ps, _, _)| *ps == s.name)
                    .filter_map(|(_, p, v)| Some((x_at(p)?, *v)))
                    .collect();
                if theirs.len() > 1 {
                    chart
                        .draw_series(LineSeries::new(
                            theirs.iter().copied(),
                            colour.mix(0.6).stroke_width(1),
                        ))
                        .map_err(plot_error)?;
                }
                chart
                    .draw_series(theirs.iter().map(|(x, v)| diamond!(*x, *v, colour)))
                    .map_err(plot_error)?;
            }
        }};
    }
    // A log x axis is labelled at the figure's own x values (e.g. 4, 16, 32
    // threads), not at plotters' decades and their multiples (10, 20, 40).
    let x_keys = || -> Vec<f64> { ctx.f.x.points.iter().filter_map(|q| q.value).collect() };
    match (ctx.f.x.log, log_y) {
        (false, false) => body!(x0..x1, lo..hi),
        (true, false) => body!((x0..x1).log_scale().with_key_points(x_keys()), lo..hi),
        (false, true) => body!(x0..x1, (lo..hi).log_scale()),
        (true, true) => {
            body!((x0..x1).log_scale().with_key_points(x_keys()), (lo..hi).log_scale())
        }
    }
    Ok(())
}

fn timeseries<Y>(
    area: &Area<'_>,
    caption: &str,
    f: &Figure,
    series: &[(String, OverTime)],
    y: Y,
) -> CliResult
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let ts = series.iter().flat_map(|(_, l)| l.iter().map(|p| p.0));
    let (t0, t1) = ts.fold((f64::MAX, f64::MIN), |(a, b), t| (a.min(t), b.max(t)));
    let (t0, t1) = if t0 <= t1 { (t0, t1) } else { (0.0, 1.0) };
    let pad = ((t1 - t0) * 0.03).max(0.05);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", caption_size(caption)))
        .margin(12)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d((t0 - pad).max(0.0)..t1 + pad, y)
        .map_err(plot_error)?;
    // Seconds with as many decimals as the span needs (0.3 s, 2.5 s, 60 s).
    let decimals = if t1 - t0 >= 5.0 {
        0
    } else if t1 - t0 >= 0.5 {
        1
    } else {
        2
    };
    chart
        .configure_mesh()
        .x_desc(f.x.label.as_str())
        .y_desc(f.y.label.as_str())
        .x_label_formatter(&|v| format!("{v:.decimals$}"))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(plot_error)?;
    for (si, s) in f.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        let Some((_, line)) = series.iter().find(|(name, _)| *name == s.name) else {
            continue;
        };
        chart
            .draw_series(LineSeries::new(line.iter().map(|o| (o.0, o.1)), colour.stroke_width(2)))
            .map_err(plot_error)?;
        chart
            .draw_series(line.iter().map(|o| Circle::new((o.0, o.1), 3, colour.filled())))
            .map_err(plot_error)?;
        chart
            .draw_series(
                line.iter()
                    .filter(|o| o.3 > o.2)
                    .map(|o| ErrorBar::new_vertical(o.0, o.2, o.1, o.3, colour.stroke_width(1), 6)),
            )
            .map_err(plot_error)?;
    }
    Ok(())
}

/// (median, min, max) of a cell with at least one value.
fn stats(cell: &Cell) -> (f64, f64, f64) {
    let m = cell.median().unwrap_or(0.0);
    (m, cell.min().unwrap_or(m), cell.max().unwrap_or(m))
}

fn legend(area: &Area<'_>, f: &Figure, with_paper: bool) -> CliResult {
    let mut y = 60;
    let font = ("sans-serif", 15).into_font();
    for (si, s) in f.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        area.draw(&Rectangle::new([(10, y - 6), (28, y + 8)], colour.filled()))
            .map_err(plot_error)?;
        area.draw(&Text::new(format!("{} (ours)", s.name), (36, y - 6), font.clone()))
            .map_err(plot_error)?;
        y += 24;
    }
    if with_paper {
        y += 8;
        area.draw(&PathElement::new(
            vec![(19, y - 8), (27, y), (19, y + 8), (11, y), (19, y - 8)],
            BLACK.stroke_width(3),
        ))
        .map_err(plot_error)?;
        area.draw(&Text::new("paper's value", (36, y - 8), font.clone())).map_err(plot_error)?;
        y += 24;
    }
    let what = if f.chart == Chart::Timeseries {
        "points: median per interval;"
    } else {
        "bars/points: median;"
    };
    area.draw(&Text::new(what, (10, y + 8), ("sans-serif", 13).into_font())).map_err(plot_error)?;
    area.draw(&Text::new("error bars: min–max", (10, y + 26), ("sans-serif", 13).into_font()))
        .map_err(plot_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::group_labels;

    fn labels(n: usize, text: &str) -> Vec<String> {
        (0..n).map(|_| text.to_string()).collect()
    }

    #[test]
    fn group_labels_stay_level_while_they_fit_and_turn_when_they_would_overlap() {
        // Four mixes: level at 14 px.
        assert_eq!(group_labels(4, &labels(4, "RO")), (14, false, 56));
        // Ten labels of ten characters: level, smaller.
        let (px, turned, _) = group_labels(10, &labels(10, "RO θ0.6 1t"));
        assert!(!turned && (11..14).contains(&px), "{px}");
        // Sixteen of them (study-zen-ideal-ycsb): turned, with room below.
        let (px, turned, area) = group_labels(16, &labels(16, "WH θ0.99 2t"));
        assert!(turned && px == 12 && area > 56, "{px} {turned} {area}");
        // No group: nothing to divide by.
        assert_eq!(group_labels(0, &[]), (14, false, 56));
    }
}
