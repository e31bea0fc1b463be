//! `results.json`: every run of one figure at one scale, with the figure
//! definition it ran, so that `zen plot` and the report need nothing else.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::figure::Figure;

/// The `results.json` format this build writes and reads.
pub const RESULTS_SCHEMA: u32 = 1;
const KIND: &str = "zen-reproduce-results";

#[derive(Debug, Error)]
pub enum ResultsError {
    #[error("{file}: cannot read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: not a `zen reproduce` results file: {message}")]
    NotResults { file: String, message: String },
    #[error(
        "{file}: written with results schema {found}; this build reads schema {RESULTS_SCHEMA} (rerun `zen reproduce` with this build, or read it with a zen whose reproduce writes schema {found})"
    )]
    Schema { file: String, found: u64 },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub schema_version: u32,
    pub kind: String,
    pub scale: String,
    pub zenplus_version: String,
    /// CPUs of the machine that ran it.
    pub cores: usize,
    /// A run whose other processes used more cores than this is contended.
    pub max_other_load: f64,
    /// When the last run was recorded (UTC, `2026-11-26T10:20:00Z`); absent
    /// in files written before it was recorded.
    #[serde(default)]
    pub finished_utc: Option<String>,
    pub figure: Figure,
    pub runs: Vec<RunRecord>,
}

/// One `zen bench` run (the last try when contended runs were repeated).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub series: String,
    pub point: String,
    pub rep: u32,
    pub seed: u64,
    /// The `zen` arguments, `--seed` and `--format` included.
    pub args: Vec<String>,
    pub exit_code: Option<i32>,
    pub wall_s: f64,
    /// CPU time other processes used during the run, in cores (from /proc/stat).
    pub other_load_cores: f64,
    /// `other_load_cores` was above `max_other_load` on every try.
    pub contended: bool,
    pub tries: u32,
    /// The summary JSON, relative to the results file's directory.
    pub summary_file: Option<String>,
    pub metric: Option<f64>,
    /// The figure's `explain` fields read from the summary.
    pub explain: BTreeMap<String, f64>,
    /// A `timeseries` chart's points: `[elapsed_s, y.column]` of every
    /// measured interval of the run's time series (absent otherwise, and in
    /// files written before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeseries: Vec<[f64; 2]>,
    pub error: Option<String>,
    /// The figure whose run this is: the run was made once for it and its
    /// summary copied here (the same arguments: see `run::RunKey`); absent
    /// for a run made for this figure, and in files written before runs
    /// were shared. Its `wall_s` is the source run's: sum the runs without
    /// it for the time an invocation took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_from: Option<String>,
}

impl RunRecord {
    /// Does `--resume` keep this run (not make it again)? A finished run is
    /// kept, a contended one only without `--redo-contended`.
    pub fn kept_on_resume(&self, redo_contended: bool) -> bool {
        self.exit_code.is_some() && !(redo_contended && self.contended)
    }

    pub fn ok(&self) -> bool {
        self.exit_code == Some(0) && self.metric.is_some()
    }
}

impl Results {
    pub fn new(figure: &Figure, scale: &str, max_other_load: f64) -> Results {
        Results {
            schema_version: RESULTS_SCHEMA,
            kind: KIND.to_string(),
            scale: scale.to_string(),
            zenplus_version: env!("CARGO_PKG_VERSION").to_string(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_other_load,
            finished_utc: None,
            figure: figure.clone(),
            runs: Vec::new(),
        }
    }

    /// Read a results file, refusing another kind of file or another schema.
    pub fn read(path: &Path) -> Result<Results, ResultsError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ResultsError::Read { file: file.clone(), message: e.to_string() })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ResultsError::NotResults { file: file.clone(), message: e.to_string() })?;
        if value.get("kind").and_then(|k| k.as_str()) != Some(KIND) {
            return Err(ResultsError::NotResults {
                file,
                message: format!("no `\"kind\": \"{KIND}\"`"),
            });
        }
        let found = value.get("schema_version").and_then(|v| v.as_u64()).unwrap_or(0);
        if found != u64::from(RESULTS_SCHEMA) {
            return Err(ResultsError::Schema { file, found });
        }
        serde_json::from_value(value)
            .map_err(|e| ResultsError::NotResults { file, message: e.to_string() })
    }

    /// Write atomically (a temporary file renamed over the old one).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, json + "\n")?;
        std::fs::rename(&tmp, path)
    }
}

