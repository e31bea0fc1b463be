# Tables of scripts/nvm-model-bench.sh runs (docs/results-nvm-model.md):
# per cell and engine, the median over the repetitions of each figure.
import glob, json, os, re, statistics, sys

D = sys.argv[1] if len(sys.argv) > 1 else 'results/nvm-model'


def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None


def figures(j):
    s = j['summary']; v = j['nvm']; c = max(s['commits'], 1); pc = v['per_commit']
    us = lambda ns: ns / c / 1000
    stall = [us(v['read_latency_ns']), us(v['write_latency_ns']), us(v['bandwidth_wait_ns'])]
    # A thread's time per commit less the modelled stall: the engine's own work.
    own = j['config']['threads'] * 1e6 / max(s['throughput_tps'], 1e-9) - sum(stall)
    return [s['throughput_tps'], pc['bytes'] / 1000, pc['media_bytes'] / 1000, pc['fences'],
            *stall, own, s['abort_ratio'] * 100]


runs = {}
for p in sorted(glob.glob(D + '/*.json')):
    m = re.match(r'(.+)-(zen|mmdb|wbl|falcon)-r(\d+)$', os.path.basename(p)[:-5])
    j = load(p)
    if m and j:
        runs.setdefault((m.group(1), m.group(2)), []).append(figures(j))
print('| cell | engine | reps | txn/s (min–max) | KB stored | media KB | fences | read lat µs | write lat µs | bw wait µs | own µs | abort % |')
print('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
order = ['zen', 'mmdb', 'wbl', 'falcon']
for cell in sorted({c for c, _ in runs}):
    for e in order:
        rs = runs.get((cell, e))
        if not rs:
            continue
        med = [statistics.median(col) for col in zip(*rs)]
        tps = [r[0] for r in rs]
        print(f'| {cell} | {e} | {len(rs)} | {med[0]:,.0f} ({min(tps):,.0f}–{max(tps):,.0f}) | '
              + ' | '.join(f'{x:.1f}' for x in med[1:]) + ' |')
fs, em = [], []
for p in sorted(glob.glob(D + '/ovh-*.json')):
    j = load(p)
    if j:
        (fs if '/ovh-fs-' in p else em).append(j['summary']['throughput_tps'])
if fs and em:
    print('overhead fs', [round(x) for x in fs], 'median', round(statistics.median(fs)))
    print('overhead emu-dram', [round(x) for x in em], 'median', round(statistics.median(em)))
    print('emu-dram/fs = %.3f' % (statistics.median(em) / statistics.median(fs)))
