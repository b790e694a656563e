"""Time a whole :class:`~fla_ascend.layers.GatedDeltaNet` layer: :func:`bench_layer`, behind
``fla-ascend bench --layer`` (:mod:`fla_ascend.bench.cli`, after a correctness gate) and
``benchmarks/side_by_side_h200.py``."""
from __future__ import annotations

import time

import torch

from fla_ascend import backend
from fla_ascend.layers import GatedDeltaNet

__all__ = ["bench_layer"]


def bench_layer(
    batch_size: int = 1,
    seq_len: int = 4096,
    dtype: torch.dtype = torch.bfloat16,
    mode: str = "fwdbwd",
    warmup: int = 3,
    repeat: int = 10,
    layer: GatedDeltaNet | None = None,
    device=None,
) -> dict:
    """Time a whole :class:`~fla_ascend.layers.GatedDeltaNet` layer (``fla-ascend bench --layer``).

    Args:
        batch_size, seq_len: input ``[batch_size, seq_len, hidden_size]``.
        dtype: parameter and input dtype.
        mode: ``"fwd"`` (inference forward, no autograd) or ``"fwdbwd"`` (forward + backward of
            ``out.sum()`` through every parameter).
        warmup, repeat: untimed and timed iterations.
        layer: the layer to time (default: Qwen3-Next's configuration).
        device: default :func:`fla_ascend.backend.device`.

    Returns:
        ``{"mode", "batch_size", "seq_len", "dtype", "ms"}`` with ``ms`` the median of ``repeat``
        timed iterations in milliseconds (device-synchronised wall clock).

    Raises:
        ValueError: unknown ``mode``.
    """
    if mode not in ("fwd", "fwdbwd"):
        raise ValueError(f"mode must be 'fwd' or 'fwdbwd', got {mode!r}")
    device = device or backend.device()
    layer = layer or GatedDeltaNet(device=device, dtype=dtype)
    x = torch.randn(batch_size, seq_len, layer.hidden_size, device=device, dtype=dtype)
    sync = getattr(torch, device.type).synchronize if device.type in ("cuda", "npu") else (lambda: None)

    def once():
        if mode == "fwd":
            with torch.no_grad():
                layer(x)
        else:
            layer.zero_grad(set_to_none=True)
            layer(x.requires_grad_())[0].float().sum().backward()

    for _ in range(warmup):
        once()
    times = []
    for _ in range(repeat):
        sync()
        t = time.perf_counter()
        once()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return {"mode": mode, "batch_size": batch_size, "seq_len": seq_len, "dtype": str(dtype),
            "ms": times[len(times) // 2]}
