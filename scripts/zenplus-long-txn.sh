#!/usr/bin/env bash
# Zen+ long-running transactions at the scale of a 2-core machine: the
# analogs of the paper's Fig. 24 (read-only long scans), Fig. 25 (long
# updates, with the exclusive stage visible in the time series) and Fig. 26
# (the slowdown matrix). Every number is a ratio to a baseline measured in
# the same run of this script, with the same seed.
#
#   scripts/zenplus-long-txn.sh            # all three
#   ONLY="fig24" scripts/zenplus-long-txn.sh
#
# Environment: OUT (default results/zenplus), RECORDS (100000), CACHE
# (16MiB: 4 workers' regions of 4 MiB, about 3,900 tuples of 1 KB each),
# DURATION (4s), REPS (2), SEED (20261123), ONLY ("fig24 fig25 fig26").
set -u
cd "$(dirname "$0")/.."

OUT=${OUT:-results/zenplus}
RECORDS=${RECORDS:-100000}
CACHE=${CACHE:-16MiB}
DURATION=${DURATION:-4s}
REPS=${REPS:-2}
SEED=${SEED:-20261123}
ONLY=${ONLY:-"fig24 fig25 fig26"}
# One Met-Cache region = CACHE / (threads + 2) = 4 MiB ≈ 3,900 entries of
# 1,072 bytes (72-byte header + 1,000-byte row).
REGION=${REGION:-3900}

mkdir -p /tmp/zen-bench-wt8 "$OUT"
cargo build --release -q || exit 1
ZEN=/tmp/zen-bench-wt8/zen
cp target/release/zen "$ZEN"

run() { # run <dir> <args...>: one bench, its summary and time series in <dir>
    local dir=$1
    shift
    mkdir -p "$dir"
    echo "$ZEN bench ycsb $*" >"$dir/cmd"
    "$ZEN" bench ycsb --engine zen --cc mvcc --pmem dram --threads 2 --records "$RECORDS" \
        --cache-size "$CACHE" --seed "$SEED" --warmup 1s --duration "$DURATION" \
        --interval 200ms --format json --out "$dir" "$@" >"$dir/stdout.json" 2>"$dir/stderr.txt"
    echo $? >"$dir/rc"
}

normal_tps() { # committed normal (not long) transactions per second
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
t = j["per_txn_type"]
print(sum(v["throughput_tps"] for k, v in t.items() if not k.startswith("long")))
' "$1/stdout.json"
}

if [[ " $ONLY " == *" fig24 "* ]]; then
    for r in $(seq 1 "$REPS"); do
        for cell in base scan2 scan8; do
            case $cell in
            base) extra=() ;;
            scan2) extra=(--long-txn scan --long-txn-tuples $((2 * REGION)) --long-txn-every 2000) ;;
            scan8) extra=(--long-txn scan --long-txn-tuples $((8 * REGION)) --long-txn-every 2000) ;;
            esac
            run "$OUT/fig24/$cell/rep$r" --mix BA --theta 0.6 "${extra[@]}"
        done
    done
fi

if [[ " $ONLY " == *" fig25 "* ]]; then
    # The paper's 2 GB and 8 GB updates are 0.5x and 2x its 4 GB region: the
    # first runs normally, the second passes alpha (exclusive stage).
    for cell in base update05 update2; do
        case $cell in
        base) extra=() ;;
        update05) extra=(--long-txn update --long-txn-tuples $((REGION / 2)) --long-txn-every 2000) ;;
        update2) extra=(--long-txn update --long-txn-tuples $((2 * REGION)) --long-txn-every 2000) ;;
        esac
        DURATION=8s run "$OUT/fig25/$cell" --mix BA --theta 0.6 "${extra[@]}"
    done
fi

if [[ " $ONLY " == *" fig26 "* ]]; then
    for mix in RH BA WH; do
        for theta in 0.6 0.99; do
            # The paper's scan 2 GB / scan 8 GB / update 2 GB = 0.5x / 2x / 0.5x
            # its region; here scans of 2x and 8x the region (the brief's
            # sizes) and an update of 0.5x (normal execution, as the paper's).
            for cell in base scan2 scan8 update05; do
                case $cell in
                base) extra=() ;;
                scan2) extra=(--long-txn scan --long-txn-tuples $((2 * REGION)) --long-txn-every 1) ;;
                scan8) extra=(--long-txn scan --long-txn-tuples $((8 * REGION)) --long-txn-every 1) ;;
                update05) extra=(--long-txn update --long-txn-tuples $((REGION / 2)) --long-txn-every 1) ;;
                esac
                run "$OUT/fig26/$mix-$theta/$cell" --mix "$mix" --theta "$theta" "${extra[@]}"
            done
        done
    done
