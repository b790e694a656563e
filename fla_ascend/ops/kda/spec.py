"""Specs of the KDA ops (:mod:`fla_ascend.ops.spec`): ``chunk_kda`` with its stages in
:mod:`fla_ascend.ops.kda` and the gated delta rule's state stages (their per-channel-decay variant:
the same records, :data:`fla_ascend.ops.gated_delta_rule.spec.FWD_H_KERNEL` and ``BWD_DH_KERNEL``, so
the NPU check launches them in the ``chunk`` scenarios below too; the WY forward's diagonal-block
inverse, ``DIAG_INVERSE_KERNEL``, likewise, under this op's WY forward stage label), and
``fused_recurrent_kda``.

``fused_recurrent_kda`` runs the gated delta rule's fused recurrent kernel
(:data:`fla_ascend.ops.gated_delta_rule.spec.RECURRENT_KERNEL`, the same record, listed here too):
the NPU check launches that kernel in the recurrent scenarios below as well (its ``GATE_GK`` and
``USE_LOWER_BOUND`` branches); the catalogue keeps the gated delta rule as its owner.

The named shapes are Kimi Linear's KDA layer (32 heads, head dim 128, no grouped value heads) at
the prefill lengths flash-linear-attention's KDA kernels are measured at, and its decode (T = 1,
measured with Kimi Linear's call: the gate, beta's sigmoid and q/k L2 normalisation in the kernel).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from fla_ascend.ops.gated_delta_rule.spec import BWD_DH_KERNEL, DIAG_INVERSE_KERNEL, FWD_H_KERNEL, RECURRENT_KERNEL
from fla_ascend.ops.spec import Input, Kernel, OpSpec, backward_if_any, element_size
from fla_ascend.tiling.ub import Tile

ORDER = 5
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`): after the gated delta rule
(which owns the fused recurrent kernel both ops run)."""

NAMED_SHAPES = {
    "kimi-linear": dict(B=1, T=4096, H=32, HV=32, K=128, V=128),
    "kda-t32k": dict(B=1, T=32768, H=32, HV=32, K=128, V=128),
    "kda-decode-b64": dict(B=64, T=1, H=32, HV=32, K=128, V=128),
    "kda-decode-b256": dict(B=256, T=1, H=32, HV=32, K=128, V=128),
}
SHAPE_GROUPS = {"kda-anchors": ("kimi-linear", "kda-t32k"), "kda-decode-anchors": ("kda-decode-b64", "kda-decode-b256")}

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


# scenario names start with "kda-": the state stages' records are shared with the gated delta rule, whose
# scenarios have the same shapes, so an allow entry of those records can name KDA's launches alone
CHUNK_SCENARIOS = {
    "kda-K128-BT64": _chunk(),
    "kda-K128-BT32": _chunk(BT=32),
    "kda-K128-BT16": _chunk(BT=16),
    "kda-K256-BT64": _chunk(K=256, V=256),
    "kda-K64-BT64": _chunk(K=64, V=64),
    "kda-K100-V16-BT64": _chunk(K=100, V=16),
    "kda-varlen-K128-BT64": _chunk(varlen=True),
    "kda-gate-K128-BT64": _chunk(gate=True),
    "kda-gate-lb-K128-BT64": _chunk(gate=True, lower_bound=-5.0),
}
CHUNK_FULL = {f"kda-{'varlen-' if vl else ''}K{K}-V{V}-BT{BT}": _chunk(K=K, V=V, BT=BT, varlen=vl)
              for K in HEAD_DIMS for V in HEAD_DIMS for BT in CHUNK_SIZES for vl in (False, True)}