/// The time now, UTC, to the second: `2026-11-26T10:20:00Z`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = zen_workload::report::civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The repetitions of one (series, point) cell.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    /// Metric of the runs counted: the uncontended ones, or all successful
    /// ones when every run was contended.
    pub values: Vec<f64>,
    pub explain: BTreeMap<String, Vec<f64>>,
    pub contended: usize,
    pub failed: usize,
}

impl Cell {
    pub fn median(&self) -> Option<f64> {
        median(&self.values)
    }
    pub fn min(&self) -> Option<f64> {
        self.values.iter().copied().reduce(f64::min)
    }
    pub fn max(&self) -> Option<f64> {
        self.values.iter().copied().reduce(f64::max)
    }
}

pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Cells by (series, point) over the runs of several results files of one figure.
pub fn cells<'a>(
    results: impl IntoIterator<Item = &'a Results>,
) -> BTreeMap<(String, String), Cell> {
    let mut by: BTreeMap<(String, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in results {
        for run in &r.runs {
            by.entry((run.series.clone(), run.point.clone())).or_default().push(run);
        }
    }
    by.into_iter()
        .map(|(key, runs)| {
            let ok: Vec<&&RunRecord> = runs.iter().filter(|r| r.ok()).collect();
            let clean: Vec<&&RunRecord> = ok.iter().copied().filter(|r| !r.contended).collect();
            let counted = if clean.is_empty() { ok.clone() } else { clean };
            let mut cell = Cell {
                values: counted.iter().filter_map(|r| r.metric).collect(),
                contended: runs.iter().filter(|r| r.contended).count(),
                failed: runs.len() - ok.len(),
                ..Cell::default()
            };
            for r in &counted {
                for (k, v) in &r.explain {
                    cell.explain.entry(k.clone()).or_default().push(*v);
                }
            }
            (key, cell)
        })
        .collect()
}

/// A number from a summary JSON by dotted path (`summary.throughput_tps`).
pub fn lookup(json: &serde_json::Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(json, |v, key| v.get(key)).and_then(|v| v.as_f64())
}

/// One series' line over time: (elapsed s, median, min, max) per interval.
pub type OverTime = Vec<(f64, f64, f64, f64)>;

/// Each series' time series, its repetitions combined interval by interval
/// (the i-th measured interval of every counted run: median time, median,
/// minimum and maximum value). Counted runs are as in the report's cells:
/// the successful uncontended ones, or all successful ones when every run
/// of the series was contended.
pub fn over_time(results: &[Results]) -> Vec<(String, OverTime)> {
    let Some(first) = results.first() else { return Vec::new() };
    first
        .figure
        .series
        .iter()
        .map(|s| {
            let ok: Vec<&RunRecord> = results
                .iter()
                .flat_map(|r| &r.runs)
                .filter(|r| r.series == s.name && r.ok() && !r.timeseries.is_empty())
                .collect();
            let clean: Vec<&RunRecord> = ok.iter().copied().filter(|r| !r.contended).collect();
            let counted = if clean.is_empty() { ok } else { clean };
            let n = counted.iter().map(|r| r.timeseries.len()).max().unwrap_or(0);
            let line = (0..n)
                .filter_map(|i| {
                    let at: Vec<[f64; 2]> =
                        counted.iter().filter_map(|r| r.timeseries.get(i).copied()).collect();
                    let t = median(&at.iter().map(|p| p[0]).collect::<Vec<_>>())?;
                    let ys: Vec<f64> = at.iter().map(|p| p[1]).collect();
                    let lo = ys.iter().copied().reduce(f64::min)?;
                    let hi = ys.iter().copied().reduce(f64::max)?;
                    Some((t, median(&ys)?, lo, hi))
                })
                .collect();
            (s.name.clone(), line)
        })
        .collect()
}
