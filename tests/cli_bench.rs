//! `zen bench` on every workload at small sizes: text, JSON (validated
//! against `docs/summary.schema.json`), CSV and `--out` files.

mod common;

use common::zen;

use serde_json::Value;

/// Run `zen bench …`, expect success, return stdout.
fn bench(args: &[&str]) -> String {
    let out = zen().arg("bench").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "zen bench {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

const QUICK: [&str; 6] = ["--threads", "2", "--txns", "2000", "--warmup", "0s"];

#[test]
fn ycsb_paper_mode_prints_a_text_summary_with_the_seed() {
    let out = bench(&[&["ycsb", "--records", "2000", "--seed", "42"][..], &QUICK].concat());
    assert!(out.contains("seed 42"), "{out}");
    assert!(out.contains("throughput") && out.contains("txn/s"), "{out}");
    assert!(out.contains("unscrambled"), "the key distribution is named: {out}");
    assert!(out.contains("nvm per commit"), "{out}");
}

#[test]
fn json_summary_validates_against_the_documented_schema() {
    let out = bench(
        &[&["ycsb", "--records", "2000", "--format", "json", "-w", "a"][..], &QUICK].concat(),
    );
    let json: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(json["schema_version"], 1);
    let commits = json["summary"]["commits"].as_u64().unwrap();
    assert_eq!(commits + json["summary"]["user_aborts"].as_u64().unwrap(), 2000);
    assert_eq!(json["config"]["durability"], "lazy", "benchmarks default to lazy durability");
    assert!(json["config"]["seed"].is_u64(), "a random seed is still reported");
    // The binary counts heap allocations (zen_pmem::alloc_count).
    let allocations = &json["allocations"];
    let total = allocations["total"].as_u64().expect("the zen binary counts allocations");
    let per_commit = allocations["per_commit"].as_f64().unwrap();
    assert!((per_commit - total as f64 / commits as f64).abs() < 1e-9, "{allocations}");
}

#[test]
fn single_op_ycsb_on_ideal_allocates_nothing_per_transaction_in_steady_state() {
    // After a warmup that grows every worker buffer, a single-op YCSB-A
    // transaction allocates nothing: not the engine, the workload or the
    // driver (docs/benchmarks.md, "Allocations"). A count, not a timing.
    let args = ["ycsb", "--engine", "ideal", "--pmem", "dram", "--records", "2000", "-w", "a"];
    let run = ["--threads", "1", "--txns", "20000", "--warmup", "200ms", "--format", "json"];
    let json: Value = serde_json::from_str(&bench(&[&args[..], &run].concat())).unwrap();
    let allocations = &json["allocations"];
    assert!(allocations["total"].is_u64(), "{json}");
    assert!(allocations["per_commit"].as_f64().unwrap() < 0.01, "{allocations}");
}

#[test]
fn out_dir_receives_summary_timeseries_and_config() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let args = [
        "smallbank",
        "--accounts",
        "1000",
        "--duration",
        "1200ms",
        "--warmup",
        "200ms",
        "--interval",
        "200ms",
        "--out",
        out_dir,
    ];
    bench(&args);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].ends_with(".config.json") && names[1].ends_with(".summary.json"));
    let csv = std::fs::read_to_string(dir.path().join(&names[2])).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("elapsed_s,phase,interval_s,commits"));
    assert!(
        lines.clone().any(|l| l.contains(",warmup,")) && lines.any(|l| l.contains(",measure,"))
    );
}

