//! `zen plot RESULTS… --out FILE.svg`: draw a figure from `zen reproduce`'s
//! `results.json` files (one figure; several files are pooled as more
//! repetitions).
//!
//! Bars (one group per x point, holding only the bars it has, centred on its
//! label) or lines (numeric x; the series' points at one x drawn a little
//! apart, see [`dodge`]), each of our points at the median of its
//! repetitions with an error bar from the minimum to the maximum; the
//! paper's values (`value` claims of the figure file) are drawn beside ours
//! as hollow diamonds in the series' colour. A bar chart may draw a second
//! metric (`y.beside`) as a light bar beside each series' bar. Log axes where
//! the figure file says the paper uses them. A `timeseries` figure draws each
//! series' time series (its runs' measured intervals, repetitions combined
//! interval by interval) over the seconds of the run. The legend has its own column right
//! of the plot, so it never covers data.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::commands::reproduce::figure::{Chart, Claim, Figure, load_file};
use crate::commands::reproduce::results::{Cell, OverTime, Results, cells, median, over_time};
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
/// Draw `results` into `out`; with `figure`, by that figure file's current
/// text instead of the definition the results recorded (the same figure: a
/// change of how it is drawn, e.g. `y.beside`, without running it again).
pub fn plot(results: &[PathBuf], figure: Option<&Path>, out: &Path) -> CliResult {
    let mut read: Vec<Results> =
        results.iter().map(|p| Results::read(p)).collect::<Result<_, _>>()?;
    if let Some(path) = figure {
        let f = load_file(path)?;
        if let Some(other) = read.iter().find(|r| r.figure.id != f.id) {
            return Err(CliError::usage(format!(
                "--figure {} is figure `{}`, the results are of `{}`",
                path.display(),
                f.id,
                other.figure.id
            )));
        }
        for r in &mut read {
            r.figure = f.clone();
        }
    }
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
    let beside = f.y.beside.as_ref().map(|b| b.metric.as_str());
    let all_values: Vec<f64> = cells
        .values()
        .flat_map(|c| {
            let side = beside.and_then(|m| c.explain.get(m)).into_iter().flatten();
            c.values.iter().chain(side).copied()
        })
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

    /// (median, min, max) of the `y.beside` metric of a cell, if it has one.
    fn beside(&self, series: &str, point: &str) -> Option<(f64, f64, f64)> {
        let metric = &self.f.y.beside.as_ref()?.metric;
        let values = self.cell(series, point)?.explain.get(metric)?;
        let m = median(values)?;
        let lo = values.iter().copied().fold(m, f64::min);
        let hi = values.iter().copied().fold(m, f64::max);
        Some((m, lo, hi))
    }

    fn has_paper(&self, series: &str, point: &str) -> bool {
        self.paper.iter().any(|(s, p, _)| s == series && p == point)
    }

    /// The bars at `point`, in slot order: for each series its metric's bar
    /// (when it has our value or the paper's there), then its `y.beside`
    /// bar (when the figure has one and the cell a value of it).
    fn bars_at(&self, point: &str) -> Vec<bool> {
        let kinds = if self.f.y.beside.is_some() { 2 } else { 1 };
        self.f
            .series
            .iter()
            .flat_map(|s| {
                let ours = self.cell(&s.name, point).is_some() || self.has_paper(&s.name, point);
                [ours, self.beside(&s.name, point).is_some()].into_iter().take(kinds)
            })
            .collect()
    }
}

/// The x centres of the bars of the group centred on `label_x`: the
/// present ones (`present`, in slot order) side by side, `width` apart, the
/// whole group centred on its label; `None` for an absent bar (no slot).
fn slot_centres(label_x: f64, present: &[bool], width: f64) -> Vec<Option<f64>> {
    let n = present.iter().filter(|p| **p).count() as f64;
    let mut next = label_x - n * width / 2.0 + width / 2.0;
    present
        .iter()
        .map(|&p| {
            p.then(|| {
                let x = next;
                next += width;
                x
            })
        })
        .collect()
}

