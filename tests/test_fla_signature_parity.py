"""Signature parity with flash-linear-attention 0.6.0: each public op's and module method's
parameters (names, positional order, defaults, ``**kwargs``), written down here as data from
fla-core 0.6.0's sources (``fla/ops/gated_delta_rule/{chunk,fused_recurrent}.py``,
``fla/ops/kda/{chunk,fused_recurrent}.py``, ``fla/modules/causal_conv1d/ops.py``,
``fla/modules/norm/{l2norm,fused_norm_gate,layernorm}.py``). Names fla reads from ``**kwargs`` may
be keyword-only parameters of ours (:data:`KEYWORD_ONLY`); no other keyword-only parameter is
accepted."""
from __future__ import annotations

import inspect

import pytest

import fla_ascend.modules as modules
import fla_ascend.ops as ops
import fla_ascend.ops.kda as kda

REQ = inspect.Parameter.empty
"""No default (a required parameter)."""

FLA_060 = {
    "chunk_gated_delta_rule": (
        [("q", REQ), ("k", REQ), ("v", REQ), ("g", REQ), ("beta", REQ), ("scale", None), ("initial_state", None),
         ("output_final_state", False), ("use_qk_l2norm_in_kernel", False), ("use_beta_sigmoid_in_kernel", False),
         ("allow_neg_eigval", False), ("state_v_first", False), ("cu_seqlens", None), ("cu_seqlens_cpu", None),
         ("chunk_indices", None), ("cp_context", None)], True),
    "fused_recurrent_gated_delta_rule": (
        [("q", REQ), ("k", REQ), ("v", REQ), ("g", None), ("gk", None), ("gv", None), ("beta", None), ("scale", None),
         ("initial_state", None), ("output_final_state", False), ("use_qk_l2norm_in_kernel", False),
         ("use_gate_in_kernel", False), ("A_log", None), ("dt_bias", None), ("use_beta_sigmoid_in_kernel", False),
         ("allow_neg_eigval", False), ("state_v_first", False), ("cu_seqlens", None)], True),
    "chunk_kda": (
        [("q", REQ), ("k", REQ), ("v", REQ), ("g", REQ), ("beta", REQ), ("scale", None), ("initial_state", None),
         ("output_final_state", False), ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
         ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False), ("safe_gate", False),
         ("lower_bound", None), ("disable_recompute", False), ("return_intermediate_states", False),
         ("state_v_first", False), ("cu_seqlens", None), ("cu_seqlens_cpu", None), ("cp_context", None),
         ("use_graph", False), ("max_num_seqs", None)], True),
    "fused_recurrent_kda": (
        [("q", REQ), ("k", REQ), ("v", REQ), ("g", REQ), ("beta", REQ), ("A_log", None), ("dt_bias", None),
         ("scale", None), ("initial_state", None), ("output_final_state", False), ("use_qk_l2norm_in_kernel", False),
         ("use_gate_in_kernel", False), ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
         ("lower_bound", None), ("state_v_first", False), ("cu_seqlens", None)], True),
    "causal_conv1d": (
        [("x", REQ), ("weight", None), ("bias", None), ("residual", None), ("initial_state", None),
         ("output_final_state", False), ("activation", None), ("backend", "triton"), ("cu_seqlens", None),
         ("cu_seqlens_cpu", None), ("chunk_indices", None), ("cp_context", None)], True),
    "causal_conv1d_update": (
        [("x", REQ), ("cache", REQ), ("residual", None), ("weight", None), ("bias", None), ("activation", None)],
        False),
    "l2norm": ([("x", REQ), ("eps", 1e-06), ("output_dtype", None)], False),
    "l2_norm": ([("x", REQ), ("eps", 1e-06), ("output_dtype", None)], False),
    "rms_norm_gated": (
        [("x", REQ), ("g", REQ), ("weight", REQ), ("bias", REQ), ("activation", "swish"), ("residual", None),
         ("prenorm", False), ("residual_in_fp32", False), ("eps", 1e-06)], False),
    "rms_norm": (
        [("x", REQ), ("weight", REQ), ("bias", REQ), ("residual", None), ("eps", 1e-05), ("prenorm", False),
         ("residual_in_fp32", False)], False),
    "ShortConvolution.__init__": (
        [("hidden_size", REQ), ("kernel_size", REQ), ("bias", False), ("activation", "silu"), ("backend", "triton"),
         ("device", None), ("dtype", None)], True),
    "ShortConvolution.forward": (
        [("x", REQ), ("residual", None), ("mask", None), ("cache", None), ("output_final_state", False),
         ("cu_seqlens", None), ("chunk_indices", None)], True),
    "ShortConvolution.step": (
        [("x", REQ), ("residual", REQ), ("cache", REQ), ("output_final_state", False), ("cu_seqlens", None)], False),
    "L2Norm.__init__": ([("eps", 1e-06), ("output_dtype", None)], False),
    "L2Norm.forward": ([("x", REQ)], False),
    "FusedRMSNormGated.__init__": (
        [("hidden_size", REQ), ("elementwise_affine", True), ("eps", 1e-05), ("activation", "swish"),
         ("device", None), ("dtype", None)], False),
    "FusedRMSNormGated.forward": (
        [("x", REQ), ("g", REQ), ("residual", None), ("prenorm", False), ("residual_in_fp32", False)], False),
    "RMSNorm.__init__": (
        [("hidden_size", REQ), ("elementwise_affine", True), ("bias", False), ("eps", 1e-05), ("device", None),
         ("dtype", None)], False),
    "RMSNorm.forward": ([("x", REQ), ("residual", None), ("prenorm", False), ("residual_in_fp32", False)], False),
}