#[test]
fn pool_dir_holds_the_temporary_pool_and_the_report_counts_gc() {
    let dir = tempfile::tempdir().unwrap();
    let run = zen()
        .args(["bench", "ycsb", "--records", "2000", "-w", "a", "--pmem", "fs", "--pool-dir"])
        .arg(dir.path())
        .args(QUICK)
        .output()
        .unwrap();
    let (out, stderr) =
        (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{stderr}");
    let banner = format!("pool {}/zen-bench-", dir.path().display());
    assert!(stderr.contains(&banner), "the pool is made in --pool-dir: {stderr}");
    // Updates supersede slots, which the GC reclaims (or keeps as spares).
    assert!(out.contains("gc per commit") && out.contains("kept as spares"), "{out}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "the temporary pool is removed: {left:?}");
    let missing = dir.path().join("absent");
    let out = zen()
        .args(["bench", "ycsb", "--records", "200", "--pmem", "fs", "--pool-dir"])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains(&format!("{}: cannot create a temporary pool directory", missing.display())),
        "{stderr}"
    );
}

#[test]
fn csv_format_prints_the_time_series() {
    let out = bench(&[
        "smallbank",
        "--accounts",
        "500",
        "--duration",
        "600ms",
        "--warmup",
        "0s",
        "--interval",
        "200ms",
        "--format",
        "csv",
    ]);
    assert!(out.starts_with("elapsed_s,phase,"), "{out}");
    assert!(out.lines().count() >= 3, "{out}");
}

#[test]
fn tpcc_scaled_down_runs_all_five_transactions() {
    let args = [
        "tpcc",
        "--warehouses",
        "2",
        "--items",
        "200",
        "--customers",
        "30",
        "--orders",
        "30",
        "--format",
        "json",
    ];
    let out = bench(&[&args[..], &["--threads", "2", "--txns", "3000", "--warmup", "0s"]].concat());
    let json: Value = serde_json::from_str(&out).unwrap();
    for t in ["new_order", "payment", "order_status", "delivery", "stock_level"] {
        assert!(json["per_txn_type"][t]["commits"].as_u64().unwrap() > 0, "{t}: {out}");
    }
    assert!(json["summary"]["user_aborts"].as_u64().unwrap() > 0, "1 % of New-Orders roll back");
    assert_eq!(json["config"]["workload_parameters"]["warehouses"], 2);
}

#[test]
fn ycsb_core_workload_e_scans_and_inserts_on_emulated_nvm() {
    let args = [
        "ycsb",
        "--records",
        "2000",
        "-w",
        "e",
        "--scramble",
        "--pmem",
        "emu",
        "--nvm-profile",
        "cxl",
    ];
    let out = bench(&[&args[..], &QUICK].concat());
    assert!(out.contains("scrambled zipfian"), "{out}");
    assert!(out.contains("scan") && out.contains("insert"), "{out}");
}

#[test]
fn mmdb_checkpoints_when_its_log_fills_a_small_pool_and_reports_it() {
    // 32 MiB pool: a write-heavy run logs far more than that, so mmdb must
    // checkpoint on log pressure instead of running out of space.
    let out = bench(&[
        "ycsb",
        "--engine",
        "mmdb",
        "--records",
        "2000",
        "--mix",
        "WH",
        "--pool-size",
        "32MiB",
        "--threads",
        "2",
        "--txns",
        "20000",
        "--warmup",
        "0s",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    let c = &json["checkpoints"];
    assert!(c["on_log_pressure"].as_u64().unwrap() >= 1, "{c}");
    assert_eq!(c["failed_on_log_pressure"], 0, "{c}");
    assert!(c["seq"].as_u64().unwrap() >= c["on_log_pressure"].as_u64().unwrap(), "{c}");
}

#[test]
fn smallbank_on_nvcaracal_runs_one_shot_epochs_and_its_summary_validates() {
    let args = ["smallbank", "--engine", "nvcaracal", "--pmem", "dram", "--accounts", "500"];
    let run = ["--threads", "2", "--duration", "150ms", "--warmup", "0s", "--format", "json"];
    let out = zen()
        .arg("bench")
        .args(
            [
                &args[..],
                &run,
                &[
                    "--epoch-size",
                    "200",
                    "--nvcaracal-split-on-demand",
                    "off",
                    "--nvcaracal-cached-versions",
                    "off",
                    "--nvcaracal-minor-gc",
                    "off",
                ],
            ]
            .concat(),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("check: smallbank passed after the epoch run"), "{stderr}");
    let json: Value = serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(json["config"]["cc"], "deterministic", "nvcaracal has no --cc choice");
    let epochs = &json["epochs"];
    assert_eq!(epochs["epoch_size"], 200);
    assert_eq!(epochs["cc_aborts"], 0);
    assert_eq!(epochs["split_rows"], 0, "split-on-demand is off");
    assert_eq!(epochs["cache_hits"], 0, "cached versions are off");
    assert_eq!(epochs["cache_entries_peak"], 0, "cached versions are off");
    assert!(epochs["cache_misses"].as_u64().unwrap() > 0, "{epochs}");
    assert_eq!(epochs["gc_minor"], 0, "the major collector empties every version first");
    // The first epoch's rows have one version each (loaded once); from the
    // second on, the major collector deletes the rows the last one wrote (a
    // loaded machine may run only one epoch in 150 ms).
    if epochs["epochs"].as_u64().unwrap() >= 2 {
        assert!(epochs["gc_major"].as_u64().unwrap() > 0, "{epochs}");
    }
    assert!(json["summary"]["throughput_tps"].as_f64().unwrap() > 0.0, "{json}");
    assert!(epochs["transient_bytes_peak"].as_u64().unwrap() > 0, "{epochs}");
    // --epoch-size needs a deterministic engine; a bad switch is named.
    for (flags, needle) in [
        (&["--engine", "zen", "--epoch-size", "10"][..], "--epoch-size"),
        (
            &["--engine", "nvcaracal", "--nvcaracal-batch-append", "maybe"][..],
            "--nvcaracal-batch-append",
        ),
        (
            &["--engine", "nvcaracal", "--nvcaracal-cached-versions", "yes"][..],
            "--nvcaracal-cached-versions",
        ),
        (
            &["--engine", "nvcaracal", "--nvcaracal-cache-epochs", "0"][..],
            "--nvcaracal-cache-epochs",
        ),
        (&["--engine", "nvcaracal", "--nvcaracal-minor-gc", "major"][..], "--nvcaracal-minor-gc"),
    ] {
        let out = zen()
            .arg("bench")
            .args([&["smallbank", "--pmem", "dram", "--accounts", "500"][..], flags, &run].concat())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(needle), "{flags:?}: {stderr}");
    }
}

#[test]
fn tpcc_on_nvcaracal_runs_one_shot_epochs_with_reconnaissance_and_its_check_passes() {
    let args = [
        "tpcc",
        "--engine",
        "nvcaracal",
        "--pmem",
        "dram",
        "--warehouses",
        "1",
        "--items",
        "500",
        "--customers",
        "30",
        "--orders",
        "30",
    ];
    let run = ["--threads", "2", "--duration", "150ms", "--warmup", "0s", "--format", "json"];
    let out = zen()
        .arg("bench")
        .args([&args[..], &run, &["--epoch-size", "300"]].concat())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("check: tpcc passed after the epoch run"), "{stderr}");
    let json: Value = serde_json::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    let epochs = &json["epochs"];
    assert_eq!(epochs["cc_aborts"], 0, "{epochs}");
    assert_eq!(epochs["failed"], 0, "{epochs}");
    assert_eq!(epochs["resubmitted"], 0, "{epochs}");
    assert!(epochs["recon_us"].as_f64().unwrap() > 0.0, "{epochs}");
    assert!(epochs["cache_hits"].as_u64().unwrap() > 0, "cached versions are on by default");
    // From the second epoch on, the warehouse every epoch writes (101
    // bytes, inline) has two versions, and minor GC (on by default)
    // deletes the stale one (a
    // loaded machine may run only one epoch in 150 ms).
    if epochs["epochs"].as_u64().unwrap() >= 2 {
        assert!(epochs["gc_minor"].as_u64().unwrap() > 0, "minor GC is on: {epochs}");
    }
    // TPC-C's larger rows (district, customer, stock) do not fit a 256-byte
    // persistent row's inline heap: they are in the value pool, and the
    // major collector deletes their stale versions (freeing their values).
    if epochs["epochs"].as_u64().unwrap() >= 2 {
        assert!(epochs["gc_major"].as_u64().unwrap() > 0, "{epochs}");
        assert!(epochs["values_freed"].as_u64().unwrap() > 0, "{epochs}");
    }
    assert!(epochs["values_allocated"].as_u64().unwrap() > 0, "{epochs}");
    assert!(json["summary"]["throughput_tps"].as_f64().unwrap() > 0.0, "{json}");
}

/// A run that fills its pool stops with an operating error (exit 1) that
/// says the pool is full and names `--pool-size`; TPC-C inserts rows with
/// every New-Order and Payment, and 200 MiB holds one warehouse with little
/// room to spare (it fills in about a second here).
#[test]
fn a_run_that_fills_its_pool_says_so_and_names_pool_size() {
    let out = zen()
        .args(["bench", "tpcc", "--engine", "zen", "--pmem", "fs", "--warehouses", "1"])
        .args(["--pool-size", "200MiB", "--duration", "60s", "--warmup", "0s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("out_of_space") && stderr.contains("the pool is full"), "{stderr}");
    assert!(stderr.contains("--pool-size"), "{stderr}");
}
