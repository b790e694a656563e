"""``chunk_gated_delta_rule``: the chunked gated delta rule (prefill and training).

Forward = four stages from ``ops/common``: gate cumsum (with the fused GatedDeltaNet gate),
WY representation, the state recurrence over chunks, and the output.
"""
from __future__ import annotations

import numbers

import torch

from fla_ascend import backend
from fla_ascend.ops.common.chunk_h import chunk_bwd_dh, chunk_fwd_h
from fla_ascend.ops.common.chunk_o import chunk_bwd_dqkwg, chunk_bwd_dv_local, chunk_fwd_o
from fla_ascend.ops.common.cumsum import chunk_gate_cumsum, chunk_gate_cumsum_bwd
from fla_ascend.ops.common.gva import gva_group_sum
from fla_ascend.ops.common.wy import chunk_wy_bwd, chunk_wy_fwd, dv_operand_dtype, wy_bwd_operand_dtype
from fla_ascend.ops.cp.chain import compose, part_maps, part_state_grad
from fla_ascend.ops.cp.comm import gather_parts
from fla_ascend.ops.cp.context import check_cp_call
from fla_ascend.ops.gated_delta_rule.inputs import GatedDeltaRuleInputs, check_extra_kwargs, validate_inputs
from fla_ascend.ops.utils import check_bools, prepare_chunk_indices, prepare_chunk_offsets
from fla_ascend.ops.utils.autograd import kernel_backward
from fla_ascend.tiling.sizes import cdiv

CUDA_MIN_BWD_HEAD_DIM = 16
"""Smallest ``K`` and ``V`` the backward accepts on CUDA. On the H200 (Triton 3.6.0) the GPU tier's
``K = V = 1`` backward case (B1 T40 H1 HV2, chunk 64) gave wrong gradients (rel-RMSE 0.6-4 for
dq, dk, dv, dg, dbeta) while the same case passes under the interpreter. Passed on the H200:
``K = 32`` as shipped, ``K = V = 16`` with a bf16 ``dv'`` (fp32 now, ``wy.dv_operand_dtype``);
sizes 2 to 15 were not run. Raised by the backward only. Off CUDA any head dim works."""

CHUNK_SIZES = (16, 32, 64)


def _chunking(B: int, T: int, cu_seqlens: torch.Tensor | None, chunk_size: int,
              chunk_indices: torch.Tensor | None = None, cu_seqlens_cpu: torch.Tensor | None = None):
    """``(N, n_chunks, chunk_indices, chunk_offsets)`` of an equal-length or varlen batch. Given
    ``chunk_indices`` (or ``cu_seqlens_cpu``, a host copy of ``cu_seqlens``) nothing is read back
    from the device: ``chunk_offsets`` is a device-side cumulative sum."""
    if cu_seqlens is None:
        return B, B * cdiv(T, chunk_size), None, None
    if chunk_indices is None:
        chunk_indices = prepare_chunk_indices(cu_seqlens, chunk_size, cu_seqlens_cpu)
    return cu_seqlens.numel() - 1, chunk_indices.shape[0], chunk_indices, prepare_chunk_offsets(cu_seqlens, chunk_size)


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
    store_ai: bool = False,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens_cpu: torch.Tensor | None = None,
):
    """Compose the forward stages on validated, contiguous inputs. Returns ``(o, final_state, Ai)``:
    ``Ai`` (the WY inverse of every chunk, :func:`chunk_wy_fwd`) when ``store_ai``, else None; the
    backward reuses it instead of forming and inverting ``A`` again. ``chunk_indices`` /
    ``cu_seqlens_cpu``: see :func:`_chunking`."""
    N, n_chunks, chunk_indices, chunk_offsets = _chunking(q.shape[0], q.shape[1], cu_seqlens, chunk_size,
                                                          chunk_indices, cu_seqlens_cpu)
    g_cum, beta_t = chunk_gate_cumsum(g, beta, chunk_size, n_chunks, chunk_indices, cu_seqlens, A_log, dt_bias)
    w, u, Ai = chunk_wy_fwd(k, v, g_cum, beta_t, chunk_size, n_chunks, chunk_indices, cu_seqlens, store_ai=store_ai)
    h, v_new, final_state = chunk_fwd_h(
        k, w, u, g_cum, chunk_size, n_chunks, N, initial_state, output_final_state, cu_seqlens, chunk_offsets
    )
    del w, u  # each intermediate is released once its last stage has run (peak memory, cases.md)
    o = chunk_fwd_o(q, k, v_new, h, g_cum, scale, chunk_size, n_chunks, chunk_indices, cu_seqlens)
    return o, final_state, Ai


