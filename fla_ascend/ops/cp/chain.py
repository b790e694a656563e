"""The affine state chain of context parallelism: per-part maps and their composition.

A part's effect on the recurrent state of a sequence that crosses it is affine, per value head::

    h_out = A h_in + b          A [K, K], b [K, V], h [K, V]

with ``A`` the product over the part's chunks of ``exp(G_last) I - (k exp(G_last - G))^T w`` (the
chunk recurrence of :mod:`fla_ascend.ops.common.chunk_h` with ``u = 0``) and ``b`` the state the part
leaves from a zero start. :func:`part_maps` gets both from the chunked forward's own stages: ``b`` is
the final state from zero, ``A`` the final state of the recurrence started on the identity
(``h0 = I``, ``V = K``) with ``u = 0``. The state gradient runs through the transposes:
``dh_in = A^T dh_out + c`` with ``c`` the gradient from this part's own outputs
(:func:`part_state_grad`). :func:`affine_step` is the composition kernel.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_h import chunk_bwd_dh, chunk_fwd_h
from fla_ascend.ops.common.chunk_o import chunk_bwd_dv_local
from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
from fla_ascend.ops.common.tiles import dot_dim
from fla_ascend.ops.common.wy import chunk_wy_fwd, wy_dot
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv


@triton.jit
def _affine_step_task(
    i_task, A, h, b, out, K: tl.constexpr, V: tl.constexpr,
    BK: tl.constexpr, BKJ: tl.constexpr, BV: tl.constexpr, TRANSPOSE: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    NK = tl.cdiv(K, BK)
    NV = tl.cdiv(V, BV)
    i_hv = i_task // (NK * NV)
    i_k = (i_task // NV) % NK
    i_v = i_task % NV
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    base_a = tl.cast(i_hv, tl.int64) * K * K
    base_h = tl.cast(i_hv, tl.int64) * K * V
    p_out = o_k[:, None] * V + o_v[None, :]
    b_acc = tl.load(b + base_h + p_out, mask=m_k[:, None] & m_v[None, :], other=0.0)  # [BK, BV]
    for j0 in range(0, K, BKJ):
        o_j = j0 + tl.arange(0, BKJ)
        m_j = o_j < K
        b_h = tl.load(h + base_h + o_j[:, None] * V + o_v[None, :], mask=m_j[:, None] & m_v[None, :],
                      other=0.0)  # [BKJ, BV]
        if TRANSPOSE:  # (A^T)[k, j] = A[j, k]: load rows j (contiguous along k), transpose on chip
            b_at = tl.load(A + base_a + o_j[:, None] * K + o_k[None, :], mask=m_j[:, None] & m_k[None, :],
                           other=0.0)  # [BKJ, BK]
            b_acc += wy_dot(tl.trans(b_at), b_h, tl.float32, DOT_PRECISION)
        else:
            b_a = tl.load(A + base_a + o_k[:, None] * K + o_j[None, :], mask=m_k[:, None] & m_j[None, :],
                          other=0.0)  # [BK, BKJ]
            b_acc += wy_dot(b_a, b_h, tl.float32, DOT_PRECISION)
    tl.store(out + base_h + p_out, b_acc, mask=m_k[:, None] & m_v[None, :])


@triton.jit(do_not_specialize=["n_tasks", "n_programs"])
def affine_step_kernel(
    A, h, b, out, n_tasks, n_programs, K: tl.constexpr, V: tl.constexpr,
    BK: tl.constexpr, BKJ: tl.constexpr, BV: tl.constexpr,
    TRANSPOSE: tl.constexpr, DOT_PRECISION: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _affine_step_task(i_task, A, h, b, out, K, V, BK, BKJ, BV, TRANSPOSE, DOT_PRECISION)
    else:
        _affine_step_task(tl.program_id(0), A, h, b, out, K, V, BK, BKJ, BV, TRANSPOSE, DOT_PRECISION)


def chain_dot_precision() -> str:
    """``input_precision`` of the chain's fp32 dots: ``tf32x3`` on compiled CUDA (near-fp32, as
    flash-linear-attention's chain), ``ieee`` elsewhere (the Ascend cube and the interpreter
    multiply fp32 exactly)."""
    return "tf32x3" if backend.is_cuda_compiled() else "ieee"


def affine_step(A: torch.Tensor, h: torch.Tensor, b: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """One link of the chain: ``A h + b`` (``A^T h + b`` with ``transpose``) per value head, in fp32.

    Args:
        A: ``[HV, K, K]`` float32 contiguous.
        h, b: ``[HV, K, V]`` float32 contiguous.
        transpose: apply ``A^T`` (the state-gradient direction).

    Returns:
        ``[HV, K, V]`` float32.
    """
    HV, K, V = b.shape
    out = torch.empty(HV, K, V, dtype=torch.float32, device=b.device)
    BK, BV = min(64, dot_dim(K)), min(64, dot_dim(V))
    n_tasks = HV * cdiv(K, BK) * cdiv(V, BV)
    plan = task_plan(n_tasks, "cube")
    affine_step_kernel[plan.grid](
        A=A, h=h, b=b, out=out, n_tasks=n_tasks, n_programs=plan.n_programs,
        K=K, V=V, BK=BK, BKJ=BK, BV=BV, TRANSPOSE=transpose, DOT_PRECISION=chain_dot_precision(),
        TASK_LOOP=plan.task_loop,
    )
    return out


def compose(maps_A: torch.Tensor, maps_b: torch.Tensor, slots: range, transpose: bool = False) -> torch.Tensor:
    """Fold the chain over ``slots`` in their order: ``h = 0; h = op(A_s) h + b_s`` for each slot ``s``
    (``op`` the transpose with ``transpose``): the first link is ``b`` itself, then one
    :func:`affine_step` launch per further slot. A chain has at most ``n_parts - 1`` links, one per
    part boundary a sequence crosses.

    Args:
        maps_A: ``[n_parts, HV, K, K]`` fp32; maps_b: ``[n_parts, HV, K, V]`` fp32.
        slots: non-empty range of slot indices.

    Returns:
        ``[HV, K, V]`` float32.
    """
    h = maps_b[slots[0]].clone()
    for s in slots[1:]:
        h = affine_step(maps_A[s], h, maps_b[s], transpose)
    return h


def _segment_wy(k, v, g, beta, A_log, dt_bias, chunk_size):
    """Gate cumsum and WY stage of one ``[1, L, ...]`` segment: ``(g_cum, w, u, n_chunks)``."""
    n_chunks = cdiv(k.shape[1], chunk_size)
    g_cum, beta_t = chunk_gate_cumsum(g, beta, chunk_size, n_chunks, None, None, A_log, dt_bias)
    w, u, _ = chunk_wy_fwd(k, v, g_cum, beta_t, chunk_size, n_chunks, None, None)
    return g_cum, w, u, n_chunks


def part_maps(k, v, g, beta, A_log, dt_bias, chunk_size: int, need_A: bool):
    """``(A, b)`` of one segment: the tokens of a sequence inside a part, ``[1, L, ...]`` slices of the
    op's inputs (``q``/``k`` already normalised, ``g`` raw when ``A_log`` is given).

    ``b`` ``[HV, K, V]`` fp32 is the state after the segment from a zero start; ``A`` ``[HV, K, K]`` fp32
    the map of its start state (the recurrence run on ``h0 = I`` with ``u = 0``), zeros when not
    ``need_A`` (a segment that starts its sequence, whose start state is zero).
    """
    HV, K = v.shape[2], k.shape[3]
    g_cum, w, u, n_chunks = _segment_wy(k, v, g, beta, A_log, dt_bias, chunk_size)
    _, _, b = chunk_fwd_h(k, w, u, g_cum, chunk_size, n_chunks, 1, None, True)
    if not need_A:
        return torch.zeros(HV, K, K, dtype=torch.float32, device=k.device), b[0]
    eye = torch.eye(K, dtype=torch.float32, device=k.device).expand(1, HV, K, K).contiguous()
    u0 = torch.zeros(1, k.shape[1], HV, K, dtype=w.dtype, device=k.device)
    _, _, A = chunk_fwd_h(k, w, u0, g_cum, chunk_size, n_chunks, 1, eye, True)
    return A[0], b[0]


def part_state_grad(q, k, v, g, beta, A_log, dt_bias, scale: float, do, chunk_size: int) -> torch.Tensor:
    """``c`` ``[HV, K, V]`` fp32: the gradient of the loss with respect to the start state of one
    segment (``[1, L, ...]`` slices, as :func:`part_maps`) through the segment's own outputs, i.e.
    with a zero gradient at its end. The state recurrence's gradient does not depend on the state,
    so no forward state is needed."""
    g_cum, w, _, n_chunks = _segment_wy(k, v, g, beta, A_log, dt_bias, chunk_size)
    dv_local = chunk_bwd_dv_local(q, k, g_cum, do, scale, chunk_size, n_chunks, None, None)
    _, _, dh0 = chunk_bwd_dh(q, k, w, g_cum, do, dv_local, scale, chunk_size, n_chunks, 1, None, True)
    return dh0[0]
