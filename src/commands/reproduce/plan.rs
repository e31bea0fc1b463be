//! `zen reproduce FIGURES --plan`: the runs an invocation would make, how
//! many of them other figures listed earlier already need (a run is shared,
//! made once: see `run::RunKey`), and an estimate of the wall time, without
//! running anything or writing anywhere.
//!
//! A run's wall time is its measured time (`--warmup` + `--duration` of its
//! arguments, `zen bench`'s defaults when absent) plus an overhead: starting
//! the process, creating the pool, loading the data set. The overhead comes
//! from measurements: `wall_s − (warmup + duration)` of the uncontended,
//! successful runs made for their own figure (not shared) in `results.json`
//! files of the same scale, from `--out DIR` (the directory resumed) and from
//! the result directories under `docs/reproduction/` beside the figures
//! directory. The median of the first of these that has samples:
//! 1. the same figure's earlier runs;
//! 2. runs of the same workload and setup (`--pmem` backend and
//!    `--pool-size`, which decide how long the pool takes to create);
//! 3. runs of the same workload;
//!
//! and none (the measured time alone, marked `uncalibrated`) when no result
//! file of the scale has a run of the workload.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::figure::{Catalog, Figure};
use super::results::{Results, median};
use super::run::{self, RunKey};
use super::{State, state};
use crate::error::{CliError, CliResult};
use crate::resolve::parse_duration;

/// `zen bench`'s defaults of `--warmup` and `--duration` (src/cli.rs).
const DEFAULT_WARMUP: &str = "1s";
const DEFAULT_DURATION: &str = "5s";

/// The value of the last `flag VALUE` or `flag=VALUE` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let mut found = None;
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            found = args.get(i + 1).map(String::as_str);
        } else if let Some(v) = a.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            found = Some(v);
        }
    }
    found
}

/// Seconds a run measures: its warmup plus its duration.
pub fn measured_s(args: &[String]) -> CliResult<f64> {
    let warmup = flag(args, "--warmup").unwrap_or(DEFAULT_WARMUP);
    let duration = flag(args, "--duration").unwrap_or(DEFAULT_DURATION);
    Ok(parse_duration("--warmup", warmup)?.as_secs_f64()
        + parse_duration("--duration", duration)?.as_secs_f64())
}

/// The workload (`bench WORKLOAD …`) and setup of a run's arguments.
fn workload_and_setup(args: &[String]) -> (String, String) {
    let workload = args.get(1).cloned().unwrap_or_default();
    let setup = format!(
        "--pmem {} --pool-size {}",
        flag(args, "--pmem").unwrap_or("fs"),
        flag(args, "--pool-size").unwrap_or("default")
    );
    (workload, setup)
}

/// One measured overhead: `wall_s − (warmup + duration)` of a run.
struct Sample {
    figure: String,
    workload: String,
    setup: String,
    overhead_s: f64,
}

/// Where the overhead samples come from.
pub struct Calibration {
    samples: Vec<Sample>,
    /// The results files read, for the output.
    pub files: Vec<PathBuf>,
}

impl Calibration {
    /// Samples of the runs at `scale` in `dir/*/results.json` of each of
    /// `dirs` that exists. A file that cannot be read as results of this
    /// schema is passed over: it is calibration, not input.
    pub fn load(dirs: &[PathBuf], scale: &str) -> Calibration {
        let mut c = Calibration { samples: Vec::new(), files: Vec::new() };
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path().join("results.json")))
                .filter(|p| p.is_file())
                .collect();
            paths.sort();
            for path in paths {
                let Ok(r) = Results::read(&path) else { continue };
                if r.scale != scale {
                    continue;
                }
                let before = c.samples.len();
                let counted = r
                    .runs
                    .iter()
                    .filter(|x| x.exit_code == Some(0) && !x.contended && x.shared_from.is_none());
                for x in counted {
                    let Ok(measured) = measured_s(&x.args) else { continue };
                    let (workload, setup) = workload_and_setup(&x.args);
                    c.samples.push(Sample {
                        figure: r.figure.id.clone(),
                        workload,
                        setup,
                        overhead_s: (x.wall_s - measured).max(0.0),
                    });
                }
                if c.samples.len() > before {
                    c.files.push(path);
                }
            }
        }
        c
    }

    /// The overhead of a run of `figure` with `args`, and where it came from.
    fn overhead(&self, figure: &str, args: &[String]) -> (f64, String) {
        let (workload, setup) = workload_and_setup(args);
        // Each level: which samples count, and how the output names them.
        type Level<'a> = (Box<dyn Fn(&Sample) -> bool + 'a>, String);
        let levels: [Level; 3] = [
            (Box::new(|s: &Sample| s.figure == figure), "its own runs".to_string()),
            (
                Box::new(|s: &Sample| s.workload == workload && s.setup == setup),
                format!("{workload} {setup}"),
            ),
            (Box::new(|s: &Sample| s.workload == workload), workload.clone()),
        ];
        for (matches, what) in levels {
            let v: Vec<f64> =
                self.samples.iter().filter(|s| matches(s)).map(|s| s.overhead_s).collect();
            if let Some(m) = median(&v) {
                return (m, format!("{what} (n={})", v.len()));
            }
        }
        (0.0, "uncalibrated".to_string())
    }
}

