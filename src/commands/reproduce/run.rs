//! Running a figure's matrix: one child `zen bench` process per run,
//! repetitions interleaved (every cell of repetition 1, then of 2, …), the
//! CPU time other processes used measured around each run, contended runs
//! repeated, and `results.json` rewritten after every run so that an
//! interrupted reproduction resumes where it stopped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::figure::{Chart, Figure};
use super::results::{Results, RunRecord, lookup, utc_now};
use crate::error::{CliError, CliResult};

/// How the runs are made.
pub struct RunOptions {
    pub scale: String,
    pub seed: u64,
    pub max_other_load: f64,
    /// Extra tries of a contended run.
    pub retries: u32,
    /// Make the recorded contended runs again (`--redo-contended`).
    pub redo_contended: bool,
    /// Files locked exclusively, in order, around every run.
    pub locks: Vec<PathBuf>,
    pub run_timeout: Duration,
}

/// One run to make.
pub struct Planned {
    pub series: String,
    pub point: String,
    pub rep: u32,
    pub seed: u64,
    pub args: Vec<String>,
    /// What determines the run, whichever figure needs it: see [`RunKey`].
    pub key: RunKey,
}

/// Everything that determines a run: its `zen` arguments in the order they
/// are passed (workload, engine and protocol, the figure's, the scale's, the
/// series' and the point's flags, then `--seed` and `--format`), and whether
/// it also writes its time series (a `timeseries` chart's `--out`). Two
/// figures that plan runs of the same key share one run: it is made once
/// and its summary serves both (each reads its own metric from it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub args: Vec<String>,
    pub timeseries: bool,
}

/// The runs of `figure` at `scale`, in the order they run: every cell of
/// repetition 1, then of repetition 2, … (repetition r has seed `seed + r`).
pub fn plan(figure: &Figure, scale: &str, seed: u64) -> Vec<Planned> {
    let reps = figure.scale.get(scale).map_or(0, |s| s.reps);
    let mut out = Vec::new();
    for rep in 1..=reps {
        for point in figure.points(scale) {
            for series in figure.series.iter().filter(|s| s.runs_at(&point.label)) {
                let seed = seed + u64::from(rep);
                let mut args = figure.bench_args(scale, series, point);
                args.extend(["--seed".into(), seed.to_string(), "--format".into(), "json".into()]);
                let key =
                    RunKey { args: args.clone(), timeseries: figure.chart == Chart::Timeseries };
                out.push(Planned {
                    series: series.name.clone(),
                    point: point.label.clone(),
                    rep,
                    seed,
                    args,
                    key,
                });
            }
        }
    }
    out
}

/// A finished run that other figures of the same invocation reuse.
#[derive(Debug, Clone)]
struct Source {
    /// The figure whose run it is.
    figure: String,
    /// That figure's directory (its record's `summary_file` is relative to it).
    dir: PathBuf,
    record: RunRecord,
}

/// The finished runs of one `zen reproduce` invocation (and of the result
/// directory it resumes), by [`RunKey`], and the keys the progress bar has
/// counted: the bar counts distinct runs.
#[derive(Default)]
pub struct Shared {
    done: HashMap<RunKey, Source>,
    counted: HashSet<RunKey>,
}

impl Shared {
    /// Offer the runs of `results` (the figure `id`, in `dir`) that a resume
    /// keeps for sharing; a key already offered keeps its first source.
    pub fn offer(&mut self, id: &str, dir: &Path, results: &Results, redo_contended: bool) {
        let timeseries = results.figure.chart == Chart::Timeseries;
        // A shared time-series run's files stay with its source figure:
        // only the source offers it.
        let offered = results
            .runs
            .iter()
            .filter(|r| r.kept_on_resume(redo_contended))
            .filter(|r| !(timeseries && r.shared_from.is_some()));
        for r in offered {
            let key = RunKey { args: r.args.clone(), timeseries };
            self.done.entry(key).or_insert_with(|| Source {
                figure: r.shared_from.clone().unwrap_or_else(|| id.to_string()),
                dir: dir.to_path_buf(),
                record: r.clone(),
            });
        }
    }

    fn add(&mut self, id: &str, dir: &Path, key: &RunKey, record: &RunRecord) {
        self.done.entry(key.clone()).or_insert_with(|| Source {
            figure: id.to_string(),
            dir: dir.to_path_buf(),
            record: record.clone(),
        });
    }

    /// Count `key` on the bar the first time it is finished.
    fn count(&mut self, key: &RunKey, bar: &ProgressBar) {
        if self.counted.insert(key.clone()) {
            bar.inc(1);
        }
    }
}

