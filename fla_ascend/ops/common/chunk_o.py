"""Stage 4: the output of every chunk, in parallel over chunks.

``o = scale * ((q exp(G)) h + causal(q . k exp(G_i - G_j)) v')`` with ``h`` the state at the
chunk's start and ``v'`` the corrected values from the state recurrence.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend.backend import launch_options
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.tiling import task_plan


@triton.jit
def _chunk_fwd_o_task(
    i_task, q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    NV = tl.cdiv(V, BV)
    i_c = i_task // (HV * NV)
    i_hv = (i_task // NV) % HV
    i_v = i_task % NV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_t = o_t < eos - t0
    m_v = o_v < V
    qk_base = (t0 * H + i_h) * K
    h_base = (tl.cast(i_c, tl.int64) * HV + i_hv) * K * V
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        p_qk = qk_base + o_t[:, None] * (H * K) + o_k[None, :]
        b_q = tl.load(q + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_k = tl.load(k + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_h = tl.load(h + h_base + o_k[:, None] * V + o_v[None, :],
                      mask=(o_k < K)[:, None] & m_v[None, :], other=0.0)  # [BK, BV]
        b_o += tl.dot(b_q, b_h)
        b_A += tl.dot(b_q, tl.trans(b_k))
    b_g = tl.load(g_cum + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, mask=m_t, other=0.0)  # [BT]
    b_o = b_o * tl.exp(b_g)[:, None]
    m_causal = (o_t[:, None] >= o_t[None, :]) & m_t[None, :]
    b_A = tl.where(m_causal, b_A * tl.exp(tl.where(m_causal, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
    p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)  # [BT, BV]
    b_o = (b_o + tl.dot(b_A.to(b_vn.dtype), b_vn)) * scale
    tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_tv)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_fwd_o_kernel(
    q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_fwd_o_task(i_task, q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT,
                              H, HV, K, V, BT, BK, BV, IS_VARLEN)
    else:
        _chunk_fwd_o_task(tl.program_id(0), q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT,
                          H, HV, K, V, BT, BK, BV, IS_VARLEN)


def chunk_fwd_o(
    q: torch.Tensor,
    k: torch.Tensor,
    v_new: torch.Tensor,
    h: torch.Tensor,
    g_cum: torch.Tensor,
    scale: float,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Output ``o`` ``[B, T, HV, V]`` in q's dtype.

    Args:
        q, k: ``[B, T, H, K]``; v_new: ``[B, T, HV, V]``; h: ``[n_chunks, HV, K, V]``;
        g_cum: ``[HV, B * T]`` fp32; scale: applied to ``q . k`` and ``q h``.
    """
    B, T, H, K = q.shape
    HV, V = v_new.shape[2], v_new.shape[3]
    o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
    BV = min(128, triton.next_power_of_2(V))
    n_tasks = n_chunks * HV * triton.cdiv(V, BV)
    plan = task_plan(n_tasks, "cube")
    chunk_fwd_o_kernel[plan.grid](
        q=q, k=k, v_new=v_new, h=h, g_cum=g_cum, o=o, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=triton.cdiv(T, chunk_size), TT=B * T, n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=min(64, triton.next_power_of_2(K)), BV=BV,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=4, num_stages=2),
    )
    return o
