"""Specs of the causal depthwise convolution ops (:mod:`fla_ascend.ops.spec`): ``causal_conv1d`` and
``causal_conv1d_update`` (decode). The named shapes are the conv anchors (silu, bias)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from fla_ascend.ops.causal_conv1d import kernels
from fla_ascend.ops.spec import Input, Kernel, OpSpec, backward_if_any, element_size

ORDER = 10
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`)."""

NAMED_SHAPES = {
    "conv-b4-t4096": dict(B=4, T=4096, D=4096, W=4),
    "conv-t32k": dict(B=1, T=32768, D=8192, W=4),
}
SHAPE_GROUPS = {"conv-anchors": ("conv-b4-t4096", "conv-t32k")}

# The launch matrix of the NPU check: the conv tiles (BT, BD) follow from D (BD = min(128, next_pow2(D)))
# and the unrolled taps from W; varlen, activation and states are constexprs.
CONV_DIMS = (16, 64, 100, 256, 2048)  # BD = 16, 64, 128 (masked), 128, 128 with many channel tiles
DTYPE = torch.bfloat16  # what the NPU runs; nothing is computed (launches are captured)


def _conv(D=256, W=4, varlen=False, update=False, act=True, state=True):
    def run():
        from fla_ascend.ops.causal_conv1d.conv import causal_conv1d, causal_conv1d_update

        B, T = (1, 256) if varlen else (2, 256)
        w = torch.randn(D, W, dtype=DTYPE, requires_grad=True)
        b = torch.randn(D, dtype=DTYPE, requires_grad=True)
        if update:
            x = torch.randn(3, D, dtype=DTYPE)
            cache = torch.randn(3, D, W, dtype=DTYPE)
            causal_conv1d_update(x, cache, weight=w.detach(), bias=b.detach(), activation="silu")
            return
        x = torch.randn(B, T, D, dtype=DTYPE, requires_grad=True)
        cu = torch.tensor([0, 100, 160, T], dtype=torch.long) if varlen else None
        N = 3 if varlen else B
        h0 = torch.randn(N, D, W, dtype=DTYPE, requires_grad=True) if state else None
        y, ht = causal_conv1d(x, w, b if act else None, initial_state=h0, output_final_state=state,
                              activation="silu" if act else None, cu_seqlens=cu)
        backward_if_any(y.float().sum() + (ht.float().sum() if ht is not None else 0.0))
    return run


CONV_SCENARIOS = {"D256-W4": _conv(), "D2048-W4": _conv(D=2048), "varlen-D256-W4": _conv(varlen=True),
                  "D200-W3-plain": _conv(D=200, W=3, act=False, state=False), "D64-W2": _conv(D=64, W=2),
                  "D16-W1": _conv(D=16, W=1)}
CONV_FULL = {f"{'varlen-' if vl else ''}D{D}-W{W}{'' if act else '-plain'}":
             _conv(D=D, W=W, varlen=vl, act=act, state=act)
             for D in CONV_DIMS for W in (1, 2, 3, 4) for vl in (False, True) for act in (True, False)}
STATE_SCENARIOS = {k: v for k, v in CONV_SCENARIOS.items() if "plain" not in k}  # launched with states
STATE_FULL = {k: v for k, v in CONV_FULL.items() if "plain" not in k}
UPDATE_SCENARIOS = {"D256-W4": _conv(update=True), "D2048-W4": _conv(D=2048, update=True),
                    "D64-W2": _conv(D=64, W=2, update=True)}
UPDATE_FULL = {f"D{D}-W{W}": _conv(D=D, W=W, update=True) for D in CONV_DIMS for W in (1, 2, 3, 4)}


def conv_gate_ref(x, weight, bias, activation):
    """Float32 causal depthwise conv written with ``F.conv1d`` (left zero padding of ``W - 1``),
    then silu: the benchmark's correctness gate, independent of the op's own reference. Returns
    ``(y, None)`` like the op without a final state."""
    W = weight.shape[-1]
    xt = F.pad(x.float().transpose(1, 2), (W - 1, 0))
    y = F.conv1d(xt, weight.float().unsqueeze(1), bias.float(), groups=x.shape[-1]).transpose(1, 2)
    return (F.silu(y) if activation in ("silu", "swish") else y), None


