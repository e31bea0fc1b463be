#!/usr/bin/env bash
# Issue 16: the engine comparison under the NVM device model, and the emulation
# overhead of an idle device. One cell (four engines, ~75 s on the 2-core guest)
# and one repetition per call, so that each zbench call stays under 3 min (a
# three-cell part, share-a or share-b, took 3 min 38 s); repetitions alternate
# across calls:
#   for cell in s16-P4-WH s16-P4-BA s16-P16-WH s16-P16-BA s4-P4-BA s32-P4-BA; do
#     for rep in 1 2 3; do
#       /work/bin/zbench scripts/nvm-model-bench.sh target/release/zen results/nvm-model $cell $rep
#   done; done
#   /work/bin/zbench scripts/nvm-model-bench.sh target/release/zen results/nvm-model overhead 1
# Then `python3 scripts/nvm-model-bench.py results/nvm-model` prints the tables of
# docs/results-nvm-model.md: medians over the repetitions.
set -u
Z=${1:-target/release/zen}
OUT=${2:-results/nvm-model}
PART=${3:-share-a}
REP=${4:-1}
mkdir -p "$OUT"
common="--records 100000 --threads 2 --duration 2s --warmup 1s --seed 20261126 --format json"
run() {
    local name=$1; shift
    "$Z" bench ycsb "$@" $common > "$OUT/$name.json" 2> "$OUT/$name.err"
    echo "$name rc=$?"
}
# One cell: the four engines back to back (zen, mmdb, wbl, falcon).
cell() {
    local name=$1; shift
    for e in zen mmdb wbl falcon; do
        run "$name-$e-r$REP" --engine $e --pmem emu --nvm-profile optane "$@"
    done
}
case $PART in
    # Fig. 5 (P = 4) and Fig. 6 (P = 16) analogs: the paper's 16 threads as a share model.
    s16-P4-WH) cell s16-P4-WH --nvm-share 16 --mix WH --theta 0.6 --dram-ratio 4 ;;
    s16-P4-BA) cell s16-P4-BA --nvm-share 16 --mix BA --theta 0.99 --dram-ratio 4 ;;
    s16-P16-WH) cell s16-P16-WH --nvm-share 16 --mix WH --theta 0.6 --dram-ratio 16 ;;
    s16-P16-BA) cell s16-P16-BA --nvm-share 16 --mix BA --theta 0.99 --dram-ratio 16 ;;
    # Fig. 8 analog: BA θ 0.99, P = 4, the share of 4 and of 32 threads.
    s4-P4-BA) cell s4-P4-BA --nvm-share 4 --mix BA --theta 0.99 --dram-ratio 4 ;;
    s32-P4-BA) cell s32-P4-BA --nvm-share 32 --mix BA --theta 0.99 --dram-ratio 4 ;;
    # The cells above three at a time (longer than one zbench call may take here).
    share-a)
        cell s16-P4-WH --nvm-share 16 --mix WH --theta 0.6 --dram-ratio 4
        cell s16-P4-BA --nvm-share 16 --mix BA --theta 0.99 --dram-ratio 4
        cell s16-P16-WH --nvm-share 16 --mix WH --theta 0.6 --dram-ratio 16
        ;;
    # Fig. 6 BA, and the Fig. 8 analog: BA θ 0.99, P = 4, the share of 4 and of 32 threads.
    share-b)
        cell s16-P16-BA --nvm-share 16 --mix BA --theta 0.99 --dram-ratio 16
        cell s4-P4-BA --nvm-share 4 --mix BA --theta 0.99 --dram-ratio 4
        cell s32-P4-BA --nvm-share 32 --mix BA --theta 0.99 --dram-ratio 4
        ;;
    # Overhead of an idle device: fs, emu-dram alternated, five each (REP numbers the set).
    overhead)
        for i in 1 2 3 4 5; do
            run "ovh-fs-r$REP-$i" --pmem fs --mix WH --theta 0.6 --dram-ratio 4
            run "ovh-emudram-r$REP-$i" --pmem emu --nvm-profile dram --mix WH --theta 0.6 --dram-ratio 4
        done
        ;;
    *)
        echo "unknown part $PART: a cell (s16-P4-WH, s16-P4-BA, s16-P16-WH, s16-P16-BA, s4-P4-BA, s32-P4-BA), share-a, share-b or overhead" >&2
        exit 2
        ;;
esac
