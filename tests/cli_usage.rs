//! `zen` refuses bad flags and combinations with exit code 2 and a message
//! that says what is allowed; `zen list` prints what this build offers.

mod common;

use common::zen;

/// Run `zen args…`, expect exit 2, and return stderr.
fn usage_error(args: &[&str]) -> String {
    let out = zen().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "zen {args:?}: {stderr}");
    stderr
}

#[test]
fn list_prints_engines_protocols_and_workloads() {
    let engines = zen().args(["list", "engines"]).output().unwrap();
    assert!(engines.status.success());
    assert!(String::from_utf8_lossy(&engines.stdout).starts_with("zen "));
    let cc = zen().args(["list", "cc"]).output().unwrap();
    assert!(String::from_utf8_lossy(&cc.stdout).contains("silo"));
    let workloads = zen().args(["list", "workloads"]).output().unwrap();
    let text = String::from_utf8_lossy(&workloads.stdout);
    assert!(text.contains("ycsb") && text.contains("tpcc") && text.contains("smallbank"));
}

#[test]
fn unknown_backend_lists_the_allowed_ones() {
    let err = usage_error(&["bench", "ycsb", "--pmem", "nvme"]);
    assert!(err.contains("--pmem") && err.contains("dax, fs, emu, dram"), "{err}");
}

#[test]
fn unknown_protocol_and_engine_are_refused() {
    assert!(usage_error(&["bench", "ycsb", "--cc", "2pl"]).contains("--cc"));
    assert!(usage_error(&["bench", "ycsb", "--engine", "nope"]).contains("--engine"));
}

#[test]
fn unknown_workload_is_a_usage_error() {
    let err = usage_error(&["bench", "tatp"]);
    assert!(err.contains("ycsb") && err.contains("tpcc"), "{err}");
}

#[test]
fn a_flag_of_another_workload_is_refused() {
    let err = usage_error(&["bench", "ycsb", "--warehouses", "2"]);
    assert!(err.contains("--warehouses applies to tpcc, not ycsb"), "{err}");
}

#[test]
fn durations_and_sizes_need_units() {
    assert!(usage_error(&["bench", "ycsb", "--duration", "10"]).contains("ms, s, m or h"));
    assert!(usage_error(&["bench", "ycsb", "--cache-size", "lots"]).contains("MiB"));
}

#[test]
fn bad_workload_values_say_what_is_allowed() {
    assert!(usage_error(&["bench", "ycsb", "--mix", "XX"]).contains("RO, RH, BA, WH"));
    assert!(usage_error(&["bench", "ycsb", "-w", "g"]).contains("a, b, c, d, e, f"));
    assert!(usage_error(&["bench", "ycsb", "--theta", "-1"]).contains("theta"));
    assert!(usage_error(&["bench", "ycsb", "--mix", "RO", "-w", "a"]).contains("give one of them"));
    assert!(usage_error(&["bench", "tpcc", "--customers", "5000"]).contains("10..=3000"));
}

#[test]
fn invalid_combinations_are_refused() {
    let err = usage_error(&["bench", "ycsb", "--nvm-profile", "optane"]);
    assert!(err.contains("--pmem emu only"), "{err}");
    usage_error(&["bench", "ycsb", "--cache-size", "64MiB", "--dram-ratio", "4"]);
    assert!(usage_error(&["bench", "ycsb", "--dram-ratio", "0.5"]).contains(">= 1"));
    assert!(usage_error(&["bench", "ycsb", "--threads", "0"]).contains("--threads"));
    assert!(
        usage_error(&["bench", "ycsb", "--durability", "eventual"]).contains("lazy or immediate")
    );
    let err = usage_error(&["check", "--pool", "/tmp/never-created.pool", "--format", "csv"]);
    assert!(err.contains("time series"), "{err}");
    let err = usage_error(&["load", "ycsb", "--pool", "/tmp/never-created.pool", "--pmem", "dram"]);
    assert!(err.contains("--pmem dram keeps nothing"), "{err}");
    let err = usage_error(&["bench", "ycsb", "--pmem", "dram", "--pool-dir", "/tmp"]);
    assert!(err.contains("--pool-dir /tmp: --pmem dram keeps no pool file"), "{err}");
}

#[test]
fn help_documents_the_exit_codes() {
    let out = zen().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 check failed"));
}

#[test]
fn bad_numa_settings_name_the_flag() {
    let refused = |args: &[&str], needle: &str| {
        let mut all = vec!["bench", "ycsb", "--pmem", "dram", "--records", "1000"];
        all.extend_from_slice(args);
        let err = usage_error(&all);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    refused(&["--numa-nodes", "0"], "--numa-nodes 0");
    refused(&["--numa-nodes", "3", "--threads", "2"], "needs at least 3 workers");
    refused(&["--numa-nodes", "2", "--numa-delta", "1.5"], "--numa-delta");
    refused(&["--numa-nodes", "2", "--numa-eta", "0.5"], "--numa-eta");
    refused(&["--numa-nodes", "2", "--engine", "mmdb"], "--engine zen");
    refused(&["--numa-nodes", "2", "--numa-mode", "far"], "soft-partition");
    refused(&["--remote-penalty-ns", "5"], "need --numa-nodes");
}
