//! Our numbers against the paper's claims, and `report.md`.
//!
//! Each claim of a figure file is judged on the medians of our repetitions:
//!
//! * `ratio`: the direction holds when our ratio is on the paper's side of 1
//!   (≥ 1 when the paper's range is ≥ 1, ≤ 1 when it is ≤ 1; a range that
//!   straddles 1 gives no direction) at every point; the magnitude is reported
//!   as how many of our ratios fall inside the paper's range.
//! * `order`: at every point, our medians rank the series in the paper's order.
//! * `trend`: along the x points each series moves in the paper's direction
//!   from first to last, and no step goes the other way by more than
//!   [`TREND_NOISE`].
//! * `value`: ours and the paper's side by side with their ratio; not judged
//!   (absolute numbers of another machine).
//!
//! A figure's shape holds when every judged claim holds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::figure::{Chart, Claim, Direction, Figure};
use super::results::{Cell, Results, RunRecord, cells, median, over_time};

/// A step against a trend smaller than this share of the previous value is noise.
pub const TREND_NOISE: f64 = 0.05;

/// One judged (or reported) claim.
pub struct Judged {
    pub what: String,
    pub paper: String,
    pub ours: String,
    /// None: reported, not judged.
    pub holds: Option<bool>,
    pub source: String,
}

/// The verdict of a figure: its judged claims and the overall word.
pub struct Verdict {
    pub claims: Vec<Judged>,
    pub word: String,
}

type Cells = BTreeMap<(String, String), Cell>;

fn med(cells: &Cells, series: &str, point: &str) -> Option<f64> {
    cells.get(&(series.to_string(), point.to_string())).and_then(Cell::median)
}

