//! `zen reproduce FIGURE|all --scale S --out DIR` and `zen reproduce --list`.
//!
//! The figures are data (`figures/*.toml`, read by [`figure`]); this command
//! runs their matrices as child `zen bench` processes ([`run`]), writes
//! `DIR/<figure>/results.json` with every run, draws `DIR/<figure>/<figure>.svg`
//! (`zen plot`) and writes `DIR/report.md`: our numbers beside the paper's,
//! the shape verdict ([`verdict`]) and the counters that explain a difference.
//!
//! `DIR/reproduce.json` records the scale and the figures a directory holds;
//! a directory that holds results is refused unless `--resume` is given, and
//! then only at the same scale.

pub mod figure;
pub mod plan;
pub mod results;
pub mod run;
pub mod verdict;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::{ReportArgs, ReproduceArgs};
use crate::error::{CliError, CliResult};
use figure::{Catalog, Figure, FigureError};
use results::{Results, ResultsError};

impl From<FigureError> for CliError {
    fn from(e: FigureError) -> CliError {
        match e {
            FigureError::Read { .. } => CliError::Failed(e.to_string()),
            _ => CliError::Usage(e.to_string()),
        }
    }
}

impl From<ResultsError> for CliError {
    fn from(e: ResultsError) -> CliError {
        match e {
            ResultsError::Read { .. } => CliError::Failed(e.to_string()),
            _ => CliError::Usage(e.to_string()),
        }
    }
}

/// Whether a figure can run here, and why not.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Runnable,
    WaitingForEngine(Vec<(String, String)>),
    Blocked(String),
    NeedsRealPmem,
    NeedsCores { needs: usize, has: usize },
}

impl State {
    pub fn describe(&self, scale: &str) -> String {
        match self {
            State::Runnable => "runnable".to_string(),
            State::WaitingForEngine(engines) => format!(
                "waiting for engine {}",
                engines.iter().map(|(e, w)| format!("{e} ({w})")).collect::<Vec<_>>().join(", ")
            ),
            State::Blocked(why) => format!("not runnable: {why}"),
            State::NeedsRealPmem => {
                "needs real PMem: no fsdax (dax) mount on this machine".to_string()
            }
            State::NeedsCores { needs, has } => {
                format!("needs more cores: scale `{scale}` needs {needs}, this machine has {has}")
            }
        }
    }
}

pub fn state(catalog: &Catalog, f: &Figure, scale: &str) -> State {
    let waiting: Vec<(String, String)> = f
        .engines()
        .into_iter()
        .filter_map(|e| catalog.planned.engines.get(e).map(|p| (e.to_string(), p.what.clone())))
        .collect();
    if !waiting.is_empty() {
        return State::WaitingForEngine(waiting);
    }
    if let Some(why) = &f.blocked {
        return State::Blocked(why.clone());
    }
    if !f.scale.contains_key(scale) {
        return State::Blocked(format!(
            "the file has no `{scale}` scale (a study has no paper setup)"
        ));
    }
    if f.real_pmem && !has_dax_mount() {
        return State::NeedsRealPmem;
    }
    let has = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(needs) = f.scale.get(scale).and_then(|s| s.min_cores)
        && needs > has
    {
        return State::NeedsCores { needs, has };
    }
    State::Runnable
}

fn has_dax_mount() -> bool {
    std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            l.split_whitespace().nth(3).is_some_and(|o| o.split(',').any(|x| x.starts_with("dax")))
        })
    })
}

/// The figures directory: `--figures`, else `./figures`, else the source tree's.
fn figures_dir(arg: Option<&Path>) -> PathBuf {
    if let Some(dir) = arg {
        return dir.to_path_buf();
    }
    let here = PathBuf::from("figures");
    if here.is_dir() {
        here
    } else {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/figures"))
    }
}

/// `DIR/reproduce.json`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    kind: String,
    schema_version: u32,
    scale: String,
    figures: Vec<String>,
}

const MANIFEST_KIND: &str = "zen-reproduce-dir";

