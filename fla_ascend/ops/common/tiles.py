"""Tile sizes of the chunk stages on an NPU, chosen by the UB model (DESIGN.md principle 4)."""
from __future__ import annotations

import torch

from fla_ascend import backend
from fla_ascend.tiling.ub import fit_tiles


def npu_tiles(tiles, chunk_size: int, x: torch.Tensor, candidates: dict, **fixed) -> dict | None:
    """Largest ``candidates`` whose declared live ``tiles`` fit the running chip's UB, or ``None``
    off an NPU (the caller then uses its CUDA / interpreter sizes).

    Args:
        tiles: the kernel's declared live tiles (:class:`fla_ascend.tiling.ub.Tile`).
        chunk_size: ``BT``; x: a tensor of the kernel's input dtype (gives ``in_bytes``).
        candidates: size name -> allowed values; fixed: other sizes (``BK``, ``BV``...).

    Returns:
        The chosen sizes; with ``"multibuffer": False`` added when they fit only without the
        compiler's double buffering (pass it on as a launch option).

    Raises:
        ValueError: no candidate combination fits even without double buffering.
    """
    if backend.device_type() != "npu":
        return None
    fixed = {"BT": chunk_size, "in_bytes": x.element_size(), **fixed}
    try:
        return fit_tiles(tiles, candidates, fixed=fixed)
    except ValueError:
        # Without double buffering each tile is charged once: slower DMA overlap, but it fits
        # (e.g. the K = 256 state recurrences, whose whole-K tiles are live at once).
        return {**fit_tiles(tiles, candidates, fixed=fixed, multibuffer=1), "multibuffer": False}