/// The distinct runs of `figures` at `scale`.
pub fn distinct_runs<'a>(figures: impl IntoIterator<Item = &'a Figure>, scale: &str) -> usize {
    let mut keys = HashSet::new();
    for f in figures {
        keys.extend(plan(f, scale, 0).into_iter().map(|p| p.key));
    }
    keys.len()
}

/// A file-name-safe form of a label.
fn slug(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
        .collect();
    mapped.trim_matches('_').to_string()
}

/// Run what `results` lacks of `figure`'s matrix into `dir`; returns the
/// results. A run that `shared` already holds (made for another figure of
/// this invocation, or found finished in the directory resumed) is not made
/// again: its record and summary are copied, marked `shared_from`.
pub fn run_figure(
    figure: &Figure,
    dir: &Path,
    mut results: Results,
    o: &RunOptions,
    bar: &ProgressBar,
    shared: &mut Shared,
) -> CliResult<Results> {
    let runs_dir = dir.join("runs");
    std::fs::create_dir_all(&runs_dir).map_err(|e| io_error(&runs_dir, e))?;
    let results_path = dir.join("results.json");
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Failed(format!("cannot find the zen binary: {e}")))?;
    let planned = plan(figure, &o.scale, o.seed);
    // Keep the finished runs of the same plan; everything else runs (again).
    results.runs.retain(|r| {
        planned.iter().any(|p| {
            p.series == r.series && p.point == r.point && p.rep == r.rep && p.args == r.args
        }) && r.kept_on_resume(o.redo_contended)
    });
    shared.offer(&figure.id, dir, &results, o.redo_contended);
    let mut todo: Vec<&Planned> = Vec::new();
    for p in &planned {
        let kept = results
            .runs
            .iter()
            .any(|r| r.series == p.series && r.point == p.point && r.rep == p.rep);
        if kept {
            shared.count(&p.key, bar);
        } else {
            todo.push(p);
        }
    }
    let mut reused: BTreeMap<String, usize> = BTreeMap::new();
    for p in todo {
        let name = format!("{}__{}__rep{}", slug(&p.series), slug(&p.point), p.rep);
        let record = if let Some(source) = shared.done.get(&p.key) {
            *reused.entry(source.figure.clone()).or_default() += 1;
            share(source, &runs_dir, &name, figure, p)
        } else {
            bar.set_message(format!("{} · {} · {} · rep {}", figure.id, p.series, p.point, p.rep));
            let record = run_one(&exe, &runs_dir, &name, figure, p, o)?;
            say(bar, progress_line(figure, p, &record));
            if record.exit_code.is_some() {
                shared.add(&figure.id, dir, &p.key, &record);
            }
            record
        };
        results.runs.push(record);
        results.finished_utc = Some(utc_now());
        results.write(&results_path).map_err(|e| io_error(&results_path, e))?;
        shared.count(&p.key, bar);
    }
    for (from, n) in reused {
        say(bar, format!("{}: {n} runs shared (made once, for {from})", figure.id));
    }
    results.write(&results_path).map_err(|e| io_error(&results_path, e))?;
    Ok(results)
}

/// What a made run printed: its cell, metric (or failure) and other load.
fn progress_line(figure: &Figure, p: &Planned, record: &RunRecord) -> String {
    format!(
        "{} {} · {} · rep {}: {} · other load {:.2} cores{}",
        figure.id,
        p.series,
        p.point,
        p.rep,
        match (record.metric, &record.error) {
            (Some(m), _) => format!("{} = {m:.4}", figure.y.metric),
            (None, Some(e)) => format!("failed: {e}"),
            (None, None) => "failed".to_string(),
        },
        record.other_load_cores,
        if record.contended { " (contended)" } else { "" }
    )
}

/// A line above the progress bar (on stderr when the bar is hidden).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The record of planned run `p` before it has run: what the plan says,
/// nothing measured.
fn planned_record(p: &Planned) -> RunRecord {
    RunRecord {
        series: p.series.clone(),
        point: p.point.clone(),
        rep: p.rep,
        seed: p.seed,
        args: p.args.clone(),
        exit_code: None,
        wall_s: 0.0,
        other_load_cores: 0.0,
        contended: false,
        tries: 0,
        summary_file: None,
        metric: None,
        explain: Default::default(),
        timeseries: Vec::new(),
        error: None,
        shared_from: None,
    }
}

