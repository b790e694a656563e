"""The chunk stages' per-backend choices (fla_ascend.ops.common.tiles): dot precision policy."""
from __future__ import annotations

import pytest
import torch

from fla_ascend.ops.common import tiles


@pytest.mark.parametrize("choice", ["tf32x3", "tf32", "input"])
def test_dot_precision_cuda_table(choice, monkeypatch):
    """On CUDA the table decides; "input" (cast to the input dtype) never applies to float32
    inputs, which keep tf32x3."""
    monkeypatch.setattr(tiles.backend, "device_type", lambda: "cuda")
    monkeypatch.setitem(tiles.CUDA_LAUNCH, "wy_bwd", {**tiles.CUDA_LAUNCH["wy_bwd"], "precision": choice})
    assert tiles.dot_precision("wy_bwd", torch.bfloat16) == choice
    assert tiles.dot_precision("wy_bwd", torch.float16) == choice
    assert tiles.dot_precision("wy_bwd", torch.float32) == ("tf32x3" if choice == "input" else choice)


@pytest.mark.parametrize("device_type", ["cpu", "npu"])
def test_dot_precision_exact_elsewhere(device_type, monkeypatch):
    """The interpreter and the Ascend cube multiply fp32 exactly: always "ieee" there."""
    monkeypatch.setattr(tiles.backend, "device_type", lambda: device_type)
    monkeypatch.setitem(tiles.CUDA_LAUNCH, "wy_bwd", {**tiles.CUDA_LAUNCH["wy_bwd"], "precision": "input"})
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert tiles.dot_precision("wy_bwd", dtype) == "ieee"
