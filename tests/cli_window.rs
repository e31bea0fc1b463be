//! One measured window for every counter of a summary (issue 19, item 5):
//! Zen+ exclusive stages begun in the warmup or still running at the end are
//! cut at the window's edges, so `adaptive.exclusive_us` never exceeds the
//! measured time (it once reported 8.5 s in a 5 s window).

mod common;

use common::ok;
use serde_json::Value;

#[test]
fn exclusive_time_never_exceeds_the_measured_window() {
    let mut switches = 0;
    for seed in ["1", "2", "3"] {
        // A Met-Cache so small that every long update is privileged (α):
        // exclusive stages come back to back, across both edges of the window.
        let out = ok(&[
            "bench",
            "ycsb",
            "--engine",
            "zen",
            "--cc",
            "mvcc",
            "--pmem",
            "dram",
            "--records",
            "20000",
            "--cache-size",
            "4MiB",
            "--long-txn",
            "update",
            "--long-txn-tuples",
            "5000",
            "--long-txn-every",
            "50",
            "--threads",
            "2",
            "--warmup",
            "300ms",
            "--duration",
            "700ms",
            "--seed",
            seed,
            "--format",
            "json",
        ]);
        let json: Value = serde_json::from_str(&out).unwrap();
        let adaptive = &json["adaptive"];
        let exclusive_us = adaptive["exclusive_us"].as_u64().unwrap();
        let measured_us = json["summary"]["measured_s"].as_f64().unwrap() * 1e6;
        assert!(exclusive_us as f64 <= measured_us, "seed {seed}: {adaptive} in {measured_us} µs");
        switches += adaptive["stage_switches"].as_u64().unwrap();
    }
    assert!(switches > 0, "the runs had exclusive stages to measure");
}

#[test]
fn checkpoints_count_the_measured_window_only() {
    // A 32 MiB pool fills with mmdb's redo log many times over in a
    // write-heavy run: checkpoints on log pressure happen in the warmup and
    // in the measured window alike.
    let out = ok(&[
        "bench",
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
        "1",
        "--warmup",
        "400ms",
        "--duration",
        "400ms",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&out).unwrap();
    let c = &json["checkpoints"];
    let get = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("no `{k}` in {c}"));
    let (start, end) = (get("seq_at_start"), get("seq"));
    assert!(start >= 1, "the warmup took checkpoints: {c}");
    assert!(end > start, "the window took checkpoints: {c}");
    // Every successful checkpoint of the window moved `seq` on; the warmup's
    // are not counted (they were, as the whole process's, before issue 19).
    let taken = get("on_log_pressure") - get("failed_on_log_pressure");
    assert!(taken >= 1 && taken <= end - start, "{c}");
}

#[test]
fn numa_counters_of_the_whole_run_say_so_in_their_names() {
    let out = ok(&[
        "bench",
        "ycsb",
        "--numa-nodes",
        "2",
        "--numa-mode",
        "soft-partition",
        "--records",
        "2000",
        "--threads",
        "2",
        "--warmup",
        "100ms",
        "--duration",
        "150ms",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&out).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../docs/summary.schema.json")).unwrap();
    let problems = zen_workload::jsonschema::validate(&json, &schema);
    assert!(problems.is_empty(), "{problems:#?}");
    let numa = &json["numa"];
    // `measured` is the window's; the placement and routing counters run
    // from the start, warmup included, and are named for it.
    assert!(numa["measured"].is_object(), "{numa}");
    assert!(numa["engine_whole_run"]["total"].is_object(), "{numa}");
    assert!(numa["route_whole_run"].is_object(), "{numa}");
    assert!(numa.get("engine").is_none() && numa.get("route").is_none(), "{numa}");
}