/// `p`'s record from the finished run `source` made for another figure: its
/// measurements, and its summary copied into `runs_dir` as `name`'s, from
/// which `figure`'s own metric and `explain` fields are read.
fn share(source: &Source, runs_dir: &Path, name: &str, figure: &Figure, p: &Planned) -> RunRecord {
    let s = &source.record;
    let mut record = RunRecord {
        exit_code: s.exit_code,
        wall_s: s.wall_s,
        other_load_cores: s.other_load_cores,
        contended: s.contended,
        tries: s.tries,
        shared_from: Some(source.figure.clone()),
        ..planned_record(p)
    };
    if s.exit_code != Some(0) {
        record.error.clone_from(&s.error);
        return record;
    }
    let Some(from) = s.summary_file.as_deref().map(|f| source.dir.join(f)) else {
        record.error = s.error.clone().or_else(|| Some("the shared run has no summary".into()));
        return record;
    };
    let summary = runs_dir.join(format!("{name}.summary.json"));
    if let Err(e) = std::fs::copy(&from, &summary) {
        record.error = Some(format!("{}: {e}", from.display()));
        return record;
    }
    read_summary(&mut record, &summary, figure, runs_dir);
    if let Some(column) = figure.y.column.as_deref().filter(|_| figure.chart == Chart::Timeseries) {
        // The time series stays in the source run's directory of files.
        let files = from.with_file_name(
            from.file_name()
                .and_then(|n| n.to_str())
                .map_or_else(String::new, |n| n.replace(".summary.json", ".files")),
        );
        match read_timeseries(&files, column) {
            Ok(points) => record.timeseries = points,
            Err(e) => record.error = Some(e),
        }
    }
    record
}

fn io_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::Failed(format!("{}: {e}", path.display()))
}

fn run_one(
    exe: &Path,
    runs_dir: &Path,
    name: &str,
    figure: &Figure,
    p: &Planned,
    o: &RunOptions,
) -> CliResult<RunRecord> {
    let summary = runs_dir.join(format!("{name}.summary.json"));
    let stderr = runs_dir.join(format!("{name}.stderr.txt"));
    // A timeseries run also writes its files (the time series among them)
    // into a directory of its own; `args` (recorded, and compared on
    // --resume) leaves that `--out` out.
    let files = runs_dir.join(format!("{name}.files"));
    let mut args = p.args.clone();
    if figure.chart == Chart::Timeseries {
        args.extend(["--out".to_string(), files.display().to_string()]);
    }
    let mut tries = 0;
    loop {
        tries += 1;
        if files.exists() {
            std::fs::remove_dir_all(&files).map_err(|e| io_error(&files, e))?;
        }
        let locks = take_locks(&o.locks)?;
        let load = LoadMeter::start();
        let started = Instant::now();
        let outcome = spawn(exe, &args, &summary, &stderr, o.run_timeout);
        let wall_s = started.elapsed().as_secs_f64();
        let other = load.other_cores(wall_s);
        drop(locks);
        let (exit_code, error) = outcome?;
        let contended = other > o.max_other_load;
        let mut record = RunRecord {
            exit_code,
            wall_s,
            other_load_cores: other,
            contended,
            tries,
            error,
            ..planned_record(p)
        };
        if exit_code == Some(0) {
            read_summary(&mut record, &summary, figure, runs_dir);
            if let Some(column) =
                figure.y.column.as_deref().filter(|_| figure.chart == Chart::Timeseries)
            {
                match read_timeseries(&files, column) {
                    Ok(points) if points.is_empty() => {
                        record.error = Some(format!(
                            "{}: the time series has no measured interval (is `--interval` shorter than `--duration`?)",
                            files.display()
                        ));
                    }
                    Ok(points) => record.timeseries = points,
                    Err(e) => record.error = Some(e),
                }
            }
        } else if record.error.is_none() {
            record.error = Some(last_line(&stderr));
        }
        if !contended || tries > o.retries || exit_code != Some(0) {
            return Ok(record);
        }
    }
}

fn read_summary(record: &mut RunRecord, summary: &Path, figure: &Figure, runs_dir: &Path) {
    let parsed = std::fs::read_to_string(summary)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
    match parsed {
        Ok(json) => {
            record.summary_file = summary
                .strip_prefix(runs_dir.parent().unwrap_or(runs_dir))
                .ok()
                .map(|p| p.display().to_string());
            record.metric = lookup(&json, &figure.y.metric);
            if record.metric.is_none() {
                record.error = Some(format!("the summary has no number at `{}`", figure.y.metric));
            }
            for field in &figure.explain {
                if let Some(v) = lookup(&json, field) {
                    record.explain.insert(field.clone(), v);
                }
            }
        }
        Err(e) => record.error = Some(format!("{}: {e}", summary.display())),
    }
}