pub fn reproduce(args: &ReproduceArgs) -> CliResult {
    let catalog = Catalog::load(&figures_dir(args.figures.as_deref()))?;
    if !figure::SCALES.contains(&args.scale.as_str()) {
        return Err(CliError::usage(format!(
            "--scale {}: one of {}",
            args.scale,
            figure::SCALES.join(", ")
        )));
    }
    if args.list {
        return list(&catalog, &args.scale);
    }
    let Some(which) = args.figure.as_deref() else {
        return Err(CliError::usage("name a figure (see `zen reproduce --list`) or `all`"));
    };
    let chosen = select(&catalog, which)?;
    if args.plan {
        let figures = figures_dir(args.figures.as_deref());
        // `figures/` beside `docs/`: the result directories of the source tree.
        let docs = figures.parent().unwrap_or(Path::new("")).join("docs").join("reproduction");
        let text = plan::render(
            &catalog,
            &chosen,
            &args.scale,
            args.seed,
            args.out.as_deref(),
            args.redo_contended,
            &[docs],
        )?;
        print!("{text}");
        return Ok(());
    }
    let Some(out) = args.out.as_deref() else {
        return Err(CliError::usage("--out DIR is required (or --plan, which runs nothing)"));
    };
    // A figure named on its own must run; `all` and `studies` skip what cannot.
    let named = |f: &Figure| which.split(',').any(|w| w.trim() == f.id);
    if let Some(f) =
        chosen.iter().find(|f| named(f) && state(&catalog, f, &args.scale) != State::Runnable)
    {
        return Err(CliError::Failed(format!(
            "{} is not runnable here: {}",
            f.id,
            state(&catalog, f, &args.scale).describe(&args.scale)
        )));
    }
    let ids: Vec<String> = chosen.iter().map(|f| f.id.clone()).collect();
    let manifest = open_out(out, &args.scale, &ids, args.resume)?;
    let options = run::RunOptions {
        scale: args.scale.clone(),
        seed: args.seed,
        max_other_load: args.max_other_load,
        retries: args.retries,
        redo_contended: args.redo_contended,
        locks: args.lock.clone(),
        run_timeout: Duration::from_secs(args.run_timeout),
    };
    let runnable: Vec<&Figure> = chosen
        .iter()
        .copied()
        .filter(|f| state(&catalog, f, &args.scale) == State::Runnable)
        .collect();
    let all_runs: u64 = runnable.iter().map(|f| run::run_count(f, &args.scale)).sum();
    let total = run::distinct_runs(runnable.iter().copied(), &args.scale);
    eprintln!(
        "zen reproduce: {} of {} figures runnable at scale `{}`, {total} distinct runs ({all_runs} with those figures share), into {}",
        runnable.len(),
        chosen.len(),
        args.scale,
        out.display()
    );
    // The runs finished in the directory resumed serve every figure that needs them.
    let mut shared = run::Shared::default();
    for id in &manifest.figures {
        let path = out.join(id).join("results.json");
        if path.exists() {
            let r = Results::read(&path)?;
            if r.scale == args.scale {
                shared.offer(id, &out.join(id), &r, args.redo_contended);
            }
        }
    }
    let bar = run::progress_bar(total as u64);
    for f in &runnable {
        let dir = out.join(&f.id);
        let results_path = dir.join("results.json");
        let previous = if results_path.exists() {
            let r = Results::read(&results_path)?;
            if r.scale != args.scale {
                return Err(CliError::usage(format!(
                    "{}: holds scale `{}`, not `{}`",
                    results_path.display(),
                    r.scale,
                    args.scale
                )));
            }
            Results { figure: (*f).clone(), max_other_load: args.max_other_load, ..r }
        } else {
            Results::new(f, &args.scale, args.max_other_load)
        };
        let results = run::run_figure(f, &dir, previous, &options, &bar, &mut shared)?;
        let svg = dir.join(format!("{}.svg", f.id));
        crate::commands::plot::draw(&[results], &svg)?;
    }
    bar.finish_and_clear();
    let report = write_report(&catalog, out, &manifest)?;
    eprintln!("wrote {}", report.display());
    Ok(())
}

