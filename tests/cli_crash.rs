//! `zen crash-test`: tiny campaigns of every workload on zen, mmdb and wbl
//! pass (exit 0) and report what they covered; an injected bug is caught
//! (exit 5) by the check meant for it, with a replay command and a saved
//! image that `zen recover` opens; nvcaracal's collector and row layout
//! are chosen by flags and shown in the report; bad flags (bad values, an
//! nvcaracal knob on another engine) and `--engine ideal` are usage errors
//! (exit 2).

mod common;

use common::run;

use serde_json::Value;

const TINY: [&str; 12] = [
    "--crash-points",
    "10",
    "--images-per-point",
    "3",
    "--nested-depth",
    "1",
    "--threads",
    "2",
    "--txns",
    "3",
    "--seed",
    "7",
];

#[test]
fn a_tiny_bank_campaign_passes() {
    let (code, out, err) = run(&[&["crash-test", "bank"][..], &TINY].concat());
    assert_eq!(code, 0, "{out}\n{err}");
    for line in [
        "crash points      10 checked of",
        "fence sites hit",
        "nested recoveries",
        "failures          0",
    ] {
        assert!(out.contains(line), "missing `{line}` in\n{out}");
    }
    assert!(
        err.contains("replay with   zen crash-test bank --engine zen --cc silo --mode strict"),
        "{err}"
    );
}

#[test]
fn the_baselines_pass_tiny_lazy_campaigns_with_cross_worker_reads() {
    for (workload, engine, mode) in
        [("bank", "mmdb", "paranoid"), ("list-append", "wbl", "eadr"), ("tpcc", "wbl", "strict")]
    {
        let args = [
            &["crash-test", workload, "--engine", engine, "--mode", mode][..],
            &["--durability", "lazy", "--format", "json"],
            &TINY,
        ]
        .concat();
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{workload} on {engine}: {out}\n{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["failures"], 0, "{out}");
        assert_eq!(report["config"]["engine"], engine);
        assert_eq!(report["config"]["durability"], "lazy");
        assert!(report["images"]["total"].as_u64().unwrap() >= 10, "{out}");
    }
}

#[test]
fn every_workload_passes_a_tiny_json_campaign() {
    for (workload, cc, mode) in
        [("ycsb", "mvcc", "strict"), ("smallbank", "tictoc", "paranoid"), ("tpcc", "silo", "eadr")]
    {
        let args =
            [&["crash-test", workload, "--cc", cc, "--mode", mode, "--format", "json"][..], &TINY]
                .concat();
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{workload}: {out}\n{err}");
        let report: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["failures"], 0, "{out}");
        assert_eq!(report["config"]["cc"], cc);
        assert_eq!(report["crash_points_checked"], 10, "{out}");
        assert!(report["images"]["total"].as_u64().unwrap() >= 10, "{out}");
        assert!(report["nested"]["recoveries"].as_u64().unwrap() > 0, "{out}");
        let sites = &report["fence_sites"];
        assert!(sites["hit"].as_u64().unwrap() <= sites["total"].as_u64().unwrap(), "{out}");
    }
}

#[test]
fn an_epoch_mode_campaign_on_nvcaracal_reports_its_phases() {
    let args = [
        &["crash-test", "tpcc", "--engine", "nvcaracal", "--epochs", "2", "--mode", "strict"][..],
        &TINY,
    ]
    .concat();
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    for line in
        ["epochs            2 of 3 one-shot transactions", "points by phase", "failures          0"]
    {
        assert!(out.contains(line), "missing `{line}` in\n{out}");
    }
    assert!(err.contains("--txns 3 --epochs 2"), "the replay names --epochs: {err}");
}

