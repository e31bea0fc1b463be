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
