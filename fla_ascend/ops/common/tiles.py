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

    Raises:
        ValueError: no candidate combination fits (from :func:`fit_tiles`).
    """
    if backend.device_type() != "npu":
        return None
    return fit_tiles(tiles, candidates, fixed={"BT": chunk_size, "in_bytes": x.element_size(), **fixed})
