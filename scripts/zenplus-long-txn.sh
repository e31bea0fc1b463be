#!/usr/bin/env bash
# Zen+ long-running transactions at the scale of a 2-core machine: the
# analog of the paper's Fig. 26 (the slowdown matrix: RH / BA / WH x
# theta 0.6 / 0.99, scans of 2x and 8x a Met-Cache region, an update of 0.5x,
# back to back on --pmem dram). Every number is a ratio to a baseline
# measured in the same run of this script, with the same seed.
#
# Fig. 24 and 25 (throughput over time while long scans / updates run) are
# figure files now, run and drawn by `zen reproduce zenplus-fig24` and
# `zen reproduce zenplus-fig25` (figures/README.md, "Time-series figures");
# this script's former parts for them are in git history. Fig. 26 is also
# the figure file zenplus-fig26, but with other sizes (2 % / 8 % of the rows
# on emulated NVM); this script is what still runs the region-relative
# matrix of docs/results-long-txn.md.
#
#   scripts/zenplus-long-txn.sh
#
# Environment: OUT (default results/zenplus), RECORDS (100000), CACHE
# (16MiB: 4 workers' regions of 4 MiB, about 3,900 tuples of 1 KB each),
# DURATION (4s), SEED (20261123).
set -u
cd "$(dirname "$0")/.."

OUT=${OUT:-results/zenplus}
RECORDS=${RECORDS:-100000}
CACHE=${CACHE:-16MiB}
DURATION=${DURATION:-4s}
SEED=${SEED:-20261123}
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

python3 - "$OUT" <<'PY'
import json, glob, os, sys
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
