"""A stand-in benchmark suite for the round tool's tests, following the benchmark contract
(schema ``fla-ascend-bench/1``): it really runs ``fla_ascend.ops.norm.l2norm`` (the copy the
round tool overlaid) against a float32 PyTorch reference, applies the rel-RMSE gate and times
the call by wall clock. Used so the round workflow is tested independently of the real suite's
shape tables and run time; the real suite is exercised by ``test_round_real_suite.py``.
"""
from __future__ import annotations

import datetime
import statistics
import sys
import time

import torch

SHAPES = {"M8-D64": (8, 64), "M16-D128": (16, 128), "M4-D256": (4, 256)}
TOL = 1e-4


def _ref(x, eps=1e-6):
    x = x.float()
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def run_suite(ops, shapes, modes, providers, dtype, quick=False, progress=True):
    import triton

    import fla_ascend
    from fla_ascend import backend
    from fla_ascend.ops.norm.l2norm import l2norm
    from fla_ascend.ops.utils import rel_rmse

    assert ops == ["l2norm"], ops
    dt = getattr(torch, dtype)
    results = []
    reps = 2 if quick else 4
    for shape in shapes or list(SHAPES):
        M, D = SHAPES[shape]
        for mode in modes:
            g = torch.Generator().manual_seed(M * 1000 + D)
            x = torch.randn(M, D, generator=g).to(dt)
            ref = _ref(x)
            y = l2norm(x)
            err = {"o": rel_rmse(ref, y)}
            ok = err["o"] <= TOL
            ms = None
            if ok:
                times = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    l2norm(x)
                    times.append((time.perf_counter() - t0) * 1e3)
                ms = statistics.median(times)
            results.append({
                "op": "l2norm", "shape": shape, "shape_args": {"M": M, "D": D}, "mode": mode,
                "provider": "fla_ascend", "dtype": dtype, "correct": ok, "rel_rmse": err,
                "tolerance": TOL, "ms": ms, "peak_mem_mb": None, "tokens_per_s": None,
                "gbps": None, "tflops": None, "error": None,
            })
    return {
        "schema": "fla-ascend-bench/1",
        "meta": {
            "device": backend.device_type(), "device_name": backend.info().device_name,
            "triton_flavour": backend.triton_flavour(), "triton_version": triton.__version__,
            "torch_version": torch.__version__, "fla_version": None,
            "timing_method": "wall-clock median (fake suite)", "warmup_ms": 0, "rep_ms": 0,
            "date": datetime.datetime.now().isoformat(), "command": sys.argv,
            "copy_bandwidth_gbps": None, "matmul_tflops": None,
            "fla_ascend_file": fla_ascend.__file__,
        },
        "results": results,
    }
