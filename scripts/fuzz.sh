#!/usr/bin/env bash
# Run the cargo-fuzz targets of fuzz/ for a given time each (VERIFICATION.md §4).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   header_decode, pool_open, recovery (default: all three)
#
# Installs what is missing first: the nightly toolchain (libFuzzer needs
# -Zsanitizer) and cargo-fuzz. Each target keeps its corpus in
# fuzz/corpus/<target>/ between runs; a crash stops the script with a
# non-zero exit, and its reproducer is in fuzz/artifacts/<target>/ (replay
# with `cargo +nightly fuzz run <target> <file>`). Prints each target's
# executions and coverage.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(header_decode pool_open recovery)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

cargo +nightly fuzz build
summary=()
for target in "${TARGETS[@]}"; do
  log=$(mktemp)
  echo "== fuzzing $target for ${SECONDS_PER_TARGET} s" >&2
  if ! cargo +nightly fuzz run "$target" -- -max_total_time="$SECONDS_PER_TARGET" \
    -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $target found a crash; reproducer in fuzz/artifacts/$target/" >&2
    exit 1
  fi
  done_line=$(grep -E '^#[0-9]+\s+DONE' "$log" | tail -1)
  summary+=("$target: $done_line")
  rm -f "$log"
done
printf '%s\n' "${summary[@]}"