def chunk_gated_delta_rule_bwd(
    q, k, v, g, beta, scale, initial_state, cu_seqlens, A_log, dt_bias, chunk_size, do, dht, Ai=None,
    chunk_indices=None,
):
    """Gradients of every input. From the forward it takes its inputs and ``Ai`` (the WY
    inverse, stored by :func:`chunk_gated_delta_rule_fwd`; recomputed when None); ``w``, ``u``,
    the chunk states ``h`` and ``v'`` are recomputed (see cases.md for the measured
    memory/time trade-off).

    Returns ``(dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias)``; ``dh0`` is None without
    ``initial_state``, ``dA_log``/``ddt_bias`` None without ``A_log``/``dt_bias``.

    Raises:
        NotImplementedError: on a CUDA GPU, ``K`` or ``V`` below :data:`CUDA_MIN_BWD_HEAD_DIM`.
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if min(K, V) < CUDA_MIN_BWD_HEAD_DIM and backend.is_cuda_compiled():
        raise NotImplementedError(
            f"chunk_gated_delta_rule: the backward on CUDA needs head dims K, V >= {CUDA_MIN_BWD_HEAD_DIM}, "
            f"got K={K}, V={V}: at K = V = 1 its gradients were wrong on the H200 (Triton 3.6.0; cases.md, "
            "Hopper findings). The forward runs at any head dim."
        )
    N, n_chunks, chunk_indices, chunk_offsets = _chunking(B, T, cu_seqlens, chunk_size, chunk_indices)
    idx = dict(chunk_indices=chunk_indices, cu_seqlens=cu_seqlens)
    g_cum, beta_t = chunk_gate_cumsum(g, beta, chunk_size, n_chunks, chunk_indices, cu_seqlens, A_log, dt_bias)
    w, u, Ai = chunk_wy_fwd(k, v, g_cum, beta_t, chunk_size, n_chunks, **idx, store_ai=Ai is None, Ai=Ai)
    h, v_new, _ = chunk_fwd_h(k, w, u, g_cum, chunk_size, n_chunks, N, initial_state, False, cu_seqlens,
                              chunk_offsets)
    # each intermediate is released once its last stage has run: the peak is then the dq/dk/dw
    # stage's, not the sum of all (-28% at bf16 sizes, measured on the CPU; cases.md, "Backward:
    # recompute, do not save")
    del u
    dv_local = chunk_bwd_dv_local(q, k, g_cum, do, scale, chunk_size, n_chunks, **idx)
    dh, dv_new, dh0 = chunk_bwd_dh(q, k, w, g_cum, do, dv_local, scale, chunk_size, n_chunks, N, dht,
                                   initial_state is not None, cu_seqlens, chunk_offsets,
                                   dv_dtype=dv_operand_dtype(k.dtype, K, V))
    del w, dv_local
    # Without GVA dq and dk leave their last stage in the input dtype; with it they stay fp32
    # per value head until the group sum below.
    gva = HV != H
    dq, dk, dw, dg_parts = chunk_bwd_dqkwg(q, k, v_new, h, dh, do, dv_new, g_cum, scale, chunk_size, n_chunks,
                                           **idx, dw_dtype=wy_bwd_operand_dtype(k.dtype),
                                           dq_dtype=torch.float32 if gva else q.dtype)
    del h, v_new, dh
    dk, dv, dbeta_t = chunk_wy_bwd(k, v, g_cum, beta_t, Ai, dw, dv_new, dk, dg_parts, chunk_size, n_chunks, **idx,
                                   dk_dtype=torch.float32 if gva else k.dtype)
    del Ai, dw, dv_new
    dg, dbeta, dA_log, ddt_bias = chunk_gate_cumsum_bwd(g, beta, dg_parts, dbeta_t, chunk_size, n_chunks,
                                                        **idx, A_log=A_log, dt_bias=dt_bias)
    if gva:  # value heads of one group share q/k: reduce their gradients in a fixed order
        dq = gva_group_sum(dq, H, q.dtype)
        dk = gva_group_sum(dk, H, k.dtype)
    return dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias,
                chunk_size, grad_needed, chunk_indices=None, cu_seqlens_cpu=None):
        if cu_seqlens is not None and chunk_indices is None:
            chunk_indices = prepare_chunk_indices(cu_seqlens, chunk_size, cu_seqlens_cpu)
        o, final_state, Ai = chunk_gated_delta_rule_fwd(
            q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, A_log, dt_bias, chunk_size,
            store_ai=grad_needed, chunk_indices=chunk_indices,
        )
        ctx.save_for_backward(q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, Ai, chunk_indices)
        ctx.scale, ctx.chunk_size = scale, chunk_size
        return o, final_state

    @staticmethod
    @kernel_backward("chunk_gated_delta_rule")
    def backward(ctx, do, dht):
        q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, Ai, chunk_indices = ctx.saved_tensors
        dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias = chunk_gated_delta_rule_bwd(
            q, k, v, g, beta, ctx.scale, initial_state, cu_seqlens, A_log, dt_bias, ctx.chunk_size,
            do.contiguous(), None if dht is None else dht.contiguous(), Ai=Ai, chunk_indices=chunk_indices,
        )
        return dq, dk, dv, dg, dbeta, None, dh0, None, None, dA_log, ddt_bias, None, None, None, None


class ChunkGatedDeltaRuleCPFunction(torch.autograd.Function):
    """``chunk_gated_delta_rule`` under context parallelism (``cp_context=``), for
    :func:`chunk_gated_delta_rule` (the op owns it; the chain, collectives and context it uses are the
    primitives of :mod:`fla_ascend.ops.cp`).

    Forward, on each rank, for each part it holds (one; two with zigzag):

    1. if the part's last sequence continues into the next part, its map ``(A, b)`` over the part's last
       segment (:func:`fla_ascend.ops.cp.chain.part_maps`; ``A`` only when that segment is the whole part
       and its sequence started earlier, else zeros);
    2. one ``all_gather`` of every part's ``[HV, K, K + V]`` fp32 map;
    3. if the part's first sequence started in an earlier part, its start state: the chain folded over
       those earlier parts (:func:`fla_ascend.ops.cp.chain.compose`);
    4. the single-device forward on the local batch with these start states as ``initial_state``.

    Backward, the other way: the start-state gradient ``c`` of each part's first segment from its own
    outputs (:func:`fla_ascend.ops.cp.chain.part_state_grad`), one ``all_gather`` of ``[HV, K, V]`` per
    part, the end-state gradient of each part's last sequence folded from later parts through ``A^T``
    (the maps gathered in the forward), then the single-device backward with these as ``dht``.

    Communication per rank and call: forward ``parts * HV * K * (K + V)`` fp32 sent, ``world`` times that
    received (one ``all_gather``); backward ``parts * HV * K * V`` sent, ``world`` times that received.
    Independent of ``T``. ``A_log``/``dt_bias`` gradients are this rank's share (sum them over the
    group, as for any parameter under context parallelism).
    """

    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, A_log, dt_bias, chunk_size, cp, grad_needed):
        HV, K, V = v.shape[2], k.shape[3], v.shape[3]
        maps = torch.zeros(len(cp.parts), HV, K, K + V, dtype=torch.float32, device=q.device)
        for i, p in enumerate(cp.parts):
            if p.post_num_ranks:
                end = p.offset + cp.part_len
                need_A = p.pre_num_ranks > 0 and p.last_seq_start == p.offset
                seg = [t[:, p.last_seq_start:end] for t in (k, v, g, beta)]
                A, b = part_maps(*seg, A_log, dt_bias, chunk_size, need_A)
                maps[i, ..., :K], maps[i, ..., K:] = A, b
        gathered = gather_parts(maps, cp)
        maps_A, maps_b = gathered[..., :K].contiguous(), gathered[..., K:].contiguous()
        h0 = torch.zeros(cp.num_seqs, HV, K, V, dtype=torch.float32, device=q.device)
        for p in cp.parts:
            if p.pre_num_ranks:
                h0[p.first_seq] = compose(maps_A, maps_b, range(p.slot - p.pre_num_ranks, p.slot))
        cu = cp.cu_seqlens
        o, _, Ai = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, h0, False, cu, A_log, dt_bias, chunk_size,
                                              store_ai=grad_needed)
        ctx.save_for_backward(q, k, v, g, beta, A_log, dt_bias, Ai, h0, maps_A)
        ctx.scale, ctx.chunk_size, ctx.cp = scale, chunk_size, cp
        return o

    @staticmethod
    @kernel_backward("chunk_gated_delta_rule")
    def backward(ctx, do):
        q, k, v, g, beta, A_log, dt_bias, Ai, h0, maps_A = ctx.saved_tensors
        cp, scale, chunk_size = ctx.cp, ctx.scale, ctx.chunk_size
        do = do.contiguous()
        HV, K, V = v.shape[2], k.shape[3], v.shape[3]
        c = torch.zeros(len(cp.parts), HV, K, V, dtype=torch.float32, device=q.device)
        for i, p in enumerate(cp.parts):
            if p.pre_num_ranks:
                sq, sk, sv, sg, sb, sdo = (t[:, p.offset:p.first_seq_end] for t in (q, k, v, g, beta, do))
                c[i] = part_state_grad(sq, sk, sv, sg, sb, A_log, dt_bias, scale, sdo, chunk_size)
        c = gather_parts(c, cp)
        dht = torch.zeros(cp.num_seqs, HV, K, V, dtype=torch.float32, device=q.device)
        for p in cp.parts:
            if p.post_num_ranks:
                dht[p.last_seq] = compose(maps_A, c, range(p.slot + p.post_num_ranks, p.slot, -1), transpose=True)
        dq, dk, dv, dg, dbeta, _, dA_log, ddt_bias = chunk_gated_delta_rule_bwd(
            q, k, v, g, beta, scale, h0, cp.cu_seqlens, A_log, dt_bias, chunk_size, do, dht, Ai=Ai,
        )
        return dq, dk, dv, dg, dbeta, None, dA_log, ddt_bias, None, None, None


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
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    cu_seqlens_cpu: torch.LongTensor | None = None,
    chunk_indices: torch.LongTensor | None = None,
    cp_context: object | None = None,
    *,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    chunk_size: int = 64,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    r"""Chunked gated delta rule, flash-linear-attention 0.6.0's ``chunk_gated_delta_rule`` (same
    parameters, positional order, defaults and returns).

    Per value head, with state ``h`` ``[K, V]``: ``h = exp(g_t) h``,
    ``v' = beta_t (v_t - h^T k_t)``, ``h = h + k_t v'^T``, ``o_t = h^T (scale q_t)``.

    Args:
        q, k: ``[B, T, H, K]``, float32 / float16 / bfloat16, ``K <= 256``.
        v: ``[B, T, HV, V]``, ``HV`` a multiple of ``H`` (GVA: value head ``i`` reads key head
            ``i // (HV // H)``), ``V <= 256``. q, k and v may have different float dtypes (as in
            flash-linear-attention): they are computed in the widest of them (:func:`common_dtype`).
        g: ``[B, T, HV]`` log-space decay in ``[-inf, 0]`` (``-inf``: a decay of 0, the state
            resets; see ``fla_ascend.ops.common.cumsum.GATE_FLOOR`` and docs/ops.md), or the raw
            gate input when ``use_gate_in_kernel``; any float dtype (computed in fp32). A NaN or inf
            in any input poisons its chunk and the rest of its sequence, never another sequence.
        beta: ``[B, T, HV]``, any float dtype; the raw logits with ``use_beta_sigmoid_in_kernel``.
        scale: multiplies ``q``; default ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``; ``N = B``, or
            the number of sequences with ``cu_seqlens``), read as float32.
        output_final_state: also return the final state (float32, same layout as ``initial_state``).
        use_qk_l2norm_in_kernel: L2-normalise q and k over ``K`` first (eps 1e-6).
        use_beta_sigmoid_in_kernel: use ``sigmoid(beta)`` (computed in float32 before the chunk
            stages, inside autograd).
        allow_neg_eigval: use ``2 sigmoid(beta)`` (beta in ``[0, 2)``); requires
            ``use_beta_sigmoid_in_kernel``.
        state_v_first: states laid out ``[N, HV, V, K]`` (transposed on the way in and out).
        cu_seqlens: ``[N + 1]`` int boundaries of sequences packed along T (requires ``B == 1``);
            empty sequences allowed. Validated on the host (one device-to-host copy) unless
            ``cu_seqlens_cpu`` or ``chunk_indices`` is given.
        cu_seqlens_cpu: the same boundaries as a CPU tensor: validation and the chunk list use it,
            and nothing is read back from the device.
        chunk_indices: ``[NT, 2]`` int rows ``(sequence, chunk)`` for chunks of ``chunk_size``
            tokens (:func:`fla_ascend.ops.utils.prepare_chunk_indices`, or flash-linear-attention's);
            used as given, without reading ``cu_seqlens`` back.
        cp_context: context parallelism: a :func:`fla_ascend.ops.cp.build_cp_context` context; the
            inputs are then this rank's ``[1, T_local, ...]`` slice, ``cu_seqlens`` (and
            ``cu_seqlens_cpu``, ``chunk_indices``) are replaced by the context's local ones, and
            ``final_state`` is None (docs/cp.md).
        use_gate_in_kernel: compute ``g = -exp(A_log) * softplus(g + dt_bias)`` fused with the
            chunk cumsum (Qwen3-Next's GatedDeltaNet gate).
        A_log, dt_bias: ``[HV]``; ``A_log`` required with ``use_gate_in_kernel``, ``dt_bias`` optional;
            without ``use_gate_in_kernel`` either one raises ``ValueError`` (it would not be used).
        chunk_size: 16, 32 or 64 (default).
        **kwargs: the deprecated ``transpose_state_layout`` (= ``state_v_first``); ``head_first``
            raises ``DeprecationWarning``; other names raise ``TypeError``.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` in q's dtype (flash-linear-attention's rule);
        ``final_state`` or ``None``.

    Raises (messages start with ``chunk_gated_delta_rule:``):
        TypeError: a non-tensor, an unsupported dtype, a non-real
            ``scale``, a non-bool flag, an unknown keyword argument.
        ValueError: a non-finite ``scale``, mismatched B/T/H/HV between inputs, ``HV`` not a multiple of ``H``, ``K`` or
            ``V`` above 256, invalid ``cu_seqlens`` / ``cu_seqlens_cpu`` / ``chunk_indices``, wrong
            ``initial_state`` shape, tensors on different devices, ``chunk_size`` not in
            {16, 32, 64}, ``A_log`` missing with ``use_gate_in_kernel`` (or ``A_log`` / ``dt_bias``
            given without it), ``allow_neg_eigval``
            without ``use_beta_sigmoid_in_kernel``.
        NotImplementedError: from the backward, on a CUDA GPU, when ``K`` or ``V`` is below
            :data:`CUDA_MIN_BWD_HEAD_DIM`; with ``cp_context``, ``initial_state`` or ``output_final_state``.
        Under ``cp_context`` also those of :func:`fla_ascend.ops.cp.context.check_cp_call`.
    """
    op = "chunk_gated_delta_rule"
    (output_final_state, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
     use_gate_in_kernel) = check_bools(
        op, output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        state_v_first=state_v_first, use_gate_in_kernel=use_gate_in_kernel)
    state_v_first = check_extra_kwargs(op, kwargs, state_v_first)
    if cp_context is not None:
        cu_seqlens = check_cp_call(op, cp_context, q, initial_state, output_final_state)
        cu_seqlens_cpu, chunk_indices = cp_context.cu_seqlens_cpu, None
    if not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool) or chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_gated_delta_rule: chunk_size must be one of {CHUNK_SIZES}, got {chunk_size!r}")
    chunk_size = int(chunk_size)
    x: GatedDeltaRuleInputs = validate_inputs(
        op, q, k, v, g, beta, scale, initial_state, cu_seqlens,
        use_gate_in_kernel, A_log, dt_bias, output_final_state, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first, cu_seqlens_cpu=cu_seqlens_cpu,
        chunk_indices=chunk_indices, chunk_size=chunk_size,
    )
    out_dtype = x.q.dtype  # flash-linear-attention's rule: o in q's dtype
    x.q, x.k, x.v = common_dtype(x.q, x.k, x.v)
    if backend.is_interpreter() and x.q.dtype == torch.bfloat16:
        # the Triton interpreter computes garbage for tl.dot on bf16 operands (README, "Where each tier runs")
        raise TypeError("chunk_gated_delta_rule: bfloat16 is not supported on the Triton interpreter (CPU); "
                        "got q of dtype torch.bfloat16: use float32 or float16 there")
    if use_qk_l2norm_in_kernel:
        from fla_ascend.ops.norm import l2norm

        x.q, x.k = l2norm(x.q), l2norm(x.k)
    if use_beta_sigmoid_in_kernel:
        x.beta = beta_activation(x.beta, allow_neg_eigval)
    if state_v_first and x.initial_state is not None:
        x.initial_state = x.initial_state.transpose(-1, -2).contiguous()
    # the WY inverse is kept for the backward only when one can follow
    grad_needed = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state, x.A_log, x.dt_bias)
    )
    if cp_context is not None:
        return ChunkGatedDeltaRuleCPFunction.apply(x.q, x.k, x.v, x.g, x.beta, x.scale, x.A_log, x.dt_bias,
                                                   chunk_size, cp_context, grad_needed).to(out_dtype), None
    o, final_state = ChunkGatedDeltaRuleFunction.apply(
        x.q, x.k, x.v, x.g, x.beta, x.scale, x.initial_state, output_final_state, x.cu_seqlens,
        x.A_log, x.dt_bias, chunk_size, grad_needed, x.chunk_indices, x.cu_seqlens_cpu,
    )
    o = o.to(out_dtype)
    if state_v_first and final_state is not None:
        final_state = final_state.transpose(-1, -2).contiguous()
    return o, final_state


def common_dtype(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``q``, ``k``, ``v`` in one dtype for the chunk stages (their matrix products take one operand
    dtype): as given when they agree, else all cast to the widest (``torch.promote_types``;
    float16 with bfloat16 gives float32). The casts are autograd ops: each input's gradient comes
    back in its own dtype."""
    if q.dtype == k.dtype == v.dtype:
        return q, k, v
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def beta_activation(beta: torch.Tensor, allow_neg_eigval: bool) -> torch.Tensor:
    """``sigmoid(beta)`` in float32, or ``2 sigmoid(beta)`` with ``allow_neg_eigval`` (beta in ``[0, 2)``,
    flash-linear-attention's ``use_beta_sigmoid_in_kernel`` / ``allow_neg_eigval``)."""
    b = torch.sigmoid(beta.float())
    return b * 2 if allow_neg_eigval else b
