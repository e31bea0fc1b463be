#!/usr/bin/env bash
# Reproduces the engine comparison of issue 7 (docs/results-engines.md): zen
# against the mmdb and wbl baselines, and against ideal, on emulated Optane.
#
#   scripts/bench-engines.sh            # build, run every sweep, summarise
#   scripts/bench-engines.sh summarize  # only re-summarise $OUT
#
# Environment:
#   ZEN       binary (default: a copy of target/release/zen in /tmp/zen-bench7,
#             so that a rebuild during the sweep cannot swap it)
#   OUT       result directory (default results/engines)
#   REPS      repetitions per cell (default 2; tables show the median)
#   DURATION  measured time per run (default 3s); WARMUP (default 1s)
#   RECORDS   YCSB rows (default 100000); THREADS (default 2)
#   RECOVERY_TXNS  transactions run before the crash of the recovery sweep
#             (default 200000)
#   ONLY      sweeps to run (default "ycsb scrambled tpcc ideal recovery")
#   POOL_SIZE pool of every bench run (default 8GiB; a pool reserves its
#             whole size when it is created (fallocate, issue 20), so on
#             /dev/shm it holds 8 GiB of memory while a run lasts and its
#             file system must have that much free. mmdb's log grows by
#             ~0.6 GB/s on write-heavy mixes; with a pool this large it never
#             reaches the log-pressure checkpoint (a quarter of the pool
#             free), so throughput runs have no checkpoints, as in the paper)
#
# Every configuration of one repetition sees the same seed; repetitions are
# the outer loop, and the engines of one cell run back to back, so a drift in
# the machine's load spreads over all engines instead of landing on one.
set -u
cd "$(dirname "$0")/.."

OUT=${OUT:-results/engines}
REPS=${REPS:-2}
DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-1s}
RECORDS=${RECORDS:-100000}
THREADS=${THREADS:-2}
RECOVERY_TXNS=${RECOVERY_TXNS:-200000}
SEED_BASE=${SEED_BASE:-20261123}
ONLY=${ONLY:-"ycsb scrambled tpcc ideal recovery"}
POOL_SIZE=${POOL_SIZE:-8GiB}
EMU=(--pmem emu --nvm-profile optane --dram-ratio 4 --pool-size "$POOL_SIZE")

summarize() {
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]

def reps(path):
    """Summary JSONs of the successful repetitions of one cell."""
    found = []
    for d in sorted(glob.glob(os.path.join(out, path, "rep*"))):
        try:
            if int(open(os.path.join(d, "rc")).read()) == 0:
                found.append(json.load(open(os.path.join(d, "stdout.json"))))
        except Exception:
            pass
    return found

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def fig(js):
    if not js:
        return None
    pc = lambda k: med([j["nvm"]["per_commit"][k] for j in js])
    return {
        "tps": med([j["summary"]["throughput_tps"] for j in js]),
        "aborts": med([j["summary"]["abort_ratio"] for j in js]),
        "bytes": pc("bytes"), "read": pc("bytes_read"),
        "flushes": pc("flushes"), "fences": pc("fences"),
        "hit": med([j["cache"]["hit_ratio"] for j in js]),
        "stall": med([j["nvm"]["stall_ns"] / max(1, j["summary"]["commits"]) / 1000 for j in js]),
        "n": len(js),
    }

def k(v):
    return "–" if v is None else f"{v/1000:.1f}k"

def ratio(a, b):
    return "–" if not a or not b else f"{a/b:.2f}×"

def ycsb_table(sweep, title):
    rows = []
    for mix in ["RO", "RH", "BA", "WH"]:
        for theta in ["0", "0.6", "0.95"]:
            f = {e: fig(reps(f"{sweep}/{mix}-theta{theta}/{e}")) for e in ["zen", "mmdb", "wbl"]}
            if not any(f.values()):
                continue
            rows.append((mix, theta, f))
    if not rows:
        return
    print(f"\n### {title}\n")
    print("| mix | θ | zen tps | mmdb tps | wbl tps | zen/mmdb | zen/wbl | hit ratio zen / mmdb / wbl |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for mix, theta, f in rows:
        t = {e: (f[e] or {}).get("tps") for e in f}
        hits = " / ".join("–" if not f[e] else f"{f[e]['hit']:.2f}" for e in f)
        print(f"| {mix} | {theta} | {k(t['zen'])} | {k(t['mmdb'])} | {k(t['wbl'])} | "
              f"{ratio(t['zen'], t['mmdb'])} | {ratio(t['zen'], t['wbl'])} | {hits} |")
    print(f"\nNVM traffic per committed transaction ({title}): bytes written / bytes read / flushes / fences / modelled NVM stall µs\n")
    print("| mix | θ | zen | mmdb | wbl |")
    print("| --- | --- | --- | --- | --- |")
    for mix, theta, f in rows:
        cell = lambda x: "–" if not x else f"{x['bytes']:.0f} / {x['read']:.0f} / {x['flushes']:.1f} / {x['fences']:.2f} / {x['stall']:.1f}"
        print(f"| {mix} | {theta} | {cell(f['zen'])} | {cell(f['mmdb'])} | {cell(f['wbl'])} |")

ycsb_table("ycsb", "YCSB paper mode (unscrambled Zipf: hot keys are the first loaded)")
ycsb_table("scrambled", "YCSB paper mode, scrambled Zipf (hot keys spread over the key space)")

engines = {e: fig(reps(f"tpcc/{e}")) for e in ["zen", "mmdb", "wbl"]}
if any(engines.values()):
    print("\n### TPC-C\n")
    print("| engine | tps | abort ratio | bytes written / read / flushes / fences / stall µs per commit | zen/engine |")
    print("| --- | --- | --- | --- | --- |")
    for e, f in engines.items():
        if f:
            print(f"| {e} | {k(f['tps'])} | {f['aborts']:.3f} | {f['bytes']:.0f} / {f['read']:.0f} / {f['flushes']:.1f} / {f['fences']:.2f} / {f['stall']:.1f} | "
                  f"{ratio(engines['zen'] and engines['zen']['tps'], f['tps'])} |")

cells = sorted({os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(out, "ideal", "*", "*"))})
if cells:
    print("\n### Zen against ideal, the data set in DRAM\n")
    print("| workload | zen tps | ideal tps | zen/ideal | zen bytes / fences per commit |")
    print("| --- | --- | --- | --- | --- |")
    for c in cells:
        z, i = fig(reps(f"ideal/{c}/zen")), fig(reps(f"ideal/{c}/ideal"))
        zb = "–" if not z else f"{z['bytes']:.0f} / {z['fences']:.2f}"
        print(f"| {c} | {k(z and z['tps'])} | {k(i and i['tps'])} | {ratio(z and z['tps'], i and i['tps'])} | {zb} |")

