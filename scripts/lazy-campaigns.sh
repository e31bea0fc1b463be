#!/usr/bin/env bash
# Longer lazy crash campaigns (issue 15 targets): 4 threads, every workload,
# zen (silo, mvcc), mmdb and wbl; one line per campaign (rc, commits, crash
# points, images, nested recoveries, failures). Build first: cargo build --release.
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-target/release/zen}
for w in bank list-append ycsb smallbank tpcc; do
  for e in zen:silo zen:mvcc mmdb: wbl:; do
    eng=${e%%:*}; cc=${e#*:}
    for m in strict paranoid eadr; do
      args=(crash-test "$w" --engine "$eng" --mode "$m" --durability lazy --threads 4 --txns 20 --crash-points 60 --images-per-point 8 --seed 1001)
      [ -n "$cc" ] && args+=(--cc "$cc")
      out=$(timeout 300 "$BIN" "${args[@]}" 2>&1); rc=$?
      pts=$(echo "$out" | awk '/^  crash points/{print $3}')
      imgs=$(echo "$out" | awk '/^  images/{print $2}')
      nest=$(echo "$out" | awk '/nested recoveries/{print $3}')
      commits=$(echo "$out" | awk '/recorded run/{print $5}')
      fails=$(echo "$out" | awk '/^  failures/{print $2}')
      echo -e "$w\t$eng${cc:+/$cc}\t$m\trc=$rc\tcommits=$commits\tpoints=$pts\timages=$imgs\tnested=$nest\tfailures=$fails"
    done
  done
done
