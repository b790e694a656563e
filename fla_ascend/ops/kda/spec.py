"""Specs of the KDA ops (:mod:`fla_ascend.ops.spec`): ``chunk_kda`` with its stages in
:mod:`fla_ascend.ops.kda` and the gated delta rule's state stages (their per-channel-decay variant).

The named shapes are Kimi Linear's KDA layer (32 heads, head dim 128, no grouped value heads) at
the prefill lengths flash-linear-attention's KDA kernels are measured at.
"""
from __future__ import annotations

import math

import torch

from fla_ascend.ops.spec import Input, Kernel, OpSpec, backward_if_any, element_size
from fla_ascend.tiling.ub import Tile

ORDER = 5
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`): after the gated delta rule."""

NAMED_SHAPES = {
    "kimi-linear": dict(B=1, T=4096, H=32, HV=32, K=128, V=128),
    "kda-t32k": dict(B=1, T=32768, H=32, HV=32, K=128, V=128),
}
SHAPE_GROUPS = {"kda-anchors": ("kimi-linear", "kda-t32k")}

# q normal, k L2-normalised, v normal, g = logsigmoid(rand) per channel, beta = sigmoid(rand); the fp32
# initial state 0.1 * normal (the estimate's call)
_INPUTS = (
    Input("q", "B T H K"),
    Input("k", "B T H K", transform="F.normalize(x, p=2, dim=-1)"),
    Input("v", "B T HV V"),
    Input("g", "B T HV K", draw="rand", transform="F.logsigmoid(x)"),
    Input("beta", "B T HV", draw="rand", transform="x.sigmoid()"),
    Input("initial_state", "B HV K V", dtype="float32", transform="0.1 * x", optional=True),
)

DTYPE = torch.bfloat16  # what the NPU runs; nothing is computed (launches are captured)
HEAD_DIMS = (16, 64, 100, 128, 256)
CHUNK_SIZES = (16, 32, 64)


def _chunk(K=128, V=128, BT=64, varlen=False, gate=False, lower_bound=None):
    def run():
        from fla_ascend.ops.kda.chunk import chunk_kda

        B = 1 if varlen else 2
        T, H, HV = 256, 2, 4
        q = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=True)
        k = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=True)
        v = torch.randn(B, T, HV, V, dtype=DTYPE, requires_grad=True)
        g = torch.randn(B, T, HV, K, dtype=DTYPE, requires_grad=True)
        beta = torch.rand(B, T, HV, dtype=DTYPE, requires_grad=True)
        cu = torch.tensor([0, 100, 160, T], dtype=torch.long) if varlen else None
        h0 = torch.randn(3 if varlen else B, HV, K, V, requires_grad=True)
        extra = {}
        if gate:
            extra = dict(use_gate_in_kernel=True, A_log=torch.randn(HV), dt_bias=torch.randn(HV * K),
                         lower_bound=lower_bound)
        o, ht = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                          chunk_size=BT, **extra)
        backward_if_any(o.float().sum() + ht.sum())
    return run


CHUNK_SCENARIOS = {
    "K128-BT64": _chunk(),
    "K128-BT32": _chunk(BT=32),
    "K128-BT16": _chunk(BT=16),
    "K256-BT64": _chunk(K=256, V=256),
    "K64-BT64": _chunk(K=64, V=64),
    "K100-V16-BT64": _chunk(K=100, V=16),
    "varlen-K128-BT64": _chunk(varlen=True),
    "gate-K128-BT64": _chunk(gate=True),
    "gate-lb-K128-BT64": _chunk(gate=True, lower_bound=-5.0),
}
CHUNK_FULL = {f"{'varlen-' if vl else ''}K{K}-V{V}-BT{BT}": _chunk(K=K, V=V, BT=BT, varlen=vl)
              for K in HEAD_DIMS for V in HEAD_DIMS for BT in CHUNK_SIZES for vl in (False, True)}
CHUNK_FULL.update({f"gate-{'lb-' if lb else ''}K128-BT{BT}": _chunk(BT=BT, gate=True, lower_bound=lb)
                   for BT in CHUNK_SIZES for lb in (None, -5.0)})


def _bytes(shape, dtype, mode):
    """Unavoidable traffic: q, k (``B T H K``), v (``B T HV V``), g (``B T HV K``), beta (``B T HV``)
    read, o written, the fp32 final state written; fwdbwd adds the inputs read again, ``do`` and
    ``dht`` read and every gradient written."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    e = element_size(dtype)
    inputs = (2 * B * T * H * K + B * T * HV * V + B * T * HV * K + B * T * HV) * e
    out = B * T * HV * V * e
    state = B * HV * K * V * 4
    total = inputs + out + state
    if mode == "fwdbwd":
        total += inputs + out + state + inputs
    return total


def _flops(shape, mode, chunk=64):
    """Matmul flops of the chunked algorithm per chunk of ``C`` tokens and value head: ``Akk`` and
    ``Aqk`` (``2 C^2 K`` each), ``w`` (``2 C^2 K``), ``u`` and ``Aqk v'`` (``2 C^2 V`` each), ``w h``,
    ``q h``, ``k^T v'`` (``2 C K V`` each), ``C^3`` for the inverse; fwdbwd is 3x the forward."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    C = min(chunk, T)
    per_chunk = 2 * C * C * K * 3 + 2 * C * C * V * 2 + 2 * C * K * V * 3 + C ** 3
    fwd = B * HV * math.ceil(T / C) * per_chunk
    return fwd * (3 if mode == "fwdbwd" else 1)


# flash-linear-attention's KDA kernels, by name, in order of precedence
_FLA_STAGES = (
    (r"gate|cumsum", "gate cumsum"),
    (r"bwd_intra", "intra bwd"),
    (r"dAv", "dAqk, dv local"),
    (r"wy_dqkg|wy_bwd|prepare_wy", "WY bwd, dq dk dg"),
    (r"bwd_dh|dhu", "state dh"),
    (r"fwd_intra|intra_token|kkt|solve_tril", "intra (Akk, Aqk)"),
    (r"recompute_w_u|wy_fwd", "WY fwd (inverse, w u)"),
    (r"fwd_h|h_fwd", "state h"),
    (r"fwd_o|chunk_o|gla", "output o"),
    (r"l2norm|l2_norm", "l2norm"),
)

_K = "fla_ascend.ops.kda."
_F32 = "fp32"
CHUNK_KERNELS = (
    Kernel(_K + "gate.kda_gate_cumsum_kernel", "vector",
           [Tile((8, "BT", "BK"), _F32, "g, its activation and cumsum temporaries", buffered=False)],
           "gate cumsum", "chunk"),
    Kernel(_K + "intra.kda_intra_fwd_kernel", "cube",
           [Tile((2, 16, "BT"), _F32, "Akk, Aqk rows", buffered=False),
            Tile((4, 16, "BK"), _F32, "q, k, G rows and their factors"),
            Tile((3, "BT", "BK"), _F32, "k, G columns and the scaled k")],
           "intra (Akk, Aqk)", "chunk"),
    Kernel(_K + "intra.kda_wy_fwd_kernel", "cube",
           [Tile((8, "BT", "BT"), _F32, "Akk, its inverse and the inverse's products", buffered=False),
            Tile((3, "BT", "BK"), _F32, "k, G, w"), Tile((2, "BT", "BV"), _F32, "v, u")],
           "WY fwd (inverse, w u)", "chunk"),
    Kernel(_K + "output.kda_fwd_o_kernel", "cube",
           [Tile(("BT", "BT"), _F32, "Aqk", buffered=False), Tile((3, "BT", "BK"), _F32, "q, G, q exp(G)"),
            Tile(("BK", "BV"), _F32, "h"), Tile((2, "BT", "BV"), _F32, "v', o")],
           "output o", "chunk"),
    Kernel(_K + "output.kda_bwd_dav_kernel", "cube",
           [Tile((3, "BT", "BT"), _F32, "Aqk, dAqk, the causal mask", buffered=False),
            Tile((3, "BT", "BV"), _F32, "do, v', dv local")],
           "dAqk, dv local", "chunk"),
    Kernel(_K + "intra.kda_wy_bwd_kernel", "cube",
           [Tile((4, "BT", "BT"), _F32, "Ai, dAi and the dAkk products", buffered=False),
            Tile((10, "BT", "BK"), _F32, "q, k, G, dq, dk, dw, dG blocks"),
            Tile((4, "BT", "BV"), _F32, "do, v, v', dv'"), Tile((2, "BK", "BV"), _F32, "h, dh")],
           "WY bwd, dq dk dg", "chunk"),
    Kernel(_K + "intra.kda_intra_bwd_kernel", "cube",
           [Tile((4, 16, "BT"), _F32, "dAkk, dAqk rows and columns", buffered=False),
            Tile((8, 16, "BK"), _F32, "q, k, G rows, their gradients"),
            Tile((5, "BT", "BK"), _F32, "q, k, G of the chunk and their factors")],
           "intra bwd", "chunk"),
    Kernel(_K + "gate.kda_gate_cumsum_bwd_kernel", "vector",
           [Tile((10, "BT", "BK"), _F32, "dG, g, reverse cumsum and activation temporaries", buffered=False)],
           "gate cumsum", "chunk"),
)

SPECS = [
    OpSpec(
        name="chunk_kda",
        entry="fla_ascend.ops.kda.chunk:chunk_kda",
        reference="fla_ascend.ops.kda.reference:chunk_kda_ref",
        torch_ref="fla_ascend.ops.kda.reference:naive_recurrent_kda",
        fla="fla.ops.kda:chunk_kda",
        dims=("B", "T", "H", "HV", "K", "V"),
        inputs=_INPUTS,
        outputs=("o", "final_state"),
        call_kwargs={"output_final_state": True},
        estimate_kwargs={"initial_state": True},
        shapes=SHAPE_GROUPS["kda-anchors"],
        ci_shape=dict(B=1, T=256, H=2, HV=2, K=128, V=128),
        named_shapes=NAMED_SHAPES,
        shape_groups=SHAPE_GROUPS,
        kernels=CHUNK_KERNELS,
        scenarios={"chunk": (CHUNK_SCENARIOS, CHUNK_FULL)},
        fla_stages=_FLA_STAGES,
        bytes_moved=_bytes,
        flops=_flops,
        torch_ref_max_tokens=2048,
    ),
]