rec = {}
for e in ["zen", "mmdb", "wbl"]:
    ms = []
    for d in sorted(glob.glob(os.path.join(out, "recovery", e, "rep*"))):
        try:
            r = json.load(open(os.path.join(d, "recover.json")))["recovery"]
            ms.append((r["total_ms"], r.get("tuples_recovered"), r.get("bytes_scanned")))
        except Exception:
            pass
    if ms:
        rec[e] = ms
if rec:
    print("\n### Recovery after a crash\n")
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
  mkdir -p /tmp/zen-bench7
  cp target/release/zen /tmp/zen-bench7/zen
  ZEN=/tmp/zen-bench7/zen
fi
mkdir -p "$OUT"
{
  date -u
  nproc
  git rev-parse HEAD
  sha256sum "$ZEN"
} >"$OUT/machine.txt"

# cell DIR ARGS…: one `zen bench` run into DIR.
cell() {
  local dir=$1
  shift
  mkdir -p "$dir"
  echo "$ZEN $*" >"$dir/cmd"
  timeout 300 "$ZEN" "$@" --format json >"$dir/stdout.json" 2>"$dir/stderr.txt"
  echo $? >"$dir/rc"
  cut -d' ' -f1 /proc/loadavg >"$dir/load"
}

for rep in $(seq 1 "$REPS"); do
  seed=$((SEED_BASE + rep))
  common=(--threads "$THREADS" --duration "$DURATION" --warmup "$WARMUP" --seed "$seed")
  for sweep in $ONLY; do
    case $sweep in
      ycsb | scrambled)
        extra=()
        [ "$sweep" = scrambled ] && extra=(--scramble)
        for mix in RO RH BA WH; do
          for theta in 0 0.6 0.95; do
            for e in zen mmdb wbl; do
              echo "rep $rep $sweep $mix θ=$theta $e" >&2
              cell "$OUT/$sweep/$mix-theta$theta/$e/rep$rep" bench ycsb --engine "$e" "${EMU[@]}" \
                --records "$RECORDS" --mix "$mix" --theta "$theta" "${extra[@]}" "${common[@]}"
            done
          done
        done
        ;;
      tpcc)
        for e in zen mmdb wbl; do
          echo "rep $rep tpcc $e" >&2
          cell "$OUT/tpcc/$e/rep$rep" bench tpcc --engine "$e" "${EMU[@]}" --warehouses "$THREADS" "${common[@]}"
        done
        ;;
      ideal)
        # The data set in DRAM: zen's Met-Cache holds all of it (1 GiB budget),
        # ideal keeps everything in DRAM without persistence.
        for c in "ycsb RH 0.6" "ycsb WH 0.6" "tpcc"; do
          set -- $c
          name=$1${2:+-$2}${3:+-theta$3}
          args=(bench "$1")
          [ "$1" = ycsb ] && args+=(--records "$RECORDS" --mix "$2" --theta "$3")
          [ "$1" = tpcc ] && args+=(--warehouses "$THREADS")
          echo "rep $rep ideal $name" >&2
          cell "$OUT/ideal/$name/zen/rep$rep" "${args[@]}" --engine zen --pmem emu --nvm-profile optane \
            --cache-size 1GiB "${common[@]}"
          cell "$OUT/ideal/$name/ideal/rep$rep" "${args[@]}" --engine ideal --pmem dram "${common[@]}"
        done
        ;;
      recovery)
        # The same number of transactions for every engine, then a crash
        # (no clean shutdown), then `zen recover` timed by the engine itself.
        for e in zen mmdb wbl; do
          dir="$OUT/recovery/$e/rep$rep"
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
        ;;
      *)
        echo "unknown sweep $sweep" >&2
        exit 2
        ;;
    esac
  done
done
summarize