EXTENSIONS = {
    ("rms_norm_gated", "bias"): None,
    ("FusedRMSNormGated.forward", "g"): None,
}
"""Parameters flash-linear-attention requires and we give a default (a call that works there works
here): ``bias=None`` of the gated norm, ``g=None`` (a plain RMSNorm) of its module."""

KEYWORD_ONLY = {
    "chunk_gated_delta_rule": {"use_gate_in_kernel": False, "A_log": None, "dt_bias": None, "chunk_size": 64},
    # fla 0.6.0's chunk_kda: kwargs.get("A_log"), kwargs.get("dt_bias"), kwargs.pop("chunk_size", 64)
    "chunk_kda": {"A_log": None, "dt_bias": None, "chunk_size": 64},
}
"""Names flash-linear-attention 0.6.0 reads from ``**kwargs`` and we name as keyword-only parameters
(with fla's default where it has one): a call that passes them by name works in both. The test
requires exactly these keyword-only parameters, so an extra one of ours fails it."""


def _ours(name: str):
    if "." in name:
        cls, meth = name.split(".")
        return getattr(getattr(modules, cls), meth)
    return getattr(ops, name)


@pytest.mark.parametrize("name", sorted(FLA_060))
def test_parameters_match_fla_060(name):
    params, has_kwargs = FLA_060[name]
    sig = inspect.signature(_ours(name))
    ours = [p for p in sig.parameters.values() if p.name != "self"]
    positional = [p for p in ours if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert [p.name for p in positional] == [n for n, _ in params], name
    for p, (n, default) in zip(positional, params):
        want = EXTENSIONS.get((name, n), default)
        assert p.default == want or (p.default is want), f"{name}({n}): default {p.default!r}, fla 0.6.0 {default!r}"
    assert any(p.kind is p.VAR_KEYWORD for p in ours) == has_kwargs, f"{name}: **kwargs"
    keyword_only = {p.name: p.default for p in ours if p.kind is p.KEYWORD_ONLY}
    assert keyword_only == KEYWORD_ONLY.get(name, {}), name


def test_modules_namespace():
    assert set(modules.__all__) == {"ShortConvolution", "FusedRMSNormGated", "RMSNorm", "L2Norm"}
    assert ops.l2_norm is ops.l2norm
    assert ops.chunk_kda is kda.chunk_kda and ops.fused_recurrent_kda is kda.fused_recurrent_kda