pub fn judge(figure: &Figure, points: &[String], cells: &Cells) -> Verdict {
    let mut out = Vec::new();
    for claim in &figure.claims {
        let chosen = |ps: &Vec<String>| -> Vec<String> {
            points.iter().filter(|p| ps.is_empty() || ps.contains(p)).cloned().collect()
        };
        match claim {
            Claim::Ratio { series, over, points: ps, range, bound, source } => {
                let pts = chosen(ps);
                let mut ratios = Vec::new();
                for o in over {
                    for p in &pts {
                        if let (Some(a), Some(b)) = (med(cells, series, p), med(cells, o, p))
                            && b > 0.0
                        {
                            ratios.push(a / b);
                        }
                    }
                }
                let (lo, hi) = (range[0], range[1]);
                let inside = ratios.iter().filter(|r| **r >= lo && **r <= hi).count();
                let holds = if ratios.is_empty() {
                    None
                } else if *bound {
                    Some(inside == ratios.len())
                } else if lo >= 1.0 {
                    Some(ratios.iter().all(|r| *r >= 1.0))
                } else if hi <= 1.0 {
                    Some(ratios.iter().all(|r| *r <= 1.0))
                } else {
                    None
                };
                let ours = match (
                    ratios.iter().copied().reduce(f64::min),
                    ratios.iter().copied().reduce(f64::max),
                ) {
                    (Some(a), Some(b)) => format!(
                        "{a:.2}–{b:.2}× (median {:.2}×; {inside} of {} in the paper's range)",
                        median(&ratios).unwrap_or(0.0),
                        ratios.len()
                    ),
                    _ => "not run".to_string(),
                };
                out.push(Judged {
                    what: format!("{series} ÷ {} at {}", over.join(", "), describe_points(ps)),
                    paper: format!("{lo:.2}–{hi:.2}×"),
                    ours,
                    holds,
                    source: source.clone(),
                });
            }
            Claim::Value { series, point, value, source } => {
                let ours = med(cells, series, point);
                out.push(Judged {
                    what: format!("{series} at {point}"),
                    paper: fmt_num(*value),
                    ours: match ours {
                        Some(v) => format!("{} (ours ÷ paper {:.3})", fmt_num(v), v / value),
                        None => "not run".to_string(),
                    },
                    holds: None,
                    source: source.clone(),
                });
            }
            Claim::Order { series, points: ps, source } => {
                let pts = chosen(ps);
                let mut held = 0;
                let mut judged = 0;
                let mut broken = Vec::new();
                for p in &pts {
                    let v: Option<Vec<f64>> = series.iter().map(|s| med(cells, s, p)).collect();
                    let Some(v) = v else { continue };
                    judged += 1;
                    if v.windows(2).all(|w| w[0] >= w[1]) {
                        held += 1;
                    } else {
                        broken.push(p.clone());
                    }
                }
                out.push(Judged {
                    what: format!("order {} at {}", series.join(" > "), describe_points(ps)),
                    paper: "holds".to_string(),
                    ours: if judged == 0 {
                        "not run".to_string()
                    } else if broken.is_empty() {
                        format!("holds at {held} of {judged} points")
                    } else {
                        format!("holds at {held} of {judged} points (not at {})", broken.join(", "))
                    },
                    holds: (judged > 0).then_some(broken.is_empty()),
                    source: source.clone(),
                });
            }
            Claim::Trend { series, points: ps, direction, source } => {
                let pts = chosen(ps);
                let mut all = true;
                let mut judged = false;
                let mut words = Vec::new();
                for s in series {
                    let v: Vec<f64> = pts.iter().filter_map(|p| med(cells, s, p)).collect();
                    if v.len() < 2 {
                        continue;
                    }
                    judged = true;
                    let ok = trend_holds(&v, *direction);
                    all &= ok;
                    words.push(format!(
                        "{s} {} {}→{}",
                        if ok { "holds" } else { "does not hold" },
                        fmt_num(v[0]),
                        fmt_num(v[v.len() - 1])
                    ));
                }
                out.push(Judged {
                    what: format!(
                        "{} along {} ({})",
                        series.join(", "),
                        figure.x.label,
                        describe_points(ps)
                    ),
                    paper: match direction {
                        Direction::Up => "rises".to_string(),
                        Direction::Down => "falls".to_string(),
                    },
                    ours: if judged { words.join("; ") } else { "not run".to_string() },
                    holds: judged.then_some(all),
                    source: source.clone(),
                });
            }
        }
    }
    let judged: Vec<bool> = out.iter().filter_map(|j| j.holds).collect();
    let held = judged.iter().filter(|h| **h).count();
    let word = if figure.is_study() {
        "measured (a study, no paper)".to_string()
    } else if judged.is_empty() {
        "no claim judged".to_string()
    } else if held == judged.len() {
        format!("shape holds ({held} of {} claims)", judged.len())
    } else if held == 0 {
        format!("shape does not hold (0 of {} claims)", judged.len())
    } else {
        format!("shape holds in part ({held} of {} claims)", judged.len())
    };
    Verdict { claims: out, word }
}

/// Monotone in `direction` from first to last, with no step back beyond the noise.
pub fn trend_holds(v: &[f64], direction: Direction) -> bool {
    let sign = match direction {
        Direction::Up => 1.0,
        Direction::Down => -1.0,
    };
    let overall = sign * (v[v.len() - 1] - v[0]) > 0.0;
    let steps = v.windows(2).all(|w| sign * (w[1] - w[0]) >= -TREND_NOISE * w[0].abs());
    overall && steps
}

fn describe_points(ps: &[String]) -> String {
    if ps.is_empty() { "every point".to_string() } else { ps.join(", ") }
}

/// A number in a table: 3 significant digits, thousands as k, millions as M.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if v == v.round() && a < 1e4 {
        format!("{v:.0}")
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// `series` ÷ `over` at `point`: the ratio of the runs of each repetition
/// where both succeeded (the contended ones only when a cell has no clean
/// run, as for the medians), in repetition order.
pub fn paired_ratios(r: &Results, series: &str, over: &str, point: &str) -> Vec<f64> {
    let counted = |name: &str| -> Vec<&RunRecord> {
        let ok: Vec<&RunRecord> =
            r.runs.iter().filter(|x| x.series == name && x.point == point && x.ok()).collect();
        let clean: Vec<&RunRecord> = ok.iter().copied().filter(|x| !x.contended).collect();
        if clean.is_empty() { ok } else { clean }
    };
    let (a, b) = (counted(series), counted(over));
    let mut reps: Vec<u32> = a.iter().map(|x| x.rep).collect();
    reps.sort_unstable();
    reps.dedup();
    reps.iter()
        .filter_map(|rep| {
            let x = a.iter().find(|x| x.rep == *rep)?.metric?;
            let y = b.iter().find(|y| y.rep == *rep)?.metric?;
            (y > 0.0).then(|| x / y)
        })
        .collect()
}

