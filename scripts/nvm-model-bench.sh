#!/usr/bin/env bash
# Issue 16: the engine comparison under the NVM device model, and the emulation
# overhead of an idle device. Run under zbench with a built binary:
#   /work/bin/zbench scripts/nvm-model-bench.sh [ZEN] [OUT]
# Then `python3 scripts/nvm-model-bench.py OUT` prints the tables of
# docs/results-engines.md ("With the device model").
set -u
Z=${1:-target/release/zen}
OUT=${2:-results/nvm-model}
mkdir -p "$OUT"
common="--records 100000 --threads 2 --duration 3s --warmup 1s --seed 20261126 --format json"
run() {
    name=$1; shift
    "$Z" bench ycsb "$@" $common > "$OUT/$name.json" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
# Overhead of an idle device: A B A B A B, zen, YCSB WH θ 0.6, P = 4.
for rep in 1 2 3; do
    run ovh-fs-$rep --pmem fs --mix WH --theta 0.6 --dram-ratio 4
    run ovh-emudram-$rep --pmem emu --nvm-profile dram --mix WH --theta 0.6 --dram-ratio 4
done
# Fig. 5 (P = 4) and Fig. 6 (P = 16) analogs: the paper's 16 threads as a share model.
for P in 4 16; do
    for cell in "WH 0.6" "BA 0.99"; do
        set -- $cell
        for e in zen mmdb wbl; do
            run share16-$e-P$P-$1-$2 --engine $e --pmem emu --nvm-profile optane \
                --nvm-share 16 --mix $1 --theta $2 --dram-ratio $P
        done
    done
done
# The device as it is (two writers), and the Fig. 8 analog: BA θ 0.99, P = 4, 4 and 32 threads' share.
for e in zen mmdb wbl; do
    run noshare-$e-P4-WH-0.6 --engine $e --pmem emu --nvm-profile optane --mix WH --theta 0.6 --dram-ratio 4
    for s in 4 32; do
        run share$s-$e-P4-BA-0.99 --engine $e --pmem emu --nvm-profile optane --nvm-share $s \
            --mix BA --theta 0.99 --dram-ratio 4
    done
done