/// One figure's line of the plan.
struct Line {
    id: String,
    state: Option<String>,
    runs: usize,
    shared: usize,
    done: usize,
    new: usize,
    measured_s: f64,
    overhead_s: f64,
    estimate_s: f64,
    source: String,
}

/// `h:mm:ss`.
fn clock(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The finished runs of the result directory `out` (the keys `--resume` would not make again;
/// with `redo_contended`, not the contended ones).
fn finished(out: &Path, ids: &[String], redo_contended: bool) -> CliResult<HashSet<RunKey>> {
    let mut keys = HashSet::new();
    for id in ids {
        let path = out.join(id).join("results.json");
        if !path.exists() {
            continue;
        }
        let r = Results::read(&path)?;
        let timeseries = r.figure.chart == super::figure::Chart::Timeseries;
        keys.extend(
            r.runs
                .iter()
                .filter(|x| x.kept_on_resume(redo_contended))
                .map(|x| RunKey { args: x.args.clone(), timeseries }),
        );
    }
    Ok(keys)
}

/// What `--out` holds: its finished runs, and whether its results calibrate
/// (it is a result directory of `scale`). Refused as `zen reproduce` would
/// refuse it: another scale, or a directory that is not empty and holds no
/// `reproduce.json`.
fn read_out(
    out: Option<&Path>,
    scale: &str,
    redo_contended: bool,
) -> CliResult<(HashSet<RunKey>, Option<PathBuf>)> {
    let Some(out) = out else { return Ok((HashSet::new(), None)) };
    if out.join("reproduce.json").exists() {
        let m = super::read_manifest(out)?;
        if m.scale != scale {
            return Err(CliError::usage(format!(
                "--out {} holds scale `{}`, not `{scale}`",
                out.display(),
                m.scale
            )));
        }
        return Ok((finished(out, &m.figures, redo_contended)?, Some(out.to_path_buf())));
    }
    if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        return Err(CliError::usage(format!(
            "--out {}: a directory that is not empty and holds no reproduce.json",
            out.display()
        )));
    }
    Ok((HashSet::new(), None))
}

/// The result directories under each of `dirs` (`docs/reproduction/<set>/`), sorted.
fn result_sets(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut sets = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else { continue };
        let mut found: Vec<PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
        found.sort();
        sets.extend(found);
    }
    sets
}

/// The line of a figure that cannot run here.
fn not_runnable(f: &Figure, why: String) -> Line {
    Line {
        id: f.id.clone(),
        state: Some(why),
        runs: 0,
        shared: 0,
        done: 0,
        new: 0,
        measured_s: 0.0,
        overhead_s: 0.0,
        estimate_s: 0.0,
        source: String::new(),
    }
}

/// The line of a runnable figure: its runs, those `seen` already holds
/// (an earlier figure needs them; `seen` gains the rest), those `done`
/// holds, and the estimate of the others.
fn figure_line(
    f: &Figure,
    scale: &str,
    seed: u64,
    seen: &mut HashSet<RunKey>,
    done: &HashSet<RunKey>,
    calibration: &Calibration,
) -> CliResult<Line> {
    let planned = run::plan(f, scale, seed);
    let mut line = not_runnable(f, String::new());
    line.state = None;
    line.runs = planned.len();
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    let (mut measured_sum, mut overhead_sum) = (0.0, 0.0);
    for p in &planned {
        if !seen.insert(p.key.clone()) {
            line.shared += 1;
        } else if done.contains(&p.key) {
            line.done += 1;
        } else {
            let measured = measured_s(&p.args)
                .map_err(|e| CliError::usage(format!("{}: a run's arguments: {e}", f.id)))?;
            let (overhead, source) = calibration.overhead(&f.id, &p.args);
            *sources.entry(source).or_default() += 1;
            line.new += 1;
            measured_sum += measured;
            overhead_sum += overhead;
        }
    }
    if line.new > 0 {
        line.measured_s = measured_sum / line.new as f64;
        line.overhead_s = overhead_sum / line.new as f64;
        line.estimate_s = measured_sum + overhead_sum;
    }
    line.source = sources.into_keys().collect::<Vec<_>>().join("; ");
    Ok(line)
}