/// The section of `report.md` for one figure that ran; its heading is at
/// `level` (2: `##`).
pub fn figure_section(r: &Results, svg: Option<&str>, level: usize) -> (String, Verdict) {
    let f = &r.figure;
    let points: Vec<String> = f.points(&r.scale).iter().map(|p| p.label.clone()).collect();
    let cells = cells([r]);
    let verdict = judge(f, &points, &cells);
    // A timeseries figure's one x point is the run; its x axis is time.
    let x_head = if f.chart == Chart::Timeseries { "run" } else { f.x.label.as_str() };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {} {} — {} (`{}`)\n",
        "#".repeat(level),
        paper_name(&f.paper),
        f.figure,
        f.title,
        f.id
    );
    let _ = writeln!(
        s,
        "Source: {}. Scale `{}`, repetitions: {}.",
        f.source, r.scale, f.scale[&r.scale].reps
    );
    // Runs made once for another figure of the same matrix (`shared_from`).
    let mut shared: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &r.runs {
        if let Some(from) = &run.shared_from {
            *shared.entry(from.as_str()).or_default() += 1;
        }
    }
    for (from, n) in shared {
        let _ = writeln!(
            s,
            "{n} of its {} runs were made once for `{from}` (the same arguments) and read here for this figure's metric.",
            r.runs.len()
        );
    }
    if let Some(n) = &f.notes {
        let _ = writeln!(s, "\n{n}");
    }
    if let Some(svg) = svg {
        let _ = writeln!(s, "\n![{} {}]({svg})", paper_name(&f.paper), f.figure);
    }
    let _ = writeln!(s, "\n**Verdict: {}.**\n", verdict.word);
    // Our numbers, with the paper's value where it gives one.
    let paper_values: BTreeMap<(String, String), f64> = f
        .claims
        .iter()
        .filter_map(|c| match c {
            Claim::Value { series, point, value, .. } => {
                Some(((series.clone(), point.clone()), *value))
            }
            _ => None,
        })
        .collect();
    // A study has no paper: no paper columns.
    let (paper_head, paper_rule) =
        if f.is_study() { ("", "") } else { (" paper | ours ÷ paper |", " --- | --- |") };
    let _ = writeln!(
        s,
        "| {x_head} | series | ours: {} (median) | min–max | runs |{paper_head}",
        f.y.label
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |{paper_rule}");
    for p in &points {
        for series in f.series.iter().filter(|s| s.runs_at(p)) {
            let key = (series.name.clone(), p.clone());
            let cell = cells.get(&key).cloned().unwrap_or_default();
            let paper = paper_values.get(&key);
            let runs = format!(
                "{}{}{}",
                cell.values.len(),
                if cell.contended > 0 {
                    format!(", {} contended", cell.contended)
                } else {
                    String::new()
                },
                if cell.failed > 0 { format!(", {} failed", cell.failed) } else { String::new() }
            );
            let paper_cells = if f.is_study() {
                String::new()
            } else {
                format!(
                    " {} | {} |",
                    paper.map_or("–".to_string(), |v| fmt_num(*v)),
                    match (paper, cell.median()) {
                        (Some(p), Some(m)) => format!("{:.3}", m / p),
                        _ => "–".to_string(),
                    }
                )
            };
            let _ = writeln!(
                s,
                "| {p} | {} | {} | {} | {runs} |{paper_cells}",
                series.name,
                cell.median().map_or("–".to_string(), fmt_num),
                match (cell.min(), cell.max()) {
                    (Some(a), Some(b)) => format!("{}–{}", fmt_num(a), fmt_num(b)),
                    _ => "–".to_string(),
                },
            );
        }
    }
    if f.chart == Chart::Timeseries {
        s.push_str(&over_time_table(r));
    }
    if !verdict.claims.is_empty() {
        let _ = writeln!(s, "\n| paper's claim | paper | ours | holds | where |");
        let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
        for j in &verdict.claims {
            let holds = match j.holds {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "(reported)",
            };
            let _ =
                writeln!(s, "| {} | {} | {} | {holds} | {} |", j.what, j.paper, j.ours, j.source);
        }
    }
    if !f.compare.is_empty() {
        let _ = writeln!(
            s,
            "\nRatios of {} (median of the ratios of runs of the same repetition; each repetition's):\n",
            f.y.label
        );
        let _ = writeln!(s, "| {x_head} | ratio | median | repetitions |");
        let _ = writeln!(s, "| --- | --- | --- | --- |");
        for c in &f.compare {
            for p in &points {
                let rs = paired_ratios(r, &c.series, &c.over, p);
                let Some(m) = median(&rs) else { continue };
                let each: Vec<String> = rs.iter().map(|x| format!("{x:.2}")).collect();
                let _ = writeln!(
                    s,
                    "| {p} | {} ÷ {} | {m:.2} | {} |",
                    c.series,
                    c.over,
                    each.join(" / ")
                );
            }
        }
    }
    if !f.explain.is_empty() {
        let _ =
            writeln!(s, "\nCounters that explain a difference (medians of the runs counted):\n");
        let _ = writeln!(s, "| {x_head} | series | {} |", f.explain.join(" | "));
        let _ = writeln!(s, "| --- | --- |{}", " --- |".repeat(f.explain.len()));
        for p in &points {
            for series in &f.series {
                let Some(cell) = cells.get(&(series.name.clone(), p.clone())) else { continue };
                let values: Vec<String> = f
                    .explain
                    .iter()
                    .map(|k| {
                        cell.explain.get(k).and_then(|v| median(v)).map_or("–".to_string(), fmt_num)
                    })
                    .collect();
                let _ = writeln!(s, "| {p} | {} | {} |", series.name, values.join(" | "));
            }
        }
    }
    let contended: Vec<String> = r
        .runs
        .iter()
        .filter(|x| x.contended)
        .map(|x| {
            format!("{} · {} · rep {} ({:.2} cores)", x.series, x.point, x.rep, x.other_load_cores)
        })
        .collect();
    let loads: Vec<f64> = r.runs.iter().map(|x| x.other_load_cores).collect();
    let _ = writeln!(
        s,
        "\nOther processes' load during the runs: median {:.3}, max {:.3} cores (limit {:.2}).{}",
        median(&loads).unwrap_or(0.0),
        loads.iter().copied().fold(0.0, f64::max),
        r.max_other_load,
        if contended.is_empty() {
            String::new()
        } else {
            format!(
                " Contended after every try (counted only where a cell has no clean run): {}.",
                contended.join("; ")
            )
        }
    );
    (s, verdict)
}

