"""Qwen3-Next's GatedDeltaNet layer from transformers at its real size, three ways, on a GPU:

- ``torch``: transformers' own PyTorch path (its fallback functions, called directly);
- ``fla``: transformers' binding when flash-linear-attention is importable (its
  ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule``; the short convolution stays
  transformers' PyTorch path unless Dao's causal-conv1d package is installed too);
- ``fla_ascend``: :func:`fla_ascend.integrations.transformers.enable`.

Each is compared in bfloat16 with the float32 PyTorch path of the same weights (relative RMSE of the
output, of the input gradient and of every parameter gradient) and timed, forward (no grad) and
forward + backward (CUDA-event medians, ``fla_ascend.bench.timing``). flash-linear-attention 0.6.0
refuses its chunked backward on Hopper with Triton 3.4 to 3.7.0
(github.com/fla-org/flash-linear-attention/issues/640): on the H200 (Triton 3.6)
its forward + backward row records that error instead of numbers.

Writes ``<out>/qwen3_next_layer.json`` and ``.md``. Run on the device machine::

    GPU_ENV_NEEDS="fla,transformers" bash -c 'source scripts/gpu_env.sh && \
        "$PY" benchmarks/qwen3_next_layer.py --out "$OUT"'

Exits with status 2 and a message where no CUDA GPU is present.
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import sys
from pathlib import Path

import fla_ascend.backend  # noqa: F401  (first: sets up the backend before transformers imports triton)

import torch

from fla_ascend.ops.utils import rel_rmse

NAMES = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
         "causal_conv1d_update")


def _bound_to_package(fn) -> bool:
    """Whether transformers bound an installed package (not its PyTorch fallback) behind ``fn``."""
    try:
        return bool(inspect.getclosurevars(fn).nonlocals.get("is_new_implementation", False))
    except TypeError:
        return False


def set_mode(mq, originals: dict, mode: str) -> None:
    """Install one path's functions in transformers' Qwen3-Next module."""
    from fla_ascend.integrations import transformers as ft

    ft.disable()
    for attr, fn in originals.items():
        setattr(mq, attr, fn.__wrapped__ if mode == "torch" else fn)
    if mode == "fla_ascend":
        ft.enable(["qwen3_next"])


def run_layer(layer, x, dy):
    """Output, input gradient and parameter gradients of one forward + backward."""
    layer.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    y = layer(x)
    y.backward(dy)
    grads = {n: p.grad.detach().clone() for n, p in layer.named_parameters() if p.grad is not None}
    return y.detach(), x.grad.detach(), grads


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out"))
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--quick", action="store_true", help="short timing budgets")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny config on the CPU (Triton interpreter) to check the script itself; "
                    "use --dtype float16")
    args = ap.parse_args(argv)
    device = "cpu" if args.smoke else "cuda"
    dtype = getattr(torch, args.dtype)
    if device == "cuda" and not torch.cuda.is_available():
        print("qwen3_next_layer: needs a CUDA GPU; none here", file=sys.stderr)
        return 2
    import transformers
    import transformers.models.qwen3_next.modeling_qwen3_next as mq

    from fla_ascend.bench.timing import make_timer

    originals = {attr: getattr(mq, attr) for attr in NAMES}
    meta = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "B": args.B, "T": args.T, "dtype": args.dtype,
        "transformers_bound_packages": {a: _bound_to_package(f) for a, f in originals.items()},
    }
    try:
        import triton

        meta["triton"] = triton.__version__
        import fla

        meta["fla"] = getattr(fla, "__version__", "importable")
    except ImportError as e:
        meta["fla"] = f"not importable: {e}"
    cfg = transformers.Qwen3NextConfig()
    if args.smoke:
        cfg = transformers.Qwen3NextConfig(hidden_size=64, linear_num_key_heads=2, linear_num_value_heads=4,
                                           linear_key_head_dim=16, linear_value_head_dim=16)
    idx = cfg.layer_types.index("linear_attention")
    torch.manual_seed(0)
    layer32 = mq.Qwen3NextGatedDeltaNet(cfg, layer_idx=idx).to(device).float()
    layer = copy.deepcopy(layer32).to(dtype)
    meta["config"] = {k: getattr(cfg, k) for k in ("hidden_size", "linear_num_key_heads", "linear_num_value_heads",
                                                   "linear_key_head_dim", "linear_value_head_dim",
                                                   "linear_conv_kernel_dim")}
    x32 = torch.randn(args.B, args.T, cfg.hidden_size, device=device)
    dy32 = torch.randn_like(x32)
    x, dy = x32.to(dtype), dy32.to(dtype)

    set_mode(mq, originals, "torch")
    ref_y, ref_dx, ref_grads = run_layer(layer32, x32, dy32)
    timer = make_timer(quick=args.quick)
    meta["timing_method"] = timer.method
    rows = []
    for mode in ("torch", "fla", "fla_ascend"):
        if mode == "fla" and not any(meta["transformers_bound_packages"].values()):
            rows.append(dict(path=mode, note="flash-linear-attention not importable: transformers bound no package"))
            continue
        set_mode(mq, originals, mode)
        row = dict(path=mode)
        with torch.no_grad():
            row["out_rel_rmse"] = rel_rmse(ref_y, layer(x))
            row["fwd_ms"] = timer(lambda: layer(x))
        try:
            y, dx, grads = run_layer(layer, x, dy)
            row["dx_rel_rmse"] = rel_rmse(ref_dx, dx)
            row["max_param_grad_rel_rmse"] = max(rel_rmse(ref_grads[n], g) for n, g in grads.items())
            xg = x.detach().requires_grad_()
            row["fwdbwd_ms"] = timer(lambda: layer(xg).backward(dy), grad_to_none=[xg, *layer.parameters()])
        except Exception as e:  # noqa: BLE001  (fla's Hopper refusal is a RuntimeError; record any)
            row["fwdbwd_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        rows.append(row)
        print(row, flush=True)
    set_mode(mq, originals, "fla")  # leave transformers as it was
    for row in rows:
        for other in ("fwd_ms", "fwdbwd_ms"):
            base = next((r.get(other) for r in rows if r["path"] == "torch"), None)
            if row.get(other) and base:
                row[other.replace("_ms", "_speedup_vs_torch")] = base / row[other]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "qwen3_next_layer.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    cols = ["path", "out_rel_rmse", "dx_rel_rmse", "max_param_grad_rel_rmse", "fwd_ms", "fwdbwd_ms",
            "fwd_speedup_vs_torch", "fwdbwd_speedup_vs_torch", "fwdbwd_error", "note"]
    lines = [f"Qwen3-Next GatedDeltaNet layer, B{args.B} T{args.T} {args.dtype}, {meta['gpu']}; errors vs the fp32 "
             f"PyTorch path; {timer.method}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(
            f"{row[c]:.4g}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in cols) + " |")
    (args.out / "qwen3_next_layer.md").write_text("\n".join(lines) + "\n\n" + json.dumps(meta, indent=2) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