fi

python3 - "$OUT" <<'PY'
import json, glob, os, sys, statistics
out = sys.argv[1]

def load(d):
    try:
        if int(open(os.path.join(d, "rc")).read()) != 0:
            return None
        return json.load(open(os.path.join(d, "stdout.json")))
    except Exception:
        return None

def normal(j):
    return sum(v["throughput_tps"] for k, v in j["per_txn_type"].items() if not k.startswith("long"))

def longs(j):
    return {k: v["commits"] for k, v in j["per_txn_type"].items() if k.startswith("long")}

def median_cell(pattern):
    runs = [j for j in (load(d) for d in sorted(glob.glob(pattern))) if j]
    return runs

if os.path.isdir(os.path.join(out, "fig24")):
    print("## Fig. 24 analog: read-only long scans beside short transactions (BA, θ 0.6)")
    base = median_cell(os.path.join(out, "fig24/base/rep*"))
    b = statistics.median(normal(j) for j in base) if base else None
    for cell in ["base", "scan2", "scan8"]:
        runs = median_cell(os.path.join(out, f"fig24/{cell}/rep*"))
        if not runs or not b:
            print(f"{cell}: failed"); continue
        n = statistics.median(normal(j) for j in runs)
        tot = statistics.median(j["summary"]["throughput_tps"] for j in runs)
        a = runs[-1].get("adaptive", {})
        print(f"{cell:8} normal {n:10.0f} txn/s  ratio {n / b:5.3f}  total {tot:10.0f}  long commits {longs(runs[-1])}  stages {a.get('stage_switches')}  snapshots {a.get('snapshot_txns')}  nvm direct reads {a.get('nvm_direct_reads')}")

if os.path.isdir(os.path.join(out, "fig25")):
    print("## Fig. 25 analog: long updates (BA, θ 0.6); time series in */timeseries.csv")
    for cell in ["base", "update05", "update2"]:
        j = load(os.path.join(out, "fig25", cell))
        if not j:
            print(f"{cell}: failed"); continue
        a = j.get("adaptive", {})
        print(f"{cell:8} normal {normal(j):10.0f} txn/s  long commits {longs(j)}  stages {a.get('stage_switches')} (α {a.get('privileged_alpha')} β {a.get('privileged_beta')} γ {a.get('privileged_gamma')})  exclusive {a.get('exclusive_us', 0) / 1000:.0f} ms  direct writes {a.get('nvm_direct_writes')}")
        series = glob.glob(os.path.join(out, "fig25", cell, "*.timeseries.csv"))
        if series and cell != "base":
            import csv
            rows = list(csv.DictReader(open(series[0])))
            line = " ".join(
                f"{float(r['elapsed_s']):.1f}s:{float(r['throughput_tps']):.0f}{'*' if r['exclusive_now'] == 'true' or int(r['stage_switches']) > 0 else ''}"
                for r in rows)
            print(f"         series (txn/s, * = exclusive stage in the interval): {line}")

if os.path.isdir(os.path.join(out, "fig26")):
    print("## Fig. 26 analog: slowdown of normal throughput vs. no long transaction")
    print(f"{'mix-θ':10} {'base txn/s':>11} {'scan 2x':>8} {'scan 8x':>8} {'upd .5x':>8}")
    for d in sorted(glob.glob(os.path.join(out, "fig26", "*"))):
        cells = {c: load(os.path.join(d, c)) for c in ["base", "scan2", "scan8", "update05"]}
        if not cells["base"]:
            continue
        b = normal(cells["base"])
        parts = [f"{(1 - normal(j) / b) * 100:7.1f}%" if j else "  failed" for c, j in cells.items() if c != "base"]
        print(f"{os.path.basename(d):10} {b:11.0f} " + " ".join(parts))
PY