#[test]
fn nvcaracal_campaigns_take_the_collector_and_row_layout_from_flags() {
    let args = [
        &["crash-test", "tpcc", "--engine", "nvcaracal", "--epochs", "2"][..],
        &["--nvcaracal-minor-gc", "off", "--nvcaracal-row-bytes", "0"],
        &TINY,
    ]
    .concat();
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}\n{err}");
    for line in [
        "nvcaracal         minor GC off (major collector), inline-only rows (row bytes 0)",
        // Minor GC off reached the engine: no deletion at a final write.
        "GC deleted 0 stale versions at final writes",
        "failures          0",
    ] {
        assert!(out.contains(line), "missing `{line}` in\n{out}");
    }
    assert!(
        err.contains("--epochs 2 --nvcaracal-minor-gc off --nvcaracal-row-bytes 0")
            && err.contains("nvcaracal     minor GC off (major collector), inline-only rows"),
        "the banner and the replay name both knobs: {err}"
    );
    // JSON carries them in the campaign's tuning; unset, the report shows
    // the engine's defaults.
    let (code, out, err) = run(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(code, 0, "{out}\n{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["failures"], 0, "{out}");
    assert_eq!(report["config"]["tuning"]["nvcaracal_minor_gc"], false, "{out}");
    assert_eq!(report["config"]["tuning"]["nvcaracal_row_bytes"], 0, "{out}");
    let (code, out, err) =
        run(&[&["crash-test", "tpcc", "--engine", "nvcaracal", "--epochs", "2"][..], &TINY]
            .concat());
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("nvcaracal         minor GC on, 256-byte persistent rows"), "{out}");
}

#[test]
fn an_injected_bug_exits_5_with_a_replay_command_and_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("failing");
    let args = [
        "crash-test",
        "bank",
        "--inject-fault",
        "no-fence-before-lp",
        "--threads",
        "1",
        "--txns",
        "4",
        "--crash-points",
        "20",
        "--images-per-point",
        "64",
        "--seed",
        "3",
        "--save-failing",
        saved.to_str().unwrap(),
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, 5, "{out}\n{err}");
    assert!(out.contains("VIOLATION") && out.contains("failures          1"), "{out}");
    assert!(
        out.contains("VIOLATION state-mismatch: "),
        "the oracle's atomicity check fires:\n{out}"
    );
    assert!(
        err.contains("replay: zen crash-test bank --engine zen --cc silo --mode strict")
            && err.contains("--inject-fault no-fence-before-lp"),
        "{err}"
    );
    let images: Vec<_> = std::fs::read_dir(&saved).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(images.len(), 1, "{images:?}");
    // The saved image is a pool file: recovery opens it without panicking.
    let (code, _, err) = run(&["recover", "--pool", images[0].to_str().unwrap()]);
    assert!(code == 0 || code == 4, "zen recover exited {code}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_crash_test_flags_are_usage_errors() {
    for (args, says) in [
        (&["crash-test", "bank", "--mode", "tso"][..], "--mode"),
        (&["crash-test", "bank", "--threads", "9"][..], "--threads"),
        (&["crash-test", "bank", "--cc", "2pl"][..], "--cc"),
        (&["crash-test", "bank", "--inject-fault", "gremlins"][..], "no-fence-before-lp"),
        (&["crash-test", "bank", "--format", "csv"][..], "csv"),
        (&["crash-test", "bank", "--engine", "ideal"][..], "persists nothing"),
        (
            &["crash-test", "bank", "--engine", "mmdb", "--inject-fault", "torn-lp-word"][..],
            "zen engine",
        ),
        (&["crash-test", "bank", "--durability", "eventually"][..], "--durability"),
        (&["crash-test", "bank", "--engine", "nvcaracal", "--epochs", "2"][..], "one-shot"),
        (&["crash-test", "tpcc", "--engine", "zen", "--epochs", "2"][..], "deterministic seam"),
        (&["crash-test", "tpcc", "--engine", "nvcaracal", "--epochs", "0"][..], "--epochs"),
        (
            &["crash-test", "tpcc", "--engine", "nvcaracal", "--nvcaracal-row-bytes", "100"][..],
            "--nvcaracal-row-bytes 100: 0 (inline-only) or a multiple of 64",
        ),
        (
            &["crash-test", "tpcc", "--engine", "nvcaracal", "--nvcaracal-row-bytes", "8192"][..],
            "--nvcaracal-row-bytes 8192",
        ),
        (
            &["crash-test", "tpcc", "--engine", "nvcaracal", "--nvcaracal-minor-gc", "maybe"][..],
            "invalid value `maybe` for --nvcaracal-minor-gc: on or off",
        ),
        (
            &["crash-test", "tpcc", "--engine", "zen", "--nvcaracal-minor-gc", "off"][..],
            "a knob of the nvcaracal engine, not of --engine zen",
        ),
        (
            &["crash-test", "tpcc", "--engine", "nvcaracal", "--nvcaracal-row-bytes", "256B"][..],
            "--nvcaracal-row-bytes",
        ),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
