//! `zen reproduce`, `zen plot` and `zen report`: every runnable figure at the
//! tiny scale (results, an SVG and a report row each), every study rendered
//! into a generated document, the rendering of a fixture result directory
//! (golden), resuming, and the bad inputs the issue names (unknown figure, a
//! figure file with a missing field or an unknown engine, an `--out` holding
//! other results, an old results schema).

mod common;

use std::path::{Path, PathBuf};

use common::{ok, run};
use serde_json::Value;

/// The ids `zen reproduce --list --scale tiny` reports runnable, and the whole listing.
fn runnable_at_tiny() -> (Vec<String>, String) {
    let list = ok(&["reproduce", "--list", "--scale", "tiny"]);
    let ids = list
        .lines()
        .skip(1)
        .filter(|l| l.trim_end().ends_with("runnable"))
        // Studies are not paper figures: `all` does not run them.
        .filter(|l| l.split_whitespace().nth(1) != Some("Study"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    (ids, list)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A well-formed-looking SVG that names what it draws.
fn assert_svg(path: &Path, must_contain: &[&str]) {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(svg.trim_start().starts_with("<svg"), "{}: not an SVG", path.display());
    assert!(svg.trim_end().ends_with("</svg>"), "{}: unterminated", path.display());
    assert_eq!(svg.matches("<svg").count(), 1, "{}", path.display());
    for s in must_contain {
        assert!(svg.contains(s), "{}: no `{s}`", path.display());
    }
}

#[test]
fn reproduce_all_at_tiny_scale_gives_results_an_svg_and_a_report_row_per_runnable_figure() {
    let (runnable, list) = runnable_at_tiny();
    assert!(runnable.len() >= 10, "{list}");
    for id in ["falcon-fig07", "falcon-fig08", "falcon-fig09", "falcon-fig11"] {
        assert!(runnable.iter().any(|r| r == id), "{id} not runnable:\n{list}");
    }
    for id in ["nvcaracal-fig05", "nvcaracal-fig06", "nvcaracal-fig07"] {
        assert!(runnable.iter().any(|r| r == id), "{id} not runnable:\n{list}");
    }
    // The time-series figures.
    for id in ["zenplus-fig24", "zenplus-fig25"] {
        assert!(runnable.iter().any(|r| r == id), "{id} not runnable:\n{list}");
    }
    assert!(list.contains("not runnable: needs the no-logging and all-DRAM"), "{list}");
    assert!(list.contains("not runnable: needs a naïve space-management mode"), "{list}");

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tiny");
    let out_s = out.to_str().unwrap();
    ok(&["reproduce", "all", "--scale", "tiny", "--out", out_s, "--retries", "0"]);

    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for id in &runnable {
        let results = read_json(&out.join(id).join("results.json"));
        assert_eq!(results["schema_version"], 1);
        assert_eq!(results["scale"], "tiny");
        let runs = results["runs"].as_array().unwrap();
        assert!(!runs.is_empty(), "{id}: no runs");
        for r in runs {
            assert_eq!(r["exit_code"], 0, "{id}: {r}");
            assert!(r["metric"].is_number(), "{id}: {r}");
            assert!(r["other_load_cores"].as_f64().unwrap() >= 0.0, "{id}: {r}");
            let summary = out.join(id).join(r["summary_file"].as_str().unwrap());
            assert_eq!(read_json(&summary)["schema_version"], 1, "{id}: the run's summary JSON");
            if results["figure"]["chart"] == "timeseries" {
                // [elapsed_s, throughput] of every measured interval, in time order.
                let ts = r["timeseries"].as_array().unwrap_or_else(|| panic!("{id}: {r}"));
                assert!(ts.len() >= 3, "{id}: {r}");
                let t: Vec<f64> = ts.iter().map(|p| p[0].as_f64().unwrap()).collect();
                assert!(t.windows(2).all(|w| w[0] < w[1]), "{id}: {t:?}");
                assert!(ts.iter().all(|p| p[1].as_f64().unwrap() >= 0.0), "{id}: {r}");
            } else {
                assert!(r.get("timeseries").is_none(), "{id}: {r}");
            }
        }
        let figure = &results["figure"];
        if figure["chart"] == "timeseries" {
            let section = report
                .split(&format!("(`{id}`)"))
                .nth(1)
                .unwrap_or_else(|| panic!("no section for {id}"));
            let section = section.split("\n## ").next().unwrap();
            assert!(section.contains("Time series (`throughput_tps`"), "{section}");
            for s in figure["series"].as_array().unwrap() {
                let name = s["name"].as_str().unwrap();
                assert!(section.contains(&format!("| {name} | ")), "{id}: no time row of {name}");
            }
        }
        let first_series = figure["series"][0]["name"].as_str().unwrap();
        let y_label = figure["y"]["label"].as_str().unwrap();
        assert_svg(&out.join(id).join(format!("{id}.svg")), &[first_series, y_label]);
        // A summary row with a verdict, and the figure's own section.
        let row = report
            .lines()
            .find(|l| l.contains(&format!("| `{id}` |")))
            .unwrap_or_else(|| panic!("no report row for {id}:\n{report}"));
        assert!(row.contains("runnable") && row.contains("runs)"), "{row}");
        assert!(report.contains(&format!("(`{id}`)")), "no section for {id}");
    }
    // The Zen figures under the NVM device model (`--nvm-share`): their runs
    // record the modelled stall split per commit, and the report shows it.
    for id in ["zen-fig05-model", "zen-fig06-model", "zen-fig08-model"] {
        assert!(runnable.iter().any(|r| r == id), "{id} not runnable:\n{list}");
        let results = read_json(&out.join(id).join("results.json"));
        for r in results["runs"].as_array().unwrap() {
            let explain = &r["explain"];
            for key in ["nvm.per_commit.media_bytes", "nvm.per_commit.unstalled_us"] {
                assert!(explain[key].as_f64().unwrap() > 0.0, "{id}: {key}: {r}");
            }
            // One thread with the share of 16 or 32 waits for write bandwidth.
            let wait = explain["nvm.per_commit.bandwidth_wait_us"].as_f64().unwrap();
            assert!(wait > 0.0, "{id}: no bandwidth wait: {r}");
        }
        let section = report.split(&format!("(`{id}`)")).nth(1).unwrap();
        let section = section.split("\n## ").next().unwrap();
        assert!(section.contains("| nvm.per_commit.bandwidth_wait_us |"), "{section}");
        assert!(section.contains("| Zen ÷ WBL |"), "{section}");
    }
    // A log x axis is labelled at the figure's own x values (tiny scale runs the
    // point of 32 modelled threads), not at plotters' decades and their multiples
    // (the axis spans 21.3–48: 30 and 40 before).
    let svg = std::fs::read_to_string(out.join("zen-fig08-model/zen-fig08-model.svg")).unwrap();
    let texts: Vec<&str> = svg.lines().map(str::trim).filter(|l| !l.starts_with('<')).collect();
    assert!(texts.contains(&"32"), "no x label 32: {texts:?}");
    for label in ["30", "40"] {
        assert!(!texts.contains(&label), "x label {label} of plotters' own: {texts:?}");
    }
    // Figures that cannot run are still rows, with their state, and nothing ran for them.
    let blocked = report.lines().find(|l| l.contains("| `nvcaracal-fig10` |")).unwrap();
    assert!(blocked.contains("needs the no-logging") && blocked.contains("not run"), "{blocked}");
    assert!(!out.join("nvcaracal-fig10").exists());

    // The same directory again: refused without --resume, naming what it holds.
    let (code, _, err) = run(&["reproduce", "zenplus-fig12", "--scale", "tiny", "--out", out_s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already holds results of") && err.contains("zenplus-fig08"), "{err}");
    // Another scale cannot be added to it.
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig12", "--scale", "small", "--out", out_s, "--resume"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds scale `tiny`"), "{err}");
    // With --resume every finished run is kept: nothing runs again.
    let before = read_json(&out.join("zenplus-fig12/results.json"));
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig12", "--scale", "tiny", "--out", out_s, "--resume"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("zenplus-fig12 Zen ·"), "a finished run ran again: {err}");
    let after = read_json(&out.join("zenplus-fig12/results.json"));
    assert_eq!(before["runs"], after["runs"]);

    // `zen plot` draws the same figure from the results file alone.
    let svg = tmp.path().join("plot/fig12.svg");
    let results = out.join("zenplus-fig12/results.json");
    ok(&["plot", results.to_str().unwrap(), "--out", svg.to_str().unwrap()]);
    assert_svg(&svg, &["sfence per committed transaction", "paper&apos;s value"]);
}

#[test]
fn an_interrupted_reproduction_resumes_the_missing_runs_only() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    ok(&["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s, "--retries", "0"]);
    let results_path = out.join("zenplus-fig13/results.json");
    let mut results = read_json(&results_path);
    let total = results["runs"].as_array().unwrap().len();
    // Drop the last run, as if the process had been killed before it.
    let dropped = results["runs"].as_array_mut().unwrap().pop().unwrap();
    std::fs::write(&results_path, serde_json::to_string(&results).unwrap()).unwrap();
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s, "--resume"]);
    assert_eq!(code, 0, "{err}");
    let again = read_json(&results_path);
    let runs = again["runs"].as_array().unwrap();
    assert_eq!(runs.len(), total);
    let redone = runs.last().unwrap();
    assert_eq!((&redone["series"], &redone["point"]), (&dropped["series"], &dropped["point"]));
    // Exactly one run was made: one progress line on stderr.
    assert_eq!(err.matches("zenplus-fig13 ").count(), 1, "{err}");
}

#[test]
fn redo_contended_makes_the_contended_runs_again_and_keeps_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    // Tests run side by side: no run of ours is contended but the one marked below.
    let calm = ["--max-other-load", "64"];
    let first = ["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s, "--retries", "0"];
    ok(&[&first[..], &calm[..]].concat());
    let results_path = out.join("zenplus-fig13/results.json");
    let mut results = read_json(&results_path);
    let total = results["runs"].as_array().unwrap().len();
    // Mark one run as made while the machine was busy.
    let marked = &mut results["runs"].as_array_mut().unwrap()[0];
    marked["contended"] = serde_json::Value::Bool(true);
    marked["other_load_cores"] = serde_json::json!(0.9);
    let (series, point) = (marked["series"].clone(), marked["point"].clone());
    std::fs::write(&results_path, serde_json::to_string(&results).unwrap()).unwrap();
    // Without the flag, --resume keeps it (it is flagged, not failed).
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s, "--resume"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("zenplus-fig13 ").count(), 0, "nothing made again: {err}");
    let redo = [
        "reproduce",
        "zenplus-fig13",
        "--scale",
        "tiny",
        "--out",
        out_s,
        "--resume",
        "--redo-contended",
    ];
    let plan = ok(&[&redo[..], &["--plan"]].concat());
    let row = plan.lines().find(|l| l.starts_with("zenplus-fig13")).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!((cols[3], cols[4]), ((total - 1).to_string().as_str(), "1"), "{plan}");
    let (code, _, err) = run(&[&redo[..], &["--retries", "0"], &calm[..]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("zenplus-fig13 ").count(), 1, "exactly the contended run: {err}");
    let again = read_json(&results_path);
    let runs = again["runs"].as_array().unwrap();
    assert_eq!(runs.len(), total);
    let redone = runs.iter().filter(|r| r["series"] == series && r["point"] == point).count();
    assert!(redone >= 1);
    assert!(
        runs.iter().all(|r| r["other_load_cores"] != serde_json::json!(0.9)),
        "the marked record was replaced"
    );
    // The flag only makes sense on a directory being resumed.
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s, "--redo-contended"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--resume"), "{err}");
}

/// A figures directory holding one (edited) copy of a real figure file.
fn figure_dir(edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    figure_dir_of("zenplus-fig12", edit)
}

/// A figures directory holding an (edited) copy of `figures/<id>.toml`.
fn figure_dir_of(id: &str, edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("figures");
    std::fs::create_dir(&dir).unwrap();
    let text = std::fs::read_to_string(format!("figures/{id}.toml")).unwrap();
    std::fs::write(dir.join(format!("{id}.toml")), edit(text)).unwrap();
    std::fs::copy("figures/planned-engines.toml", dir.join("planned-engines.toml")).unwrap();
    (tmp, dir)
}

#[test]
fn an_unknown_figure_is_refused_with_the_list_of_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let (code, _, err) = run(&["reproduce", "zenplus-fig99", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown figure `zenplus-fig99`") && err.contains("zenplus-fig08"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written for a refused command");
}

#[test]
fn a_figure_file_with_a_missing_field_names_the_file_and_the_field() {
    let (_tmp, dir) = figure_dir(|t| t.replace("figure = \"Fig. 12\"\n", ""));
    let (code, _, err) = run(&["reproduce", "--list", "--figures", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("zenplus-fig12.toml") && err.contains("field `figure`: missing"), "{err}");
}

#[test]
fn a_figure_file_with_an_unknown_engine_names_the_file_and_the_field() {
    let (_tmp, dir) = figure_dir(|t| t.replacen("engine = \"mmdb\"", "engine = \"foedus\"", 1));
    let (code, _, err) = run(&["reproduce", "--list", "--figures", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("zenplus-fig12.toml")
            && err.contains("field `series[1].engine`")
            && err.contains("unknown engine `foedus`"),
        "{err}"
    );
}

#[test]
fn a_figure_file_giving_a_flag_twice_is_refused() {
    let (_tmp, dir) = figure_dir(|t| {
        t.replacen(
            "args = [\"--mix\", \"RO\"",
            "args = [\"--records\", \"10\", \"--mix\", \"RO\"",
            1,
        )
    });
    let (code, _, err) = run(&["reproduce", "--list", "--figures", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`--records` is also given in"), "{err}");
}

#[test]
fn an_out_directory_with_other_files_is_never_written_into() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("mine.txt"), "user data").unwrap();
    let (code, _, err) = run(&[
        "reproduce",
        "zenplus-fig12",
        "--scale",
        "tiny",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no reproduce.json"), "{err}");
    let names: Vec<_> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec!["mine.txt"]);
}

#[test]
fn a_results_file_of_another_schema_says_which_version_is_needed() {
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("results.json");
    std::fs::write(&old, r#"{"kind": "zen-reproduce-results", "schema_version": 0, "runs": []}"#)
        .unwrap();
    let svg = tmp.path().join("x.svg");
    let (code, _, err) = run(&["plot", old.to_str().unwrap(), "--out", svg.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("results schema 0") && err.contains("reads schema 1"), "{err}");
    assert!(!svg.exists());
    // A file that is no results file at all.
    std::fs::write(&old, r#"{"schema_version": 1}"#).unwrap();
    let (code, _, err) = run(&["plot", old.to_str().unwrap(), "--out", svg.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a `zen reproduce` results file"), "{err}");
}

#[test]
fn a_figure_that_cannot_run_here_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let (code, _, err) =
        run(&["reproduce", "nvcaracal-fig10", "--scale", "tiny", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("nvcaracal-fig10 is not runnable here")
            && err.contains("needs the no-logging and all-DRAM"),
        "{err}"
    );
    // A figure naming a planned engine waits for it.
    let (_tmp, dir) = figure_dir(|t| t.replacen("engine = \"mmdb\"", "engine = \"foedus\"", 1));
    std::fs::write(
        dir.join("planned-engines.toml"),
        "[engines.foedus]\nwhat = \"FOEDUS (SIGMOD 2015); not built\"\n",
    )
    .unwrap();
    let dirs = dir.to_str().unwrap();
    let (code, _, err) = run(&[
        "reproduce",
        "zenplus-fig12",
        "--figures",
        dirs,
        "--scale",
        "tiny",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("zenplus-fig12 is not runnable here: waiting for engine foedus"), "{err}");
}

#[test]
fn every_study_runs_at_tiny_scale_and_renders_into_a_generated_document() {
    let list = ok(&["reproduce", "--list", "--scale", "tiny"]);
    let studies: Vec<&str> = list
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Study"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    // The sweeps of the former scripts/bench-matrix.sh and bench-engines.sh.
    for id in ["study-ycsb-threads", "study-cc-backends", "study-engines-scrambled"] {
        assert!(studies.contains(&id), "{id} missing:\n{list}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("studies");
    let out_s = out.to_str().unwrap();
    ok(&["reproduce", "studies", "--scale", "tiny", "--out", out_s, "--retries", "0"]);
    let doc = tmp.path().join("docs/results.md");
    let (code, _, err) = run(&["report", out_s, "--out", doc.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&doc).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("<!-- Generated by `zen report ") && first.contains("do not edit"),
        "{first}"
    );
    assert!(text.contains("Last run 20"), "the date of the last run:\n{text}");
    for id in &studies {
        let results = read_json(&out.join(id).join("results.json"));
        assert!(results["finished_utc"].is_string(), "{id}");
        for r in results["runs"].as_array().unwrap() {
            assert_eq!(r["exit_code"], 0, "{id}: {r}");
        }
        assert!(text.contains(&format!("| `{id}` |")), "no row for {id}");
        assert!(text.contains(&format!("(`{id}`)")), "no section for {id}");
        // The picture, linked from the document's own directory.
        assert!(text.contains(&format!("](../studies/{id}/{id}.svg)")), "no picture of {id}");
        assert_svg(&out.join(id).join(format!("{id}.svg")), &[]);
    }
    // The prose of the figure files, and no paper columns for a study.
    assert!(text.contains("lazy durability"), "the notes of study-ycsb-threads");
    assert!(!text.contains("ours ÷ paper"), "{text}");
    assert!(text.contains("| 2 threads ÷ 1 thread |"), "a `compare` ratio");
}

/// Copy `from` (a directory of files and directories of files) into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn zen_report_renders_a_fixture_result_directory_exactly_and_stably() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new("tests/fixtures/report"), tmp.path());
    let args = [
        "report",
        "small-study",
        "--out",
        "docs/results.md",
        "--title",
        "Fixture results",
        "--figures",
        "figures",
    ];
    let render = || {
        let out = common::zen().args(args).current_dir(tmp.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(tmp.path().join("docs/results.md")).unwrap()
    };
    let first = render();
    let expected = std::fs::read_to_string("tests/fixtures/report/expected.md").unwrap();
    assert_eq!(
        first, expected,
        "the rendering changed; if on purpose, update tests/fixtures/report/expected.md"
    );
    assert_eq!(render(), first, "the same directories render to the same bytes");
}

#[test]
fn zen_report_refuses_what_is_not_a_result_directory_of_this_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = tmp.path().join("doc.md");
    let doc_s = doc.to_str().unwrap();
    // No reproduce.json.
    let (code, _, err) = run(&["report", tmp.path().to_str().unwrap(), "--out", doc_s]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("reproduce.json"), "{err}");
    // A results file of an older schema: which version this build reads.
    let dir = tmp.path().join("old");
    copy_tree(Path::new("tests/fixtures/report/small-study"), &dir);
    let results = dir.join("study-smallbank-threads/results.json");
    let mut json = read_json(&results);
    json["schema_version"] = Value::from(0);
    std::fs::write(&results, json.to_string()).unwrap();
    let (code, _, err) = run(&["report", dir.to_str().unwrap(), "--out", doc_s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("results schema 0") && err.contains("reads schema 1"), "{err}");
    assert!(!doc.exists(), "nothing is written from a refused directory");
}

#[test]
fn a_study_with_claims_is_refused_naming_the_file_and_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("figures");
    std::fs::create_dir(&dir).unwrap();
    let text = std::fs::read_to_string("figures/study-emu-fs.toml").unwrap();
    let claim = "\n[[claims]]\nkind = \"value\"\nseries = \"fs\"\npoint = \"RH θ0.6\"\nvalue = 1.0\nsource = \"none\"\n";
    std::fs::write(dir.join("study-emu-fs.toml"), text + claim).unwrap();
    let (code, _, err) = run(&["reproduce", "--list", "--figures", dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("study-emu-fs.toml") && err.contains("field `claims`"), "{err}");
}

#[test]
fn resuming_a_directory_of_an_older_schema_says_which_version_is_needed() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = r#"{"kind": "zen-reproduce-dir", "schema_version": 0, "scale": "tiny", "figures": ["zenplus-fig12"]}"#;
    std::fs::write(tmp.path().join("reproduce.json"), manifest).unwrap();
    let out = tmp.path().to_str().unwrap();
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig12", "--scale", "tiny", "--out", out, "--resume"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("written with schema 0") && err.contains("reads schema 1"), "{err}");
    assert!(!tmp.path().join("zenplus-fig12").exists(), "nothing ran");
}

#[test]
fn a_bad_timeseries_field_names_the_file_and_the_field() {
    /// (figure, edit of its file, what the error must say)
    type Case = (&'static str, fn(String) -> String, &'static str);
    let cases: [Case; 5] = [
        (
            "zenplus-fig25",
            |t| t.replace("column = \"throughput_tps\"\n", ""),
            "field `y.column`: missing (a timeseries chart needs it)",
        ),
        (
            "zenplus-fig25",
            |t| t.replace("column = \"throughput_tps\"", "column = \"txn_per_s\""),
            "field `y.column`: `txn_per_s` is not a time-series column (known: elapsed_s,",
        ),
        (
            "zenplus-fig25",
            |t| t.replacen("[[series]]", "[[x.points]]\nlabel = \"RH\"\n\n[[series]]", 1),
            "field `x.points`: a timeseries chart has one x point",
        ),
        (
            "zenplus-fig25",
            |t| t.replace("[x]\n", "[x]\nlog = true\n"),
            "field `x.log`: a timeseries chart's time axis is linear",
        ),
        (
            "zenplus-fig12",
            |t| t.replace("[y]\n", "[y]\ncolumn = \"throughput_tps\"\n"),
            "field `y.column`: only a `timeseries` chart reads the time series",
        ),
    ];
    for (id, edit, want) in cases {
        let (_tmp, dir) = figure_dir_of(id, edit);
        let (code, _, err) = run(&["reproduce", "--list", "--figures", dir.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&format!("{id}.toml")) && err.contains(want), "{want}: {err}");
    }
}

/// The records of `results.json` of `id` in `out`.
fn runs_of(out: &Path, id: &str) -> Vec<Value> {
    read_json(&out.join(id).join("results.json"))["runs"].as_array().unwrap().clone()
}

/// Runs made into `out/<id>/runs` (each made run leaves its stderr file; a shared one does not).
fn made_runs(out: &Path, id: &str) -> usize {
    std::fs::read_dir(out.join(id).join("runs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".stderr.txt"))
        .count()
}

#[test]
fn two_figures_with_the_same_matrix_make_their_shared_runs_once() {
    // zenplus-fig11 and -fig12 run the same matrix and plot two counters of it.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    let (code, _, err) = run(&[
        "reproduce",
        "zenplus-fig11,zenplus-fig12",
        "--scale",
        "tiny",
        "--out",
        out_s,
        "--retries",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    let (first, second) = (runs_of(&out, "zenplus-fig11"), runs_of(&out, "zenplus-fig12"));
    assert_eq!(first.len(), 6, "2 points × 3 series × 1 rep");
    assert_eq!(second.len(), first.len());
    assert!(err.contains("6 distinct runs (12 with those figures share)"), "{err}");
    // Six runs were made, all for the first figure: six progress lines, six stderr files.
    assert_eq!(err.matches("zenplus-fig11 ").count(), 6, "{err}");
    assert_eq!(err.matches("zenplus-fig12 ").count(), 0, "{err}");
    assert!(err.contains("zenplus-fig12: 6 runs shared (made once, for zenplus-fig11)"), "{err}");
    assert_eq!(made_runs(&out, "zenplus-fig11"), 6);
    assert_eq!(made_runs(&out, "zenplus-fig12"), 0);
    for (a, b) in first.iter().zip(&second) {
        assert!(a.get("shared_from").is_none(), "{a}");
        assert_eq!(b["shared_from"], "zenplus-fig11", "{b}");
        assert_eq!(
            (&a["series"], &a["point"], &a["args"]),
            (&b["series"], &b["point"], &b["args"])
        );
        assert_eq!((&a["wall_s"], &a["exit_code"]), (&b["wall_s"], &b["exit_code"]));
        // Each figure reads its own metric from the one summary (copied beside its results).
        let summary =
            read_json(&out.join("zenplus-fig12").join(b["summary_file"].as_str().unwrap()));
        assert_eq!(b["metric"].as_f64(), summary["nvm"]["per_commit"]["fences"].as_f64(), "{b}");
        assert_eq!(a["metric"].as_f64(), summary["nvm"]["per_commit"]["flushes"].as_f64(), "{a}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for id in ["zenplus-fig11", "zenplus-fig12"] {
        assert_svg(&out.join(id).join(format!("{id}.svg")), &["Zen", "WBL"]);
        let row = report.lines().find(|l| l.contains(&format!("| `{id}` |"))).unwrap();
        assert!(row.contains("(6 runs)"), "{row}");
    }
    assert!(report.contains("6 of its 6 runs were made once for `zenplus-fig11`"), "{report}");
}

#[test]
fn a_resumed_reproduction_makes_an_interrupted_shared_run_once() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    let both = "zenplus-fig11,zenplus-fig12";
    ok(&["reproduce", both, "--scale", "tiny", "--out", out_s, "--retries", "0"]);
    // Killed during the first figure's last run: that run is missing and the
    // second figure has not started.
    let path = out.join("zenplus-fig11/results.json");
    let mut results = read_json(&path);
    let dropped = results["runs"].as_array_mut().unwrap().pop().unwrap();
    std::fs::write(&path, serde_json::to_string(&results).unwrap()).unwrap();
    std::fs::remove_dir_all(out.join("zenplus-fig12")).unwrap();
    let resume = ["reproduce", both, "--scale", "tiny", "--out", out_s, "--resume"];
    let (code, _, err) = run(&resume);
    assert_eq!(code, 0, "{err}");
    // One run made (for the first figure); the second shares all six.
    assert_eq!(err.matches("zenplus-fig11 ").count(), 1, "{err}");
    assert!(err.contains(&format!("· {} · rep 1", dropped["point"].as_str().unwrap())), "{err}");
    assert_eq!(runs_of(&out, "zenplus-fig11").len(), 6);
    let second = runs_of(&out, "zenplus-fig12");
    assert_eq!(second.len(), 6);
    assert!(second.iter().all(|r| r["shared_from"] == "zenplus-fig11" && r["metric"].is_number()));
    // The second figure's last shared record lost: resuming reads it again
    // from the first figure's finished run and makes nothing.
    let path = out.join("zenplus-fig12/results.json");
    let mut results = read_json(&path);
    results["runs"].as_array_mut().unwrap().pop().unwrap();
    std::fs::write(&path, serde_json::to_string(&results).unwrap()).unwrap();
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig12", "--scale", "tiny", "--out", out_s, "--resume"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("zenplus-fig12 ").count(), 0, "{err}");
    assert!(err.contains("zenplus-fig12: 1 runs shared (made once, for zenplus-fig11)"), "{err}");
    assert_eq!(runs_of(&out, "zenplus-fig12").len(), 6);
    assert_eq!(made_runs(&out, "zenplus-fig12"), 0);
}

/// The columns of the `--plan` line of `id`: runs, shared, done, new.
fn plan_counts(plan: &str, id: &str) -> [usize; 4] {
    let line = plan
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .unwrap_or_else(|| panic!("no line of {id}:\n{plan}"));
    let n: Vec<usize> =
        line.split_whitespace().skip(1).take(4).map(|x| x.parse().unwrap()).collect();
    [n[0], n[1], n[2], n[3]]
}

#[test]
fn plan_counts_the_runs_and_the_shared_runs_and_touches_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let out_s = out.to_str().unwrap();
    let figures = "zenplus-fig11,zenplus-fig12,zenplus-fig13,zenplus-fig14";
    let plan = ok(&["reproduce", figures, "--scale", "small", "--plan", "--out", out_s]);
    assert!(!out.exists(), "--plan created {out_s}");
    // 4 points × 3 series × 3 reps each; the last three share every run with the first.
    assert_eq!(plan_counts(&plan, "zenplus-fig11"), [36, 0, 0, 36], "{plan}");
    for id in ["zenplus-fig12", "zenplus-fig13", "zenplus-fig14"] {
        assert_eq!(plan_counts(&plan, id), [36, 36, 0, 0], "{plan}");
    }
    assert!(
        plan.contains("144 runs, 36 distinct (108 shared), 0 already done in --out, 36 to make"),
        "{plan}"
    );
    // The wall time is at least the measured time: 36 × (1 s warmup + 2 s).
    let total = plan.lines().find(|l| l.starts_with("total:")).unwrap();
    let seconds: f64 = total.rsplit('(').next().unwrap().trim_end_matches(" s)").parse().unwrap();
    assert!(seconds >= 108.0, "{total}");
    // An empty directory stays empty; an unknown figure is a usage error.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    ok(&["reproduce", "zenplus-fig11", "--plan", "--out", empty.to_str().unwrap()]);
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    let (code, _, err) = run(&["reproduce", "zenplus-fig11,nope", "--plan"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown figure `nope`"), "{err}");
}

#[test]
fn plan_counts_what_a_resumed_directory_has_done() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    // Uncontended whatever else runs (the calibration counts uncontended runs only).
    let high = ["--retries", "0", "--max-other-load", "100"];
    ok(&[&["reproduce", "zenplus-fig13", "--scale", "tiny", "--out", out_s][..], &high].concat());
    let before = std::fs::read_to_string(out.join("zenplus-fig13/results.json")).unwrap();
    let plan = ok(&[
        "reproduce",
        "zenplus-fig13,zenplus-fig14",
        "--scale",
        "tiny",
        "--plan",
        "--out",
        out_s,
    ]);
    assert_eq!(plan_counts(&plan, "zenplus-fig13"), [6, 0, 6, 0], "{plan}");
    assert_eq!(plan_counts(&plan, "zenplus-fig14"), [6, 6, 0, 0], "{plan}");
    // Calibrated from the directory's own runs, and nothing written.
    assert!(plan.contains("zenplus-fig13/results.json"), "{plan}");
    assert_eq!(std::fs::read_to_string(out.join("zenplus-fig13/results.json")).unwrap(), before);
    // Another scale is refused, as reproduce refuses it.
    let (code, _, err) =
        run(&["reproduce", "zenplus-fig13", "--scale", "small", "--plan", "--out", out_s]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds scale `tiny`"), "{err}");
}
