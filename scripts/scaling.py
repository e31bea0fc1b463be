#!/usr/bin/env python3
"""Thread scaling of `zen bench`: each engine at 1..N workers, side by side.

For every round, configuration and thread count the engines run one after
another (A B A B ...), so each zen / ideal ratio compares two runs that sat
next to each other; the summary gives medians over rounds, the speed-up over
one thread, and the deterministic counters per commit.

    scripts/scaling.py --bin target/release/zen --out results/scaling \
        --threads 1,2,4,8,16 --rounds 2 --duration 3s

Two builds side by side: `--bin base=OLD,new=NEW` runs each engine with
each build in turn (engine@base, engine@new, ...); the ratio column then
compares each build with the first one, round by round.

Configurations (`--configs`, comma-separated):
  ycsb-a-0.99  single-op YCSB-A, 2M rows of 1 KiB, zipfian theta 0.99
  ycsb-a-0     the same, uniform keys (theta 0): no contention
  tpcc         TPC-C full mix, max(4, threads) warehouses (one per worker
               from 4 workers up, as the papers scale it)

Each run records the CPU time other processes used while it ran (from
/proc/stat, in cores); the summary flags runs where that exceeded 0.15.
docs/benchmarks.md ("Scaling") has the figures this produced.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

ENGINES = {
    "ideal": ["--engine", "ideal", "--pmem", "dram"],
    "zen": ["--engine", "zen", "--pmem", "fs"],
}


def workload_args(config, threads, records):
    if config == "ycsb-a-0.99":
        return ["ycsb", "-w", "a", "--records", str(records), "--theta", "0.99"]
    if config == "ycsb-a-0":
        return ["ycsb", "-w", "a", "--records", str(records), "--theta", "0"]
    if config == "tpcc":
        return ["tpcc", "--warehouses", str(max(4, threads))]
    raise SystemExit(f"unknown configuration {config!r} (ycsb-a-0.99, ycsb-a-0, tpcc)")


def busy_jiffies():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait
    return sum(fields) - fields[3] - fields[4]


def run_one(cmd, out_path):
    hz = os.sysconf("SC_CLK_TCK")
    t0, b0 = time.monotonic(), busy_jiffies()
    with open(out_path, "w") as out, open(out_path + ".log", "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    wall, busy = time.monotonic() - t0, (busy_jiffies() - b0) / hz
    own = usage.ru_utime + usage.ru_stime
    other = max(0.0, busy - own) / wall
    if os.waitstatus_to_exitcode(status) != 0:
        return None, other
    with open(out_path) as f:
        return json.load(f), other


def baseline_of(engine, first_build):
    """What an engine's ratio column compares it with: with several builds
    (`engine@build`) the same engine on the first build, else `ideal`."""
    if "@" in engine:
        return engine.split("@")[0] + "@" + first_build
    return "ideal"


def summarize(out_dir):
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out_dir, "results.tsv"))]
    header, rows = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    cells = defaultdict(list)
    order = []
    builds = [r[col["engine"]].split("@")[1] for r in rows if "@" in r[col["engine"]]]
    first_build = builds[0] if builds else ""
    for r in rows:
        key = (r[col["config"]], r[col["engine"]], int(r[col["threads"]]))
        if key not in order:
            order.append(key)
        cells[key].append(r)
    lines = ["| configuration | engine | threads | txn/s (median) | runs | x 1 thread | "
             "÷ baseline (median of rounds) | flushes/commit | fences/commit | "
             "NVM bytes/commit | abort % | max other load (cores) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key in order:
        config, engine, threads = key
        runs = cells[key]
        tps = [float(r[col["tps"]]) for r in runs]
        med = statistics.median(tps)
        one = cells.get((config, engine, 1))
        speedup = f"{med / statistics.median(float(r[col['tps']]) for r in one):.2f}" if one else ""
        ratio = ""
        base_engine = baseline_of(engine, first_build)
        if base_engine != engine and (config, base_engine, threads) in cells:
            ideal = {r[col["round"]]: float(r[col["tps"]]) for r in cells[(config, base_engine, threads)]}
            ratios = [float(r[col["tps"]]) / ideal[r[col["round"]]] for r in runs
                      if r[col["round"]] in ideal and ideal[r[col["round"]]] > 0]
            if ratios:
                ratio = f"{statistics.median(ratios):.3f}"
        def m(name, fmt):
            return fmt.format(statistics.median(float(r[col[name]]) for r in runs))
        other = max(float(r[col["other_cores"]]) for r in runs)
        flag = " (!)" if other > 0.15 else ""
        lines.append(f"| {config} | {engine} | {threads} | {med:,.0f} | {len(runs)} | {speedup} | "
                     f"{ratio} | {m('flushes', '{:.2f}')} | {m('fences', '{:.3f}')} | "
                     f"{m('nvm_bytes', '{:,.0f}')} | {m('abort_pct', '{:.2f}')} | {other:.3f}{flag} |")
    note = (f"Baseline: the same engine on build `{first_build}`." if first_build
            else "Baseline: `ideal` at the same thread count.")
    text = "\n".join(lines) + "\n\n" + note + "\n"
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="target/release/zen",
                   help="the zen binary, or NAME=PATH,NAME=PATH to compare builds")
    p.add_argument("--out", default="results/scaling")
    p.add_argument("--threads", default="1,2,4,8,16")
    p.add_argument("--configs", default="ycsb-a-0.99,tpcc")
    p.add_argument("--engines", default="ideal,zen")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", default="3s")
    p.add_argument("--warmup", default="1s")
    p.add_argument("--records", type=int, default=2097152)
    p.add_argument("--zen-cache", default="8GiB", help="Met-Cache budget of zen (all data cached)")
    p.add_argument("--pool-dir", default=None)
    p.add_argument("--summarize", action="store_true", help="only re-summarise OUT/results.tsv")
    a = p.parse_args()
    if a.summarize:
        summarize(a.out)
        return
    os.makedirs(a.out, exist_ok=True)
    tsv = os.path.join(a.out, "results.tsv")
    with open(tsv, "w") as f:
        f.write("config\tengine\tthreads\tround\ttps\tabort_pct\tflushes\tfences\tnvm_bytes\tother_cores\n")
    threads = [int(t) for t in a.threads.split(",")]
    if "=" in a.bin:
        builds = [tuple(b.split("=", 1)) for b in a.bin.split(",")]
    else:
        builds = [("", a.bin)]
    for rnd in range(1, a.rounds + 1):
        for config in a.configs.split(","):
            for t in threads:
                for engine, (build, path) in [(e, b) for e in a.engines.split(",") for b in builds]:
                    cmd = [path, "bench"] + workload_args(config, t, a.records) + ENGINES[engine]
                    if engine == "zen":
                        cmd += ["--cache-size", a.zen_cache]
                    if a.pool_dir and "dram" not in ENGINES[engine]:
                        cmd += ["--pool-dir", a.pool_dir]
                    cmd += ["--threads", str(t), "--duration", a.duration, "--warmup", a.warmup,
                            "--seed", str(1000 + rnd), "--format", "json"]
                    label = f"{engine}@{build}" if build else engine
                    path = os.path.join(a.out, f"{config}-{label}-t{t}-r{rnd}.json")
                    d, other = run_one(cmd, path)
                    if d is None:
                        print(f"FAILED: {' '.join(cmd)} (see {path}.log)", flush=True)
                        continue
                    s, pc = d["summary"], d["nvm"]["per_commit"]
                    row = [config, label, t, rnd, f"{s['throughput_tps']:.0f}",
                           f"{100 * s['abort_ratio']:.3f}", f"{pc['flushes']:.3f}",
                           f"{pc['fences']:.4f}", f"{pc['bytes']:.1f}", f"{other:.3f}"]
                    with open(tsv, "a") as f:
                        f.write("\t".join(str(x) for x in row) + "\n")
                    print("\t".join(str(x) for x in row), flush=True)
    summarize(a.out)


if __name__ == "__main__":
    sys.exit(main())
