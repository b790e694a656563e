"""A/B of the chunk stages' CUDA launch choices (stage-level timing, all variants in one run).

For each stage of the chunked gated delta rule (WY forward/backward, state recurrences, output
stages) every variant of ``fla_ascend.ops.common.tiles.CUDA_LAUNCH`` listed in ``VARIANTS`` is
timed at B1 T4096 H16 HV32 and B1 T32768 H16 HV32 (K = V = 128, bf16); the fastest per stage is
then checked for bf16 accuracy against the fp32 reference and timed end to end beside the base
table. Results: ``$OUT/ab.json``. The run recorded in cases.md (benchmarks/results/
h200_ab_chunk_stages.json) also compared the two diagonal-block substitutions of the WY inverse,
at commit 07689cf.

    python3 benchmarks/tune_chunk_stages.py          # on a CUDA GPU
    DRY=1 python3 benchmarks/tune_chunk_stages.py    # smoke run on the CPU interpreter
"""
import os, sys, json, copy, itertools, time
sys.path.insert(0, os.getcwd())
import fla_ascend  # noqa: F401  (before triton: it decides interpreter mode)
import torch, triton
import torch.nn.functional as F
from triton.testing import do_bench
import fla_ascend
from fla_ascend.ops.common import tiles
from fla_ascend.ops.common.chunk_h import chunk_fwd_h, chunk_bwd_dh
from fla_ascend.ops.common.chunk_o import chunk_fwd_o, chunk_bwd_dv_local, chunk_bwd_dqkwg
from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
from fla_ascend.ops.common.wy import chunk_wy_fwd, chunk_wy_bwd
from fla_ascend.ops.gated_delta_rule.reference import chunk_gated_delta_rule_ref
from fla_ascend.ops.utils import rel_rmse
torch.backends.cuda.matmul.allow_tf32 = False
OUT = os.environ.get("OUT", "/tmp")
BASE = copy.deepcopy(tiles.CUDA_LAUNCH)
dev = "cuda"
if os.environ.get("DRY"):
    dev = "cpu"
    def do_bench(fn, warmup=0, rep=0, return_mode="median", grad_to_none=None):
        t = time.time(); fn(); return (time.time() - t) * 1e3
    QWEN, T32K, D128, D256 = (1, 64, 1, 2, 32, 32), (1, 128, 1, 2, 32, 32), (1, 70, 1, 2, 32, 32), (1, 40, 1, 1, 64, 64)
else:
    QWEN, T32K, D128, D256 = (1, 4096, 16, 32, 128, 128), (1, 32768, 16, 32, 128, 128), (2, 1024, 4, 4, 128, 128), (1, 512, 2, 2, 256, 256)
t_start = time.time()

def mk(B, T, H, HV, K, V, seed=0):
    torch.manual_seed(seed)
    q = torch.randn(B, T, H, K, device=dev, dtype=torch.bfloat16)
    k = F.normalize(torch.randn(B, T, H, K, device=dev), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, HV, V, device=dev, dtype=torch.bfloat16)
    g = F.logsigmoid(torch.rand(B, T, HV, device=dev))
    beta = torch.rand(B, T, HV, device=dev).sigmoid()
    return q, k, v, g, beta

def stages(shape):
    q, k, v, g, beta = mk(*shape)
    B, T, H, HV, K, V = shape
    BT = 64; n = B * triton.cdiv(T, BT); N = B; scale = K ** -0.5
    g_cum, beta_t = chunk_gate_cumsum(g, beta, BT, n)
    w, u, Ai = chunk_wy_fwd(k, v, g_cum, beta_t, BT, n, store_ai=True)
    h, v_new, _ = chunk_fwd_h(k, w, u, g_cum, BT, n, N)
    do = torch.randn_like(v)
    dv_local = chunk_bwd_dv_local(q, k, g_cum, do, scale, BT, n)
    dh, dv_new, _ = chunk_bwd_dh(q, k, w, g_cum, do, dv_local, scale, BT, n, N, None, False)
    dq, dk, dw, dg_parts = chunk_bwd_dqkwg(q, k, v_new, h, dh, do, dv_new, g_cum, scale, BT, n)
    return {
        "wy_fwd": lambda: chunk_wy_fwd(k, v, g_cum, beta_t, BT, n),
        "wy_bwd": lambda: chunk_wy_bwd(k, v, g_cum, beta_t, Ai, dw, dv_new, dk, dg_parts, BT, n),
        "chunk_h": lambda: (chunk_fwd_h(k, w, u, g_cum, BT, n, N), chunk_bwd_dh(q, k, w, g_cum, do, dv_local, scale, BT, n, N, None, False)),
        "chunk_o": lambda: (chunk_fwd_o(q, k, v_new, h, g_cum, scale, BT, n), chunk_bwd_dv_local(q, k, g_cum, do, scale, BT, n),
                            chunk_bwd_dqkwg(q, k, v_new, h, dh, do, dv_new, g_cum, scale, BT, n)),
    }