/// A timeseries figure's lines in numbers: per series the measured
/// intervals, and the lowest and highest (medians of the repetitions
/// interval by interval, as drawn) with their time.
fn over_time_table(r: &Results) -> String {
    let f = &r.figure;
    let column = f.y.column.as_deref().unwrap_or("");
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nTime series (`{column}` of every measured interval, median of the repetitions interval by interval):\n"
    );
    let _ =
        writeln!(s, "| series | intervals | lowest ({}) | at (s) | highest | at (s) |", f.y.label);
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    for (name, line) in over_time(std::slice::from_ref(r)) {
        let low = line.iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let high = line.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        let (Some(low), Some(high)) = (low, high) else {
            let _ = writeln!(s, "| {name} | 0 | – | – | – | – |");
            continue;
        };
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {:.2} | {} | {:.2} |",
            line.len(),
            fmt_num(low.1),
            low.0,
            fmt_num(high.1),
            high.0
        );
    }
    s
}

pub fn paper_name(paper: &str) -> &str {
    match paper {
        "zen+" => "Zen+",
        "zen" => "Zen",
        "nvcaracal" => "NVCaracal",
        "falcon" => "Falcon",
        "study" => "Study",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trends_allow_noise_but_not_a_reversal() {
        assert!(trend_holds(&[10.0, 8.0, 8.3, 5.0], Direction::Down));
        assert!(!trend_holds(&[10.0, 8.0, 9.0, 5.0], Direction::Down), "a 12 % step back");
        assert!(!trend_holds(&[10.0, 10.0], Direction::Up), "flat is no rise");
        assert!(trend_holds(&[1.0, 2.0], Direction::Up));
    }

    fn figure() -> Figure {
        let text = std::fs::read_to_string("figures/zenplus-fig08.toml").unwrap();
        toml::from_str(&text).unwrap()
    }

    fn cells_of(values: &[(&str, &str, f64)]) -> Cells {
        values
            .iter()
            .map(|(s, p, v)| {
                ((s.to_string(), p.to_string()), Cell { values: vec![*v], ..Cell::default() })
            })
            .collect()
    }

    #[test]
    fn ratio_direction_and_order_are_judged_on_the_points_that_ran() {
        let f = figure();
        let points = vec!["RO θ0.6".to_string(), "WH θ0.6".to_string()];
        let cells = cells_of(&[
            ("Zen", "RO θ0.6", 300.0),
            ("MMDB", "RO θ0.6", 200.0),
            ("WBL", "RO θ0.6", 100.0),
            ("Zen", "WH θ0.6", 90.0),
            ("MMDB", "WH θ0.6", 100.0),
            ("WBL", "WH θ0.6", 50.0),
        ]);
        let v = judge(&f, &points, &cells);
        let find = |what: &str| v.claims.iter().find(|j| j.what.starts_with(what)).unwrap();
        // RO: 1.5× and 3× over MMDB and WBL, on the paper's side of 1.
        let ro = v.claims.iter().find(|j| j.source.ends_with("RO")).unwrap();
        assert_eq!(ro.holds, Some(true), "{}", ro.ours);
        assert!(ro.ours.contains("2 of 2 in the paper's range"), "{}", ro.ours);
        // WH: 0.9× over MMDB breaks the direction.
        let wh = v.claims.iter().find(|j| j.source.ends_with("WH")).unwrap();
        assert_eq!(wh.holds, Some(false), "{}", wh.ours);
        // Points that did not run are not judged.
        let rh = v.claims.iter().find(|j| j.source.ends_with("RH")).unwrap();
        assert_eq!(rh.holds, None);
        assert_eq!(find("order").holds, Some(false));
        assert!(find("order").ours.contains("not at WH θ0.6"), "{}", find("order").ours);
        assert_eq!(find("Zen, MMDB, WBL along").holds, Some(true));
        assert!(v.word.starts_with("shape holds in part"), "{}", v.word);
    }

    /// Zen+ Fig. 28's read-only claim ("at most 5 % overhead", a bound):
    /// 0.86× is on the paper's side of 1 but outside its range.
    #[test]
    fn a_bound_claim_holds_only_inside_its_range() {
        let text = std::fs::read_to_string("figures/zenplus-fig28.toml").unwrap();
        let f: Figure = toml::from_str(&text).unwrap();
        let points = vec!["RO θ0.6".to_string(), "RO θ0.99".to_string()];
        let judged = |ratio: f64| {
            let cells = cells_of(&[
                ("soft-partition", "RO θ0.6", 100.0 * ratio),
                ("local-write", "RO θ0.6", 100.0),
                ("soft-partition", "RO θ0.99", 98.0),
                ("local-write", "RO θ0.99", 100.0),
            ]);
            let v = judge(&f, &points, &cells);
            v.claims.iter().find(|j| j.source.contains("at most 5 %")).unwrap().holds
        };
        assert_eq!(judged(0.86), Some(false), "17 % overhead is not at most 5 %");
        assert_eq!(judged(0.97), Some(true));
        assert_eq!(judged(1.01), Some(true), "no overhead: within the 5 % either way");
        assert_eq!(judged(1.2), Some(false), "far above: not what the paper says either");
    }
}
