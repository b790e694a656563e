"""Merge the chunk_gated_delta_rule rows of the eighth and ninth sessions into gdn_all.* and the README plot (run from the repository root)."""
import json, sys, os
sys.path.insert(0, '.')
os.environ.setdefault("FLA_ASCEND_DEVICE", "cpu")
from fla_ascend.bench import report
S8 = 'benchmarks/results/h200_2026-11-30_s8/'
R = 'benchmarks/results/h200_2026-11-30_s9/'
def load(p): return json.load(open(p))
sources = [
    (S8 + 'call2_gdn/bench.json', "eighth session call 2: febc6f9 (R7 copies off on CUDA), two-GPU machine; the other GPU ran profiles and stage A/Bs"),
    (S8 + 'call4_qwen/bench.json', "eighth session call 4: febc6f9, one-GPU machine, alone; both providers slower than in earlier runs"),
    (R + 'call1_gdn_k64/bench.json', "ninth session call 1: 0a1d524 (the GDN kernels of febc6f9), one GPU of the two-GPU machine; the other GPU ran conv benchmarks"),
]
rows, seen, meta = [], set(), None
for path, note in sources:
    a = load(path)
    meta = meta or a['meta']
    for r in a['results']:
        key = (r['shape'], r['mode'], r['provider'])
        if key in seen:
            continue
        seen.add(key)
        rows.append({**r, 'source': note})
art = {'schema': load(sources[0][0])['schema'], 'meta': {**meta, 'command': ['merged from the files named in README.md']},
       'results': rows, 'notes': ['rows from several runs; each row has a "source" naming its run and code']}
json.dump(art, open(R + 'gdn_all.json', 'w'), indent=1)
report.write_markdown(art, R + 'gdn_all.md')
report.write_plot(art, 'docs/h200_chunk_gated_delta_rule.png')
for r in rows:
    if r['provider'] == 'fla_ascend':
        o = next(x for x in rows if x['shape'] == r['shape'] and x['mode'] == r['mode'] and x['provider'] == 'fla')
        print(r['shape'], r['mode'], f"{r['ms']:.3f} / {o['ms']:.3f}", {k: round(v, 2) for k, v in r['speedup'].items()}, r.get('peak_mem_mb'), o.get('peak_mem_mb'), r['err'] if 'err' in r else r.get('gate'), r['source'][:30])