/// The figures `which` names: ids separated by commas, `all` (every paper
/// figure) and `studies` (every study), each figure once, in catalog order.
fn select<'a>(catalog: &'a Catalog, which: &str) -> CliResult<Vec<&'a Figure>> {
    let mut ids: Vec<&str> = Vec::new();
    for w in which.split(',').map(str::trim) {
        let add: Vec<&str> = match w {
            "all" => {
                catalog.figures.iter().filter(|f| !f.is_study()).map(|f| f.id.as_str()).collect()
            }
            "studies" => {
                catalog.figures.iter().filter(|f| f.is_study()).map(|f| f.id.as_str()).collect()
            }
            id => vec![catalog.get(id)?.id.as_str()],
        };
        for id in add {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(catalog.figures.iter().filter(|f| ids.contains(&f.id.as_str())).collect())
}

/// Check `out` and record the figures it will hold.
fn open_out(out: &Path, scale: &str, ids: &[String], resume: bool) -> CliResult<Manifest> {
    let path = out.join("reproduce.json");
    let mut manifest = if path.exists() {
        let m = read_manifest(out)?;
        if !resume {
            return Err(CliError::usage(format!(
                "--out {} already holds results of {} (scale `{}`); pass --resume to continue or add to them, or choose another directory",
                out.display(),
                m.figures.join(", "),
                m.scale
            )));
        }
        if m.scale != scale {
            return Err(CliError::usage(format!(
                "--out {} holds scale `{}`; --resume cannot add scale `{scale}` to it",
                out.display(),
                m.scale
            )));
        }
        m
    } else {
        let non_empty = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
        if non_empty {
            return Err(CliError::usage(format!(
                "--out {}: a directory that is not empty and holds no reproduce.json; nothing is written into it",
                out.display()
            )));
        }
        Manifest {
            kind: MANIFEST_KIND.to_string(),
            schema_version: results::RESULTS_SCHEMA,
            scale: scale.to_string(),
            figures: Vec::new(),
        }
    };
    for id in ids {
        if !manifest.figures.contains(id) {
            manifest.figures.push(id.clone());
        }
    }
    std::fs::create_dir_all(out).map_err(|e| io_error(out, e))?;
    let json =
        serde_json::to_string_pretty(&manifest).map_err(|e| CliError::Failed(e.to_string()))?;
    std::fs::write(&path, json + "\n").map_err(|e| io_error(&path, e))?;
    Ok(manifest)
}

fn io_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::Failed(format!("{}: {e}", path.display()))
}

/// `DIR/report.md`: the summary table, then one section per figure that ran.
fn write_report(catalog: &Catalog, out: &Path, manifest: &Manifest) -> CliResult<PathBuf> {
    let mut s = String::new();
    let _ = writeln!(s, "# zen reproduce: scale `{}`\n", manifest.scale);
    let _ = writeln!(
        s,
        "Written by `zen reproduce` (zenplus {}); every number comes from the `results.json` beside each figure.\n",
        env!("CARGO_PKG_VERSION")
    );
    s.push_str(&render_dir(catalog, out, manifest, 2, "")?);
    let path = out.join("report.md");
    std::fs::write(&path, s).map_err(|e| io_error(&path, e))?;
    Ok(path)
}

