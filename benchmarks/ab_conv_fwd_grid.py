"""A/B of a candidate causal_conv1d forward design against the shipped kernel, in one process.

The candidate (not shipped; the lead for the conv forward, cases.md) drops the task-index decode:
a 3-D grid (channel block, token group, batch row), each program looping over ``NB`` token tiles
of ``BT`` rows (``tl.range`` with ``num_stages``, so Triton can prefetch the next tile's loads).
It covers the anchors' case only: dense ``[B, T, D]`` input, no initial state, SiLU and bias.
Each variant's output is compared with the shipped op's (max abs difference) before it is timed
(``triton.testing.do_bench`` median); a device-to-device copy of ``x`` gives the bandwidth roof.

    python3 benchmarks/ab_conv_fwd_grid.py

On a GPU it runs the two conv anchors and times them; elsewhere a small shape under the
interpreter, outputs only (no times). A variant whose output differs from the shipped op's by
more than ``TOL``, or that raises, is reported (MISMATCH / ERROR) and the script exits with
status 1.

Writes ``$OUT/conv_fwd_grid_ab.json`` (default ``/tmp``).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend import backend  # noqa: E402  (before triton: it decides interpreter mode)
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from fla_ascend.ops.causal_conv1d import causal_conv1d  # noqa: E402

ON_GPU = backend.is_cuda_compiled()
SHAPES = [(4, 4096, 4096), (1, 32768, 8192)] if ON_GPU else [(2, 100, 200)]
"""``(B, T, D)``, width 4: the conv anchors on a GPU, a small shape elsewhere."""
VARIANTS = [(32, 128, 1, 1, 4), (64, 128, 1, 1, 4), (16, 128, 1, 1, 4), (32, 128, 4, 2, 4), (32, 128, 8, 3, 4),
            (64, 128, 4, 2, 4), (64, 128, 8, 3, 8), (16, 128, 8, 3, 4), (16, 128, 16, 4, 4), (32, 256, 8, 3, 8),
            (64, 64, 8, 3, 4), (32, 128, 16, 3, 4), (128, 128, 4, 2, 8)]
"""``(BT, BD, NB, num_stages, num_warps)``."""
TOL = {torch.bfloat16: 2e-2, torch.float32: 1e-5}
"""Largest max-abs difference from the shipped forward (bf16: a few output roundings)."""


@triton.jit
def conv_fwd_grid_kernel(x, wt, bias, y, T, D, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr,
                         NB: tl.constexpr, STAGES: tl.constexpr):
    i_d = tl.program_id(0)
    i_g = tl.program_id(1)
    i_b = tl.program_id(2).to(tl.int64)
    o_d = i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    b_bias = tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)
    base = i_b * T * D
    for i in tl.range(0, NB, num_stages=STAGES):
        o_t = (i_g * NB + i) * BT + tl.arange(0, BT)
        b_y = tl.zeros([BT, BD], dtype=tl.float32) + b_bias[None, :]
        for w in tl.static_range(W):
            o_r = o_t - (W - 1) + w
            m_r = (o_r >= 0) & (o_r < T)
            b_x = tl.load(x + base + o_r[:, None] * D + o_d[None, :], mask=m_r[:, None] & m_d[None, :], other=0.0)
            b_w = tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)
            b_y += b_x.to(tl.float32) * b_w[None, :]
        b_y = b_y * tl.sigmoid(b_y)
        m_t = o_t < T
        tl.store(y + base + o_t[:, None] * D + o_d[None, :], b_y.to(y.dtype.element_ty),
                 mask=m_t[:, None] & m_d[None, :])


def conv_fwd_grid(x, wt, bias, BT, BD, NB, STAGES, num_warps):
    """The candidate forward: ``x`` ``[B, T, D]`` contiguous, ``wt`` ``[W, D]``, ``bias`` ``[D]``."""
    B, T, D = x.shape
    y = torch.empty_like(x)
    grid = (triton.cdiv(D, BD), triton.cdiv(triton.cdiv(T, BT), NB), B)
    opts = dict(num_warps=num_warps) if ON_GPU else {}
    conv_fwd_grid_kernel[grid](x, wt, bias, y, T, D, W=wt.shape[0], BT=BT, BD=BD, NB=NB, STAGES=STAGES, **opts)
    return y


def main() -> dict:
    device, dtype = ("cuda", torch.bfloat16) if ON_GPU else ("cpu", torch.float32)
    bench = do_bench if ON_GPU else (lambda fn, **kw: (fn(), None)[1])  # no times under the interpreter
    pct = (lambda a, b: f"{a:.3f} ms ({b / a:.0%} of copy)") if ON_GPU else (lambda a, b: "untimed")
    res = {}
    for B, T, D in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(B, T, D, device=device, dtype=dtype)
        w = torch.rand(D, 4, device=device, dtype=dtype) - 0.5
        b = torch.rand(D, device=device, dtype=dtype) - 0.5
        wt = w.t().contiguous()
        ref = causal_conv1d(x, w, b, activation="silu")
        ref = ref[0] if isinstance(ref, tuple) else ref
        copy_ms = bench(lambda: torch.empty_like(x).copy_(x), warmup=25, rep=200)
        shipped = bench(lambda: causal_conv1d(x, w, b, activation="silu"), warmup=25, rep=200)
        key = f"B{B}-T{T}-D{D}"
        res[key] = {"copy": copy_ms, "shipped": shipped}
        print(f"{key}: shipped {pct(shipped, copy_ms)}", flush=True)
        for BT, BD, NB, ST, nw in VARIANTS:
            name = f"{BT}x{BD} NB{NB} st{ST} w{nw}"
            try:
                out = conv_fwd_grid(x, wt, b, BT, BD, NB, ST, nw)
                diff = (out.float() - ref.float()).abs().max().item()
                ms = bench(lambda: conv_fwd_grid(x, wt, b, BT, BD, NB, ST, nw), warmup=25, rep=200)
            except Exception as e:  # a variant that fails to compile or run must not lose the others
                res[key][name] = {"ms": None, "max_abs_diff": None, "ok": False, "error": f"{type(e).__name__}: {e}"}
                print(f"  {name}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            ok = diff <= TOL[dtype]
            res[key][name] = {"ms": ms, "max_abs_diff": diff, "ok": ok}
            print(f"  {name}: {pct(ms, copy_ms) if ms is not None else 'untimed'}, max abs diff {diff:.2e}"
                  f"{'' if ok else ' MISMATCH'}", flush=True)
    out_dir = os.environ.get("OUT", "/tmp")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "conv_fwd_grid_ab.json"), "w") as f:
        json.dump(res, f, indent=1, allow_nan=False)
    return res


if __name__ == "__main__":
    sys.exit(0 if all(v["ok"] for r in main().values() for v in r.values() if isinstance(v, dict)) else 1)
