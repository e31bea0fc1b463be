#!/usr/bin/env bash
# Reproduces every number in docs/results.md (the benchmark reports asked for
# by issue 4 and issue 6).
#
#   scripts/bench-matrix.sh            # build, run the whole matrix, summarise
#   scripts/bench-matrix.sh summarize  # only re-summarise results/matrix/
#
# Environment:
#   ZEN       binary to run (default: a copy of target/release/zen in /tmp/zen-bench,
#             so a concurrent rebuild cannot swap it in the middle of the sweep)
#   OUT       result directory (default results/matrix)
#   REPS      repetitions per cell (default 3; the tables report the median)
#   REP_FIRST first repetition to run (default 1; REP_FIRST=3 REPS=3 adds a
#             third repetition to an existing result directory)
#   DURATION  measured time per run (default 3s)
#   WARMUP    warmup per run (default 1s)
#   RECORDS   YCSB rows (default 100000)
#   TIMEOUT   seconds before a run is declared hung (default 150)
#   ONLY      run only the sweeps whose names are listed (space separated):
#             ycsb tpcc smallbank fsdram cc emu ccemu
#
# Every cell is run REPS times; repetition r uses seed SEED_BASE+r for every
# configuration, so all configurations of one repetition see the same request
# streams. Repetitions are the outer loop (rep 1 of every cell, then rep 2 …),
# so slow drifts in the machine's background load are spread over all cells
# rather than landing on one. Pairs that are compared with each other (fs vs
# dram, emu vs fs) run back to back.
#
# Layout: $OUT/<sweep>/<cell>/rep<r>/{stdout.json,stderr.txt,rc,cmd,*.summary.json,...}
set -u
cd "$(dirname "$0")/.."

OUT=${OUT:-results/matrix}
REPS=${REPS:-3}
REP_FIRST=${REP_FIRST:-1}
DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-1s}
RECORDS=${RECORDS:-100000}
TIMEOUT=${TIMEOUT:-150}
SEED_BASE=${SEED_BASE:-20261122}
ONLY=${ONLY:-"ycsb tpcc smallbank fsdram cc emu ccemu"}

