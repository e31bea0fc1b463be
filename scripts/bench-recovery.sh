#!/usr/bin/env bash
# Recovery time after a crash (the paper's Zen+ Fig. 22; docs/results-recovery.md, "Recovery
# after a crash"): for zen, mmdb and wbl, load YCSB, run the same number of transactions,
# crash at the end (no clean shutdown), then time `zen recover`.
#
# Why a script and not a figure file: every other sweep of the former
# scripts/bench-engines.sh is a figure file now (`zen reproduce zenplus-fig08,zenplus-fig19,
# zenplus-fig20,study-engines-scrambled,study-engines-ideal-tpcc`), but a recovery point is
# three commands on one pool (load, run ending in a crash, recover) and `zen reproduce` runs
# `zen bench` matrices only (figures/zenplus-fig22.toml says so in its `blocked`).
#
#   scripts/bench-recovery.sh            # build, run, summarise
#   scripts/bench-recovery.sh summarize  # only re-summarise $OUT
#
# Environment:
#   ZEN       binary (default: a copy of target/release/zen in /tmp/zen-bench-recovery,
#             so that a rebuild during the sweep cannot swap it)
#   OUT       result directory (default results/recovery)
#   REPS      repetitions per engine (default 2; the table shows the median)
#   RECORDS   YCSB rows (default 100000); THREADS (default 2)
#   RECOVERY_TXNS  transactions run before the crash (default 200000)
set -u
cd "$(dirname "$0")/.."

OUT=${OUT:-results/recovery}
REPS=${REPS:-2}
RECORDS=${RECORDS:-100000}
THREADS=${THREADS:-2}
RECOVERY_TXNS=${RECOVERY_TXNS:-200000}
SEED_BASE=${SEED_BASE:-20261123}

summarize() {
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rec = {}
for e in ["zen", "mmdb", "wbl"]:
    ms = []
    for d in sorted(glob.glob(os.path.join(out, e, "rep*"))):
        try:
            r = json.load(open(os.path.join(d, "recover.json")))["recovery"]
            ms.append((r["total_ms"], r.get("tuples_recovered"), r.get("bytes_scanned")))
        except Exception:
            pass
    if ms:
        rec[e] = ms
print("| engine | recovery ms (median) | tuples | bytes scanned |")
print("| --- | --- | --- | --- |")
for e, ms in rec.items():
    m = statistics.median([x[0] for x in ms])
    print(f"| {e} | {m:.1f} | {ms[0][1]} | {ms[0][2]} |")
PY
}

if [ "${1:-}" = summarize ]; then
  summarize
  exit 0
fi

if [ -z "${ZEN:-}" ]; then
  cargo build --release --quiet || exit 1
  mkdir -p /tmp/zen-bench-recovery
  cp target/release/zen /tmp/zen-bench-recovery/zen
  ZEN=/tmp/zen-bench-recovery/zen
fi
mkdir -p "$OUT"
{
  date -u
  nproc
  git rev-parse HEAD
  sha256sum "$ZEN"
} >"$OUT/machine.txt"

for rep in $(seq 1 "$REPS"); do
  seed=$((SEED_BASE + rep))
  for e in zen mmdb wbl; do
    dir="$OUT/$e/rep$rep"
    mkdir -p "$dir"
    pool=$(mktemp -u /dev/shm/zen-recovery.XXXXXX)
    echo "rep $rep recovery $e" >&2
    {
      "$ZEN" load ycsb --engine "$e" --pool "$pool" --records "$RECORDS" --threads "$THREADS" &&
        "$ZEN" run --engine "$e" --pool "$pool" -w a --txns "$RECOVERY_TXNS" --threads "$THREADS" \
          --seed "$seed" --crash-at-end --format json >"$dir/run.json" &&
        "$ZEN" recover --engine "$e" --pool "$pool" --format json >"$dir/recover.json"
    } 2>"$dir/stderr.txt"
    echo $? >"$dir/rc"
    rm -f "$pool"
  done
done
summarize
