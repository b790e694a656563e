"""Specs of the norms (:mod:`fla_ascend.ops.spec`): ``l2norm`` (GatedDeltaNet's q / k norm),
``rms_norm_gated`` (its output norm) and ``rms_norm`` (the same kernels without a gate). They are
measured at the GatedDeltaNet layer's shapes (``qwen3next``, ``gdn-t32k``)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from fla_ascend.ops.norm.rms_norm_gated import BWD_TILES as RMS_GATED_BWD_TILES
from fla_ascend.ops.spec import Input, Kernel, OpSpec, backward_if_any, element_size
from fla_ascend.tiling.ub import Tile

ORDER = 20
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`)."""

NORM_DIMS = (16, 64, 100, 128, 256, 512, 1024, 2048, 4096, 8192)
DTYPE = torch.bfloat16  # what the NPU runs; nothing is computed (launches are captured)
SHAPES = ("qwen3next", "gdn-t32k")


def _l2norm(D=128):
    def run():
        from fla_ascend.ops.norm.l2norm import l2norm

        x = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        backward_if_any(l2norm(x).float().sum())
    return run


def _rms_gated(D=128):
    def run():
        from fla_ascend.ops.norm.rms_norm_gated import rms_norm_gated

        x = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        g = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        w = torch.ones(D, dtype=DTYPE, requires_grad=True)
        backward_if_any(rms_norm_gated(x, g, w).float().sum())
    return run


def l2norm_gate_ref(x):
    """Float32 ``x / sqrt(sum(x^2) + 1e-6)`` over the last dim (flash-linear-attention's eps)."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + 1e-6)


def rms_norm_gated_gate_ref(x, g, weight, bias=None, activation="swish", eps=1e-6):
    """Float32 ``x * rsqrt(mean(x^2) + eps) * weight * silu(g)`` over the last dim."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y * F.silu(g.float())


def _rowwise_bytes(n_tensors_fwd, n_tensors_bwd, dims):
    def count(shape, dtype, mode):
        n = math.prod(shape[d] for d in dims) * element_size(dtype)
        return n * (n_tensors_fwd + (n_tensors_bwd if mode == "fwdbwd" else 0))

    return count


_L2 = ("B", "T", "H", "K")
_RMS = ("B", "T", "HV", "V")
_M = "fla_ascend.ops.norm."
SPECS = [
    OpSpec(
        name="l2norm",
        entry="fla_ascend.ops.norm.l2norm:l2norm",
        reference="fla_ascend.ops.norm.spec:l2norm_gate_ref",
        fla="fla.modules.norm.l2norm:l2norm",
        dims=_L2,
        inputs=(Input("x", "B T H K"),),
        outputs=("y",),
        shapes=SHAPES,
        ci_shape=dict(B=2, T=256, H=4, K=128),
        kernels=(
            Kernel(_M + "l2norm.l2norm_fwd_kernel", "vector",
                   [Tile(("BM", "BD"), "in", "x", buffered=False),
                    Tile((4, "BM", "BD"), "fp32", "x fp32, y, temps", buffered=False),
                    Tile((24, "BM"), "fp32", "row norms", buffered=False),
                    Tile((64,), "fp32", "scalars", buffered=False)], "l2norm", "l2norm"),
            Kernel(_M + "l2norm.l2norm_bwd_kernel", "vector",
                   [Tile((2, "BM", "BD"), "in", "x, dy", buffered=False),
                    Tile((6, "BM", "BD"), "fp32", "float32 x, dy, dx and temporaries", buffered=False)],
                   "l2norm", "l2norm"),
        ),
        scenarios={"l2norm": ({f"D{D}": _l2norm(D) for D in (128, 256, 8192)},
                              {f"D{D}": _l2norm(D) for D in NORM_DIMS})},
        fla_stages=((r"l2norm|l2_norm", "l2norm"),),
        bytes_moved=_rowwise_bytes(2, 3, _L2),  # x in, y out; bwd: x, dy in, dx out
        flops=lambda shape, mode: 4 * math.prod(shape[d] for d in _L2) * (3 if mode == "fwdbwd" else 1),
    ),
    OpSpec(
        name="rms_norm_gated",
        entry="fla_ascend.ops.norm.rms_norm_gated:rms_norm_gated",
        reference="fla_ascend.ops.norm.spec:rms_norm_gated_gate_ref",
        fla="fla.modules.norm.fused_norm_gate:rms_norm_gated",
        dims=_RMS,
        # GatedDeltaNet's output norm: o and gate z [B, T, HV, V], weight [V] near 1
        inputs=(Input("x", "B T HV V"), Input("g", "B T HV V"), Input("weight", "V", transform="1 + 0.1 * x")),
        outputs=("y",),
        call_kwargs={"bias": None, "activation": "swish", "eps": 1e-6},
        shapes=SHAPES,
        ci_shape=dict(B=2, T=256, HV=4, V=128),
        kernels=(
            Kernel(_M + "rms_norm_gated.rms_norm_gated_fwd_kernel", "vector",
                   # fitted to bishengir-compile's A2 plans: 125344 / 125664 B at D 128 / 256 (BM x BD = 4096),
                   # 180388 B at D 8192 (BM 1): about 20 B per row element plus a fixed part
                   [Tile((2, "BM", "BD"), "in", "x, g", buffered=False),
                    Tile((4, "BM", "BD"), "fp32", "float32 x, g, y, a temporary", buffered=False),
                    Tile((12288,), "fp32", "weight, bias, row statistics and scratch: the plan's fixed part",
                         buffered=False)], "norm", "rms"),
            Kernel(_M + "rms_norm_gated.rms_norm_gated_bwd_kernel", "vector", RMS_GATED_BWD_TILES, "norm", "rms"),
        ),
        scenarios={"rms": ({f"D{D}": _rms_gated(D) for D in (128, 256, 8192)},
                           {f"D{D}": _rms_gated(D) for D in NORM_DIMS})},
        fla_stages=((r"norm", "norm"),),
        bytes_moved=_rowwise_bytes(3, 5, _RMS),  # x, g in, y out; bwd: x, g, dy in, dx, dg out
        flops=lambda shape, mode: 10 * math.prod(shape[d] for d in _RMS) * (3 if mode == "fwdbwd" else 1),
    ),
    OpSpec(
        name="rms_norm",
        entry="fla_ascend.ops.norm.rms_norm_gated:rms_norm",
        reference=None,
        fla="fla.modules.norm.layernorm:rms_norm",
        dims=_RMS,
        inputs=(Input("x", "B T HV V"), Input("weight", "V", transform="1 + 0.1 * x")),
        outputs=("y",),
        call_kwargs={"bias": None},
        shapes=SHAPES,
        ci_shape=dict(B=2, T=256, HV=4, V=128),
        kernels=(),  # the kernels of rms_norm_gated, launched without a gate
        scenarios={},
        benchmark=False,
    ),
]
