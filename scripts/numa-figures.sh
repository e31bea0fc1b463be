#!/usr/bin/env bash
# Zen+ NUMA figures on 2 virtual nodes (docs/design/numa.md, "Measuring"):
# Fig. 27/28 (YCSB: local, remote, naive, local-write, soft-partition),
# Fig. 30 (group vs even binding), Fig. 31 (TPC-C partitioned by warehouse).
# Configurations of one figure run interleaved, REPEAT times, so machine
# noise hits them alike; compare ratios within one run of this script.
# Usage: scripts/numa-figures.sh OUT_DIR [REPEAT] [DURATION]
set -euo pipefail
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