/// How far apart, as a fraction of the smallest gap between x points, the
/// series of a line chart draw their points at one x (so that each series'
/// error bar shows).
const DODGE: f64 = 0.05;

/// The smallest gap between the distinct x values `xs` in the axis' space
/// (decades on a log axis), or `span` when there is at most one value.
fn x_gap(xs: &[f64], log: bool, span: f64) -> f64 {
    let mut v: Vec<f64> = xs.iter().map(|&x| if log { x.log10() } else { x }).collect();
    v.sort_by(f64::total_cmp);
    v.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0.0).reduce(f64::min).unwrap_or(span)
}

/// Where series `si` of `k` draws its point of value `x`: shifted sideways
/// by `DODGE` of `gap` per series, the series centred on `x` (a log axis
/// shifts by a factor, so the shift looks the same at every x).
fn dodge(x: f64, si: usize, k: usize, gap: f64, log: bool) -> f64 {
    let step = DODGE * gap * (si as f64 - (k.max(1) - 1) as f64 / 2.0);
    if log { x * 10f64.powf(step) } else { x + step }
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
    // `y.label` names `y.metric` (the report's column too); the axis also
    // names the light bars of `y.beside`.
    let y_desc = match &ctx.f.y.beside {
        Some(b) => format!("{}; light bars: {}", ctx.f.y.label, b.label),
        None => ctx.f.y.label.clone(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_desc(ctx.f.x.label.as_str())
        .y_desc(y_desc)
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
    // Each group is at most 0.8 wide; every bar has the width of one slot
    // of the fullest group, and a group holds only the bars it has.
    let group = 0.8;
    let slots = ctx.points.iter().map(|p| ctx.bars_at(p).iter().filter(|b| **b).count());
    let width = group / slots.max().unwrap_or(1).max(1) as f64;
    let kinds = if ctx.f.y.beside.is_some() { 2 } else { 1 };
    let base = chart.y_range().start;
    let centres: Vec<Vec<Option<f64>>> = ctx
        .points
        .iter()
        .enumerate()
        .map(|(pi, p)| slot_centres(pi as f64, &ctx.bars_at(p), width))
        .collect();
    for (si, s) in ctx.f.series.iter().enumerate() {
        let colour = COLOURS[si % COLOURS.len()];
        for (pi, p) in ctx.points.iter().enumerate() {
            let centres = &centres[pi];
            // The metric's bar, solid; the `y.beside` bar, light with the
            // series' colour as outline.
            let mut draw = |mid: f64, (m, lo, hi): (f64, f64, f64), side: bool| -> CliResult {
                let corners = [(mid - width * 0.42, base), (mid + width * 0.42, m)];
                if side {
                    chart
                        .draw_series([
                            Rectangle::new(corners, colour.mix(0.3).filled()),
                            Rectangle::new(corners, colour.stroke_width(2)),
                        ])
                        .map_err(plot_error)?;
                } else {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            corners,
                            colour.mix(0.85).filled(),
                        )))
                        .map_err(plot_error)?;
                }
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
                Ok(())
            };
            let main = centres[si * kinds];
            if let (Some(mid), Some(cell)) = (main, ctx.cell(&s.name, p)) {
                draw(mid, stats(cell), false)?;
            }
            if kinds == 2
                && let (Some(mid), Some(side)) = (centres[si * kinds + 1], ctx.beside(&s.name, p))
            {
                draw(mid, side, true)?;
            }
            if let Some(mid) = main {
                for (_, _, v) in ctx.paper.iter().filter(|(ps, pp, _)| *ps == s.name && pp == p) {
                    chart
                        .draw_series(std::iter::once(diamond!(mid, *v, colour)))
                        .map_err(plot_error)?;
                }
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
    let log_x = ctx.f.x.log;
    let k = ctx.f.series.len();
    // The series' points at one x are dodged sideways (see `dodge`); the
    // axis has room for the outermost.
    // One x point: the gap of the axis' least span (the pads below).
    let span = if log_x { (xmax / xmin).log10().max(0.35) } else { (xmax - xmin).max(1.0) };
    let gap = x_gap(&xs, log_x, span);
    let (x0, x1) = if log_x {
        (dodge(xmin, 0, k, gap, true) / 1.5, dodge(xmax, k.max(1) - 1, k, gap, true) * 1.5)
    } else {
        let pad = ((xmax - xmin) * 0.05).max(0.5);
        (dodge(xmin, 0, k, gap, false) - pad, dodge(xmax, k.max(1) - 1, k, gap, false) + pad)
    };
    let x_at = |p: &str| ctx.f.x.points.iter().find(|q| q.label == p).and_then(|q| q.value);
    // Series `si`'s x of the point `p`.
    let x_of = |si: usize, p: &str| Some(dodge(x_at(p)?, si, k, gap, log_x));
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
                        Some((x_of(si, p)?, m, lo, hi))
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
                    .filter_map(|(_, p, v)| Some((x_of(si, p)?, *v)))
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
    // threads), not at plotters' decades and their multiples (10, 20, 40);
    // only at those on the axis: plotters draws a key point's mesh line
    // wherever it falls, and a point that did not run at this scale (4
    // threads where 1 and 2 ran) drew one across the legend.
    let x_keys = || -> Vec<f64> {
        ctx.f.x.points.iter().filter_map(|q| q.value).filter(|v| (x0..=x1).contains(v)).collect()
    };
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
        if let Some(b) = &f.y.beside {
            let swatch = [(10, y - 6), (28, y + 8)];
            area.draw(&Rectangle::new(swatch, colour.mix(0.3).filled())).map_err(plot_error)?;
            area.draw(&Rectangle::new(swatch, colour.stroke_width(2))).map_err(plot_error)?;
            let text = format!("{} {} (ours)", s.name, b.label);
            area.draw(&Text::new(text, (36, y - 6), font.clone())).map_err(plot_error)?;
            y += 24;
        }
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
    if f.chart == Chart::Line && f.series.len() > 1 {
        // `dodge`: the labels stay at the true x values.
        for (i, line) in
            ["series drawn a little apart", "at each x (ticks: true x)"].iter().enumerate()
        {
            let at = (10, y + 44 + 18 * i as i32);
            area.draw(&Text::new(*line, at, ("sans-serif", 13).into_font())).map_err(plot_error)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::commands::reproduce::results::RunRecord;

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

    /// A figure of `chart` with the x points `points` (label, value), the
    /// series `series`, and `extra` TOML at the top level; scale `small`
    /// runs the points `ran` (all when empty).
    fn figure(
        chart: &str,
        x: &str,
        points: &[(&str, f64)],
        series: &[&str],
        extra: &str,
        ran: &[&str],
    ) -> Figure {
        let mut t = format!(
            "schema = 1\nid = \"t\"\npaper = \"zen+\"\nfigure = \"Fig. 0\"\ntitle = \"t\"\n\
             source = \"s\"\nworkload = \"ycsb\"\nchart = \"{chart}\"\n{extra}\n\
             [y]\nlabel = \"y\"\nmetric = \"summary.throughput_tps\"\n\n[x]\nlabel = \"x\"\n{x}\n"
        );
        for (label, value) in points {
            t += &format!("[[x.points]]\nlabel = \"{label}\"\nvalue = {value}\n");
        }
        for name in series {
            t += &format!("[[series]]\nname = \"{name}\"\nengine = \"zen\"\n");
        }
        t += "[scale.small]\nreps = 1\n";
        if !ran.is_empty() {
            t += &format!("points = {ran:?}\n");
        }
        toml::from_str(&t).unwrap()
    }

    /// One run: series, point, metric and `explain` values.
    type Run<'a> = (&'a str, &'a str, f64, &'a [(&'a str, f64)]);

    /// Results of `f` with one run per entry of `runs`.
    fn results(f: &Figure, runs: &[Run<'_>]) -> Results {
        let mut r = Results::new(f, "small", 0.15);
        for (i, (series, point, metric, explain)) in runs.iter().enumerate() {
            r.runs.push(RunRecord {
                series: series.to_string(),
                point: point.to_string(),
                rep: i as u32,
                seed: 0,
                args: Vec::new(),
                exit_code: Some(0),
                wall_s: 1.0,
                other_load_cores: 0.0,
                contended: false,
                tries: 1,
                summary_file: None,
                metric: Some(*metric),
                explain: explain
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect::<BTreeMap<_, _>>(),
                timeseries: Vec::new(),
                error: None,
                shared_from: None,
            });
        }
        r
    }

    fn svg_of(results: &[Results]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f.svg");
        draw(results, &out).unwrap();
        std::fs::read_to_string(out).unwrap()
    }

    /// The number of attribute `name` of an SVG element's line.
    fn attr(line: &str, name: &str) -> Option<f64> {
        let key = format!(" {name}=\"");
        let rest = &line[line.find(&key)? + key.len()..];
        rest[..rest.find('"')?].parse().ok()
    }

    fn attr_str<'a>(line: &'a str, name: &str) -> Option<&'a str> {
        let key = format!(" {name}=\"");
        let rest = &line[line.find(&key)? + key.len()..];
        Some(&rest[..rest.find('"')?])
    }

    /// The x of each `<text>` element whose text is `label`.
    fn text_x(svg: &str, label: &str) -> Vec<f64> {
        let lines: Vec<&str> = svg.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].starts_with("<text") && w[1].trim() == label)
            .filter_map(|w| attr(w[0], "x"))
            .collect()
    }

    /// (x centre, fill, width) of every filled `<rect>` of the plot: not the
    /// background, outlines or the legend's swatches.
    fn bars_of(svg: &str) -> Vec<(f64, String, f64)> {
        svg.lines()
            .filter(|l| l.starts_with("<rect") && attr_str(l, "fill") != Some("#FFFFFF"))
            .filter(|l| attr_str(l, "fill") != Some("none"))
            .map(|l| {
                let (x, w) = (attr(l, "x").unwrap(), attr(l, "width").unwrap());
                (x + w / 2.0, attr_str(l, "fill").unwrap().to_string(), w)
            })
            .filter(|b| b.0 < f64::from(WIDTH - LEGEND_WIDTH))
            .collect()
    }

    #[test]
    fn slot_centres_give_slots_only_to_present_bars_centred_on_the_label() {
        let w = 0.8 / 3.0;
        // Only one of three series has a value: its bar on the label.
        assert_eq!(slot_centres(3.0, &[true, false, false], w), vec![Some(3.0), None, None]);
        assert_eq!(slot_centres(3.0, &[false, false, true], w), vec![None, None, Some(3.0)]);
        // Two of three: half a slot either side of the label, a slot apart.
        let c = slot_centres(1.0, &[true, false, true], w);
        assert_eq!(c[1], None);
        let (a, b) = (c[0].unwrap(), c[2].unwrap());
        assert!((a + b - 2.0).abs() < 1e-12 && (b - a - w).abs() < 1e-12, "{c:?}");
        // All three: the middle one on the label.
        let c = slot_centres(0.0, &[true, true, true], w);
        assert!(c[1].unwrap().abs() < 1e-12 && (c[0].unwrap() + w).abs() < 1e-12, "{c:?}");
    }

    #[test]
    fn a_lone_bar_is_drawn_on_its_label() {
        // Zen+ Fig. 23 at small: where only Zen ran, its bar sat in the
        // first of three slots, left of the label, the other two empty.
        let f = figure("bars", "", &[("a", 0.0), ("b", 0.0)], &["Zen", "MMDB", "WBL"], "", &[]);
        let runs: [Run<'_>; 4] = [
            ("Zen", "a", 10.0, &[]),
            ("MMDB", "a", 8.0, &[]),
            ("WBL", "a", 6.0, &[]),
            ("Zen", "b", 9.0, &[]),
        ];
        let svg = svg_of(&[results(&f, &runs)]);
        let bars = bars_of(&svg);
        assert_eq!(bars.len(), 4, "{bars:?}");
        let (xa, xb) = (text_x(&svg, "a")[0], text_x(&svg, "b")[0]);
        let zen: Vec<f64> = bars.iter().filter(|b| b.1 == "#0072B2").map(|b| b.0).collect();
        assert!((zen[1] - xb).abs() <= 1.5, "lone bar at {}, label at {xb}", zen[1]);
        // The full group is centred on its label, and every bar is as wide.
        let mmdb = bars.iter().find(|b| b.1 == "#D55E00").unwrap().0;
        assert!((mmdb - xa).abs() <= 1.5, "middle bar at {mmdb}, label at {xa}");
        assert!(bars.iter().all(|b| (b.2 - bars[0].2).abs() <= 1.0), "{bars:?}");
    }

    #[test]
    fn dodge_moves_the_series_apart_by_the_same_screen_distance_at_every_x() {
        // A log axis shifts by a factor; the middle series stays on the true x.
        let gap = 2f64.log10();
        assert_eq!(dodge(4.0, 1, 3, gap, true), 4.0);
        let (lo, hi) = (dodge(1.0, 0, 3, gap, true), dodge(1.0, 2, 3, gap, true));
        assert!(lo < 1.0 && hi > 1.0 && (lo * hi - 1.0).abs() < 1e-12, "{lo} {hi}");
        assert!((dodge(8.0, 2, 3, gap, true) / 8.0 - hi).abs() < 1e-12);
        assert_eq!(dodge(5.0, 0, 2, 10.0, false), 5.0 - DODGE * 10.0 / 2.0);
        assert_eq!(x_gap(&[1.0, 2.0, 8.0], true, 9.0), gap);
        assert_eq!(x_gap(&[3.0], false, 9.0), 9.0);
    }

    /// Zen+ Fig. 16 at small: 1 and 2 of 1–32 threads on a log x axis, three
    /// series whose repetitions spread, drawn; its `<line>` elements.
    fn fig16_like() -> String {
        let points = [("1", 1.0), ("2", 2.0), ("4", 4.0), ("8", 8.0), ("16", 16.0), ("32", 32.0)];
        let f = figure("line", "log = true", &points, &["Zen", "MMDB", "WBL"], "", &["1", "2"]);
        let mut runs: Vec<Run<'_>> = Vec::new();
        for (s, v) in [("Zen", 100.0), ("MMDB", 90.0), ("WBL", 95.0)] {
            for p in ["1", "2"] {
                runs.push((s, p, v, &[]));
                runs.push((s, p, v * 1.2, &[]));
            }
        }
        svg_of(&[results(&f, &runs)])
    }

    #[test]
    fn the_error_bars_of_the_series_at_one_x_do_not_share_an_x() {
        // Zen+ Fig. 16: the three series' min–max bars at one x were drawn
        // on one vertical line, each hiding the others.
        let svg = fig16_like();
        let stems = |colour: &str| -> Vec<f64> {
            svg.lines()
                .filter(|l| l.starts_with("<line") && attr_str(l, "stroke") == Some(colour))
                .filter(|l| attr(l, "x1") == attr(l, "x2") && attr(l, "y1") != attr(l, "y2"))
                .map(|l| attr(l, "x1").unwrap())
                .collect()
        };
        let (zen, mmdb, wbl) = (stems("#0072B2"), stems("#D55E00"), stems("#009E73"));
        assert!(zen.len() == 2 && mmdb.len() == 2 && wbl.len() == 2, "{zen:?} {mmdb:?} {wbl:?}");
        for i in 0..2 {
            assert!(zen[i] < mmdb[i] && mmdb[i] < wbl[i], "{zen:?} {mmdb:?} {wbl:?}");
        }
        // The tick labels stay at the true x: the middle series' x.
        assert!((text_x(&svg, "1")[0] - mmdb[0]).abs() <= 1.5, "{mmdb:?}");
        assert!((text_x(&svg, "2")[0] - mmdb[1]).abs() <= 1.5, "{mmdb:?}");
    }

    #[test]
    fn no_line_is_drawn_right_of_the_plot() {
        // Zen+ Fig. 16 and 21 at small: the key point 4 (a thread count that
        // did not run) was off the axis, and its mesh line fell across the
        // legend column as a stray grey line.
        let svg = fig16_like();
        let right = f64::from(WIDTH - LEGEND_WIDTH);
        for l in svg.lines().filter(|l| l.starts_with("<line")) {
            assert!(attr(l, "x1").unwrap() <= right && attr(l, "x2").unwrap() <= right, "{l}");
        }
    }

    fn latency_figure() -> Figure {
        let explain = "explain = [\"summary.latency_us.mean\"]";
        figure("bars", "", &[("RO", 0.0), ("WH", 0.0)], &["Zen"], explain, &[])
    }

    const MEAN: &[(&str, f64)] = &[("summary.latency_us.mean", 12.0)];

    #[test]
    fn y_beside_draws_a_light_bar_beside_each_series_bar() {
        let f = latency_figure();
        let r = results(&f, &[("Zen", "RO", 30.0, MEAN), ("Zen", "WH", 60.0, MEAN)]);
        // Without it: one bar per mix.
        assert_eq!(bars_of(&svg_of(std::slice::from_ref(&r))).len(), 2);
        // With it: the mean's bar beside each, the pair centred on the label.
        let mut g = f.clone();
        g.y.beside = Some(crate::commands::reproduce::figure::Beside {
            metric: "summary.latency_us.mean".into(),
            label: "mean".into(),
        });
        let svg = svg_of(&[Results { figure: g, ..r }]);
        let bars = bars_of(&svg);
        assert_eq!(bars.len(), 4, "two bars per mix: {bars:?}");
        assert!(svg.contains("Zen mean (ours)"), "no legend entry");
        assert!(svg.contains("y; light bars: mean"), "no axis description");
        let ro = text_x(&svg, "RO")[0];
        let (p99, side) = (bars[0].0, bars[1].0);
        assert!(p99 < ro && side > ro && (p99 + side - 2.0 * ro).abs() <= 2.0, "{bars:?} {ro}");
    }

    #[test]
    fn plot_figure_redraws_recorded_runs_with_the_same_figure_only() {
        // Results recorded before Fig. 18 drew the mean, redrawn with the
        // figure file's current text.
        let dir = tempfile::tempdir().unwrap();
        let fig18 = Path::new("figures/zenplus-fig18.toml");
        let mut old = results(&load_file(fig18).unwrap(), &[("Zen", "RO", 30.0, MEAN)]);
        old.figure.y.beside = None;
        let path = dir.path().join("results.json");
        old.write(&path).unwrap();
        let out = dir.path().join("f.svg");
        plot(std::slice::from_ref(&path), None, &out).unwrap();
        assert!(!std::fs::read_to_string(&out).unwrap().contains("Zen mean (ours)"));
        plot(std::slice::from_ref(&path), Some(fig18), &out).unwrap();
        assert!(std::fs::read_to_string(&out).unwrap().contains("Zen mean (ours)"));
        // Another figure's file: a usage error naming both.
        let other = Path::new("figures/zenplus-fig16.toml");
        match plot(&[path], Some(other), &out) {
            Err(CliError::Usage(m)) => {
                assert!(m.contains("zenplus-fig16") && m.contains("zenplus-fig18"), "{m}")
            }
            e => panic!("{e:?}"),
        }
    }
}
