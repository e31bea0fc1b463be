//! Figure files: `figures/<id>.toml`, one per paper figure.
//!
//! A figure file is data only: the paper and figure it reproduces, the axes,
//! the matrix of `zen bench` runs (series × x points, each a list of flags),
//! the scale presets and the paper's reported facts for the same points.
//! This module reads and validates them; it knows nothing about any
//! particular figure. `figures/README.md` documents every field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use zen_engine::{CcKind, EngineKind};

/// The figure-file format this build reads (`schema = 1`).
pub const FIGURE_SCHEMA: u32 = 1;
/// The scale presets every figure defines.
pub const SCALES: [&str; 3] = ["tiny", "small", "paper"];
const WORKLOADS: [&str; 3] = ["ycsb", "tpcc", "smallbank"];
/// The papers a figure file may reproduce, and `study`: a sweep of our own
/// in the same format (no paper, no claims), e.g. the benchmark tables of
/// `docs/results.md`.
pub const PAPERS: [&str; 5] = ["zen+", "zen", "nvcaracal", "falcon", STUDY];
/// The `paper` of a study.
pub const STUDY: &str = "study";
/// Flags `reproduce` sets itself on every run.
const RESERVED: [&str; 5] = ["--engine", "--seed", "--format", "--out", "--pool"];

/// What is wrong with a figure file; always names the file, and the field
/// where there is one.
#[derive(Debug, Error)]
pub enum FigureError {
    #[error("{file}: cannot read: {message}")]
    Read { file: PathBuf, message: String },
    #[error("{file}: field `{field}`: {message}")]
    Field { file: PathBuf, field: String, message: String },
    #[error("{file}: {message}")]
    Syntax { file: PathBuf, message: String },
    #[error(
        "{file}: field `{field}`: unknown engine `{engine}` (this build has {built}; planned in figures/planned-engines.toml: {planned})"
    )]
    UnknownEngine { file: PathBuf, field: String, engine: String, built: String, planned: String },
    #[error("unknown figure `{name}`; the figures are: {known}")]
    UnknownFigure { name: String, known: String },
}

