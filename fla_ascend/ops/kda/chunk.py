"""``chunk_kda``: chunked Kimi Delta Attention (prefill and training).

Forward = five stages: the per-channel gate cumsum (:mod:`fla_ascend.ops.kda.gate`), the in-chunk
matrices and the WY representation (:mod:`fla_ascend.ops.kda.intra`), the state recurrence over
chunks (the gated delta rule's, :func:`fla_ascend.ops.common.chunk_h.chunk_fwd_h` with its
per-channel decay) and the output (:mod:`fla_ascend.ops.kda.output`). The backward recomputes ``w``,
``u``, the chunk states and ``v'`` from the stored inverse and runs the same stages in reverse.
"""
from __future__ import annotations

import numbers

import torch

from fla_ascend import backend
from fla_ascend.ops.common.chunk_h import chunk_bwd_dh, chunk_fwd_h
from fla_ascend.ops.common.gva import gva_group_sum
from fla_ascend.ops.common.wy import dv_operand_dtype
from fla_ascend.ops.gated_delta_rule.chunk import CUDA_MIN_BWD_HEAD_DIM, _chunking, beta_activation, common_dtype
from fla_ascend.ops.kda.gate import kda_gate_cumsum, kda_gate_cumsum_bwd
from fla_ascend.ops.kda.inputs import validate_kda_inputs
from fla_ascend.ops.kda.intra import kda_intra_bwd, kda_intra_fwd, kda_wy_bwd, kda_wy_fwd
from fla_ascend.ops.kda.output import kda_bwd_dav, kda_fwd_o
from fla_ascend.ops.utils import check_bools, prepare_chunk_indices
from fla_ascend.ops.utils.autograd import kernel_backward

CHUNK_SIZES = (16, 32, 64)
SAFE_LOWER_BOUND = (-5.0, 0.0)
"""The range ``[-5, 0)`` flash-linear-attention 0.6.0 requires of ``lower_bound`` with ``safe_gate``
and ``use_gate_in_kernel``."""


def _beta_time_major(beta: torch.Tensor) -> torch.Tensor:
    """``beta`` ``[B, T, HV]`` as ``[HV, B * T]`` float32 (time-contiguous per head, as the gated
    delta rule's stages read it)."""
    B, T, HV = beta.shape
    return beta.float().permute(2, 0, 1).reshape(HV, B * T).contiguous()


def chunk_kda_fwd(q, k, v, g, beta_t, scale, initial_state, output_final_state, cu_seqlens, gate, chunk_size,
                  store_ai, chunk_indices=None, keep=False):
    """Compose the forward stages on validated, contiguous inputs.

    Args:
        gate: keyword arguments of :func:`fla_ascend.ops.kda.gate.kda_gate_cumsum` (``use_gate``,
            ``A_log``, ``dt_bias``, ``lower_bound``).
        store_ai: keep ``Ai`` (the WY inverse) for the backward.
        keep: also return ``w``, ``kg``, ``qg``, ``h`` and ``v'`` (``disable_recompute``).

    Returns:
        ``(o, final_state, Ai, Aqk, h, saved)``; ``Ai`` None unless ``store_ai``; ``saved``
        ``(G, w, kg, qg, h, v_new)`` with ``keep`` (``kg``, ``qg``: the state recurrences'
        pre-scaled operands, :func:`fla_ascend.ops.kda.intra.kda_wy_fwd`), else None.
    """
    N, n_chunks, chunk_indices, chunk_offsets = _chunking(q.shape[0], q.shape[1], cu_seqlens, chunk_size,
                                                          chunk_indices)
    idx = dict(chunk_indices=chunk_indices, cu_seqlens=cu_seqlens)
    G = kda_gate_cumsum(g, chunk_size, n_chunks, **idx, **gate)
    Akk, Aqk = kda_intra_fwd(q, k, G, beta_t, scale, chunk_size, n_chunks, **idx)
    w, u, kg, qg = kda_wy_fwd(k, v, G, beta_t, Akk, chunk_size, n_chunks, **idx,
                              ai_mode="store" if store_ai else "none", q=q if keep else None, scale=scale,
                              store_kg=True)
    h, v_new, final_state = chunk_fwd_h(kg, w, u, G, chunk_size, n_chunks, N, initial_state, output_final_state,
                                        cu_seqlens, chunk_offsets, gk=True)
    o = kda_fwd_o(q, v_new, G, h, Aqk, scale, chunk_size, n_chunks, **idx)
    saved = (G, w, kg, qg, h, v_new) if keep else None
    return o, final_state, Akk if store_ai else None, Aqk, h, saved


