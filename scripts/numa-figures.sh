#!/usr/bin/env bash
# Zen+ NUMA figures on 2 virtual nodes (docs/design/numa.md, "Measuring"):
# Fig. 27/28 (YCSB: local, remote, naive, local-write, soft-partition),
# Fig. 30 (group vs even binding), Fig. 31 (TPC-C partitioned by warehouse).
# Configurations of one figure run interleaved, REPEAT times, so machine
# noise hits them alike; compare ratios within one run of this script.
# Usage: scripts/numa-figures.sh OUT_DIR [REPEAT] [DURATION]
#        scripts/numa-figures.sh summarize OUT_DIR   (tables of a finished run)
set -euo pipefail
if [ "${1:-}" = summarize ]; then
  exec python3 - "${2:?usage: scripts/numa-figures.sh summarize OUT_DIR}" <<'PY'
import collections, json, os, sys
out = sys.argv[1]
runs = collections.defaultdict(list)  # config -> [(tps, numa measured)]
for name in sorted(os.listdir(out)):
    if not name.endswith(".json"):
        continue
    config = name.rsplit(".", 2)[0]
    try:
        with open(os.path.join(out, name)) as f:
            d = json.load(f)
    except ValueError:
        print(f"skipping {name}: not a finished run", file=sys.stderr)
        continue
    runs[config].append((d["summary"]["throughput_tps"], d["numa"]))
def mean(xs):
    return sum(xs) / len(xs)
def share(numa):
    return 100 * numa["remote_fraction"], 100 * numa["remote_read_fraction"], 100 * numa["remote_write_fraction"]
groups = collections.OrderedDict()
for config in runs:
    fig, rest = config.split(".", 1)
    cell, _, variant = rest.rpartition(".")
    groups.setdefault((fig, cell), []).append(variant)
for (fig, cell), variants in groups.items():
    base = f"{fig}.{cell}"
    ref = runs.get(f"{base}.remote") or runs.get(f"{base}.even") or runs[f"{base}.{variants[0]}"]
    ref_tps = mean([t for t, _ in ref])
    print(f"{fig} {cell}")
    for v in variants:
        rs = runs[f"{base}.{v}"]
        tps = mean([t for t, _ in rs])
        total, reads, writes = (mean(x) for x in zip(*(share(n) for _, n in rs)))
        print(f"  {v:15s} {tps:10.0f} txn/s  {tps / ref_tps:5.2f}x  remote {total:5.1f} % (reads {reads:5.1f} %, writes {writes:5.1f} %)")
PY
fi
out=${1:?usage: scripts/numa-figures.sh OUT_DIR [REPEAT] [DURATION]}
repeat=${2:-2}
duration=${3:-3s}
penalty=${PENALTY_NS:-300}
mkdir -p "$out"
[ -x target/release/zen ] || cargo build --release --quiet
zen=target/release/zen
common=(--pmem dram --numa-nodes 2 --remote-penalty-ns "$penalty" --duration "$duration" --warmup 1s --seed 42 --format json)
run() { # name args...
  local name=$1; shift
  "$zen" bench "$@" "${common[@]}" 2>/dev/null >"$out/$name.$r.json"
}
for r in $(seq 1 "$repeat"); do
  for mix in RH WH; do
    for theta in 0.6 0.99; do
      for mode in local remote naive local-write soft-partition; do
        run "fig27.ycsb-$mix-$theta.$mode" ycsb --threads 2 --mix "$mix" --theta "$theta" --numa-mode "$mode"
      done
    done
  done
  for threads in 2 4; do
    for binding in group even; do
      run "fig30.t$threads.$binding" ycsb --threads "$threads" --mix WH --theta 0.99 \
        --numa-binding "$binding" --numa-node-cpus "$threads"
    done
  done
  for mode in local remote naive local-write soft-partition; do
    run "fig31.tpcc.$mode" tpcc --threads 2 --warehouses 4 --numa-mode "$mode"
  done
done
