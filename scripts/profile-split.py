#!/usr/bin/env python3
"""Split two steady-state profiles into the same categories, in ns per commit.

usage: scripts/profile-split.py A.perf.data A_TXN_PER_S B.perf.data B_TXN_PER_S [NAME_A NAME_B]

Each profile is `perf record -F 1000 --call-graph dwarf -p PID -- sleep S` of one
busy worker thread, attached after loading and warm-up (docs/benchmarks.md,
"Where the time goes"); TXN_PER_S is the run's throughput over the profiled
seconds (its per-second lines). Self time of each symbol (`perf report
--no-children --sort symbol`) becomes ns per commit = share x 1e9 / TXN_PER_S,
summed per category (first matching pattern wins). Prints a markdown table.
"""
import re
import subprocess
import sys

CATEGORIES = [
    ("kernel (page faults, page clearing)", r"^\[k\]"),
    ("prefetch stage of grouped reads (point lookups, then the records' words)", r"PrimaryIndex::prefetch|::prefetch_row"),
    ("row copies (memmove, memset)", r"memmove|memset"),
    ("index (point, ordered, secondary: lookups and inserts)",
     r"PrimaryIndex|lookup_or_create|congee|SecondaryIndex|PointIndex|memcmp|skiplist|::next|RangeScan|hash"),
    ("validation (commit-time read checks, re-scans)", r"read_still_valid|validate|entry_cc|rescan|scan_still_valid"),
    ("read path (location word, entry or row, copy out)",
     r"read_current|read_row|load_row|read_record|get_impl|DramRows::words|get_locking|read_version|cache_in|touch"),
    ("GC: slot recycling (zero stores, free lists, floors)",
     r"after_fence|before_fence|HeapRegion|cover_with_floor|free_own_slot|free_reclaimed|take_back|collect_ready|raise_floor"),
    ("commit (lock, persist to NVM, install)",
     r"commit|persist|flush|write_row|install|lock_for_insert|insert|update_or_delete|push_write|finish|deps|"
     r"depend_on|on_write|find_write|fill|allocate|evict|clock|prepare|leave_commit|crc|sort"),
    ("driver and workload", r"zen_workload|hdrhistogram|execute|generate|pow|rand|Zipf|fill_field|backtrace"),
]


def split(path, tps):
    out = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "--sort", "symbol", "--stdio"],
        capture_output=True, text=True, check=True).stdout
    ns = {name: 0.0 for name, _ in CATEGORIES}
    ns["other"] = 0.0
    for line in out.splitlines():
        m = re.match(r"^\s+([0-9.]+)%\s+(.*)$", line)
        if not m:
            continue
        share, symbol = float(m.group(1)), re.sub(r"^\[\.\]\s*", "", m.group(2).strip())
        value = share / 100 * 1e9 / tps
        for name, pattern in CATEGORIES:
            if re.search(pattern, symbol):
                ns[name] += value
                break
        else:
            ns["other"] += value
    return ns


def main():
    if len(sys.argv) not in (5, 7):
        sys.exit(__doc__)
    a, b = split(sys.argv[1], float(sys.argv[2])), split(sys.argv[3], float(sys.argv[4]))
    na, nb = (sys.argv[5], sys.argv[6]) if len(sys.argv) == 7 else ("A", "B")
    print(f"| ns per commit | {na} | {nb} | {na} − {nb} |")
    print("| --- | ---: | ---: | ---: |")
    for name in a:
        print(f"| {name} | {a[name]:,.0f} | {b[name]:,.0f} | {a[name] - b[name]:+,.0f} |")
    ta, tb = sum(a.values()), sum(b.values())
    print(f"| **total** | **{ta:,.0f}** | **{tb:,.0f}** | **{ta - tb:+,.0f}** |")


if __name__ == "__main__":
    main()
