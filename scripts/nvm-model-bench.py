# Tables of scripts/nvm-model-bench.sh runs (docs/results-engines.md, "With the device model").
import json,glob,os,statistics
import sys
D=sys.argv[1] if len(sys.argv) > 1 else 'results/nvm-model'
def load(n):
    try: return json.load(open(f'{D}/{n}.json'))
    except Exception as e: return None
def row(n):
    j=load(n)
    if not j: return f'| {n} | failed | | | | | | |'
    s=j['summary']; v=j['nvm']; c=max(s['commits'],1); pc=v['per_commit']
    us=lambda ns: ns/c/1000
    return f"| {n} | {s['throughput_tps']:,.0f} | {pc['bytes']/1000:.1f} | {pc['media_bytes']/1000:.1f} | {pc['fences']:.1f} | {us(v['read_latency_ns']):.1f} | {us(v['write_latency_ns']):.1f} | {us(v['bandwidth_wait_ns']):.1f} | {s['abort_ratio']*100:.1f} |"
print('| run | txn/s | KB written/commit | media KB/commit | fences/commit | read lat µs/commit | write lat µs/commit | bw wait µs/commit | abort % |')
print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
names=sorted(os.path.basename(p)[:-5] for p in glob.glob(D+'/*.json'))
for n in names:
    if not n.startswith('ovh'): print(row(n))
fs=[load(f'ovh-fs-{r}')['summary']['throughput_tps'] for r in (1,2,3) if load(f'ovh-fs-{r}')]
em=[load(f'ovh-emudram-{r}')['summary']['throughput_tps'] for r in (1,2,3) if load(f'ovh-emudram-{r}')]
print('overhead fs', [round(x) for x in fs], 'median', statistics.median(fs) if fs else None)
print('overhead emu-dram', [round(x) for x in em], 'median', statistics.median(em) if em else None)
if fs and em: print('emu-dram/fs = %.3f' % (statistics.median(em)/statistics.median(fs)))