/// The plan of `chosen` at `scale` as text (what `--plan` prints).
pub fn render(
    catalog: &Catalog,
    chosen: &[&Figure],
    scale: &str,
    seed: u64,
    out: Option<&Path>,
    redo_contended: bool,
    calibration_dirs: &[PathBuf],
) -> CliResult<String> {
    let (done, out_dir) = read_out(out, scale, redo_contended)?;
    let dirs: Vec<PathBuf> = out_dir.into_iter().chain(result_sets(calibration_dirs)).collect();
    let calibration = Calibration::load(&dirs, scale);
    let mut seen: HashSet<RunKey> = HashSet::new();
    let mut lines = Vec::new();
    for f in chosen {
        let st = state(catalog, f, scale);
        lines.push(if st == State::Runnable {
            figure_line(f, scale, seed, &mut seen, &done, &calibration)?
        } else {
            not_runnable(f, st.describe(scale))
        });
    }
    Ok(print(&lines, scale, &calibration))
}

/// The table of `lines`, the distinct total and where the overhead came from.
fn print(lines: &[Line], scale: &str, calibration: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "zen reproduce --plan: scale `{scale}`, {} figures; a run that an earlier figure of the list also needs is shared (made once).",
        lines.len()
    );
    let _ = writeln!(
        s,
        "{:<24} {:>5} {:>6} {:>5} {:>5} {:>9} {:>10} {:>9}  overhead from",
        "figure", "runs", "shared", "done", "new", "run s", "overhead s", "est. wall"
    );
    for l in lines {
        if let Some(st) = &l.state {
            let _ = writeln!(s, "{:<24} {:>5}  {st}", l.id, 0);
            continue;
        }
        let _ = writeln!(
            s,
            "{:<24} {:>5} {:>6} {:>5} {:>5} {:>9.1} {:>10.2} {:>9}  {}",
            l.id,
            l.runs,
            l.shared,
            l.done,
            l.new,
            l.measured_s,
            l.overhead_s,
            clock(l.estimate_s),
            if l.new == 0 { "-" } else { &l.source }
        );
    }
    let runs: usize = lines.iter().map(|l| l.runs).sum();
    let shared: usize = lines.iter().map(|l| l.shared).sum();
    let done: usize = lines.iter().map(|l| l.done).sum();
    let new: usize = lines.iter().map(|l| l.new).sum();
    let total: f64 = lines.iter().map(|l| l.estimate_s).sum();
    let runnable = lines.iter().filter(|l| l.state.is_none()).count();
    let uncalibrated = lines.iter().any(|l| l.new > 0 && l.source.contains("uncalibrated"));
    let _ = writeln!(
        s,
        "total: {runnable} of {} figures runnable, {runs} runs, {} distinct ({shared} shared), {done} already done in --out, {new} to make; estimated wall time {} ({total:.0} s)",
        lines.len(),
        runs - shared,
        clock(total)
    );
    let _ = writeln!(
        s,
        "overhead per run (process start, pool creation, data load) = median wall_s − (warmup + duration) of {} results files of scale `{scale}`{}",
        calibration.files.len(),
        if uncalibrated {
            "; `uncalibrated`: no results of the workload, the measured time alone"
        } else {
            ""
        }
    );
    for f in &calibration.files {
        let _ = writeln!(s, "  {}", f.display());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_run_measures_its_warmup_and_duration_or_zen_bench_defaults() {
        assert_eq!(measured_s(&args("bench ycsb --duration 2s --warmup 1s")).unwrap(), 3.0);
        assert_eq!(measured_s(&args("bench ycsb --duration=150ms --warmup=50ms")).unwrap(), 0.2);
        // The last of a flag given twice wins, as clap's would.
        assert_eq!(measured_s(&args("bench ycsb --duration 9s --duration 4s")).unwrap(), 5.0);
        assert_eq!(measured_s(&args("bench tpcc")).unwrap(), 6.0);
        assert!(measured_s(&args("bench ycsb --duration soon")).is_err());
    }

    #[test]
    fn the_setup_names_the_backend_and_the_pool_size() {
        let (w, s) = workload_and_setup(&args("bench tpcc --pmem emu --pool-size 4GiB"));
        assert_eq!((w.as_str(), s.as_str()), ("tpcc", "--pmem emu --pool-size 4GiB"));
        let (_, s) = workload_and_setup(&args("bench ycsb"));
        assert_eq!(s, "--pmem fs --pool-size default");
    }
}