summarize() {
python3 - "$OUT" <<'PY'
import json, os, sys, statistics, glob
out = sys.argv[1]

def load_reps(sweep, cell):
    """{rep name: figures} for the successful repetitions of one cell."""
    res = {}
    for d in sorted(glob.glob(os.path.join(out, sweep, cell, "rep*"))):
        try:
            rc = int(open(os.path.join(d, "rc")).read().strip())
        except Exception:
            rc = -1
        if rc != 0:
            continue
        try:
            j = json.load(open(os.path.join(d, "stdout.json")))
        except Exception:
            continue
        s, n = j["summary"], j["nvm"]
        res[os.path.basename(d)] = (dict(
            tps=s["throughput_tps"], abort=s["abort_ratio"], cc_abort=s["cc_abort_ratio"],
            p50=s["latency_us"]["p50"], p99=s["latency_us"]["p99"],
            bytes=n["per_commit"]["bytes"], flushes=n["per_commit"]["flushes"],
            fences=n["per_commit"]["fences"], hit=j["cache"]["hit_ratio"],
            stall=n.get("stall_ns", 0), commits=s["commits"], seed=j["config"]["seed"],
        ))
    return res

def load(sweep, cell):
    """Median over repetitions of the figures of one cell (None if every rep failed)."""
    reps = list(load_reps(sweep, cell).values())
    if not reps:
        return None
    m = {k: statistics.median(r[k] for r in reps) for k in reps[0] if k != "seed"}
    m["n"] = len(reps)
    m["seeds"] = ",".join(str(r["seed"]) for r in reps)
    m["tps_all"] = [r["tps"] for r in reps]
    m["abort_all"] = [r["abort"] for r in reps]
    return m

def paired(sweep, a, b, sa=None):
    """Median over repetitions of tps(a)/tps(b), pairing the runs of the same
    repetition (they ran minutes apart at most, under the same background load)."""
    ra, rb = load_reps(sa or sweep, a), load_reps(sweep, b)
    rs = [ra[k]["tps"] / rb[k]["tps"] for k in ra if k in rb]
    if not rs:
        return "n/a"
    return f"{statistics.median(rs):.2f} ({'/'.join(f'{r:.2f}' for r in rs)})"

def f_tps(x): return "FAIL" if x is None else f"{x['tps']:,.0f}"
def pct(v): return f"{100*v:.2f} %"
def row(cells): return "| " + " | ".join(str(c) for c in cells) + " |"
def hdr(cols): return row(cols) + "\n" + row(["---"] * len(cols))
def spread(m): return "/".join(f"{t:,.0f}" for t in m["tps_all"])

lines = []
P = lines.append

# ---- Issue 4: YCSB matrix
if os.path.isdir(os.path.join(out, "ycsb")):
    P("### YCSB paper mode (Zen, silo, pmem fs, cache 256 MiB)\n")
    P(hdr(["mix", "θ", "threads", "txn/s (median)", "txn/s (reps)", "abort", "p50 µs", "p99 µs",
           "fences/commit", "flushes/commit", "NVM B/commit", "hit ratio"]))
    for mix in ["RO", "RH", "BA", "WH"]:
        for th in ["0", "0.6", "0.95"]:
            for t in ["1", "2"]:
                m = load("ycsb", f"{mix}-theta{th}-t{t}")
                if m is None:
                    P(row([mix, th, t, "FAIL"] + [""] * 8)); continue
                P(row([mix, th, t, f_tps(m), spread(m), pct(m["abort"]), f"{m['p50']:.1f}",
                       f"{m['p99']:.0f}", f"{m['fences']:.3f}", f"{m['flushes']:.1f}",
                       f"{m['bytes']:,.0f}", f"{m['hit']:.3f}"]))
    P("\n#### YCSB 1→2 thread scaling (throughput t2 / t1: median of the per-repetition ratios, then each repetition's)\n")
    P(hdr(["mix", "θ=0", "θ=0.6", "θ=0.95"]))
    for mix in ["RO", "RH", "BA", "WH"]:
        cells = [mix]
        for th in ["0", "0.6", "0.95"]:
            cells.append(paired("ycsb", f"{mix}-theta{th}-t2", f"{mix}-theta{th}-t1"))
        P(row(cells))
    P("")

# ---- Issue 4: TPC-C
if os.path.isdir(os.path.join(out, "tpcc")):
    P("### TPC-C (Zen, silo, pmem fs, cache 256 MiB, full scale: 100k items, 3000 customers & orders per district)\n")
    P(hdr(["threads", "warehouses", "wh/thread", "txn/s (median)", "txn/s (reps)", "abort (cc+user)",
           "cc abort", "p50 µs", "p99 µs", "fences/commit", "flushes/commit", "NVM B/commit", "hit ratio"]))
    for t, w in [(1, 1), (1, 2), (2, 2), (2, 4)]:
        m = load("tpcc", f"t{t}-w{w}")
        if m is None:
            P(row([t, w, w // t, "FAIL"] + [""] * 9)); continue
        P(row([t, w, w // t, f_tps(m), spread(m), pct(m["abort"]), pct(m["cc_abort"]),
               f"{m['p50']:.1f}", f"{m['p99']:.0f}", f"{m['fences']:.3f}", f"{m['flushes']:.1f}",
               f"{m['bytes']:,.0f}", f"{m['hit']:.3f}"]))
    P("\n#### TPC-C 1→2 thread scaling\n")
    P(hdr(["wh/thread", "t1 txn/s", "t2 txn/s", "t2/t1 (paired per repetition)"]))
    for wpt in [1, 2]:
        a, b = load("tpcc", f"t1-w{wpt}"), load("tpcc", f"t2-w{2*wpt}")
        P(row([wpt, f_tps(a), f_tps(b), paired("tpcc", f"t2-w{2*wpt}", f"t1-w{wpt}")]))
    P("")

# ---- Issue 4: SmallBank
if os.path.isdir(os.path.join(out, "smallbank")):
    P("### SmallBank (Zen, silo, pmem fs, 100k accounts, hotspot 100 @ 0.9)\n")
    P(hdr(["threads", "txn/s (median)", "txn/s (reps)", "abort (cc+user)", "cc abort", "p50 µs", "p99 µs",
           "fences/commit", "flushes/commit", "NVM B/commit"]))
    for t in [1, 2]:
        m = load("smallbank", f"t{t}")
        if m is None:
            P(row([t, "FAIL"] + [""] * 8)); continue
        P(row([t, f_tps(m), spread(m), pct(m["abort"]), pct(m["cc_abort"]), f"{m['p50']:.1f}",
               f"{m['p99']:.0f}", f"{m['fences']:.3f}", f"{m['flushes']:.1f}", f"{m['bytes']:,.0f}"]))
    a, b = load("smallbank", "t1"), load("smallbank", "t2")
    if a and b:
        P(f"\n1→2 thread scaling (paired per repetition): {paired('smallbank', 't2', 't1')}")
    P("")

# ---- Issue 4: fs vs dram, whole data set cached
if os.path.isdir(os.path.join(out, "fsdram")):
    P("### Zen on `--pmem fs` vs `--pmem dram`, cache holding the whole data set\n")
    P(hdr(["workload", "threads", "cache", "fs txn/s", "dram txn/s", "fs / dram (paired per rep)", "fs hit ratio",
           "fs fences/commit", "dram fences/commit", "fs NVM B/commit", "dram NVM B/commit"]))
    for wl, cache in [("ycsb-RH-theta0.6", "2 GiB"), ("tpcc-w1pt", "4 GiB")]:
        for t in [1, 2]:
            a, b = load("fsdram", f"{wl}-t{t}-fs"), load("fsdram", f"{wl}-t{t}-dram")
            P(row([wl, t, cache, f_tps(a), f_tps(b),
                   paired("fsdram", f"{wl}-t{t}-fs", f"{wl}-t{t}-dram"),
                   "" if not a else f"{a['hit']:.3f}",
                   "" if not a else f"{a['fences']:.3f}", "" if not b else f"{b['fences']:.3f}",
                   "" if not a else f"{a['bytes']:,.0f}", "" if not b else f"{b['bytes']:,.0f}"]))
    P("\n#### 1→2 thread scaling with the whole data set cached\n")
    P(hdr(["workload", "pmem", "t1 txn/s", "t2 txn/s", "t2/t1 (paired per rep)"]))
    for wl in ["ycsb-RH-theta0.6", "tpcc-w1pt"]:
        for pm in ["fs", "dram"]:
            a, b = load("fsdram", f"{wl}-t1-{pm}"), load("fsdram", f"{wl}-t2-{pm}")
            P(row([wl, pm, f_tps(a), f_tps(b), paired("fsdram", f"{wl}-t2-{pm}", f"{wl}-t1-{pm}")]))
    P("")

# ---- Issue 6: all protocols
if os.path.isdir(os.path.join(out, "cc")):
    P("### Fig. 23 analog: YCSB BA (50 % reads), θ 0.95, 2 threads, each protocol (cache 256 MiB)\n")
    P(hdr(["cc", "fs txn/s", "fs txn/s (reps)", "fs abort", "fs abort (reps)", "fs p99 µs", "fences/commit",
           "flushes/commit", "NVM B/commit", "dram txn/s", "dram txn/s (reps)", "dram abort",
           "fs / dram (paired per rep)"]))
    for cc in ["no-wait", "wait-die", "dl-detect", "occ", "silo", "tictoc", "mvcc", "hekaton", "cicada", "hstore"]:
        a, b = load("cc", f"{cc}-fs"), load("cc", f"{cc}-dram")
        P(row([cc, f_tps(a), "" if not a else spread(a), "" if not a else pct(a["abort"]),
               "" if not a else "/".join(f"{100*x:.0f}" for x in a["abort_all"]) + " %",
               "" if not a else f"{a['p99']:.0f}",
               "" if not a else f"{a['fences']:.3f}", "" if not a else f"{a['flushes']:.2f}",
               "" if not a else f"{a['bytes']:,.0f}", f_tps(b), "" if not b else spread(b),
               "" if not b else pct(b["abort"]), paired("cc", f"{cc}-fs", f"{cc}-dram")]))
    P("")

# ---- Issue 6 with the NVM latency model
if os.path.isdir(os.path.join(out, "ccemu")):
    P("### Fig. 23 analog with the latency model: `--pmem emu --nvm-profile optane` vs `--pmem dram`, YCSB BA θ 0.95, 2 threads\n")
    P(hdr(["cc", "emu txn/s", "emu txn/s (reps)", "emu abort", "stall µs/commit", "fences/commit", "NVM B/commit",
           "dram txn/s", "dram txn/s (reps)", "emu / dram (paired per rep)"]))
    for cc in ["no-wait", "wait-die", "dl-detect", "occ", "silo", "tictoc", "mvcc", "hekaton", "cicada", "hstore"]:
        a, b = load("ccemu", f"{cc}-emu-optane"), load("ccemu", f"{cc}-dram")
        P(row([cc, f_tps(a), "" if not a else spread(a), "" if not a else pct(a["abort"]),
               "" if not a else f"{a['stall']/a['commits']/1e3:.2f}",
               "" if not a else f"{a['fences']:.3f}", "" if not a else f"{a['bytes']:,.0f}",
               f_tps(b), "" if not b else spread(b), paired("ccemu", f"{cc}-emu-optane", f"{cc}-dram")]))
    P("")

# ---- emu vs fs
if os.path.isdir(os.path.join(out, "emu")):
    P("### `--pmem emu --nvm-profile optane` vs `--pmem fs`: YCSB RH θ 0.6, 2 threads (cache 256 MiB)\n")
    P(hdr(["pmem", "txn/s (median)", "txn/s (reps)", "abort", "p50 µs", "p99 µs", "fences/commit",
           "NVM B/commit", "hit ratio", "emulated stall ms (total)"]))
    ms = {}
    for pm in ["fs", "emu-optane"]:
        m = ms[pm] = load("emu", pm)
        if m is None:
            P(row([pm, "FAIL"] + [""] * 8)); continue
        P(row([pm, f_tps(m), spread(m), pct(m["abort"]), f"{m['p50']:.1f}", f"{m['p99']:.0f}",
               f"{m['fences']:.3f}", f"{m['bytes']:,.0f}", f"{m['hit']:.3f}", f"{m['stall']/1e6:,.1f}"]))
    if ms.get("fs") and ms.get("emu-optane"):
        P(f"\nemu-optane / fs throughput (paired per repetition): {paired('emu', 'emu-optane', 'fs')}")
    P("")

# ---- failures
fails = []
for rcf in sorted(glob.glob(os.path.join(out, "*", "*", "rep*", "rc"))):
    d = os.path.dirname(rcf)
    rc = open(rcf).read().strip()
    if rc != "0":
        cmd = open(os.path.join(d, "cmd")).read().strip()
        err = open(os.path.join(d, "stderr.txt"), errors="replace").read().strip().splitlines()
        fails.append((d, rc, cmd, err[-15:]))
P("### Failures\n")
if not fails:
    P("None.")
for d, rc, cmd, err in fails:
    P(f"* `{d}` exit {rc} ({'timeout: hung' if rc in ('124', '137') else 'error'})\n\n  ```\n  {cmd}\n  ```\n")
    P("  ```\n" + "\n".join("  " + l for l in err) + "\n  ```\n")
print("\n".join(lines))
PY
}

if [ "${1:-}" = "summarize" ]; then
    summarize
    exit 0
fi

if [ -z "${ZEN:-}" ]; then
    cargo build --release || exit 1
    mkdir -p /tmp/zen-bench
    cp target/release/zen /tmp/zen-bench/zen
    ZEN=/tmp/zen-bench/zen
fi

mkdir -p "$OUT"
{
    echo "=== reps $REP_FIRST..$REPS"
    echo "date: $(date -u +%FT%TZ)"
    echo "git: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) dirty paths"
    echo "binary: $ZEN ($("$ZEN" --version))"
    echo "nproc: $(nproc)"
    lscpu | head -20
    uptime
    echo "reps=$REPS duration=$DURATION warmup=$WARMUP records=$RECORDS seed_base=$SEED_BASE"
} >> "$OUT/machine.txt"

# run_cell <sweep> <cell> <rep> <zen bench args...>
run_cell() {
    local sweep=$1 cell=$2 rep=$3
    shift 3
    local dir="$OUT/$sweep/$cell/rep$rep"
    local seed=$((SEED_BASE + rep))
    rm -rf "$dir"
    mkdir -p "$dir"
    local cmd=("$ZEN" bench "$@" --duration "$DURATION" --warmup "$WARMUP" --seed "$seed"
               --format json --out "$dir")
    echo "${cmd[*]}" > "$dir/cmd"
    timeout -k 10 "$TIMEOUT" "${cmd[@]}" > "$dir/stdout.json" 2> "$dir/stderr.txt"
    local rc=$?
    echo "$rc" > "$dir/rc"
    cut -d' ' -f1-3 /proc/loadavg > "$dir/loadavg"   # background load of the shared machine
    local tps
    tps=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["summary"]["throughput_tps"]))' \
          "$dir/stdout.json" 2>/dev/null || echo "-")
    printf '%-10s %-28s rep%s seed %s rc %s  %8s txn/s  load %s\n' "$sweep" "$cell" "$rep" "$seed" "$rc" "$tps" \
        "$(cat "$dir/loadavg")"
}

want() { [[ " $ONLY " == *" $1 "* ]]; }

for rep in $(seq "$REP_FIRST" "$REPS"); do
    if want ycsb; then
        for mix in RO RH BA WH; do
            for th in 0 0.6 0.95; do
                for t in 1 2; do
                    run_cell ycsb "$mix-theta$th-t$t" "$rep" ycsb --records "$RECORDS" \
                        --mix "$mix" --theta "$th" --threads "$t"
                done
            done
        done
    fi
    if want tpcc; then
        for tw in "1 1" "1 2" "2 2" "2 4"; do
            set -- $tw
            run_cell tpcc "t$1-w$2" "$rep" tpcc --threads "$1" --warehouses "$2"
        done
    fi
    if want smallbank; then
        for t in 1 2; do
            run_cell smallbank "t$t" "$rep" smallbank --threads "$t"
        done
    fi
    if want fsdram; then
        for t in 1 2; do
            for pm in fs dram; do
                run_cell fsdram "ycsb-RH-theta0.6-t$t-$pm" "$rep" ycsb --records "$RECORDS" \
                    --mix RH --theta 0.6 --threads "$t" --pmem "$pm" --cache-size 2GiB
            done
            for pm in fs dram; do
                run_cell fsdram "tpcc-w1pt-t$t-$pm" "$rep" tpcc --threads "$t" --warehouses "$t" \
                    --pmem "$pm" --cache-size 4GiB
            done
        done
    fi
    if want cc; then
        for cc in no-wait wait-die dl-detect occ silo tictoc mvcc hekaton cicada hstore; do
            for pm in fs dram; do
                run_cell cc "$cc-$pm" "$rep" ycsb --records "$RECORDS" --mix BA --theta 0.95 \
                    --threads 2 --cc "$cc" --pmem "$pm"
            done
        done
    fi
    if want ccemu; then
        # Fig. 23 with the NVM latency model: emu (optane) vs dram, back to back.
        for cc in no-wait wait-die dl-detect occ silo tictoc mvcc hekaton cicada hstore; do
            run_cell ccemu "$cc-emu-optane" "$rep" ycsb --records "$RECORDS" --mix BA --theta 0.95 \
                --threads 2 --cc "$cc" --pmem emu --nvm-profile optane
            run_cell ccemu "$cc-dram" "$rep" ycsb --records "$RECORDS" --mix BA --theta 0.95 \
                --threads 2 --cc "$cc" --pmem dram
        done
    fi
    if want emu; then
        run_cell emu fs "$rep" ycsb --records "$RECORDS" --mix RH --theta 0.6 --threads 2 --pmem fs
        run_cell emu emu-optane "$rep" ycsb --records "$RECORDS" --mix RH --theta 0.6 --threads 2 \
            --pmem emu --nvm-profile optane
    fi
done

summarize | tee "$OUT/tables.md"