/// `[elapsed_s, column]` of every measured interval of the one
/// `*.timeseries.csv` in `dir` (no field of it is quoted: numbers, a phase
/// word and a boolean).
fn read_timeseries(dir: &Path, column: &str) -> Result<Vec<[f64; 2]>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let csvs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".timeseries.csv"))
        .collect();
    let [path] = csvs.as_slice() else {
        return Err(format!("{}: {} time-series files, not one", dir.display(), csvs.len()));
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let at = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("{}: no column `{name}`", path.display()))
    };
    let (t, y, phase) = (at("elapsed_s")?, at(column)?, at("phase")?);
    let mut out = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        let number = |k: usize| {
            fields.get(k).and_then(|v| v.parse::<f64>().ok()).ok_or_else(|| {
                format!("{}: row {}: column {} is not a number", path.display(), i + 2, header[k])
            })
        };
        if fields.get(phase) == Some(&"measure") {
            out.push([number(t)?, number(y)?]);
        }
    }
    Ok(out)
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string))
        .unwrap_or_else(|| "no message".to_string())
}

/// Run `exe args`, stdout into `summary`, stderr into `stderr`; kill it after `timeout`.
fn spawn(
    exe: &Path,
    args: &[String],
    summary: &Path,
    stderr: &Path,
    timeout: Duration,
) -> CliResult<(Option<i32>, Option<String>)> {
    let out = File::create(summary).map_err(|e| io_error(summary, e))?;
    let err = File::create(stderr).map_err(|e| io_error(stderr, e))?;
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| CliError::Failed(format!("cannot start {}: {e}", exe.display())))?;
    let started = Instant::now();
    loop {
        if let Some(status) =
            child.try_wait().map_err(|e| CliError::Failed(format!("waiting for a run: {e}")))?
        {
            return Ok((status.code(), None));
        }
        if started.elapsed() > timeout {
            // Our own child: stop it and reap it.
            let _ = child.kill();
            let _ = child.wait();
            return Ok((None, Some(format!("killed after {} s", timeout.as_secs()))));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Exclusive locks on `paths`, taken in order (released when dropped).
fn take_locks(paths: &[PathBuf]) -> CliResult<Vec<File>> {
    paths
        .iter()
        .map(|p| {
            let f = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(p)
                .map_err(|e| io_error(p, e))?;
            f.lock().map_err(|e| io_error(p, e))?;
            Ok(f)
        })
        .collect()
}

/// Kernel clock ticks per second of /proc/stat and /proc/self/stat (USER_HZ,
/// 100 on every Linux architecture the project builds for).
const USER_HZ: f64 = 100.0;

/// Busy CPU time of the whole machine and of our waited-for children, in
/// seconds, read before and after a run.
struct LoadMeter {
    busy: Option<f64>,
    children: Option<f64>,
    own: Option<f64>,
}

impl LoadMeter {
    fn start() -> LoadMeter {
        LoadMeter {
            busy: machine_busy_s(),
            children: self_times().map(|t| t.1),
            own: self_times().map(|t| t.0),
        }
    }

    /// Cores other processes kept busy over `wall_s` (0 when /proc is missing).
    fn other_cores(&self, wall_s: f64) -> f64 {
        let (Some(b0), Some(c0), Some(o0)) = (self.busy, self.children, self.own) else {
            return 0.0;
        };
        let (Some(b1), Some((o1, c1))) = (machine_busy_s(), self_times()) else {
            return 0.0;
        };
        let ours = (c1 - c0) + (o1 - o0);
        ((b1 - b0 - ours) / wall_s.max(1e-3)).max(0.0)
    }
}

/// user + nice + system + irq + softirq + steal of the `cpu` line, in seconds.
fn machine_busy_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum::<f64>();
    Some(busy / USER_HZ)
}

/// (this process's utime + stime, its waited-for children's cutime + cstime), in seconds.
fn self_times() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<f64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // rest starts at field 3 (state, not a number: skipped by the parse),
    // so utime (14) .. cstime (17) are at 10..14 of the numeric fields.
    let get = |i: usize| f.get(i).copied();
    Some(((get(10)? + get(11)?) / USER_HZ, (get(12)? + get(13)?) / USER_HZ))
}

/// A progress bar over `total` runs with an ETA; hidden when stderr is not a terminal.
pub fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{bar:30} {pos}/{len} runs · {elapsed_precise} · eta {eta} · {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(500));
    bar
}

/// Runs `figure`'s matrix would make at `scale`.
pub fn run_count(figure: &Figure, scale: &str) -> u64 {
    let reps = figure.scale.get(scale).map_or(0, |s| s.reps);
    let cells = figure
        .points(scale)
        .iter()
        .map(|p| figure.series.iter().filter(|s| s.runs_at(&p.label)).count())
        .sum::<usize>();
    cells as u64 * u64::from(reps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("RO θ=0.6"), "RO___0.6");
        assert_eq!(slug("zen/silo"), "zen_silo");
    }

    #[test]
    fn proc_readings_are_sane() {
        let (own, children) = self_times().expect("/proc/self/stat");
        assert!(own >= 0.0 && children >= 0.0);
        assert!(machine_busy_s().expect("/proc/stat") > 0.0);
    }
}
