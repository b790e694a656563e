"""Specs of the gated delta rule ops (:mod:`fla_ascend.ops.spec`): ``chunk_gated_delta_rule`` with the
chunk stages of :mod:`fla_ascend.ops.common`, and ``fused_recurrent_gated_delta_rule``.

The named shapes are the GatedDeltaNet anchors (docs/bench.md, "Shapes"; flash-linear-attention
0.6.0 measured at them on the H200 in benchmarks/results/results.csv) and flash-linear-attention's own
default benchmark list, (B, T, H, D) with HV = H, K = V = D.
"""
from __future__ import annotations

import importlib
import math

import torch

from fla_ascend.ops.common import chunk_h, chunk_o, gva, wy
from fla_ascend.ops.gated_delta_rule import fused_recurrent
from fla_ascend.ops.spec import Input, Kernel, OpSpec, backward_if_any, element_size
from fla_ascend.tiling.ub import Tile

ORDER = 0
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`)."""

NAMED_SHAPES = {
    # GatedDeltaNet prefill anchors; the first is Qwen3-Next's layer shape.
    "qwen3next": dict(B=1, T=4096, H=16, HV=32, K=128, V=128),
    "gdn-b4-t4096": dict(B=4, T=4096, H=16, HV=16, K=128, V=128),
    "gdn-t32k": dict(B=1, T=32768, H=16, HV=32, K=128, V=128),
    "gdn-b8-t2048": dict(B=8, T=2048, H=32, HV=32, K=128, V=128),
    # decode anchors (T = 1, fp32 state in and out)
    "decode-b64": dict(B=64, T=1, H=16, HV=32, K=128, V=128),
    "decode-b256": dict(B=256, T=1, H=16, HV=32, K=128, V=128),
    # flash-linear-attention's default benchmark list
    "fla-b1-t8192-h96-d128": dict(B=1, T=8192, H=96, HV=96, K=128, V=128),
    "fla-b2-t16384-h16-d128": dict(B=2, T=16384, H=16, HV=16, K=128, V=128),
    "fla-b4-t2048-h16-d128": dict(B=4, T=2048, H=16, HV=16, K=128, V=128),
    "fla-b4-t4096-h64-d128": dict(B=4, T=4096, H=64, HV=64, K=128, V=128),
    "fla-b8-t2048-h32-d256": dict(B=8, T=2048, H=32, HV=32, K=256, V=256),
    "fla-b8-t1024-h8-d64": dict(B=8, T=1024, H=8, HV=8, K=64, V=64),
}
SHAPE_GROUPS = {
    "gdn-anchors": ("qwen3next", "gdn-b4-t4096", "gdn-t32k", "gdn-b8-t2048"),
    "decode-anchors": ("decode-b64", "decode-b256"),
    "fla-defaults": tuple(k for k in NAMED_SHAPES if k.startswith("fla-")),
}

# The inputs of the anchor measurements: q normal, k L2-normalised, v normal, g = logsigmoid(rand),
# beta = sigmoid(rand); the fp32 initial state 0.1 * normal (decode, and the estimate's chunk call).
_QKVGB = (
    Input("q", "B T H K"),
    Input("k", "B T H K", transform="F.normalize(x, p=2, dim=-1)"),
    Input("v", "B T HV V"),
    Input("g", "B T HV", draw="rand", transform="F.logsigmoid(x)"),
    Input("beta", "B T HV", draw="rand", transform="x.sigmoid()"),
)
_STATE = dict(shape="B HV K V", dtype="float32", transform="0.1 * x")

# The matrix of launches the NPU check compiles. The chunk stages' BK/BV/multibuffer follow from K, V,
# the chunk size BT and the input dtype; the recurrence's BV from V. Flags are constexprs: varlen
# changes every chunk kernel, gates in kernel only the gate cumsum kernels, l2norm in kernel only the
# l2norm kernels (q and k are normalised before the chunk stages) and the fused recurrence. Launches
# that lower to the same text are merged before compiling (fla_ascend.check.compiled).
HEAD_DIMS = (16, 64, 100, 128, 256)
CHUNK_SIZES = (16, 32, 64)
DTYPE = torch.bfloat16  # what the NPU runs; nothing is computed (launches are captured)


def _scenario_inputs(T=256, H=2, HV=4, K=128, V=128, varlen=False, grad=True):
    B = 1 if varlen else 2
    q = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=grad)
    k = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=grad)
    v = torch.randn(B, T, HV, V, dtype=DTYPE, requires_grad=grad)
    g = torch.randn(B, T, HV, dtype=DTYPE, requires_grad=grad)
    beta = torch.rand(B, T, HV, dtype=DTYPE, requires_grad=grad)
    cu = torch.tensor([0, 100, 160, T], dtype=torch.long) if varlen else None
    N = 3 if varlen else B
    h0 = torch.randn(N, HV, K, V, dtype=torch.float32, requires_grad=grad)
    return q, k, v, g, beta, cu, h0


def _chunk(K=128, V=128, BT=64, varlen=False, gate=False, l2norm=False):
    def run():
        from fla_ascend.ops.gated_delta_rule.chunk import chunk_gated_delta_rule

        q, k, v, g, beta, cu, h0 = _scenario_inputs(K=K, V=V, varlen=varlen)
        extra = {}
        if gate:
            extra = dict(use_gate_in_kernel=True, A_log=torch.randn(v.shape[2]), dt_bias=torch.randn(v.shape[2]))
        o, ht = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                       chunk_size=BT, use_qk_l2norm_in_kernel=l2norm, **extra)
        backward_if_any(o.float().sum() + ht.sum())
    return run


def _recurrent(K=128, V=128, varlen=False, l2norm=True, fla_flags=False):
    """``fla_flags``: per-dim decays ``gk``/``gv``, per-value beta logits (``2 sigmoid``), a V-first state."""
    def run():
        from fla_ascend.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule

        q, k, v, g, beta, cu, h0 = _scenario_inputs(T=8 if not varlen else 12, K=K, V=V, varlen=varlen, grad=False)
        if varlen:
            cu = torch.tensor([0, 3, 7, 12], dtype=torch.long)
        extra = {}
        if fla_flags:
            B, T, HV = v.shape[:3]
            extra = dict(gk=-torch.rand(B, T, HV, K), gv=-torch.rand(B, T, HV, V), use_beta_sigmoid_in_kernel=True,
                         allow_neg_eigval=True, state_v_first=True)
            beta = torch.randn(B, T, HV, V, dtype=DTYPE)
            h0 = h0.transpose(-1, -2).contiguous()
        fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                                         cu_seqlens=cu, use_qk_l2norm_in_kernel=l2norm, **extra)
    return run


CHUNK_SCENARIOS = {
    "K128-BT64": _chunk(),
    "K128-BT32": _chunk(BT=32),
    "K128-BT16": _chunk(BT=16),
    "K256-V128-BT64": _chunk(K=256),
    "K256-BT64": _chunk(K=256, V=256),
    "K64-BT64": _chunk(K=64, V=64),
    "K100-V16-BT64": _chunk(K=100, V=16),
    "varlen-K128-BT64": _chunk(varlen=True),
    "gate-K128-BT64": _chunk(gate=True),
    "l2norm-K128-BT64": _chunk(l2norm=True),
}
CHUNK_FULL = {f"{'varlen-' if vl else ''}K{K}-V{V}-BT{BT}": _chunk(K=K, V=V, BT=BT, varlen=vl)
              for K in HEAD_DIMS for V in HEAD_DIMS for BT in CHUNK_SIZES for vl in (False, True)}
CHUNK_FULL.update({f"gate-{'varlen-' if vl else ''}K128-BT{BT}": _chunk(BT=BT, varlen=vl, gate=True)
                   for BT in CHUNK_SIZES for vl in (False, True)})
CHUNK_FULL.update({f"l2norm-K{K}-BT64": _chunk(K=K, V=K, l2norm=True) for K in HEAD_DIMS})

RECURRENT_SCENARIOS = {"K128": _recurrent(), "K256-V128": _recurrent(K=256), "K256": _recurrent(K=256, V=256),
                       "K16-V100": _recurrent(K=16, V=100), "varlen-K128": _recurrent(varlen=True),
                       "no-l2norm-K128": _recurrent(l2norm=False),
                       "gk-gv-vfirst-K128": _recurrent(fla_flags=True)}
RECURRENT_FULL = {f"{'varlen-' if vl else ''}{'' if l2 else 'no-l2norm-'}K{K}-V{V}": _recurrent(K, V, vl, l2)
                  for K in HEAD_DIMS for V in HEAD_DIMS for vl in (False, True) for l2 in (True, False)}


def _bytes(shape, dtype, mode, decode=False):
    """Unavoidable traffic: q, k (``B T H K``), v (``B T HV V``), g, beta (``B T HV``) read, o
    (``B T HV V``) written, the fp32 final state written (and for decode the fp32 initial state
    read). fwdbwd adds: the inputs read again, ``do`` and ``dht`` read, the gradients of q, k,
    v, g, beta written."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    e = element_size(dtype)
    inputs = (2 * B * T * H * K + B * T * HV * V + 2 * B * T * HV) * e
    out = B * T * HV * V * e
    state = B * HV * K * V * 4
    total = inputs + out + state + (state if decode else 0)
    if mode == "fwdbwd":
        total += inputs + out + state + inputs  # re-read inputs, read do and dht, write grads
    return total


def _chunk_flops(shape, mode, chunk=64):
    """Matmul flops of the chunked algorithm in reference.py, per chunk of ``C`` tokens and
    value head: ``k k^T``, ``q k^T`` (``2 C^2 K`` each), ``T k`` (``2 C^2 K``), ``T v`` and
    ``attn v'`` (``2 C^2 V`` each), ``w h``, ``q h``, ``k^T v'`` (``2 C K V`` each), plus
    ``C^3`` for the triangular solve. fwdbwd counts 3x the forward (the usual convention:
    backward ~ 2x forward)."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    C = min(chunk, T)
    per_chunk = 2 * C * C * K * 3 + 2 * C * C * V * 2 + 2 * C * K * V * 3 + C ** 3
    fwd = B * HV * math.ceil(T / C) * per_chunk
    return fwd * (3 if mode == "fwdbwd" else 1)


def _recurrent_flops(shape, mode):
    """Per token and value head: decay ``K V``, ``h^T k`` ``2 K V``, rank-1 update ``2 K V``,
    ``h^T q`` ``2 K V``: ``7 K V``."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    return 7 * B * T * HV * K * V


def _fla_hopper_prepare(provider: str, mode: str) -> dict:
    """flash-linear-attention 0.6.0 refuses its gated chunk backward on Hopper with Triton
    3.4 to 3.7.0 (github.com/fla-org/flash-linear-attention/issues/640). With the guard
    bypassed its bf16 gradients matched an fp64 recurrent reference on the H200 (relative RMSE
    0.0024-0.0042, 2026-11-29); the bypass is recorded in meta and the gate still checks the
    gradients."""
    if provider != "fla" or mode != "fwdbwd" or not torch.cuda.is_available():
        return {}
    if torch.cuda.get_device_capability()[0] != 9:
        return {}
    chunk_o_fla = importlib.import_module("fla.ops.common.chunk_o")
    if getattr(chunk_o_fla, "IS_NVIDIA_HOPPER", False):
        chunk_o_fla.IS_NVIDIA_HOPPER = False
        return {"fla_hopper_guard_bypassed":
                "fla.ops.common.chunk_o.IS_NVIDIA_HOPPER = False (flash-linear-attention issue 640)"}
    return {}


# flash-linear-attention's kernels of the chunked op, by name, in order of precedence
_FLA_CHUNK_STAGES = (
    (r"cumsum", "gate cumsum"),
    (r"gva|group_sum", "GVA group sum"),
    (r"dv_local", "dv local"),
    (r"dqkwg|dg_bwd", "dq dk dw dg"),
    (r"bwd_dh|dhu|h_bwd|delta_h_bwd", "state dh"),
    (r"wy_bwd|wy_repr_bwd|prepare_wy", "WY bwd"),
    (r"kkt|solve_tril|inverse|wy_fwd|recompute_w_u|fwd_intra", "WY fwd (kkt, inverse, w u)"),
    (r"fwd_h|h_fwd", "state h"),
    (r"fwd_o|o_fwd|chunk_o", "output o"),
    (r"l2norm|l2_norm", "l2norm"),
)

_C = "fla_ascend.ops.common."
# KDA's launches (scenarios "kda-*") run the per-channel-decay variant (GK), which reads k (and q) pre-scaled
# by the WY stage and no per-token gate: below the gated delta rule's variant, whose tiles the model declares
_GK_UNFITTED = ("ub_model_vs_plan", "kda-*", "the per-channel-decay variant (GK, chunk_kda) reads its operands "
                "pre-scaled and no per-token gate, so the model (the gated delta rule's tiles) is above its plan, "
                "1.3-2.3x at small head dims (K = 64, K = 100 with V = 16); it only picks narrower tiles there")
FWD_H_KERNEL = Kernel(_C + "chunk_h.chunk_fwd_h_kernel", "cube", chunk_h.FWD_H_TILES, "state h", "chunk",
                      allow=(_GK_UNFITTED,))
BWD_DH_KERNEL = Kernel(_C + "chunk_h.chunk_bwd_dh_kernel", "cube", chunk_h.BWD_DH_TILES, "state dh", "chunk",
                       allow=(_GK_UNFITTED,))
"""The state recurrences' records; ``chunk_kda`` (:mod:`fla_ascend.ops.kda.spec`) lists the same records
(their per-channel-decay ``GK`` variant runs in its ``chunk`` scenarios)."""
DIAG_INVERSE_KERNEL = Kernel(_C + "wy.chunk_wy_diag_inverse_kernel", "vector", wy.WY_DIAG_INVERSE_TILES,
                             "WY fwd (kkt, inverse, w u)", "chunk", npu_only=True,
                             allow=tuple(("not_launched", f"*BT{bt}*", f"launched at chunk_size 64 only "
                                          f"(wy.NPU_SPLIT_INVERSE_CHUNKS, kda.intra.NPU_SPLIT_INVERSE_CHUNKS); "
                                          f"chunk_size {bt} computes the inverse in one launch") for bt in (16, 32)))
"""The WY forward's diagonal-block inverse on the vector cores; ``chunk_kda`` lists the same record
under its own stage label (its WY forward runs it at chunk 64 on an NPU, zeroing the blocks it reads)."""
CHUNK_KERNELS = (
    Kernel(_C + "cumsum.chunk_gate_cumsum_kernel", "vector",
           # bishengir-compile's plan (A2, with the GATE_FLOOR count): 32.2-32.6 [BT, BH] fp32 tiles, 74 with
           # the gate activation in the kernel
           [Tile(("33 + 42 * USE_GATE", "BT", "BH"), "fp32", "g, beta, cumsum and activation temporaries",
                 buffered=False)], "gate cumsum", "chunk"),
    Kernel(_C + "wy.chunk_wy_fwd_kernel", "cube", wy.WY_FWD_TILES, "WY fwd (kkt, inverse, w u)", "chunk",
           sizes=lambda s: {**{k: v for k, v in s.items() if not isinstance(v, str)},
                            **wy.wy_fwd_mode_sizes(s["AI_MODE"])}),
    DIAG_INVERSE_KERNEL,
    FWD_H_KERNEL,
    Kernel(_C + "chunk_o.chunk_fwd_o_kernel", "cube", chunk_o.FWD_O_TILES, "output o", "chunk",
           allow=(("ub_model_vs_plan", "*BT64*", "BT = 64 on A2/A3: the tile is chosen by estimate "
                   "(chunk_o.NPU_FWD_O_TILE: BV 128 without double buffering, 47% of UB); the model, fitted on "
                   "the double-buffered tiles, overstates it"),)),
    Kernel(_C + "cumsum.chunk_gate_cumsum_bwd_kernel", "vector",
           # bishengir-compile's plan (A2, with the GATE_FLOOR mask): 33.3-34.4 [BT, BH] fp32 tiles, 85.5 with
           # the gate activation
           [Tile(("35 + 51 * USE_GATE", "BT", "BH"), "fp32", "dg, g, reverse cumsum and activation temporaries",
                 buffered=False)], "gate cumsum", "chunk"),
    Kernel(_C + "wy.chunk_wy_bwd_kernel", "cube", wy.WY_BWD_TILES, "WY bwd", "chunk",
           allow=(("ub_model_vs_plan", "*BT64*", "BT = 64: the tile is chosen by estimate (wy.NPU_WY_BWD_TILE); "
                   "the compiler fills the UB for every tile, the model (fitted on smaller tiles) overstates it"),)),
    BWD_DH_KERNEL,
    Kernel(_C + "chunk_o.chunk_bwd_dv_local_kernel", "cube", chunk_o.BWD_DV_LOCAL_TILES, "dv local", "chunk"),
    Kernel(_C + "chunk_o.chunk_bwd_dqkwg_kernel", "cube", chunk_o.BWD_DQKWG_TILES, "dq dk dw dg", "chunk",
           allow=(("ub_model_vs_plan", "*BT64*", "BT = 64: the tile is chosen by estimate (chunk_o.NPU_DQKWG_TILE); "
                   "the compiler fills the UB for every tile, the model (fitted on smaller tiles) overstates it"),)),
    Kernel(_C + "gva.gva_group_sum_kernel", "vector", gva.GVA_SUM_TILES, "GVA group sum", "chunk"),
)

RECURRENT_KERNEL = Kernel("fla_ascend.ops.gated_delta_rule.fused_recurrent.fused_recurrent_gated_delta_rule_kernel",
                          "vector", fused_recurrent.RECURRENT_TILES, "recurrent step", "recurrent")
"""The fused recurrent kernel's record; ``fused_recurrent_kda`` (:mod:`fla_ascend.ops.kda.spec`) lists
the same record, with its own ``recurrent`` scenarios."""

SPECS = [
    OpSpec(
        name="chunk_gated_delta_rule",
        entry="fla_ascend.ops.gated_delta_rule.chunk:chunk_gated_delta_rule",
        reference="fla_ascend.ops.gated_delta_rule.reference:chunk_gated_delta_rule_ref",
        torch_ref="fla_ascend.ops.gated_delta_rule.reference:naive_recurrent_gated_delta_rule",
        fla="fla.ops.gated_delta_rule:chunk_gated_delta_rule",
        dims=("B", "T", "H", "HV", "K", "V"),
        inputs=(*_QKVGB, Input("initial_state", **_STATE, optional=True)),
        outputs=("o", "final_state"),
        call_kwargs={"output_final_state": True},
        estimate_kwargs={"initial_state": True},
        shapes=SHAPE_GROUPS["gdn-anchors"],
        ci_shape=dict(B=1, T=256, H=2, HV=4, K=128, V=128),
        named_shapes=NAMED_SHAPES,
        shape_groups=SHAPE_GROUPS,
        kernels=CHUNK_KERNELS,
        scenarios={"chunk": (CHUNK_SCENARIOS, CHUNK_FULL)},
        fla_stages=_FLA_CHUNK_STAGES,
        bytes_moved=_bytes,
        flops=_chunk_flops,
        torch_ref_max_tokens=2048,
        prepare=_fla_hopper_prepare,
    ),
    OpSpec(
        name="fused_recurrent_gated_delta_rule",
        entry="fla_ascend.ops.gated_delta_rule.fused_recurrent:fused_recurrent_gated_delta_rule",
        reference="fla_ascend.ops.gated_delta_rule.reference:chunk_gated_delta_rule_ref",
        torch_ref="fla_ascend.ops.gated_delta_rule.reference:naive_recurrent_gated_delta_rule",
        fla="fla.ops.gated_delta_rule:fused_recurrent_gated_delta_rule",
        dims=("B", "T", "H", "HV", "K", "V"),
        inputs=(*_QKVGB, Input("initial_state", **_STATE, grad=False)),
        outputs=("o", "final_state"),
        call_kwargs={"output_final_state": True},
        estimate_kwargs={"use_qk_l2norm_in_kernel": True},
        modes=("fwd",),
        shapes=SHAPE_GROUPS["decode-anchors"],
        ci_shape=dict(B=2, T=1, H=2, HV=4, K=128, V=128),
        kernels=(RECURRENT_KERNEL,),
        scenarios={"recurrent": (RECURRENT_SCENARIOS, RECURRENT_FULL)},
        fla_stages=((r"recurrent", "recurrent step"),),
        bytes_moved=lambda shape, dtype, mode: _bytes(shape, dtype, mode, decode=True),
        flops=_recurrent_flops,
        torch_ref_max_tokens=2048,
    ),
]
