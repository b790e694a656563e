"""KDA stage 4: the output, and its backward through the in-chunk part.

Per chunk, value head and ``BV`` slice, with ``h`` the state at the chunk's start::

    o = scale (q exp(G)) h + Aqk v'

Backward (one task per chunk and value head, over every ``BV`` slice): ``dAqk = causal(do v'^T)``
and the in-chunk part of ``dv'``, ``Aqk^T do``.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.common.tiles import (
    dot_chained,
    dot_operand,
    f32_dot_chain,
    stage_block,
    stage_form,
    stage_launch,
)
from fla_ascend.ops.utils.math import masked_exp
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv

NPU_FWD_O_BLOCK = 128
"""Widest K and V blocks of the output stage on an NPU: half the tasks of ``BV = 64`` and fewer
cross-core waits; 68% of A2's UB at chunk 64, estimated 1083 -> 559 us at Kimi Linear's layer (B1
T4096 H32)."""
NPU_DAV_BLOCK = 64
"""The V block of the dAqk / dv local stage on an NPU."""


@triton.jit
def _kda_fwd_o_task(
    i_task, q, v_new, g_cum, h, Aqk, o, chunk_indices, cu_seqlens, scale, T, NT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, F32_CHAIN: tl.constexpr,
    ONE_ACC: tl.constexpr,
):
    NV = tl.cdiv(V, BV)
    i_c = i_task // (HV * NV)
    i_hv = (i_task // NV) % HV
    i_v = i_task % NV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    state = (tl.cast(i_c, tl.int64) * HV + i_hv) * K * V
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        b_q = tl.load(q + (t0 + o_t)[:, None] * (H * K) + i_h * K + o_k[None, :], mask=m_tk, other=0.0)
        b_G = tl.load(g_cum + (t0 + o_t)[:, None] * (HV * K) + i_hv * K + o_k[None, :], mask=m_tk, other=0.0)
        b_qg = b_q.to(tl.float32) * masked_exp(b_G, m_tk)
        if ONE_ACC:
            b_qg = b_qg * scale
        b_h = tl.load(h + state + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.0)
        b_o += tl.dot(b_qg.to(b_q.dtype), b_h.to(b_q.dtype))
    p_A = (t0 + o_t)[:, None] * (HV * BT) + i_hv * BT + o_t[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    p_v = (t0 + o_t)[:, None] * (HV * V) + i_hv * V + o_v[None, :]
    b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)
    if ONE_ACC:  # the second product accumulates onto the first (scale is in q exp(G))
        if F32_CHAIN:  # A5 at chunk 16 / 16-wide V blocks
            b_o = tl.dot(tl.load(Aqk + p_A, mask=m_t[:, None], other=0.0), b_vn.to(tl.float32), b_o)
        else:
            b_o = tl.dot(tl.load(Aqk + p_A, mask=m_t[:, None], other=0.0).to(b_vn.dtype), b_vn, b_o)
    else:
        b_A = tl.load(Aqk + p_A, mask=m_t[:, None], other=0.0)
        b_o = b_o * scale + dot_chained(b_A, b_vn, F32_CHAIN)  # F32_CHAIN: A5 at chunk 16 / 16-wide V blocks
    tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_tv)


@triton.jit(do_not_specialize=["scale", "T", "NT", "n_tasks", "n_programs"])
def kda_fwd_o_kernel(
    q, v_new, g_cum, h, Aqk, o, chunk_indices, cu_seqlens, scale, T, NT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    F32_CHAIN: tl.constexpr = False, ONE_ACC: tl.constexpr = False,
):
    """Output of one chunk, value head and ``BV`` slice (module doc).

    ``ONE_ACC`` (the NPU form): ``scale`` multiplies ``q exp(G)`` before the first product and the
    second product (``Aqk v'``) accumulates onto the first, so no vector operation touches the
    accumulator between the two dots; on Ascend one would send it through the vector cores and back
    (Ascend910B2, Kimi Linear's layer B1 T4096 H32, 2026-12-07: cross-core waits per core 374 -> 180,
    estimated 559 -> 394 us, UB 68% -> 52%; docs/ascend-rules.md R13)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_fwd_o_task(i_task, q, v_new, g_cum, h, Aqk, o, chunk_indices, cu_seqlens, scale, T, NT,
                            H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN, ONE_ACC)
    else:
        _kda_fwd_o_task(tl.program_id(0), q, v_new, g_cum, h, Aqk, o, chunk_indices, cu_seqlens, scale, T, NT,
                        H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN, ONE_ACC)


def kda_fwd_o(q, v_new, g_cum, h, Aqk, scale, chunk_size, n_chunks, chunk_indices=None, cu_seqlens=None):
    """``o`` ``[B, T, HV, V]`` in q's dtype.

    Args:
        q: ``[B, T, H, K]``; v_new: ``[B, T, HV, V]``; g_cum: ``[B, T, HV, K]`` float32;
        h: ``[n_chunks, HV, K, V]``; Aqk: ``[B, T, HV, BT]`` float32 (scale included).
    """
    B, T, H, K = q.shape
    HV, V = v_new.shape[2], v_new.shape[3]
    o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
    BV = stage_block("kda_fwd_o", V, NPU_FWD_O_BLOCK)
    n_tasks = n_chunks * HV * cdiv(V, BV)
    plan = task_plan(n_tasks, "cube")
    kda_fwd_o_kernel[plan.grid](
        q=q, v_new=v_new, g_cum=g_cum, h=h, Aqk=Aqk, o=o, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=cdiv(T, chunk_size), n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=stage_block("kda_fwd_o", K, NPU_FWD_O_BLOCK), BV=BV,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        F32_CHAIN=f32_dot_chain(chunk_size, BV), ONE_ACC=stage_form("kda_fwd_o", "one_acc"),
        **stage_launch("kda_fwd_o"),
    )
    return o


@triton.jit
def _kda_bwd_dav_task(
    i_task, v_new, do, Aqk, dAqk, dv_local, chunk_indices, cu_seqlens, T, NT,
    HV: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr,
    F32_CHAIN: tl.constexpr,
):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    p_A = (t0 + o_t)[:, None] * (HV * BT) + i_hv * BT + o_t[None, :]
    b_A = tl.load(Aqk + p_A, mask=m_t[:, None], other=0.0)
    b_dA = tl.zeros([BT, BT], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (t0 + o_t)[:, None] * (HV * V) + i_hv * V + o_v[None, :]
        b_do = tl.load(do + p_v, mask=m_tv, other=0.0)
        b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)
        b_dA += tl.dot(dot_operand(b_do), tl.trans(b_vn.to(b_do.dtype)))
        tl.store(dv_local + p_v, dot_chained(tl.trans(b_A), b_do, F32_CHAIN), mask=m_tv)
    m_causal = (o_t[:, None] >= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    tl.store(dAqk + p_A, tl.where(m_causal, b_dA, 0.0), mask=m_t[:, None])


@triton.jit(do_not_specialize=["T", "NT", "n_tasks", "n_programs"])
def kda_bwd_dav_kernel(
    v_new, do, Aqk, dAqk, dv_local, chunk_indices, cu_seqlens, T, NT, n_tasks, n_programs,
    HV: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr, F32_CHAIN: tl.constexpr = False,
):
    """``dAqk`` and the in-chunk ``dv'`` of one chunk and value head (module doc)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_bwd_dav_task(i_task, v_new, do, Aqk, dAqk, dv_local, chunk_indices, cu_seqlens, T, NT,
                              HV, V, BT, BV, IS_VARLEN, F32_CHAIN)
    else:
        _kda_bwd_dav_task(tl.program_id(0), v_new, do, Aqk, dAqk, dv_local, chunk_indices, cu_seqlens, T, NT,
                          HV, V, BT, BV, IS_VARLEN, F32_CHAIN)


def kda_bwd_dav(v_new, do, Aqk, chunk_size, n_chunks, chunk_indices=None, cu_seqlens=None):
    """``(dAqk, dv_local)``: ``dAqk`` ``[B, T, HV, BT]`` float32 (causal), ``dv_local``
    ``[B, T, HV, V]`` float32 (``Aqk^T do``)."""
    B, T, HV, V = do.shape
    dAqk = torch.empty_like(Aqk)
    dv_local = torch.empty(B, T, HV, V, dtype=torch.float32, device=do.device)
    plan = task_plan(n_chunks * HV, "cube")
    BV = stage_block("kda_bwd_dav", V, NPU_DAV_BLOCK)
    kda_bwd_dav_kernel[plan.grid](
        v_new=v_new, do=do, Aqk=Aqk, dAqk=dAqk, dv_local=dv_local, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        T=T, NT=cdiv(T, chunk_size), n_tasks=n_chunks * HV, n_programs=plan.n_programs,
        HV=HV, V=V, BT=chunk_size, BV=BV, IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        F32_CHAIN=f32_dot_chain(chunk_size, BV), **stage_launch("kda_bwd_dav"),
    )
    return dAqk, dv_local