def _bytes(shape, dtype, mode):
    """x read and y written (``B T D`` each; weight and bias negligible); fwdbwd adds x and dy
    read and dx written."""
    n = shape["B"] * shape["T"] * shape["D"] * element_size(dtype)
    return 2 * n + (3 * n if mode == "fwdbwd" else 0)


def _flops(shape, mode):
    """``2 W`` per output element plus ~4 for bias and silu; fwdbwd 3x."""
    n = shape["B"] * shape["T"] * shape["D"] * (2 * shape["W"] + 4)
    return n * (3 if mode == "fwdbwd" else 1)


_M = "fla_ascend.ops.causal_conv1d.kernels."
# flags (ACT, USE_H0, HAS_DHT) enter the tile sizes as 0/1: a tile of a switched-off path has size 0
SPECS = [
    OpSpec(
        name="causal_conv1d",
        entry="fla_ascend.ops.causal_conv1d.conv:causal_conv1d",
        reference="fla_ascend.ops.causal_conv1d.spec:conv_gate_ref",
        fla="fla.modules.causal_conv1d:causal_conv1d",
        dims=("B", "T", "D", "W"),
        # x normal; depthwise weight [D, W] and bias [D] like a default nn.Conv1d init (uniform in +-1/sqrt(W))
        inputs=(Input("x", "B T D"),
                Input("weight", "D W", draw="rand", transform="(2 * x - 1) * W ** -0.5"),
                Input("bias", "D", draw="rand", transform="(2 * x - 1) * W ** -0.5")),
        outputs=("y", "final_state"),
        call_kwargs={"activation": "silu"},
        shapes=SHAPE_GROUPS["conv-anchors"],
        ci_shape=dict(B=2, T=256, D=256, W=4),
        named_shapes=NAMED_SHAPES,
        shape_groups=SHAPE_GROUPS,
        kernels=(
            Kernel(_M + "causal_conv1d_fwd_kernel", "vector", kernels.FWD_TILES, "conv fwd", "conv"),
            Kernel(_M + "causal_conv1d_bwd_kernel", "vector", kernels.BWD_TILES, "conv bwd", "conv"),
            Kernel(_M + "causal_conv1d_states_fwd_kernel", "vector", kernels.STATES_FWD_TILES, "conv states",
                   "conv-states"),
            Kernel(_M + "causal_conv1d_states_bwd_kernel", "vector", kernels.STATES_BWD_TILES, "conv states",
                   "conv-states"),
        ),
        scenarios={"conv": (CONV_SCENARIOS, CONV_FULL), "conv-states": (STATE_SCENARIOS, STATE_FULL)},
        fla_stages=((r"states", "conv states"), (r"silu|_add_kernel", "conv activation / add"),
                    (r"dwdb|dh0", "conv dweight / dbias / dh0"),
                    (r"conv1d.*bwd|bwd.*conv1d|bwd_dx|bwd_seq", "conv bwd"), (r"conv1d", "conv fwd")),
        bytes_moved=_bytes,
        flops=_flops,
    ),
    OpSpec(
        name="causal_conv1d_update",
        entry="fla_ascend.ops.causal_conv1d.conv:causal_conv1d_update",
        reference="fla_ascend.ops.causal_conv1d.reference:causal_conv1d_update_ref",
        fla="fla.modules.causal_conv1d:causal_conv1d_update",
        dims=("B", "D", "W"),
        inputs=(Input("x", "B D", grad=False), Input("cache", "B D W", grad=False),
                Input("weight", "D W", draw="rand", transform="(2 * x - 1) * W ** -0.5", grad=False),
                Input("bias", "D", draw="rand", transform="(2 * x - 1) * W ** -0.5", grad=False)),
        outputs=("y",),
        call_kwargs={"activation": "silu"},
        modes=("fwd",),
        shapes=SHAPE_GROUPS["conv-anchors"],
        ci_shape=dict(B=2, D=256, W=4),
        kernels=(Kernel(_M + "causal_conv1d_update_kernel", "vector", kernels.UPDATE_TILES, "conv update",
                        "update"),),
        scenarios={"update": (UPDATE_SCENARIOS, UPDATE_FULL)},
        benchmark=False,
    ),
]
