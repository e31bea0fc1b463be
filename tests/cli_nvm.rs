//! The NVM device model from the command line: bad `--nvm-*` values and
//! combinations are refused naming the flag (exit 2), a modelled run reports
//! media bytes and the stall split in text and JSON and says when it is a
//! share model, and `zen probe` prints every figure beside its target.
//! Structure only: no test here depends on speed.

mod common;

use common::{ok, run};
use serde_json::Value;

/// Run `zen args…`, expect exit 2, and return stderr.
fn usage_error(args: &[&str]) -> String {
    let (code, _, stderr) = run(args);
    assert_eq!(code, 2, "zen {args:?}: {stderr}");
    stderr
}

const EMU: [&str; 4] = ["bench", "ycsb", "--pmem", "emu"];

fn emu_with(extra: &[&str]) -> String {
    usage_error(&[&EMU[..], extra].concat())
}

#[test]
fn zero_or_negative_bandwidths_are_refused_naming_the_flag() {
    for value in ["0", "-1", "-0.5", "fast"] {
        let err = emu_with(&["--nvm-write-bw", value]);
        assert!(err.contains("--nvm-write-bw") && err.contains(value), "{err}");
        let err = emu_with(&["--nvm-read-bw", value]);
        assert!(err.contains("--nvm-read-bw") && err.contains(value), "{err}");
    }
}

#[test]
fn a_granularity_that_is_not_a_power_of_two_is_refused() {
    for value in ["192", "100", "32", "8192", "-256"] {
        let err = emu_with(&["--nvm-granularity", value]);
        assert!(err.contains("--nvm-granularity") && err.contains("power of two"), "{err}");
    }
}

#[test]
fn an_unknown_profile_is_refused_with_the_known_ones() {
    let err = emu_with(&["--nvm-profile", "flash"]);
    assert!(err.contains("--nvm-profile") && err.contains("dram, optane, cxl"), "{err}");
    let err = usage_error(&["probe", "--nvm-profile", "pcm"]);
    assert!(err.contains("--nvm-profile") && err.contains("optane"), "{err}");
}

#[test]
fn the_share_flag_and_overrides_need_the_emu_backend() {
    let err = usage_error(&["bench", "ycsb", "--pmem", "fs", "--nvm-share", "16"]);
    assert!(err.contains("--nvm-share") && err.contains("--pmem emu only"), "{err}");
    let err = usage_error(&["bench", "ycsb", "--pmem", "dram", "--nvm-write-bw", "2"]);
    assert!(err.contains("--nvm-write-bw") && err.contains("--pmem emu only"), "{err}");
    let err = usage_error(&["probe", "--pmem", "fs", "--nvm-share", "16"]);
    assert!(err.contains("--nvm-share"), "{err}");
    assert!(emu_with(&["--nvm-share", "0"]).contains("--nvm-share"));
}

#[test]
fn other_parameters_out_of_range_name_their_flag() {
    assert!(emu_with(&["--nvm-write-floor", "0"]).contains("--nvm-write-floor"));
    assert!(emu_with(&["--nvm-write-falloff", "2"]).contains("--nvm-write-falloff"));
    assert!(emu_with(&["--nvm-combine-lines", "99"]).contains("--nvm-combine-lines"));
    assert!(emu_with(&["--nvm-persist-ns", "-5"]).contains("--nvm-persist-ns"));
    assert!(emu_with(&["--nvm-write-peak-writers", "0"]).contains("--nvm-write-peak-writers"));
}

#[test]
fn a_modelled_run_reports_media_bytes_and_the_stall_split() {
    let args = [
        &EMU[..],
        &["--records", "2000", "--mix", "WH", "--threads", "2", "--txns", "2000"],
        &["--warmup", "0s", "--nvm-share", "16", "--format", "json"],
    ]
    .concat();
    let json: Value = serde_json::from_str(&ok(&args)).expect("one JSON document");
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    let (config, nvm) = (&json["config"], &json["nvm"]);
    assert_eq!(config["nvm_device"]["share_threads"], 16, "{config}");
    assert_eq!(config["nvm_device"]["media_granularity_bytes"], 256, "{config}");
    assert!(config["nvm_model_note"].as_str().unwrap().starts_with("MODEL"), "{config}");
    let media = nvm["media_bytes_written"].as_u64().unwrap();
    assert!(media > 0 && media % 256 == 0, "media writes are whole XPLines: {nvm}");
    let split: u64 = ["read_latency_ns", "write_latency_ns", "bandwidth_wait_ns"]
        .iter()
        .map(|k| nvm[k].as_u64().unwrap())
        .sum();
    assert_eq!(split, nvm["stall_ns"].as_u64().unwrap(), "the split sums to the stall: {nvm}");
    assert!(nvm["write_latency_ns"].as_u64().unwrap() > 0, "{nvm}");

    let text = ok(&[&args[..args.len() - 2], &["--format", "text"]].concat());
    assert!(text.contains("nvm device model") && text.contains("bandwidth wait"), "{text}");
    assert!(text.contains("nvm share") && text.contains("MODEL"), "{text}");
}