CHUNK_FULL.update({f"kda-gate-{'lb-' if lb else ''}K128-BT{BT}": _chunk(BT=BT, gate=True, lower_bound=lb)
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
    (r"kda_gate|cumsum", "gate cumsum"),
    (r"bwd_intra|bwd_kernel_intra", "intra bwd"),
    (r"dAv", "dAqk, dv local"),
    (r"wy_dqkg|wy_bwd|prepare_wy|bwd_kernel_wy_", "WY bwd, dq dk dg"),
    (r"bwd_dh|dhu|_h_bwd", "state dh"),
    (r"fwd_intra|intra_token|intra_sub_chunk|diag_solve|inter_solve|kkt|solve_tril", "intra (Akk, Aqk)"),
    (r"recompute_w_u|wy_fwd", "WY fwd (inverse, w u)"),
    (r"fwd_h|_h_fwd", "state h"),
    (r"fwd_o|chunk_o|gla_fwd", "output o"),
    (r"l2norm|l2_norm", "l2norm"),
)

# Findings of the NPU check accepted for now (each says why; docs/check.md, "KDA")
_UNFITTED = ("ub_model_vs_plan", "*", "the UB model of the KDA stages is not fitted to bishengir-compile's plans "
             "yet: the declared tiles are the kernel's own count, the plan is what the compiler reports")

_K = "fla_ascend.ops.kda."
_F32 = "fp32"
CHUNK_KERNELS = (
    Kernel(_K + "gate.kda_gate_cumsum_kernel", "vector",
           [Tile((8, "BT", "BK"), _F32, "g, its activation and cumsum temporaries", buffered=False)],
           "gate cumsum", "chunk",
           allow=(_UNFITTED,)),
    Kernel(_K + "intra.kda_intra_fwd_kernel", "cube",
           [Tile((2, 16, "BT"), _F32, "Akk, Aqk rows", buffered=False),
            Tile((4, 16, "BK"), _F32, "q, k, G rows and their factors"),
            Tile((3, "BT", "BK"), _F32, "k, G columns and the scaled k")],
           "intra (Akk, Aqk)", "chunk",
           allow=(_UNFITTED,)),
    dataclasses.replace(DIAG_INVERSE_KERNEL, stage="WY fwd (inverse, w u)"),  # KDA's kkt is the intra stage
    Kernel(_K + "intra.kda_wy_fwd_kernel", "cube",
           [Tile((8, "BT", "BT"), _F32, "Akk, its inverse and the inverse's products", buffered=False),
            Tile((3, "BT", "BK"), _F32, "k, G, w"), Tile((2, "BT", "BV"), _F32, "v, u")],
           "WY fwd (inverse, w u)", "chunk",
           allow=(_UNFITTED,)),
    FWD_H_KERNEL,
    Kernel(_K + "output.kda_fwd_o_kernel", "cube",
           [Tile(("BT", "BT"), _F32, "Aqk", buffered=False), Tile((3, "BT", "BK"), _F32, "q, G, q exp(G)"),
            Tile(("BK", "BV"), _F32, "h"), Tile((2, "BT", "BV"), _F32, "v', o")],
           "output o", "chunk",
           allow=(_UNFITTED,)),
    Kernel(_K + "output.kda_bwd_dav_kernel", "cube",
           [Tile((3, "BT", "BT"), _F32, "Aqk, dAqk, the causal mask", buffered=False),
            Tile((3, "BT", "BV"), _F32, "do, v', dv local")],
           "dAqk, dv local", "chunk",
           allow=(_UNFITTED,)),
    BWD_DH_KERNEL,
    Kernel(_K + "intra.kda_wy_bwd_kernel", "cube",
           [Tile((4, "BT", "BT"), _F32, "Ai, dAi and the dAkk products", buffered=False),
            Tile((10, "BT", "BK"), _F32, "q, k, G, dq, dk, dw, dG blocks"),
            Tile((4, "BT", "BV"), _F32, "do, v, v', dv'"), Tile((2, "BK", "BV"), _F32, "h, dh")],
           "WY bwd, dq dk dg", "chunk",
           allow=(_UNFITTED,)),
    Kernel(_K + "intra.kda_intra_bwd_kernel", "cube",
           [Tile((4, 16, "BT"), _F32, "dAkk, dAqk rows and columns", buffered=False),
            Tile((8, 16, "BK"), _F32, "q, k, G rows, their gradients"),
            Tile((5, "BT", "BK"), _F32, "q, k, G of the chunk and their factors")],
           "intra bwd", "chunk",
           allow=(_UNFITTED,)),
    Kernel(_K + "gate.kda_gate_cumsum_bwd_kernel", "vector",
           [Tile((10, "BT", "BK"), _F32, "dG, g, reverse cumsum and activation temporaries", buffered=False)],
           "gate cumsum", "chunk",
           allow=(_UNFITTED,)),
)

# Kimi Linear's inputs: q normal, k normal (L2-normalised in the kernel), v normal, the raw gate
# input g normal with A_log = log(uniform(1, 16)) and dt_bias normal / 2, beta logits normal; the fp32
# initial state 0.1 * normal.
_RECURRENT_INPUTS = (
    Input("q", "B T H K"),
    Input("k", "B T H K"),
    Input("v", "B T HV V"),
    Input("g", "B T HV K"),
    Input("beta", "B T HV"),
    Input("A_log", "HV", dtype="float32", draw="rand", transform="torch.log(1 + 15 * x)", grad=False),
    Input("dt_bias", "HV K", dtype="float32", transform="0.5 * x", grad=False),
    Input("initial_state", "B HV K V", dtype="float32", transform="0.1 * x", grad=False),
)
_RECURRENT_CALL = {"output_final_state": True, "use_qk_l2norm_in_kernel": True, "use_gate_in_kernel": True,
                   "use_beta_sigmoid_in_kernel": True}


def fused_recurrent_kda_ref(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
                            output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                            use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                            state_v_first=False, cu_seqlens=None, **_ignored):
    """:func:`fla_ascend.ops.kda.reference.naive_recurrent_kda` called like
    :func:`fla_ascend.ops.kda.fused_recurrent_kda` (its positional order; ``A_log`` of ``HV``
    elements in any singleton shape, ``dt_bias`` ``[HV * K]`` or ``[HV, K]``; V-first states
    transposed in and out). float32 (float64 for float64 inputs); keywords the result does not
    depend on are ignored."""
    from fla_ascend.ops.kda.reference import naive_recurrent_kda

    HV, K = g.shape[-2:]
    if A_log is not None:
        A_log = A_log.reshape(HV)
    if dt_bias is not None:
        dt_bias = dt_bias.reshape(HV * K)
    if state_v_first and initial_state is not None:
        initial_state = initial_state.transpose(-1, -2)
    o, ht = naive_recurrent_kda(
        q, k, v, g, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel, A_log=A_log,
        dt_bias=dt_bias, lower_bound=lower_bound, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, cu_seqlens=cu_seqlens,
    )
    if state_v_first and ht is not None:
        ht = ht.transpose(-1, -2).contiguous()
    return o, ht


# The NPU check's launches (captured, nothing runs): each head dim (K, V in 64, 100, 128, 256), the gate
# forms (raw g with A_log + dt_bias, the lower bound with and without A_log, a log-space g), varlen, a
# V-first state with per-value beta. bf16 inputs (DTYPE), as the NPU runs them. K = 64 is in the full
# matrix only: there bishengir-compile (A2) plans about 1.5x the UB model for this kernel with or without KDA's gate
# (the gated delta rule's own K64 launches measure the same ratio, 0.67). A V-first state at K = 256 has no
# NPU plan (the launcher refuses: the on-chip transposes' [BK, BK] scratch alone is 256 KiB); the full
# matrix keeps that launch so the check reports it.
RECURRENT_HEAD_DIMS = (64, 100, 128, 256)


def _recurrent(K=128, V=128, gate="kernel", varlen=False, vfirst=False):
    def run():
        from fla_ascend.ops.kda.fused_recurrent import fused_recurrent_kda

        B, T, H, HV = (1, 12, 2, 4) if varlen else (2, 8, 2, 4)
        N = 3 if varlen else B
        q, k = torch.randn(B, T, H, K, dtype=DTYPE), torch.randn(B, T, H, K, dtype=DTYPE)
        v = torch.randn(B, T, HV, V, dtype=DTYPE)
        g = torch.randn(B, T, HV, K, dtype=torch.float32)
        beta = torch.randn(B, T, HV, *((V,) if vfirst else ()), dtype=DTYPE)
        h0 = torch.randn(N, HV, *((V, K) if vfirst else (K, V)), dtype=torch.float32)
        cu = torch.tensor([0, 3, 7, 12], dtype=torch.long) if varlen else None
        extra = {}
        if gate != "none":
            extra = dict(use_gate_in_kernel=True, dt_bias=torch.randn(HV * K))
            if gate != "lb-noA":
                extra["A_log"] = torch.randn(HV)
            if gate.startswith("lb"):
                extra["lower_bound"] = -5.0
        else:
            g = -torch.rand(B, T, HV, K)
        fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                            use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, state_v_first=vfirst,
                            **extra)
    return run


