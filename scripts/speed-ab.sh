#!/usr/bin/env bash
# Side-by-side speed comparison of two `zen` binaries (issue 13, "Speed I"):
# TPC-C (4 warehouses) and single-op YCSB-A (2 M rows of 1 KiB), alternating
# A B A B, REPS repetitions, medians; docs/benchmarks.md#where-the-time-goes
# has the figures this produced.
#
#   scripts/speed-ab.sh OLD_BIN NEW_BIN     # run every configuration, then summarise
#   scripts/speed-ab.sh summarize           # only re-summarise $OUT/results.tsv
#
# Environment: OUT (default results/speed-ab), REPS (default 3), DURATION
# (default 5s), ONLY (a glob of configuration names, e.g. 'tpcc-*'), SET
# (speed or durability, below).
#
# Every run holds the gate (/tmp/zen-gate.lock) and then the exclusive side of
# the shared benchmark lock (/tmp/zen-bench.lock, `flock`), so runs of several
# people or helpers never overlap, builds wrapped in the shared side of that
# lock (as /work/bin/zbuild does) finish first and new ones wait, and records the CPU
# time that other processes used during it (from /proc/stat, in cores);
# the summary flags cells where that exceeded 0.15 cores. Do not build
# while it runs.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-results/speed-ab}
REPS=${REPS:-3}
DURATION=${DURATION:-5s}

summarize() {
  python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
from collections import defaultdict
cells = defaultdict(lambda: defaultdict(list))
order = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 6:
        continue
    name, side, rep, tps, other, allocs = f[:6]
    if name not in order:
        order.append(name)
    cells[name][side].append((float(tps), float(other), allocs))
print(f"{'configuration':22} {'A (median)':>12} {'B (median)':>12} {'B/A':>6}  {'allocs/commit B':>15}  other load")
for name in order:
    a = [x[0] for x in cells[name]["A"]]
    b = [x[0] for x in cells[name]["B"]]
    if not a or not b:
        continue
    ratios = [y / x for x, y in zip(a, b)]
    other = max(x[1] for x in cells[name]["A"] + cells[name]["B"])
    flag = "  DISCARD (> 0.15 cores)" if other > 0.15 else ""
    print(f"{name:22} {statistics.median(a):>12,.0f} {statistics.median(b):>12,.0f} "
          f"{statistics.median(ratios):>6.2f}  {cells[name]['B'][-1][2]:>15}  max {other:.3f}{flag}")
PY
}

