"""``chunk_gated_delta_rule``: the chunked gated delta rule (prefill and training).

Forward = four stages from ``ops/common``: gate cumsum (with the fused GatedDeltaNet gate),
WY representation, the state recurrence over chunks, and the output.
"""
from __future__ import annotations

import torch
import triton

from fla_ascend.ops.common.chunk_h import chunk_fwd_h
from fla_ascend.ops.common.chunk_o import chunk_fwd_o
from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
from fla_ascend.ops.common.wy import chunk_wy_fwd
from fla_ascend.ops.gated_delta_rule.inputs import GatedDeltaRuleInputs, validate_inputs
from fla_ascend.ops.utils import prepare_chunk_indices, prepare_chunk_offsets

CHUNK_SIZES = (16, 32, 64)


def chunk_gated_delta_rule_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    A_log: torch.Tensor | None,
    dt_bias: torch.Tensor | None,
    chunk_size: int,
):
    """Compose the forward stages on validated, contiguous inputs.

    Returns ``(o, final_state)``.
    """
    B, T = q.shape[:2]
    if cu_seqlens is None:
        N, n_chunks = B, B * triton.cdiv(T, chunk_size)
        chunk_indices = chunk_offsets = None
    else:
        N = cu_seqlens.numel() - 1
        chunk_indices = prepare_chunk_indices(cu_seqlens, chunk_size)
        chunk_offsets = prepare_chunk_offsets(cu_seqlens, chunk_size)
        n_chunks = chunk_indices.shape[0]
    g_cum, beta_t = chunk_gate_cumsum(g, beta, chunk_size, n_chunks, chunk_indices, cu_seqlens, A_log, dt_bias)
    w, u, _ = chunk_wy_fwd(k, v, g_cum, beta_t, chunk_size, n_chunks, chunk_indices, cu_seqlens)
    h, v_new, final_state = chunk_fwd_h(
        k, w, u, g_cum, chunk_size, n_chunks, N, initial_state, output_final_state, cu_seqlens, chunk_offsets
    )
    o = chunk_fwd_o(q, k, v_new, h, g_cum, scale, chunk_size, n_chunks, chunk_indices, cu_seqlens)
    return o, final_state


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias,
                chunk_size):
        return chunk_gated_delta_rule_fwd(
            q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias, chunk_size
        )

    @staticmethod
    def backward(ctx, do, dht):
        raise NotImplementedError(
            "chunk_gated_delta_rule has no backward pass yet (tracked as the 'Gated delta rule backward' "
            "issue); use it under torch.no_grad() or for inference until then"
        )


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    *,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""Chunked gated delta rule, flash-linear-attention compatible.

    Per value head, with state ``h`` ``[K, V]``: ``h = exp(g_t) h``,
    ``v' = beta_t (v_t - h^T k_t)``, ``h = h + k_t v'^T``, ``o_t = h^T (scale q_t)``.

    Args:
        q, k: ``[B, T, H, K]``, float32 / float16 / bfloat16, ``K <= 256``.
        v: ``[B, T, HV, V]``, ``HV`` a multiple of ``H`` (GVA: value head ``i`` reads key head
            ``i // (HV // H)``), ``V <= 256``; same dtype as q.
        g: ``[B, T, HV]`` log-space decay (``<= 0``), or the raw gate input when
            ``use_gate_in_kernel``; any float dtype (computed in fp32).
        beta: ``[B, T, HV]``, any float dtype.
        scale: multiplies ``q``; default ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (``N = B``, or the number of sequences with
            ``cu_seqlens``), read as float32.
        output_final_state: also return the final state ``[N, HV, K, V]`` float32.
        use_qk_l2norm_in_kernel: L2-normalise q and k over ``K`` first (eps 1e-6).
        cu_seqlens: ``[N + 1]`` int boundaries of sequences packed along T (requires ``B == 1``);
            empty sequences allowed.
        use_gate_in_kernel: compute ``g = -exp(A_log) * softplus(g + dt_bias)`` fused with the
            chunk cumsum (Qwen3-Next's GatedDeltaNet gate).
        A_log, dt_bias: ``[HV]``; ``A_log`` required with ``use_gate_in_kernel``, ``dt_bias`` optional.
        chunk_size: 16, 32 or 64 (default).

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` in q's dtype; ``final_state`` or ``None``.

    Raises:
        TypeError: a non-tensor or an unsupported dtype.
        ValueError: mismatched B/T/H/HV between inputs, ``HV`` not a multiple of ``H``, ``K`` or
            ``V`` above 256, invalid ``cu_seqlens``, wrong ``initial_state`` shape, tensors on
            different devices, ``chunk_size`` not in {16, 32, 64}, ``A_log`` missing with
            ``use_gate_in_kernel``.
    """
    x: GatedDeltaRuleInputs = validate_inputs(
        "chunk_gated_delta_rule", q, k, v, g, beta, scale, initial_state, cu_seqlens,
        use_gate_in_kernel, A_log, dt_bias,
    )
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size must be one of {CHUNK_SIZES}, got {chunk_size}")
    if use_qk_l2norm_in_kernel:
        from fla_ascend.ops.norm import l2norm

        x.q, x.k = l2norm(x.q), l2norm(x.k)
    return ChunkGatedDeltaRuleFunction.apply(
        x.q, x.k, x.v, x.g, x.beta, x.scale, x.initial_state, output_final_state, x.cu_seqlens,
        x.A_log, x.dt_bias, chunk_size,
    )