def chunk_kda_bwd(q, k, v, g, beta_t, scale, initial_state, cu_seqlens, gate, chunk_size, do, dht, Ai, Aqk,
                  chunk_indices=None, saved=None):
    """Gradients of every input: ``(dq, dk, dv, dg, dbeta_t, dh0, dA_log, ddt_bias)``; ``dbeta_t``
    ``[HV, B * T]`` float32, ``dh0`` None without ``initial_state``, ``dA_log`` / ``ddt_bias`` None
    when not used. ``saved``: the forward's ``(G, w, kg, qg, h, v_new)`` (else recomputed).

    Raises:
        NotImplementedError: on a CUDA GPU, ``K`` or ``V`` below
            :data:`fla_ascend.ops.gated_delta_rule.chunk.CUDA_MIN_BWD_HEAD_DIM`.
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if min(K, V) < CUDA_MIN_BWD_HEAD_DIM and backend.is_cuda_compiled():
        raise NotImplementedError(
            f"chunk_kda: the backward on CUDA needs head dims K, V >= {CUDA_MIN_BWD_HEAD_DIM}, got K={K}, V={V} "
            "(the state stages' rule, chunk_gated_delta_rule's backward). The forward runs at any head dim.")
    N, n_chunks, chunk_indices, chunk_offsets = _chunking(B, T, cu_seqlens, chunk_size, chunk_indices)
    idx = dict(chunk_indices=chunk_indices, cu_seqlens=cu_seqlens)
    if saved is None:
        G = kda_gate_cumsum(g, chunk_size, n_chunks, **idx, **gate)
        w, u, kg, qg = kda_wy_fwd(k, v, G, beta_t, Ai, chunk_size, n_chunks, **idx, ai_mode="load", q=q,
                                  scale=scale, store_kg=True)
        h, v_new, _ = chunk_fwd_h(kg, w, u, G, chunk_size, n_chunks, N, initial_state, False, cu_seqlens,
                                  chunk_offsets, gk=True)
        del u
    else:
        G, w, kg, qg, h, v_new = saved
    dAqk, dv_local = kda_bwd_dav(v_new, do, Aqk, chunk_size, n_chunks, **idx)
    dh, dv_new, dh0 = chunk_bwd_dh(qg, kg, w, G, do, dv_local, scale, chunk_size, n_chunks, N, dht,
                                   initial_state is not None, cu_seqlens, chunk_offsets,
                                   dv_dtype=dv_operand_dtype(k.dtype, K, V), gk=True)
    del w, kg, qg, dv_local
    dq, dk, dv, dG, dbeta_t, dAkk = kda_wy_bwd(q, k, v, v_new, G, beta_t, Ai, h, dh, do, dv_new, scale, chunk_size,
                                               n_chunks, **idx)
    del h, dh, v_new, dv_new
    kda_intra_bwd(q, k, G, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, scale, chunk_size, n_chunks, **idx)
    del dAqk, dAkk
    dg, dA_log, ddt_bias = kda_gate_cumsum_bwd(g, dG, chunk_size, n_chunks, **idx, **gate)
    # value heads of one group share q/k: their gradients are summed in a fixed order
    dq = gva_group_sum(dq, H, q.dtype) if HV != H else dq.to(q.dtype)
    dk = gva_group_sum(dk, H, k.dtype) if HV != H else dk.to(k.dtype)
    return dq, dk, dv, dg, dbeta_t, dh0, dA_log, ddt_bias


class ChunkKDAFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state, cu_seqlens,
                use_gate, lower_bound, chunk_size, grad_needed, keep, chunk_indices):
        gate = dict(use_gate=use_gate, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound)
        beta_t = _beta_time_major(beta)
        o, final_state, Ai, Aqk, h, saved = chunk_kda_fwd(
            q, k, v, g, beta_t, scale, initial_state, output_final_state, cu_seqlens, gate, chunk_size,
            store_ai=grad_needed, chunk_indices=chunk_indices, keep=keep and grad_needed)
        ctx.save_for_backward(q, k, v, g, beta_t, A_log, dt_bias, initial_state, cu_seqlens, Ai, Aqk, chunk_indices,
                              *(saved or ()))
        ctx.scale, ctx.chunk_size, ctx.use_gate, ctx.lower_bound = scale, chunk_size, use_gate, lower_bound
        ctx.beta_dtype, ctx.beta_shape = beta.dtype, beta.shape
        ctx.mark_non_differentiable(h)
        return o, final_state, h

    @staticmethod
    @kernel_backward("chunk_kda")
    def backward(ctx, do, dht, _dh):
        q, k, v, g, beta_t, A_log, dt_bias, initial_state, cu_seqlens, Ai, Aqk, chunk_indices, *saved = \
            ctx.saved_tensors
        gate = dict(use_gate=ctx.use_gate, A_log=A_log, dt_bias=dt_bias, lower_bound=ctx.lower_bound)
        dq, dk, dv, dg, dbeta_t, dh0, dA_log, ddt_bias = chunk_kda_bwd(
            q, k, v, g, beta_t, ctx.scale, initial_state, cu_seqlens, gate, ctx.chunk_size, do.contiguous(),
            None if dht is None else dht.contiguous(), Ai, Aqk, chunk_indices=chunk_indices, saved=saved or None)
        B, T, HV = ctx.beta_shape
        dbeta = dbeta_t.reshape(HV, B, T).permute(1, 2, 0).to(ctx.beta_dtype)
        return (dq, dk, dv, dg, dbeta, dA_log, ddt_bias, None, dh0, None, None, None, None, None, None, None, None)


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    safe_gate: bool = False,
    lower_bound: float | None = None,
    disable_recompute: bool = False,
    return_intermediate_states: bool = False,
    state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    cu_seqlens_cpu: torch.LongTensor | None = None,
    cp_context: object | None = None,
    use_graph: bool = False,
    max_num_seqs: int | None = None,
    *,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    chunk_size: int = 64,
    **kwargs,
):
    r"""Chunked Kimi Delta Attention, flash-linear-attention 0.6.0's ``chunk_kda`` (same parameters,
    positional order, defaults and returns).

    Per value head, with state ``h`` ``[K, V]``: ``h = diag(exp(g_t)) h``,
    ``v' = beta_t (v_t - h^T k_t)``, ``h = h + k_t v'^T``, ``o_t = h^T (scale q_t)``.

    Args:
        q, k: ``[B, T, H, K]``, float32 / float16 / bfloat16, ``K <= 256``.
        v: ``[B, T, HV, V]``, ``HV`` a multiple of ``H`` (GVA: value head ``i`` reads key head
            ``i // (HV // H)``), ``V <= 256``; q, k, v are computed in the widest of their dtypes.
        g: ``[B, T, HV, K]`` log-space decay per key channel in ``[-inf, 0]`` (``-inf`` resets that
            channel's state row; see ``fla_ascend.ops.common.cumsum.GATE_FLOOR``), or the raw gate
            input with ``use_gate_in_kernel``; float32 / float16 / bfloat16 (computed in float32).
        beta: ``[B, T, HV]``; the logits with ``use_beta_sigmoid_in_kernel``.
        scale: multiplies ``q``; default ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``), read as float32.
        output_final_state: also return the final state (float32).
        use_qk_l2norm_in_kernel: L2-normalise q and k over ``K`` first (eps 1e-6).
        use_gate_in_kernel: ``g = -exp(A_log) softplus(g + dt_bias)`` fused with the gate cumsum, or
            with ``lower_bound`` ``g = lower_bound * sigmoid(exp(A_log) (g + dt_bias))`` (``A_log``
            optional there) (:func:`fla_ascend.ops.kda.reference.kda_gate`).
        use_beta_sigmoid_in_kernel, allow_neg_eigval: ``beta = sigmoid(beta)``, ``2 sigmoid(beta)``.
        safe_gate: flash-linear-attention's fast path for gates bounded in ``[lower_bound, 0)``; the
            kernels here are exact for any gate, so it only checks ``lower_bound`` (with
            ``use_gate_in_kernel`` it must be given, in ``[-5, 0)``).
        lower_bound: the lower-bound gate (see ``use_gate_in_kernel``).
        disable_recompute: keep ``w``, the pre-scaled ``k`` and ``q``, the chunk states and ``v'`` from
            the forward for the backward instead of recomputing them (more memory, less time).
        return_intermediate_states: also return the chunk states ``h`` ``[B, NT, HV, K, V]`` (``B = 1``
            with ``cu_seqlens``, ``NT`` the chunks over all sequences) in the dtype q, k, v are computed
            in (the widest of theirs); only under
            ``torch.inference_mode()``.
        state_v_first: states laid out ``[N, HV, V, K]``.
        cu_seqlens, cu_seqlens_cpu: ``[N + 1]`` boundaries of sequences packed along T (``B == 1``);
            empty sequences allowed; with ``cu_seqlens_cpu`` nothing is read back from the device.
        cp_context, use_graph: not supported (``NotImplementedError``); ``max_num_seqs`` is read only
            with ``use_graph``.
        A_log: ``[HV]``; dt_bias: ``[HV * K]``; with ``use_gate_in_kernel`` only.
        chunk_size: 16, 32 or 64 (default).
        **kwargs: the deprecated ``transpose_state_layout`` (= ``state_v_first``); other names raise
            ``TypeError``.

    Returns:
        ``(o, final_state)``, or ``(o, final_state, h)`` with ``return_intermediate_states``: ``o``
        ``[B, T, HV, V]`` in q's dtype; ``final_state`` ``[N, HV, K, V]`` float32 or ``None``.

    Raises (messages start with ``chunk_kda:``):
        TypeError: a non-tensor, an unsupported dtype, a non-real ``scale`` or ``lower_bound``, a
            non-bool flag, an unknown keyword argument.
        ValueError: mismatched shapes, ``HV`` not a multiple of ``H``, ``K`` or ``V`` above 256,
            invalid ``cu_seqlens`` / ``cu_seqlens_cpu``, wrong ``initial_state`` shape, tensors on
            different devices, ``chunk_size`` not in {16, 32, 64}, ``A_log`` missing with
            ``use_gate_in_kernel`` and no ``lower_bound`` (or ``A_log`` / ``dt_bias`` given without
            it), ``safe_gate`` with ``use_gate_in_kernel`` and ``lower_bound`` outside ``[-5, 0)``,
            ``allow_neg_eigval`` without ``use_beta_sigmoid_in_kernel``,
            ``return_intermediate_states`` outside inference mode or with ``disable_recompute``.
        NotImplementedError: ``cp_context``, ``use_graph``; from the backward on a CUDA GPU, ``K`` or
            ``V`` below 16, on an Ascend NPU ``K`` above 128.
    """
    op = "chunk_kda"
    from fla_ascend.ops.gated_delta_rule.inputs import check_extra_kwargs

    (output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
     safe_gate, disable_recompute, return_intermediate_states, state_v_first, use_graph) = check_bools(
        op, output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_gate_in_kernel=use_gate_in_kernel, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, disable_recompute=disable_recompute,
        return_intermediate_states=return_intermediate_states, state_v_first=state_v_first, use_graph=use_graph)
    state_v_first = check_extra_kwargs(op, kwargs, state_v_first)
    if cp_context is not None:
        raise NotImplementedError("chunk_kda: cp_context (context parallelism) is not supported; got a context")
    if use_graph:
        raise NotImplementedError("chunk_kda: use_graph=True (a fixed-shape chunk list for graph capture) is not "
                                  "supported")
    if not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool) or chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_kda: chunk_size must be one of {CHUNK_SIZES}, got {chunk_size!r}")
    chunk_size = int(chunk_size)
    x = validate_kda_inputs(
        op, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias, lower_bound,
        output_final_state, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        state_v_first=state_v_first, cu_seqlens_cpu=cu_seqlens_cpu, chunk_size=chunk_size,
    )
    if safe_gate and use_gate_in_kernel:
        lo, hi = SAFE_LOWER_BOUND
        if lower_bound is None or not lo <= lower_bound < hi:
            raise ValueError(f"chunk_kda: safe_gate=True with use_gate_in_kernel=True requires lower_bound in "
                             f"[{lo:g}, {hi:g}), got {lower_bound!r}")
    if return_intermediate_states:
        if not torch.is_inference_mode_enabled():
            raise ValueError("chunk_kda: return_intermediate_states=True is for inference: call it under "
                             "torch.inference_mode(); got a call outside inference mode")
        if disable_recompute:
            raise ValueError("chunk_kda: return_intermediate_states=True cannot be combined with "
                             "disable_recompute=True")
    out_dtype = x.q.dtype
    x.q, x.k, x.v = common_dtype(x.q, x.k, x.v)
    if backend.is_interpreter() and x.q.dtype == torch.bfloat16:
        raise TypeError("chunk_kda: bfloat16 is not supported on the Triton interpreter (CPU); got q of dtype "
                        "torch.bfloat16: use float32 or float16 there")
    if use_qk_l2norm_in_kernel:
        from fla_ascend.ops.norm import l2norm

        x.q, x.k = l2norm(x.q), l2norm(x.k)
    if use_beta_sigmoid_in_kernel:
        x.beta = beta_activation(x.beta, allow_neg_eigval)
    if state_v_first and x.initial_state is not None:
        x.initial_state = x.initial_state.transpose(-1, -2).contiguous()
    chunk_indices = None
    if x.cu_seqlens is not None:
        chunk_indices = prepare_chunk_indices(x.cu_seqlens, chunk_size, x.cu_seqlens_cpu)
    grad_needed = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x.q, x.k, x.v, x.gk, x.beta, x.initial_state, x.A_log, x.dt_bias))
    o, final_state, h = ChunkKDAFunction.apply(
        x.q, x.k, x.v, x.gk, x.beta, x.A_log, x.dt_bias, x.scale, x.initial_state, output_final_state, x.cu_seqlens,
        use_gate_in_kernel, None if lower_bound is None else float(lower_bound), chunk_size, grad_needed,
        disable_recompute, chunk_indices,
    )
    o = o.to(out_dtype)
    if state_v_first and final_state is not None:
        final_state = final_state.transpose(-1, -2).contiguous()
    if return_intermediate_states:
        B = 1 if x.cu_seqlens is not None else x.q.shape[0]
        h = h.view(B, -1, *h.shape[1:])
        return o, final_state, h.transpose(-1, -2) if state_v_first else h
    return o, final_state