#[test]
fn a_run_without_the_model_has_no_device_and_no_media_bytes() {
    let args = ["bench", "ycsb", "--records", "2000", "--threads", "1", "--txns", "500"];
    let json: Value =
        serde_json::from_str(&ok(&[&args[..], &["--warmup", "0s", "--format", "json"]].concat()))
            .unwrap();
    assert!(json["config"]["nvm_device"].is_null());
    assert!(json["config"]["nvm_model_note"].is_null());
    assert_eq!(json["nvm"]["media_bytes_written"], 0);
}

/// The rows every `zen probe` prints, per thread count for the bandwidth ones.
const LATENCY_ROWS: [&str; 3] =
    ["read latency, random", "read latency, sequential", "persist latency (64 B)"];
const BANDWIDTH_ROWS: [&str; 4] = [
    "write bandwidth, 64 B scattered",
    "write bandwidth, 256 B sequential",
    "read bandwidth, 4 KiB sequential",
    "write bandwidth ratio 256 B / 64 B",
];

#[test]
fn probe_prints_every_figure_beside_its_target_in_json() {
    let out = ok(&[
        "probe",
        "--nvm-profile",
        "optane",
        "--nvm-share",
        "16",
        "--threads",
        "2",
        "--size",
        "4MiB",
        "--duration",
        "20ms",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(json["pmem"], "emu");
    assert_eq!(json["device"]["profile"], "optane");
    assert!(json["model_note"].as_str().unwrap().contains("16"), "{json}");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), LATENCY_ROWS.len() + 2 * BANDWIDTH_ROWS.len(), "{json:#}");
    for name in LATENCY_ROWS {
        let r = rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name}"));
        assert!(r["measured"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["target"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["within_10_percent"].is_boolean(), "{r}");
    }
    let random = rows.iter().find(|r| r["name"] == LATENCY_ROWS[0]).unwrap();
    assert_eq!(random["published"], 305.0, "Izraelevitz et al.'s random read");
    // The target adds the model's extra to the same pool's figure with the model off.
    assert!(random["note"].as_str().unwrap().contains("model off"), "{random}");
    for threads in [1, 2] {
        for name in BANDWIDTH_ROWS {
            let r = rows.iter().find(|r| r["name"] == name && r["threads"] == threads);
            let r = r.unwrap_or_else(|| panic!("{name} × {threads}"));
            assert!(r["target"].as_f64().unwrap() > 0.0, "{r}");
        }
        let scattered = rows
            .iter()
            .find(|r| r["name"] == BANDWIDTH_ROWS[0] && r["threads"] == threads)
            .unwrap();
        // A count, not a speed: a scattered 64-byte write costs one XPLine
        // (unless it lands on one of the thread's 24 combining entries).
        let media = scattered["media_per_byte"].as_f64().unwrap();
        assert!((3.9..=4.0).contains(&media), "{scattered}");
    }
}

#[test]
fn probe_text_names_the_model_and_each_row() {
    let out = ok(&["probe", "--threads", "1", "--size", "4MiB", "--duration", "10ms"]);
    assert!(out.contains("device model  profile optane"), "{out}");
    for name in LATENCY_ROWS.iter().chain(&BANDWIDTH_ROWS) {
        assert!(out.contains(name), "{name}: {out}");
    }
    let dram =
        ok(&["probe", "--pmem", "dram", "--threads", "1", "--size", "4MiB", "--duration", "10ms"]);
    assert!(dram.contains("no model"), "{dram}");
}