impl FigureError {
    fn field(file: &Path, field: impl Into<String>, message: impl Into<String>) -> FigureError {
        FigureError::Field {
            file: file.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// How the figure is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Chart {
    /// One group of bars per x point, one bar per series.
    Bars,
    /// One line per series over numeric x points.
    Line,
    /// One line per series over the time of its run: the `y.column` of the
    /// run's `zen bench` time series (`<run>.timeseries.csv`, measured
    /// intervals) at each interval's `elapsed_s`. One x point: the run.
    Timeseries,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub schema: u32,
    /// The file name without `.toml`; what `zen reproduce ID` takes.
    pub id: String,
    /// `zen+`, `zen`, `nvcaracal`, `falcon`, or `study` (a sweep of our own).
    pub paper: String,
    /// As the paper numbers it, e.g. `Fig. 8`.
    pub figure: String,
    pub title: String,
    /// Where in `/work/shared/papers/` (file, section, lines) the figure and its facts are.
    pub source: String,
    pub workload: String,
    pub chart: Chart,
    /// Flags of every run (after `zen bench <workload>`).
    #[serde(default)]
    pub args: Vec<String>,
    pub y: YAxis,
    pub x: XAxis,
    pub series: Vec<Series>,
    pub scale: BTreeMap<String, Scale>,
    /// Summary-JSON fields reported beside the metric, to explain a difference.
    #[serde(default)]
    pub explain: Vec<String>,
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// Ratios of two series reported per x point (median of the ratios of
    /// runs of the same repetition, and each repetition's).
    #[serde(default)]
    pub compare: Vec<Compare>,
    /// Why the figure cannot run in this build although its engines exist.
    #[serde(default)]
    pub blocked: Option<String>,
    /// Needs real persistent memory (an fsdax mount), not an emulation.
    #[serde(default)]
    pub real_pmem: bool,
    /// What differs from the paper's setup, in words.
    #[serde(default)]
    pub notes: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YAxis {
    pub label: String,
    /// Dotted path into the summary JSON, e.g. `summary.throughput_tps`.
    pub metric: String,
    /// The time-series column drawn by a `timeseries` chart (e.g.
    /// `throughput_tps`); `metric` still gives the report's per-run number.
    #[serde(default)]
    pub column: Option<String>,
    #[serde(default)]
    pub log: bool,
    /// A second metric drawn beside `metric` (a `bars` chart: one lighter
    /// bar per series and x point next to the metric's bar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beside: Option<Beside>,
}

/// `[y.beside]`: a second number of each run drawn beside the metric, e.g.
/// the mean latency beside p99. Its values are the runs' `explain` field of
/// the same name, so `metric` must be one of `explain`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Beside {
    /// Dotted path into the summary JSON; one of the figure's `explain`.
    pub metric: String,
    /// Its name in the legend (`Zen mean (ours)`), e.g. `mean`.
    pub label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XAxis {
    pub label: String,
    #[serde(default)]
    pub log: bool,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    pub label: String,
    /// The x value of a line chart.
    #[serde(default)]
    pub value: Option<f64>,
    #[serde(default)]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    pub name: String,
    pub engine: String,
    #[serde(default)]
    pub cc: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The x points this series runs at (labels); all when absent.
    #[serde(default)]
    pub points: Option<Vec<String>>,
}

impl Series {
    /// Whether this series has a run at the x point `label`.
    pub fn runs_at(&self, label: &str) -> bool {
        self.points.as_ref().is_none_or(|ps| ps.iter().any(|p| p == label))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    pub reps: u32,
    #[serde(default)]
    pub args: Vec<String>,
    /// The x points run at this scale (labels); all when absent.
    #[serde(default)]
    pub points: Option<Vec<String>>,
    /// Cores the machine needs for this scale to mean what the paper measured.
    #[serde(default)]
    pub min_cores: Option<usize>,
}

/// `series` ÷ `over` at every x point where both ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    pub series: String,
    pub over: String,
}

/// A fact the paper states about the figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Claim {
    /// `series` ÷ each of `over` lies in `range` at `points` (all when empty).
    Ratio {
        series: String,
        over: Vec<String>,
        #[serde(default)]
        points: Vec<String>,
        range: [f64; 2],
        /// The range is a bound the paper states ("at most 5 % overhead"):
        /// the claim holds only if every ratio lies in it. Otherwise only
        /// the side of 1 is judged and the range is reported.
        #[serde(default)]
        bound: bool,
        source: String,
    },
    /// The paper's value of `series` at `point`, in the metric's unit.
    Value { series: String, point: String, value: f64, source: String },
    /// At each of `points` (all when empty) the series rank in this order, best first.
    Order {
        series: Vec<String>,
        #[serde(default)]
        points: Vec<String>,
        source: String,
    },
    /// Along `points` (all when empty), in file order, each of `series` goes `up` or `down`.
    Trend {
        series: Vec<String>,
        #[serde(default)]
        points: Vec<String>,
        direction: Direction,
        source: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

/// Engines the figure files may name that this build does not have yet.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Planned {
    #[serde(default)]
    pub engines: BTreeMap<String, PlannedEngine>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedEngine {
    pub what: String,
}

/// The figure files of a directory, validated.
pub struct Catalog {
    pub figures: Vec<Figure>,
    pub planned: Planned,
}

impl Catalog {
    /// Read every `*.toml` of `dir` except `planned-engines.toml`.
    pub fn load(dir: &Path) -> Result<Catalog, FigureError> {
        let planned_path = dir.join("planned-engines.toml");
        let planned = read_planned(&planned_path)?;
        let entries = std::fs::read_dir(dir)
            .map_err(|e| FigureError::Read { file: dir.to_path_buf(), message: e.to_string() })?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p != &planned_path)
            .collect();
        paths.sort();
        let figures =
            paths.iter().map(|p| parse_file(p, &planned)).collect::<Result<Vec<_>, _>>()?;
        Ok(Catalog { figures, planned })
    }

    pub fn get(&self, id: &str) -> Result<&Figure, FigureError> {
        self.figures.iter().find(|f| f.id == id).ok_or_else(|| FigureError::UnknownFigure {
            name: id.to_string(),
            known: self.figures.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// `planned-engines.toml` at `path`; none planned when there is no such file.
fn read_planned(path: &Path) -> Result<Planned, FigureError> {
    if !path.exists() {
        return Ok(Planned::default());
    }
    let text = read(path)?;
    toml::from_str(&text).map_err(|e| syntax(path, &e))
}

/// Read and validate one figure file on its own, with the planned engines of
/// the `planned-engines.toml` beside it (if any).
pub fn load_file(path: &Path) -> Result<Figure, FigureError> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let planned = read_planned(&dir.join("planned-engines.toml"))?;
    parse_file(path, &planned)
}

fn read(path: &Path) -> Result<String, FigureError> {
    std::fs::read_to_string(path)
        .map_err(|e| FigureError::Read { file: path.to_path_buf(), message: e.to_string() })
}

/// A TOML or serde error; a missing or unknown field becomes a `Field` error.
fn syntax(file: &Path, e: &toml::de::Error) -> FigureError {
    let message = e.message().to_string();
    let quoted = message.split('`').nth(1).map(str::to_string);
    match quoted {
        Some(field) if message.starts_with("missing field") => {
            FigureError::field(file, field, "missing")
        }
        Some(field) if message.starts_with("unknown field") => {
            FigureError::field(file, field, message.clone())
        }
        _ => FigureError::Syntax { file: file.to_path_buf(), message: e.to_string() },
    }
}

/// Read and validate one figure file.
pub fn parse_file(path: &Path, planned: &Planned) -> Result<Figure, FigureError> {
    let text = read(path)?;
    let figure: Figure = toml::from_str(&text).map_err(|e| syntax(path, &e))?;
    validate(path, &figure, planned)?;
    Ok(figure)
}

fn validate(file: &Path, f: &Figure, planned: &Planned) -> Result<(), FigureError> {
    let err = |field: &str, message: String| Err(FigureError::field(file, field, message));
    if f.schema != FIGURE_SCHEMA {
        return err("schema", format!("is {}; this build reads schema {FIGURE_SCHEMA}", f.schema));
    }
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if f.id != stem {
        return err("id", format!("is `{}` but the file is named `{stem}.toml`", f.id));
    }
    if !PAPERS.contains(&f.paper.as_str()) {
        return err("paper", format!("`{}` is not one of {}", f.paper, PAPERS.join(", ")));
    }
    if f.is_study() && !f.claims.is_empty() {
        return err(
            "claims",
            "a study has no paper, so no paper's facts to judge (use `compare` for ratios)".into(),
        );
    }
    if !WORKLOADS.contains(&f.workload.as_str()) {
        return err("workload", format!("`{}` is not one of {}", f.workload, WORKLOADS.join(", ")));
    }
    if f.series.is_empty() {
        return err("series", "no series".to_string());
    }
    if f.x.points.is_empty() {
        return err("x.points", "no points".to_string());
    }
    let built: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
    let mut names = BTreeSet::new();
    for (i, s) in f.series.iter().enumerate() {
        if !names.insert(s.name.as_str()) {
            return err(&format!("series[{i}].name"), format!("`{}` appears twice", s.name));
        }
        if !built.contains(&s.engine.as_str()) && !planned.engines.contains_key(&s.engine) {
            return Err(FigureError::UnknownEngine {
                file: file.to_path_buf(),
                field: format!("series[{i}].engine"),
                engine: s.engine.clone(),
                built: built.join(", "),
                planned: planned.engines.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        }
        if let Some(cc) = &s.cc
            && CcKind::parse(cc).is_none()
        {
            let known: Vec<&str> = CcKind::EVERY.iter().map(|k| k.name()).collect();
            return err(
                &format!("series[{i}].cc"),
                format!("unknown protocol `{cc}` (known: {})", known.join(", ")),
            );
        }
    }
    let mut labels = BTreeSet::new();
    for p in &f.x.points {
        labels.insert(p.label.as_str());
    }
    for (i, s) in f.series.iter().enumerate() {
        if let Some(p) = s.points.iter().flatten().find(|p| !labels.contains(p.as_str())) {
            return err(&format!("series[{i}].points"), format!("no x point `{p}`"));
        }
    }
    validate_beside(file, f)?;
    validate_timeseries(file, f)?;
    let mut labels = BTreeSet::new();
    for (i, p) in f.x.points.iter().enumerate() {
        if !labels.insert(p.label.as_str()) {
            return err(&format!("x.points[{i}].label"), format!("`{}` appears twice", p.label));
        }
        if f.chart == Chart::Line && p.value.is_none() {
            return err(&format!("x.points[{i}].value"), "missing (a line chart needs it)".into());
        }
        if f.x.log && p.value.is_some_and(|v| v <= 0.0) {
            return err(&format!("x.points[{i}].value"), "must be positive on a log axis".into());
        }
    }
    for scale in SCALES {
        let Some(s) = f.scale.get(scale) else {
            // A study has no paper, so no paper-sized setup to give.
            if f.is_study() && scale == "paper" {
                continue;
            }
            return err(&format!("scale.{scale}"), "missing".to_string());
        };
        if s.reps == 0 {
            return err(&format!("scale.{scale}.reps"), "must be at least 1".to_string());
        }
        for p in s.points.iter().flatten() {
            if !labels.contains(p.as_str()) {
                return err(&format!("scale.{scale}.points"), format!("no x point `{p}`"));
            }
        }
    }
    if let Some(extra) = f.scale.keys().find(|k| !SCALES.contains(&k.as_str())) {
        return err(
            &format!("scale.{extra}"),
            format!("unknown scale (known: {})", SCALES.join(", ")),
        );
    }
    // Every run's flags: no flag twice, none that reproduce sets itself.
    for (scale_name, scale) in &f.scale {
        for (i, s) in f.series.iter().enumerate() {
            for p in &f.x.points {
                let cc: Vec<String> =
                    s.cc.iter().flat_map(|c| ["--cc".to_string(), c.clone()]).collect();
                let fields = [
                    format!("series[{i}].cc"),
                    "args".to_string(),
                    format!("scale.{scale_name}.args"),
                    format!("series[{i}].args"),
                    format!("x.points.{}.args", p.label),
                ];
                let lists: [&[String]; 5] = [&cc, &f.args, &scale.args, &s.args, &p.args];
                check_flags(file, &fields, &lists)?;
            }
        }
    }
    for (i, c) in f.claims.iter().enumerate() {
        let field = format!("claims[{i}]");
        let series_ok = |s: &String| names.contains(s.as_str());
        let point_ok = |p: &String| labels.contains(p.as_str());
        let (series, points): (Vec<&String>, Vec<&String>) = match c {
            Claim::Ratio { series, over, points, range, .. } => {
                if !(range[0] > 0.0 && range[0] <= range[1]) {
                    return err(&format!("{field}.range"), "must be 0 < low <= high".into());
                }
                (std::iter::once(series).chain(over).collect(), points.iter().collect())
            }
            Claim::Value { series, point, .. } => (vec![series], vec![point]),
            Claim::Order { series, points, .. } => {
                (series.iter().collect(), points.iter().collect())
            }
            Claim::Trend { series, points, .. } => {
                (series.iter().collect(), points.iter().collect())
            }
        };
        if let Some(s) = series.iter().find(|s| !series_ok(s)) {
            return err(&format!("{field}.series"), format!("no series named `{s}`"));
        }
        if let Some(p) = points.iter().find(|p| !point_ok(p)) {
            return err(&format!("{field}.points"), format!("no x point `{p}`"));
        }
    }
    for (i, c) in f.compare.iter().enumerate() {
        for (name, field) in [(&c.series, "series"), (&c.over, "over")] {
            if !names.contains(name.as_str()) {
                return err(&format!("compare[{i}].{field}"), format!("no series named `{name}`"));
            }
        }
        if c.series == c.over {
            return err(&format!("compare[{i}].over"), "is the series itself".into());
        }
    }
    Ok(())
}

/// The time-series columns a `timeseries` chart may draw: the numeric
/// columns of `zen bench`'s `<run>.timeseries.csv`.
pub fn timeseries_columns() -> Vec<String> {
    let header = zen_workload::report::timeseries_csv(&[]).unwrap_or_default();
    header
        .lines()
        .next()
        .unwrap_or_default()
        .split(',')
        .filter(|c| !c.is_empty() && *c != "phase" && *c != "exclusive_now")
        .map(str::to_string)
        .collect()
}

/// `y.beside` is drawn by a `bars` chart, and read from the runs' `explain`
/// fields.
fn validate_beside(file: &Path, f: &Figure) -> Result<(), FigureError> {
    let Some(b) = &f.y.beside else { return Ok(()) };
    let err = |field: &str, message: String| Err(FigureError::field(file, field, message));
    if f.chart != Chart::Bars {
        return err("y.beside", "only a `bars` chart draws a second metric".into());
    }
    if b.label.trim().is_empty() {
        return err("y.beside.label", "is empty (it names the metric in the legend)".into());
    }
    if b.metric == f.y.metric {
        return err("y.beside.metric", format!("is `y.metric` (`{}`) itself", b.metric));
    }
    if !f.explain.contains(&b.metric) {
        return err(
            "y.beside.metric",
            format!(
                "`{}` is not one of `explain` (a run records `y.metric` and the `explain` fields only)",
                b.metric
            ),
        );
    }
    Ok(())
}

/// `y.column` belongs to a `timeseries` chart, which has one x point (the
/// run) on a linear time axis.
fn validate_timeseries(file: &Path, f: &Figure) -> Result<(), FigureError> {
    let err = |field: &str, message: String| Err(FigureError::field(file, field, message));
    if f.chart != Chart::Timeseries {
        if f.y.column.is_some() {
            return err(
                "y.column",
                "only a `timeseries` chart reads the time series (use `metric`)".into(),
            );
        }
        return Ok(());
    }
    let columns = timeseries_columns();
    match &f.y.column {
        None => return err("y.column", "missing (a timeseries chart needs it)".into()),
        Some(c) if !columns.contains(c) => {
            return err(
                "y.column",
                format!("`{c}` is not a time-series column (known: {})", columns.join(", ")),
            );
        }
        Some(_) => {}
    }
    if f.x.points.len() != 1 {
        return err(
            "x.points",
            format!(
                "a timeseries chart has one x point (the run; time is its x axis), not {}",
                f.x.points.len()
            ),
        );
    }
    if f.x.log {
        return err("x.log", "a timeseries chart's time axis is linear".into());
    }
    Ok(())
}

fn check_flags(file: &Path, fields: &[String], lists: &[&[String]]) -> Result<(), FigureError> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (field, args) in fields.iter().zip(lists) {
        for a in args.iter().filter(|a| a.starts_with("--")) {
            let flag = a.split('=').next().unwrap_or(a);
            if RESERVED.contains(&flag) {
                return Err(FigureError::field(
                    file,
                    field.as_str(),
                    format!("`{flag}` is set by `zen reproduce` itself"),
                ));
            }
            if let Some(first) = seen.insert(flag, field) {
                return Err(FigureError::field(
                    file,
                    field.as_str(),
                    format!("`{flag}` is also given in `{first}`"),
                ));
            }
        }
    }
    Ok(())
}

impl Figure {
    /// A sweep of our own (`paper = "study"`), not a paper's figure.
    pub fn is_study(&self) -> bool {
        self.paper == STUDY
    }

    /// The x points of `scale`, in file order.
    pub fn points(&self, scale: &str) -> Vec<&Point> {
        let keep = self.scale.get(scale).and_then(|s| s.points.as_ref());
        self.x.points.iter().filter(|p| keep.is_none_or(|k| k.contains(&p.label))).collect()
    }

    /// Engines of the series, each once, in file order.
    pub fn engines(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for s in &self.series {
            if !out.contains(&s.engine.as_str()) {
                out.push(&s.engine);
            }
        }
        out
    }

    /// The `zen bench` arguments of one run (without `--seed` and `--format`).
    pub fn bench_args(&self, scale: &str, series: &Series, point: &Point) -> Vec<String> {
        let mut args = vec!["bench".to_string(), self.workload.clone()];
        args.extend(["--engine".to_string(), series.engine.clone()]);
        if let Some(cc) = &series.cc {
            args.extend(["--cc".to_string(), cc.clone()]);
        }
        args.extend(self.args.iter().cloned());
        if let Some(s) = self.scale.get(scale) {
            args.extend(s.args.iter().cloned());
        }
        args.extend(series.args.iter().cloned());
        args.extend(point.args.iter().cloned());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `figures/zenplus-fig18.toml` with `from` replaced by `to`, read from
    /// a file of the same name.
    fn fig18_with(from: &str, to: &str) -> Result<Figure, FigureError> {
        let text = std::fs::read_to_string("figures/zenplus-fig18.toml").unwrap();
        assert!(text.contains(from), "{from}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zenplus-fig18.toml");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        load_file(&path)
    }

    fn field_of(r: Result<Figure, FigureError>) -> (String, String) {
        match r {
            Err(FigureError::Field { field, message, .. }) => (field, message),
            other => panic!("not a field error: {other:?}"),
        }
    }

    #[test]
    fn y_beside_is_optional_and_a_bad_one_is_a_field_error() {
        // Zen+ Fig. 18 draws the mean beside p99; a figure without it is valid.
        let f = load_file(Path::new("figures/zenplus-fig18.toml")).unwrap();
        let b = f.y.beside.as_ref().unwrap();
        assert_eq!((b.metric.as_str(), b.label.as_str()), ("summary.latency_us.mean", "mean"));
        assert!(load_file(Path::new("figures/zenplus-fig16.toml")).unwrap().y.beside.is_none());
        // Not one of `explain`: the runs do not record it.
        let (field, message) = field_of(fig18_with(
            "metric = \"summary.latency_us.mean\"",
            "metric = \"summary.latency_us.p90\"",
        ));
        assert!(field == "y.beside.metric" && message.contains("explain"), "{field}: {message}");
        // The metric itself.
        let (field, _) = field_of(fig18_with(
            "metric = \"summary.latency_us.mean\"",
            "metric = \"summary.latency_us.p99\"",
        ));
        assert_eq!(field, "y.beside.metric");
        // No label.
        let (field, _) = field_of(fig18_with("label = \"mean\"", "label = \" \""));
        assert_eq!(field, "y.beside.label");
        // Only bars draw it.
        let (field, message) = field_of(fig18_with("chart = \"bars\"", "chart = \"line\""));
        assert!(field == "y.beside" && message.contains("bars"), "{field}: {message}");
        // An unknown field of it.
        let (field, _) = field_of(fig18_with("label = \"mean\"", "label = \"mean\"\ncolour = 1"));
        assert!(field.contains("colour"), "{field}");
    }
}