/// The body of a report of one result directory: the summary table of its
/// figures, then a section per figure that ran, headings at `level`; the
/// pictures are linked as `{link}<id>/<id>.svg`. Figures that ran are drawn
/// from their `results.json` (which holds the figure file they ran) with the
/// `notes` of `catalog`'s file of the same id, the others from `catalog`.
fn render_dir(
    catalog: &Catalog,
    dir: &Path,
    manifest: &Manifest,
    level: usize,
    link: &str,
) -> CliResult<String> {
    let mut rows = String::new();
    let mut sections = String::new();
    for id in &manifest.figures {
        let results_path = dir.join(id).join("results.json");
        let (f, verdict) = if results_path.exists() {
            let mut r = Results::read(&results_path)?;
            // The prose is the figure file's as it is now, so that an edited
            // `notes` shows without running the figure again.
            if let Ok(now) = catalog.get(id) {
                r.figure.notes.clone_from(&now.notes);
            }
            let svg = format!("{link}{id}/{id}.svg");
            let (section, v) = verdict::figure_section(&r, Some(&svg), level);
            sections.push_str(&section);
            sections.push('\n');
            (r.figure.clone(), format!("{} ({} runs)", v.word, r.runs.len()))
        } else if let Ok(f) = catalog.get(id) {
            (f.clone(), "not run".to_string())
        } else {
            continue;
        };
        let _ = writeln!(
            rows,
            "| {} {} | `{id}` | {} | {} | {verdict} |",
            verdict::paper_name(&f.paper),
            f.figure,
            f.engines().join(", "),
            state(catalog, &f, &manifest.scale).describe(&manifest.scale)
        );
    }
    let mut s = String::new();
    let _ = writeln!(s, "| figure | id | engines | state | verdict |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    s.push_str(&rows);
    s.push('\n');
    s.push_str(&sections);
    Ok(s)
}

/// Read `DIR/reproduce.json`.
pub(crate) fn read_manifest(dir: &Path) -> CliResult<Manifest> {
    let path = dir.join("reproduce.json");
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    let m: Manifest = serde_json::from_str(&text)
        .ok()
        .filter(|m: &Manifest| m.kind == MANIFEST_KIND)
        .ok_or_else(|| {
            CliError::usage(format!("{}: not a `zen reproduce` directory manifest", path.display()))
        })?;
    if m.schema_version != results::RESULTS_SCHEMA {
        return Err(CliError::usage(format!(
            "{}: written with schema {}; this build reads schema {} (rerun `zen reproduce` with this build)",
            path.display(),
            m.schema_version,
            results::RESULTS_SCHEMA
        )));
    }
    Ok(m)
}

/// `zen report DIR… --out FILE.md`: a markdown document of one or more
/// result directories (e.g. `docs/results.md`), generated, never edited:
/// its first line says so and gives the command that regenerates it.
pub fn report(args: &ReportArgs) -> CliResult {
    let catalog = Catalog::load(&figures_dir(args.figures.as_deref()))?;
    let manifests: Vec<Manifest> =
        args.dirs.iter().map(|d| read_manifest(d)).collect::<CliResult<_>>()?;
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    }
    let text = render_document(
        &catalog,
        &args.dirs,
        &manifests,
        &args.out,
        &args.title,
        args.figures.as_deref(),
    )?;
    std::fs::write(&args.out, text).map_err(|e| io_error(&args.out, e))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

fn render_document(
    catalog: &Catalog,
    dirs: &[PathBuf],
    manifests: &[Manifest],
    out: &Path,
    title: &str,
    figures: Option<&Path>,
) -> CliResult<String> {
    let mut command = format!(
        "zen report {} --out {} --title {}",
        dirs.iter().map(|d| shell_word(&d.display().to_string())).collect::<Vec<_>>().join(" "),
        shell_word(&out.display().to_string()),
        shell_word(title)
    );
    if let Some(f) = figures {
        command.push_str(&format!(" --figures {}", shell_word(&f.display().to_string())));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<!-- Generated by `{command}`; do not edit: the prose is the `notes` of the figure files (figures/*.toml); edit those and rerun the command. -->\n"
    );
    let _ = writeln!(s, "# {title}\n");
    let _ = writeln!(
        s,
        "Generated from `zen reproduce` result directories by `{command}`: every number comes from their `results.json` files.\n"
    );
    let base = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for (dir, m) in dirs.iter().zip(manifests) {
        let finished = m
            .figures
            .iter()
            .filter_map(|id| Results::read(&dir.join(id).join("results.json")).ok())
            .filter_map(|r| r.finished_utc.map(|t| (t, r.zenplus_version, r.cores)))
            .max();
        let _ = writeln!(s, "## `{}`: scale `{}`\n", dir.display(), m.scale);
        match finished {
            Some((t, version, cores)) => {
                let _ = writeln!(
                    s,
                    "Last run {t} (zenplus {version}, {cores} cores), scale `{}`.\n",
                    m.scale
                );
            }
            None => {
                let _ = writeln!(s, "No run recorded its time.\n");
            }
        }
        let link = relative_link(base, dir);
        s.push_str(&render_dir(catalog, dir, m, 3, &link)?);
    }
    Ok(s)
}

/// `dir` as a link prefix relative to `base` (ending in `/`), or as given
/// when one of them cannot be resolved.
fn relative_link(base: &Path, dir: &Path) -> String {
    let given = format!("{}/", dir.display());
    let (Ok(base), Ok(dir)) = (base.canonicalize(), dir.canonicalize()) else { return given };
    let b: Vec<_> = base.components().collect();
    let d: Vec<_> = dir.components().collect();
    let common = b.iter().zip(&d).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); b.len() - common];
    parts.extend(d[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.iter().map(|p| format!("{p}/")).collect()
}

/// A word as a shell would need it: unchanged when plain, else single-quoted.
fn shell_word(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c)) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn list(catalog: &Catalog, scale: &str) -> CliResult {
    println!(
        "{:<24} {:<10} {:<22} {:<24} {:>5}  state (scale `{scale}`)",
        "figure", "paper", "fig.", "engines", "runs"
    );
    for f in &catalog.figures {
        println!(
            "{:<24} {:<10} {:<22} {:<24} {:>5}  {}",
            f.id,
            verdict::paper_name(&f.paper),
            f.figure,
            f.engines().join(","),
            run::run_count(f, scale),
            state(catalog, f, scale).describe(scale)
        );
    }
    Ok(())
}
