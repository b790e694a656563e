"""The chunk stages' per-backend choices (fla_ascend.ops.common.tiles): dot precision policy."""
from __future__ import annotations

import pytest
import torch

from fla_ascend.ops.common import tiles


@pytest.mark.parametrize("choice", ["tf32x3", "tf32", "input"])
def test_dot_precision_cuda_table(choice, monkeypatch):
    """On CUDA the table decides for bf16 inputs; float16 and float32 inputs always keep tf32x3."""
    monkeypatch.setattr(tiles.backend, "device_type", lambda: "cuda")
    monkeypatch.setattr(tiles.backend, "is_interpreter", lambda: False)
    monkeypatch.setitem(tiles.CUDA_LAUNCH, "wy_bwd", {**tiles.CUDA_LAUNCH["wy_bwd"], "precision": choice})
    assert tiles.dot_precision("wy_bwd", torch.bfloat16) == choice
    assert tiles.dot_precision("wy_bwd", torch.float16) == "tf32x3"
    assert tiles.dot_precision("wy_bwd", torch.float32) == "tf32x3"


@pytest.mark.parametrize("device_type", ["cpu", "npu"])
def test_dot_precision_exact_elsewhere(device_type, monkeypatch):
    """The interpreter and the Ascend cube multiply fp32 exactly: always "ieee" there."""
    monkeypatch.setattr(tiles.backend, "device_type", lambda: device_type)
    monkeypatch.setitem(tiles.CUDA_LAUNCH, "wy_bwd", {**tiles.CUDA_LAUNCH["wy_bwd"], "precision": "input"})
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert tiles.dot_precision("wy_bwd", dtype) == "ieee"


def test_dot_precision_interpreter_on_cuda_host(monkeypatch):
    """TRITON_INTERPRET=1 on a CUDA machine: the interpreter's bf16 dots are wrong, so "ieee"."""
    monkeypatch.setattr(tiles.backend, "device_type", lambda: "cuda")
    monkeypatch.setattr(tiles.backend, "is_interpreter", lambda: True)
    monkeypatch.setitem(tiles.CUDA_LAUNCH, "wy_bwd", {**tiles.CUDA_LAUNCH["wy_bwd"], "precision": "input"})
    assert tiles.dot_precision("wy_bwd", torch.bfloat16) == "ieee"


@pytest.mark.parametrize("bk, bv, want", [(64, 32, (64, 64)), (16, 16, (32, 32)), (32, 16, (32, 32)),
                                          (64, 64, (64, 64)), (64, 128, (64, 128)), (16, 64, (32, 64))])
def test_wy_slabs_off_the_npu(bk, bv, want):
    """The WY stages' slab rule off the NPU (Hopper findings in cases.md): at least 32 wide and
    the V slab never narrower than the K slab."""
    from fla_ascend.ops.common.wy import off_npu_slabs

    assert off_npu_slabs(bk, bv) == want
