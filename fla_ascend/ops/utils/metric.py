"""Accuracy metric used by tests and the benchmark's correctness gate."""
from __future__ import annotations

import torch


def rel_rmse(ref: torch.Tensor, out: torch.Tensor) -> float:
    """Relative RMSE ratio ``||ref - out||_2 / ||ref||_2`` computed in float64.

    Returns ``inf`` when ``out`` holds a NaN or Inf (unwritten NaN-filled outputs fail), and
    the absolute norm of the difference when ``ref`` is all zeros.

    Raises:
        ValueError: ``ref`` and ``out`` have different shapes.
    """
    if ref.shape != out.shape:
        raise ValueError(f"shapes differ: ref {tuple(ref.shape)} vs out {tuple(out.shape)}")
    ref64 = ref.detach().to(torch.float64).cpu()
    out64 = out.detach().to(torch.float64).cpu()
    if not torch.isfinite(out64).all():
        return float("inf")
    diff = (ref64 - out64).norm().item()
    base = ref64.norm().item()
    return diff / base if base > 0 else diff