if [ "${1:-}" = summarize ]; then summarize; exit 0; fi
if [ $# -ne 2 ]; then
  echo "usage: scripts/speed-ab.sh OLD_BIN NEW_BIN | summarize" >&2
  exit 2
fi
A=$1
B=$2
mkdir -p "$OUT"
: > "$OUT/results.tsv"

# SET=speed (default): issue 13's configurations. SET=durability: issue 15's
# cost check of dependency-closed lazy commits (the CLI's default durability),
# Zen at 2 threads on the set-ups of issue 14 (YCSB 100k rows θ 0.6 RH/WH,
# TPC-C 2 warehouses). SET=paper: issue 14's zen/ideal ratios (below).
SET=${SET:-speed}
if [ "$SET" = durability ]; then
configs=(
  "ycsb-rh-zen-2t|ycsb --engine zen --pmem fs --mix RH --records 100000 --threads 2"
  "ycsb-wh-zen-2t|ycsb --engine zen --pmem fs --mix WH --records 100000 --threads 2"
  "tpcc-2wh-zen-2t|tpcc --engine zen --pmem fs --warehouses 2 --threads 2"
)
elif [ "$SET" = paper ]; then
# SET=paper: issue 14's zen/ideal configurations (YCSB paper mode 100k rows
# θ 0.6, TPC-C 2 warehouses; zen on fs, ideal on dram), 2 threads, and 1
# thread for WH and TPC-C. The ideal engine is the same code in both binaries.
configs=()
for t in 2 1; do
  mixes="RO RH BA WH"; [ "$t" = 1 ] && mixes="WH"
  for m in $mixes; do
    configs+=("ycsb-$m-ideal-${t}t|ycsb --engine ideal --pmem dram --mix $m --records 100000 --theta 0.6 --threads $t")
    configs+=("ycsb-$m-zen-${t}t|ycsb --engine zen --pmem fs --mix $m --records 100000 --theta 0.6 --threads $t")
  done
  configs+=("tpcc-2wh-ideal-${t}t|tpcc --engine ideal --pmem dram --warehouses 2 --threads $t")
  configs+=("tpcc-2wh-zen-${t}t|tpcc --engine zen --pmem fs --warehouses 2 --threads $t")
done
else
configs=(
  "tpcc-ideal-1t|tpcc --engine ideal --pmem dram --warehouses 4 --threads 1"
  "tpcc-zen-1t|tpcc --engine zen --pmem fs --warehouses 4 --threads 1"
  "tpcc-zen-cached-1t|tpcc --engine zen --pmem fs --cache-size 4GiB --warehouses 4 --threads 1"
  "tpcc-ideal-2t|tpcc --engine ideal --pmem dram --warehouses 4 --threads 2"
  "tpcc-zen-2t|tpcc --engine zen --pmem fs --warehouses 4 --threads 2"
  "ycsbA-0.99-ideal-1t|ycsb --engine ideal --pmem dram -w a --records 2097152 --theta 0.99 --threads 1"
  "ycsbA-0.99-zen-1t|ycsb --engine zen --pmem fs -w a --records 2097152 --theta 0.99 --threads 1"
  "ycsbA-0-ideal-1t|ycsb --engine ideal --pmem dram -w a --records 2097152 --theta 0 --threads 1"
  "ycsbA-0-zen-1t|ycsb --engine zen --pmem fs -w a --records 2097152 --theta 0 --threads 1"
  "ycsbA-0.99-ideal-2t|ycsb --engine ideal --pmem dram -w a --records 2097152 --theta 0.99 --threads 2"
  "ycsbA-0.99-zen-2t|ycsb --engine zen --pmem fs -w a --records 2097152 --theta 0.99 --threads 2"
)
fi

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

run_one() { # side binary args...
  local side=$1 bin=$2; shift 2
  local log
  log=$(mktemp)
  exec 8>/tmp/zen-gate.lock
  flock 8
  exec 9>/tmp/zen-bench.lock
  flock 9
  local t0 s0 t1 s1 self
  t0=$(busy); s0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$log.time" "$bin" bench "$@" --duration "$DURATION" > "$log" 2>&1
  t1=$(busy); s1=$(date +%s.%N)
  flock -u 9
  flock -u 8
  self=$(awk '{print $1+$2}' "$log.time")
  python3 -c "import os; hz=os.sysconf('SC_CLK_TCK'); print(round((($t1-$t0)/hz-$self)/($s1-$s0),3))" > "$log.other"
  local tps allocs
  tps=$(awk '/^throughput/{gsub(",","",$2); print $2}' "$log")
  allocs=$(awk '/^heap allocations/{print $3}' "$log")
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$name" "$side" "$rep" "${tps:-0}" "$(cat "$log.other")" "${allocs:-na}" >> "$OUT/results.tsv"
  cp "$log" "$OUT/$name.$side.$rep.txt"
  rm -f "$log" "$log.time" "$log.other"
}

for c in "${configs[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  if [ -n "${ONLY:-}" ] && [[ $name != $ONLY ]]; then continue; fi
  for rep in $(seq 1 "$REPS"); do
    # shellcheck disable=SC2086
    run_one A "$A" $args --seed $((1000 + rep))
    # shellcheck disable=SC2086
    run_one B "$B" $args --seed $((1000 + rep))
  done
done
summarize
