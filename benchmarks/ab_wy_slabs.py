"""Which K x V slab widths of the WY forward give the same ``w``, ``u`` as the default launch?

For each slab pair (BK, BV), run ``chunk_wy_fwd_kernel`` with ``Ai`` loaded ("load", the
backward's recompute) and computing it ("store", the training forward), and compare ``w``, ``u``
with the default launch's: ``ok`` bit for bit, ``rounding`` within the forward's relative-RMSE
tolerance (another summation order), ``WRONG`` beyond it or with unwritten (NaN) elements. This
is how the off-NPU slab rule (``wy.off_npu_slabs``) was found on the H200 (cases.md). A fault
ends the process (CUDA context lost), so the pairs known to fault in store mode (BV < BK) are
not run there. Exit status 1 when any result is ``WRONG``.

    python3 benchmarks/ab_wy_slabs.py        # on a CUDA GPU; also runs on the CPU interpreter
"""
from __future__ import annotations

import fla_ascend.backend  # noqa: F401  (before triton: it decides interpreter mode)

import torch
import triton

from fla_ascend.ops.common import wy
from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
from fla_ascend.ops.common.tiles import dot_precision
from fla_ascend.ops.utils import rel_rmse

BT = 64
SHAPES = [(63, 1, 1, 128, 32), (500, 1, 1, 100, 32), (15, 1, 1, 100, 32), (256, 2, 4, 128, 32),
          (256, 1, 1, 128, 64), (256, 1, 1, 128, 128), (256, 1, 1, 64, 32), (256, 1, 1, 256, 32)]
"""(T, H, HV, K, V), B = 1."""
TOLERANCE = 0.005
"""Relative RMSE against the default launch above which a result is wrong (the forward gate's)."""
SLABS = [(64, 64), (64, 32), (32, 32), (32, 64), (128, 128), (16, 16)]


def run(k, v, g_cum, beta_t, n, mode, BK, BV, Ai):
    """One launch of the WY forward with the given slabs; ``w``, ``u`` NaN-filled first."""
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    w = torch.full((B, T, HV, K), float("nan"), dtype=k.dtype, device=k.device)
    u = torch.full((B, T, HV, V), float("nan"), dtype=v.dtype, device=v.device)
    wy.chunk_wy_fwd_kernel[(n * HV,)](
        k=k, v=v, g_cum=g_cum, beta_t=beta_t, w=w, u=u, Ai=Ai, chunk_indices=None, cu_seqlens=None,
        T=T, NT=triton.cdiv(T, BT), TT=B * T, n_tasks=n * HV, n_programs=n * HV, H=H, HV=HV, K=K, V=V,
        BT=BT, BK=BK, BV=BV, DOT_PRECISION=dot_precision("wy_fwd", k.dtype), AI_MODE=mode, IS_VARLEN=False,
        TASK_LOOP=False, **fla_ascend.backend.launch_options(num_warps=4, num_stages=1))
    if k.is_cuda:
        torch.cuda.synchronize()
    return w, u


def main() -> int:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float16  # the interpreter's bf16 dots are wrong
    torch.manual_seed(0)
    wrong = False
    for T, H, HV, K, V in SHAPES:
        k = torch.nn.functional.normalize(torch.randn(1, T, H, K, device=dev), dim=-1).to(dtype)
        v = torch.randn(1, T, HV, V, device=dev).to(dtype)
        g = torch.nn.functional.logsigmoid(torch.randn(1, T, HV, device=dev))
        beta = torch.rand(1, T, HV, device=dev)
        n = triton.cdiv(T, BT)
        g_cum, beta_t = chunk_gate_cumsum(g, beta, BT, n)
        w0, u0, Ai = wy.chunk_wy_fwd(k, v, g_cum, beta_t, BT, n, store_ai=True)
        res = []
        for BK, BV in SLABS:
            if BK > triton.next_power_of_2(K) or BV > max(64, triton.next_power_of_2(V)):
                continue
            for mode in ("load", "store"):
                if mode == "store" and BV < BK:
                    continue  # faults with an illegal address on the H200 (Triton 3.6)
                try:
                    w, u = run(k, v, g_cum, beta_t, n, mode, BK, BV, Ai if mode == "load" else torch.empty_like(Ai))
                    if torch.equal(w, w0) and torch.equal(u, u0):
                        ok = "ok"
                    else:
                        err = max(rel_rmse(w0.float(), w.float()), rel_rmse(u0.float(), u.float()))
                        bad = not err <= TOLERANCE or bool(torch.isnan(w).any() or torch.isnan(u).any())
                        wrong |= bad
                        ok = f"{'WRONG' if bad else 'rounding'} {err:.2g}"
                except Exception as e:  # a compile error is a result; a fault ends the process anyway
                    ok = "ERR " + str(e)[:60]
                res.append(f"{mode[0]}{BK}x{BV}:{ok}")
        print(f"T{T} H{H} HV{HV} K{K} V{V}:", " ".join(res), flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
