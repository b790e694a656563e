"""How fast are fla-ascend and flash-linear-attention side by side, in one process on a CUDA GPU?

Produces the H200 numbers quoted in cases.md and the README (ratios measured in one run):
the four GatedDeltaNet anchor shapes (forward, forward+backward, peak memory), decode state
traffic, causal_conv1d bandwidth and forward+backward, the GatedDeltaNet layer, the device copy
bandwidth, and a bf16 accuracy check of the chunked op against the fp32 reference.

Run from the repository root (flash-linear-attention importable, e.g. ``PYTHONPATH=.site``)::

    python3 benchmarks/side_by_side_h200.py --out OUT_DIR [--sections acc,gdn,decode,conv,layer]

Timing: ``triton.testing.do_bench`` median (CUDA events), warmup 25 ms, rep 100 ms.
On Hopper with Triton 3.4-3.7, flash-linear-attention refuses its gated backward (its issue
640); for timing, the guard is bypassed (``fla.ops.common.chunk_o.IS_NVIDIA_HOPPER = False``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.getcwd())
import fla_ascend.backend  # noqa: E402  (before triton: it decides interpreter mode)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from fla_ascend.cli_common import output_dir, require_cuda_gpu, split_list  # noqa: E402
from fla_ascend.ops import causal_conv1d  # noqa: E402
from fla_ascend.ops.gated_delta_rule.reference import chunk_gated_delta_rule_ref  # noqa: E402
from fla_ascend.ops.utils import rel_rmse  # noqa: E402

try:
    import fla.ops.common.chunk_o as fla_chunk_o
    from fla.modules.causal_conv1d import causal_conv1d as fla_conv
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fla_recurrent

    fla_chunk_o.IS_NVIDIA_HOPPER = False
except ImportError:
    fla_chunk = fla_recurrent = fla_conv = None

DEV = "cuda"
BENCH = dict(warmup=25, rep=100, return_mode="median")
GDN_ANCHORS = [(1, 4096, 16, 32, 128, 128), (4, 4096, 16, 16, 128, 128), (1, 32768, 16, 32, 128, 128),
               (8, 2048, 32, 32, 128, 128)]


def gdn_inputs(B, T, H, HV, K, V, h0=False, cu=None, seed=0):
    torch.manual_seed(seed)
    q = torch.randn(B, T, H, K, device=DEV, dtype=torch.bfloat16)
    k = F.normalize(torch.randn(B, T, H, K, device=DEV), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, HV, V, device=DEV, dtype=torch.bfloat16)
    g = F.logsigmoid(torch.rand(B, T, HV, device=DEV))
    beta = torch.rand(B, T, HV, device=DEV).sigmoid()
    N = B if cu is None else len(cu) - 1
    return dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=torch.randn(N, HV, K, V, device=DEV) if h0 else None,
                cu_seqlens=None if cu is None else torch.tensor(cu, device=DEV, dtype=torch.long))


def emit(out, rows, row):
    rows.append(row)
    print(json.dumps(row), flush=True)
    with open(os.path.join(out, "side_by_side.json"), "w") as f:
        json.dump(rows, f, indent=1)


def section_acc(out, rows):
    """bf16 op vs fp32 reference (outputs and every gradient)."""
    for shape, cu in [((2, 1024, 4, 4, 128, 128), None), ((1, 512, 2, 2, 256, 256), None),
                      ((1, 2000, 2, 4, 64, 100), [0, 15, 100, 300, 1200, 2000])]:
        x = gdn_inputs(*shape, h0=True, cu=cu, seed=1)
        B, T, H, HV, K, V = shape
        N = B if cu is None else len(cu) - 1
        do, dht = torch.randn(B, T, HV, V, device=DEV), torch.randn(N, HV, K, V, device=DEV)
        names = ["q", "k", "v", "g", "beta", "initial_state"]

        def grads(fn, cast):
            xs = {n: x[n].detach().clone().to(torch.float32 if cast else x[n].dtype).requires_grad_() for n in names}
            o, ht = fn(**xs, cu_seqlens=x["cu_seqlens"], output_final_state=True)
            gr = torch.autograd.grad((o.float() * do).sum() + (ht.float() * dht).sum(), [xs[n] for n in names])
            return dict(o=o, ht=ht, **{"d" + n: t for n, t in zip(names, gr)})

        ref, ours = grads(chunk_gated_delta_rule_ref, True), grads(fla_ascend.chunk_gated_delta_rule, False)
        emit(out, rows, dict(section="acc", shape=shape, varlen=cu is not None,
                             **{n: rel_rmse(ref[n], ours[n]) for n in ref}))


def section_gdn(out, rows):
    providers = [("fla_ascend", fla_ascend.chunk_gated_delta_rule), ("fla", fla_chunk)]
    for shape in GDN_ANCHORS:
        x = gdn_inputs(*shape)
        for name, fn in providers:
            if fn is None:
                continue
            try:
                t_fwd = do_bench(lambda: fn(**x, output_final_state=True), **BENCH)
                xs = {n: (t.detach().clone().requires_grad_() if t is not None and t.is_floating_point() else t)
                      for n, t in x.items()}
                o, _ = fn(**xs, output_final_state=True)
                do = torch.randn_like(o)

                def fwdbwd():
                    o, _ = fn(**xs, output_final_state=True)
                    o.backward(do)

                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                fwdbwd()
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() / 2**20
                grads = [xs[n] for n in ("q", "k", "v", "g", "beta")]
                t_fb = do_bench(fwdbwd, grad_to_none=grads, **BENCH)
                emit(out, rows, dict(section="gdn", shape=shape, provider=name, fwd_ms=t_fwd, fwdbwd_ms=t_fb,
                                     peak_mb=peak))
            except Exception as e:  # one failing provider must not stop the table
                emit(out, rows, dict(section="gdn", shape=shape, provider=name, error=repr(e)[:300]))


def section_decode(out, rows):
    for B in (64, 256):
        x = gdn_inputs(B, 1, 16, 32, 128, 128, h0=True)
        state_bytes = 2 * x["initial_state"].numel() * 4  # fp32 state read + written
        for name, fn in [("fla_ascend", fla_ascend.fused_recurrent_gated_delta_rule), ("fla", fla_recurrent)]:
            if fn is None:
                continue
            ms = do_bench(lambda: fn(**x, output_final_state=True), **BENCH)
            emit(out, rows, dict(section="decode", B=B, provider=name, ms=ms, state_TBps=state_bytes / ms / 1e9))


def section_conv(out, rows):
    for B, T, D, W in [(4, 4096, 4096, 4), (1, 32768, 8192, 4)]:
        torch.manual_seed(0)
        x = torch.randn(B, T, D, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(D, W, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(D, device=DEV, dtype=torch.bfloat16)
        io_bytes = 2 * x.numel() * 2 + w.numel() * 2 + b.numel() * 2
        for name, fn in [("fla_ascend", causal_conv1d), ("fla", fla_conv)]:
            if fn is None:
                continue
            try:
                t_fwd = do_bench(lambda: fn(x, w, b, activation="silu"), **BENCH)
                xs = [t.detach().clone().requires_grad_() for t in (x, w, b)]
                y, _ = fn(*xs, activation="silu")
                dy = torch.randn_like(y)

                def fwdbwd():
                    y, _ = fn(*xs, activation="silu")
                    y.backward(dy)

                t_fb = do_bench(fwdbwd, grad_to_none=xs, **BENCH)
                emit(out, rows, dict(section="conv", shape=(B, T, D, W), provider=name, fwd_ms=t_fwd,
                                     fwd_TBps=io_bytes / t_fwd / 1e9, fwdbwd_ms=t_fb))
            except Exception as e:
                emit(out, rows, dict(section="conv", shape=(B, T, D, W), provider=name, error=repr(e)[:300]))


def section_layer(out, rows):
    from fla_ascend.bench.layer import bench_layer

    for mode in ("fwd", "fwdbwd"):
        r = bench_layer(batch_size=1, seq_len=4096, dtype=torch.bfloat16, mode=mode, warmup=5, repeat=20)
        emit(out, rows, dict(section="layer", **{k: str(v) if k == "dtype" else v for k, v in r.items()}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--sections", default="acc,gdn,decode,conv,layer")
    args = p.parse_args()
    require_cuda_gpu("benchmarks/side_by_side_h200.py")
    try:
        output_dir(args.out, "--out")
    except (ValueError, OSError) as e:
        p.error(str(e))
    rows = []
    t0 = time.time()
    a = torch.empty(2**30, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    copy_ms = do_bench(lambda: b.copy_(a), **BENCH)
    emit(args.out, rows, dict(section="machine", device=torch.cuda.get_device_name(), torch=torch.__version__,
                              copy_TBps=2 * 2**30 / copy_ms / 1e9, fla=fla_chunk is not None))
    a = b = None  # frees the two 1 GiB buffers
    for s in split_list(args.sections) or []:
        globals()["section_" + s](args.out, rows)
        print(f"# {s} done at {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
