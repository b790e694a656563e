"""Specs of the Kimi Delta Attention ops (:mod:`fla_ascend.ops.spec`): ``fused_recurrent_kda``.

``fused_recurrent_kda`` runs the gated delta rule's fused recurrent kernel
(:data:`fla_ascend.ops.gated_delta_rule.spec.RECURRENT_KERNEL`, the same record, listed here too):
the NPU check launches that kernel in the scenarios below as well (its ``GATE_GK`` and
``USE_LOWER_BOUND`` branches), the catalogue keeps the gated delta rule as its owner.

The named shapes are Kimi Linear's decode (48B-A3B: 32 heads of K = V = 128, no GVA), measured
with Kimi Linear's call: the gate, beta's sigmoid and q/k L2 normalisation in the kernel.
"""
from __future__ import annotations

import torch

from fla_ascend.ops.gated_delta_rule.spec import RECURRENT_KERNEL
from fla_ascend.ops.spec import Input, OpSpec, element_size

ORDER = 5
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`): after the gated delta rule,
which owns the shared kernel."""

NAMED_SHAPES = {
    "kda-decode-b64": dict(B=64, T=1, H=32, HV=32, K=128, V=128),
    "kda-decode-b256": dict(B=256, T=1, H=32, HV=32, K=128, V=128),
}
SHAPE_GROUPS = {"kda-decode-anchors": ("kda-decode-b64", "kda-decode-b256")}

# Kimi Linear's inputs: q normal, k normal (L2-normalised in the kernel), v normal, the raw gate
# input g normal with A_log = log(uniform(1, 16)) and dt_bias normal / 2, beta logits normal; the fp32
# initial state 0.1 * normal.
_INPUTS = (
    Input("q", "B T H K"),
    Input("k", "B T H K"),
    Input("v", "B T HV V"),
    Input("g", "B T HV K"),
    Input("beta", "B T HV"),
    Input("A_log", "HV", dtype="float32", draw="rand", transform="torch.log(1 + 15 * x)", grad=False),
    Input("dt_bias", "HV K", dtype="float32", transform="0.5 * x", grad=False),
    Input("initial_state", "B HV K V", dtype="float32", transform="0.1 * x", grad=False),
)
_CALL = {"output_final_state": True, "use_qk_l2norm_in_kernel": True, "use_gate_in_kernel": True,
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
# V-first state with per-value beta. bf16 inputs, as the NPU runs them. K = 64 is in the full matrix only:
# there bishengir-compile (A2) plans about 1.5x the UB model for this kernel with or without KDA's gate
# (the gated delta rule's own K64 launches measure the same ratio, 0.67). A V-first state at K = 256 has no
# NPU plan (the launcher refuses: the on-chip transposes' [BK, BK] scratch alone is 256 KiB); the full
# matrix keeps that launch so the check reports it.
HEAD_DIMS = (64, 100, 128, 256)
DTYPE = torch.bfloat16


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
RECURRENT_FULL = {_name(K, V, gate, vl): _recurrent(K, V, gate, vl) for K in HEAD_DIMS for V in HEAD_DIMS
                  for gate in ("kernel", "lb", "lb-noA", "none") for vl in (False, True)}
RECURRENT_FULL.update({_name(K, K, "lb", vfirst=True): _recurrent(K, K, "lb", vfirst=True) for K in HEAD_DIMS})


def _bytes(shape, dtype, mode):
    """Unavoidable traffic of one decode call: q, k (``B T H K``), v (``B T HV V``), g
    (``B T HV K``), beta (``B T HV``) read, o (``B T HV V``) written, the fp32 state read and
    written, ``A_log`` and ``dt_bias`` (``HV``, ``HV K``, fp32) read."""
    B, T, H, HV, K, V = (shape[d] for d in ("B", "T", "H", "HV", "K", "V"))
    e = element_size(dtype)
    inputs = (2 * B * T * H * K + B * T * HV * V + B * T * HV * K + B * T * HV) * e + (HV + HV * K) * 4
    return inputs + B * T * HV * V * e + 2 * B * HV * K * V * 4


def _flops(shape, mode):
    """Per token and value head: decay ``K V``, ``h^T k`` ``2 K V``, rank-1 update ``2 K V``,
    ``h^T q`` ``2 K V``: ``7 K V`` (the gate's ``O(K)`` is left out)."""
    B, T, HV, K, V = (shape[d] for d in ("B", "T", "HV", "K", "V"))
    return 7 * B * T * HV * K * V


SPECS = [
    OpSpec(
        name="fused_recurrent_kda",
        entry="fla_ascend.ops.kda.fused_recurrent:fused_recurrent_kda",
        reference="fla_ascend.ops.kda.spec:fused_recurrent_kda_ref",
        fla="fla.ops.kda:fused_recurrent_kda",
        dims=("B", "T", "H", "HV", "K", "V"),
        inputs=_INPUTS,
        outputs=("o", "final_state"),
        call_kwargs=_CALL,
        modes=("fwd",),
        shapes=SHAPE_GROUPS["kda-decode-anchors"],
        ci_shape=dict(B=2, T=1, H=2, HV=4, K=128, V=128),
        named_shapes=NAMED_SHAPES,
        shape_groups=SHAPE_GROUPS,
        kernels=(RECURRENT_KERNEL,),
        scenarios={"recurrent": (RECURRENT_SCENARIOS, RECURRENT_FULL)},
        fla_stages=((r"recurrent", "recurrent step"),),
        bytes_moved=_bytes,
        flops=_flops,
        torch_ref_max_tokens=2048,
    ),
]
