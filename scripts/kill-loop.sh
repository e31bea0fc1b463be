#!/usr/bin/env bash
# Process-kill loop (VERIFICATION.md §2): start `zen run --expected-state` on
# an fs pool in /dev/shm, SIGKILL it at a random moment, recover and check
# with `zen check --expected-state`, repeat. Stops at the first failed check
# and keeps the pool, the expected-state file and the logs for inspection.
#
#   scripts/kill-loop.sh [CYCLES] [WORKLOAD] [CC]
#   CYCLES   kills to run (default 100; VERIFICATION.md's long tier is 1000)
#   WORKLOAD smallbank (default) or ycsb; tpcc grows its tables on every
#            run and eventually fills the pool, so it suits short loops only
#   CC       concurrency-control protocol (default silo; see `zen list cc`)
#
# Environment: THREADS (default 4), MAX_MS (longest run before the kill,
# default 3000), SEED (default: random, printed), DIR (default: a new
# directory under /dev/shm or $TMPDIR), ZEN (the zen binary; default: build
# target/release/zen).
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLES=${1:-100}
WORKLOAD=${2:-smallbank}
CC=${3:-silo}
THREADS=${THREADS:-4}
MAX_MS=${MAX_MS:-3000}
SEED=${SEED:-$RANDOM$RANDOM}
if [[ -z "${ZEN:-}" ]]; then
  cargo build --release --bin zen >&2
  ZEN=target/release/zen
fi
base=/dev/shm
[[ -d $base ]] || base=${TMPDIR:-/tmp}
DIR=${DIR:-$(mktemp -d "$base/zen-kill-loop.XXXXXX")}
POOL=$DIR/kill.pool
EXPECTED=$DIR/kill.expected
echo "kill loop: $CYCLES cycles of $WORKLOAD on --cc $CC, $THREADS threads, seed $SEED, in $DIR" >&2

case $WORKLOAD in
  smallbank) params=(--accounts 10000) ;;
  ycsb) params=(--records 20000) ;;
  tpcc) params=(--warehouses "$THREADS" --items 1000 --customers 100 --orders 100) ;;
  *) echo "unknown workload $WORKLOAD" >&2; exit 2 ;;
esac
"$ZEN" load "$WORKLOAD" --pool "$POOL" --cc "$CC" --threads 2 --pool-size 1GiB --cache-size 64MiB "${params[@]}" \
  >"$DIR/load.log" 2>&1

RANDOM=$SEED
start=$(date +%s)
for ((i = 1; i <= CYCLES; i++)); do
  "$ZEN" run --pool "$POOL" --cc "$CC" --expected-state "$EXPECTED" --threads "$THREADS" \
    --duration 1h --warmup 0s --seed "$RANDOM" --cache-size 64MiB >"$DIR/run.log" 2>&1 &
  pid=$!
  ms=$(( (RANDOM * 32768 + RANDOM) % MAX_MS + 50 ))
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "cycle $i: zen run ended before the kill; see $DIR/run.log" >&2
    cat "$DIR/run.log" >&2
    exit 1
  fi
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  if ! "$ZEN" check --pool "$POOL" --cc "$CC" --expected-state "$EXPECTED" >"$DIR/check.log" 2>&1; then
    echo "cycle $i: CHECK FAILED after a kill at ${ms} ms (seed $SEED); pool and logs kept in $DIR" >&2
    cat "$DIR/check.log" >&2
    exit 1
  fi
  acked=$(grep -o '[0-9]* acknowledged transactions' "$DIR/check.log" | cut -d' ' -f1)
  echo "cycle $i/$CYCLES: killed at ${ms} ms, check passed ($acked acknowledged transactions present)"
done
echo "kill loop: $CYCLES kills, every check passed in $(( $(date +%s) - start )) s (seed $SEED)"
rm -rf "$DIR"