VARIANTS = {
    "wy_fwd": [dict(num_warps=nw, precision=p) for nw in (4, 8) for p in ("tf32x3", "tf32")],
    "wy_bwd": [dict(num_warps=nw, num_stages=ns, precision=p) for nw in (4, 8) for ns in (1, 2) for p in ("tf32x3", "tf32")],
    "chunk_h": [dict(num_warps=nw, num_stages=2, bv=bv) for nw in (4, 8) for bv in ((64, 32), (32,), (16,))],
    "chunk_o": [dict(num_warps=nw, num_stages=ns) for nw in (4, 8) for ns in (2, 3)],
}

def apply(stage, cfg):
    tiles.CUDA_LAUNCH[stage] = dict(cfg)

results = {}
fns = {name: stages(shp) for name, shp in (("qwen", QWEN), ("t32k", T32K))}
best = {}
for stage, cfgs in VARIANTS.items():
    rows = []
    for cfg in cfgs:
        apply(stage, cfg)
        try:
            ms = {s: do_bench(fns[s][stage], warmup=10, rep=40, return_mode="median") for s in fns}
        except Exception as e:
            ms = {"error": repr(e)[:200]}
        row = dict(stage=stage, cfg=cfg, **ms); rows.append(row); print(json.dumps(row), flush=True)
    ok = [r for r in rows if "error" not in r]
    best[stage] = min(ok, key=lambda r: r["qwen"] + r["t32k"] / 8)["cfg"]
    apply(stage, BASE[stage])
    results[stage] = rows
print("BEST", json.dumps(best), flush=True)

# accuracy of the best config (all stages together) vs the base config, bf16 vs fp32 reference
def op_err(shape):
    B, T, H, HV, K, V = shape
    q, k, v, g, beta = mk(*shape, seed=1)
    h0 = torch.randn(B, HV, K, V, device=dev)
    do = torch.randn(B, T, HV, V, device=dev); dht = torch.randn(B, HV, K, V, device=dev)
    def grads(fn, xs):
        xs = [x.detach().clone().requires_grad_() for x in xs]
        o, ht = fn(*xs[:5], initial_state=xs[5], output_final_state=True)
        gr = torch.autograd.grad((o.float() * do).sum() + (ht.float() * dht).sum(), xs)
        return [o, ht, *gr]
    ref = grads(chunk_gated_delta_rule_ref, [x.float() for x in (q, k, v, g, beta)] + [h0])
    out = grads(fla_ascend.chunk_gated_delta_rule, [q, k, v, g, beta, h0])
    return {n: rel_rmse(r, o) for n, r, o in zip(("o", "ht", "dq", "dk", "dv", "dg", "dbeta", "dh0"), ref, out)}

def full_times(shape):
    q, k, v, g, beta = mk(*shape)
    xs = [x.detach().clone().requires_grad_() for x in (q, k, v, g, beta)]
    f = lambda: fla_ascend.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)
    o, _ = fla_ascend.chunk_gated_delta_rule(*xs, output_final_state=True); do = torch.randn_like(o)
    def fb():
        o, _ = fla_ascend.chunk_gated_delta_rule(*xs, output_final_state=True); o.backward(do)
    return dict(fwd=do_bench(f, warmup=20, rep=100, return_mode="median"), fwdbwd=do_bench(fb, warmup=20, rep=100, return_mode="median", grad_to_none=xs))

summary = {}
for label in ("base", "best"):
    for st in VARIANTS:
        apply(st, best[st] if label == "best" else BASE[st])
    summary[label] = {"err_D128": op_err(D128), "err_D256": op_err(D256),
                      "qwen": full_times(QWEN), "t32k": full_times(T32K)}
    print(label, json.dumps(summary[label]), flush=True)
json.dump(dict(results=results, best=best, summary=summary), open(os.path.join(OUT, "ab.json"), "w"), indent=1)
print("elapsed", time.time() - t_start)