def _name(K, V, gate="kernel", varlen=False, vfirst=False):
    return f"kda-{gate}-{'varlen-' if varlen else ''}{'vfirst-' if vfirst else ''}K{K}-V{V}"


_REPRESENTATIVE = [dict(K=128, V=128), dict(K=100, V=100), dict(K=256, V=128), dict(K=256, V=256), dict(K=128, V=64),
                   dict(K=128, V=128, gate="lb"), dict(K=128, V=128, gate="lb-noA"), dict(K=128, V=128, gate="none"),
                   dict(K=128, V=128, varlen=True), dict(K=128, V=128, gate="lb", vfirst=True)]
RECURRENT_SCENARIOS = {_name(**c): _recurrent(**c) for c in _REPRESENTATIVE}
RECURRENT_FULL = {_name(K, V, gate, vl): _recurrent(K, V, gate, vl) for K in RECURRENT_HEAD_DIMS
                  for V in RECURRENT_HEAD_DIMS for gate in ("kernel", "lb", "lb-noA", "none") for vl in (False, True)}
RECURRENT_FULL.update({_name(K, K, "lb", vfirst=True): _recurrent(K, K, "lb", vfirst=True)
                       for K in RECURRENT_HEAD_DIMS})


def _recurrent_bytes(shape, dtype, mode):
    """Unavoidable traffic of one decode call: q, k (``B T H K``), v (``B T HV V``), g
    (``B T HV K``), beta (``B T HV``) read, o (``B T HV V``) written, the fp32 state read and
    written, ``A_log`` and ``dt_bias`` (``HV``, ``HV K``, fp32) read."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    e = element_size(dtype)
    inputs = (2 * B * T * H * K + B * T * HV * V + B * T * HV * K + B * T * HV) * e + (HV + HV * K) * 4
    return inputs + B * T * HV * V * e + 2 * B * HV * K * V * 4


def _recurrent_flops(shape, mode):
    """Per token and value head: decay ``K V``, ``h^T k`` ``2 K V``, rank-1 update ``2 K V``,
    ``h^T q`` ``2 K V``: ``7 K V`` (the gate's ``O(K)`` is left out)."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    return 7 * B * T * HV * K * V


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
    OpSpec(
        name="fused_recurrent_kda",
        entry="fla_ascend.ops.kda.fused_recurrent:fused_recurrent_kda",
        reference="fla_ascend.ops.kda.spec:fused_recurrent_kda_ref",
        fla="fla.ops.kda:fused_recurrent_kda",
        dims=("B", "T", "H", "HV", "K", "V"),
        inputs=_RECURRENT_INPUTS,
        outputs=("o", "final_state"),
        call_kwargs=_RECURRENT_CALL,
        modes=("fwd",),
        shapes=SHAPE_GROUPS["kda-decode-anchors"],
        ci_shape=dict(B=2, T=1, H=2, HV=4, K=128, V=128),
        named_shapes=NAMED_SHAPES,
        shape_groups=SHAPE_GROUPS,
        kernels=(RECURRENT_KERNEL,),
        scenarios={"recurrent": (RECURRENT_SCENARIOS, RECURRENT_FULL)},
        fla_stages=((r"recurrent", "recurrent step"),),
        bytes_moved=_recurrent_bytes,
        flops=_recurrent_flops,
        torch_ref_max_tokens=2048,
    ),
]
