"""Stage 4: the output of every chunk, in parallel over chunks.

``o = scale * ((q exp(G)) h + causal(q . k exp(G_i - G_j)) v')`` with ``h`` the state at the
chunk's start and ``v'`` the corrected values from the state recurrence.
"""
from __future__ import annotations

from types import MappingProxyType

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.common.tiles import (
    a5_target,
    dot_chained,
    dot_dim,
    dot_operand,
    f32_dot_chain,
    npu_tiles,
    stage_launch,
)
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.chips import get_chip
from fla_ascend.tiling.sizes import cdiv
from fla_ascend.tiling.ub import Tile

# The UB model of the kernels (fla_ascend.tiling.ub): NPU launch plans pick their tile sizes with it,
# and `fla-ascend check` compares it with bishengir-compile's planned UB (docs/check.md). The counts of
# float32 buffers are fitted to the compiler's A2 plans (2026-12-01): the Cube + Vector stages'
# UB buffers are planned once (the compiler multi-buffers their L1 buffers).
FWD_O_TILES = [Tile((6, "BT", "BT"), "fp32", "A, its gating and causal masks", buffered=False),
    Tile((4, "BT", "BV"), "fp32", "o acc, v_new, temporaries", buffered=False),
    Tile(("BT", 16), "fp32", "g", buffered=False)]
BWD_DV_LOCAL_TILES = [Tile((10, "BT", "BT"), "fp32", "A^T, its gating and causal masks", buffered=False),
    Tile((2, "BT", 16), "fp32", "g", buffered=False)]
NPU_FWD_O_TILE = MappingProxyType({"BK": 64, "BV": 128, "multibuffer": False})
"""NPU tile of :func:`chunk_fwd_o` at ``chunk_size = 64`` on A2/A3: ``BV = 128`` (one V block per
task, half the tasks and Cube <-> Vector hand-offs of ``BV = 64``) without the compiler's double
buffering, which at ``BV = 128`` planned 189440 B (96% of UB); without it 92704 B (47%). B1 T4096
H16 HV32, Ascend910B2, calibrated constants (``fla-ascend estimate chunk_gated_delta_rule --shape
qwen3next``, 2026-12-03): 864 us at ``BK = 128, BV = 64`` (the UB model's pick), 480 here. A5
(whose compiler does not double-buffer by default) and smaller chunks keep the UB model's pick."""
NPU_DQKWG_TILE = MappingProxyType({"BK": 128, "BV": 32})
"""NPU ``BK`` (capped at ``dot_dim(K)``) and ``BV`` of :func:`chunk_bwd_dqkwg` at ``chunk_size = 64``,
chosen by the compiled plan's estimate rather than the UB model (smaller chunks keep the model's
pick: at ``[128, 32]`` their plans fill 98-99% of UB instead of 73-85%; so does A5 with 16-wide V
blocks, whose float32 dot operands overflow its UB at ``BK = 128``): its cross-core waits are
about 16 per task of (chunk, value head, K block), so one K block halves them. B1 T4096 H16 HV32,
Ascend910B2, calibrated constants (``fla-ascend estimate chunk_gated_delta_rule --shape
qwen3next``, 2026-12-03): 3140 us at
``BK = 64, BV = 16`` (the UB model's pick before), 1869 / 1577 / 1655 at ``BK = 128`` with ``BV``
16 / 32 / 64; B8 T2048 H32: 12268 -> 6007 at ``[128, 32]``. bishengir-compile plans 194848-196384 B
at ``BT = 64`` for every tile tried: it fills the UB whatever the tile, so the UB model
(:data:`BWD_DQKWG_TILES`, calibrated on the smaller tiles) overstates it there. With ``dw`` stored
before the in-chunk part, every such plan also plans beside a reserved 10% of the UB (the check's
probe, :mod:`fla_ascend.compiler.reserve`)."""
BWD_DQKWG_TILES = [Tile((6, "BT", "BT"), "fp32", "dS, S / dSg, gating and masks", buffered=False),
    Tile((5, "BT", "BK"), "fp32", "q, k blocks, dq, dk, dw"), Tile((4, "BK", "BV"), "fp32", "h, dh blocks")]


@triton.jit
def _chunk_fwd_o_task(
    i_task, q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT, NK,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, F32_CHAIN: tl.constexpr,
    RUNTIME_NK: tl.constexpr,
):
    # on A5 NK = cdiv(K, BK) is a runtime argument: with a compile-time trip count above one
    # bishengir-compile-a5 rejects its own outlined call (as chunk_bwd_dqkwg's V loop)
    if RUNTIME_NK:
        n_k = NK
    else:
        n_k = tl.cdiv(K, BK)
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
    for i_k in range(n_k):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        p_qk = qk_base + o_t[:, None] * (H * K) + o_k[None, :]
        b_q = tl.load(q + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_k = tl.load(k + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_h = tl.load(h + h_base + o_k[:, None] * V + o_v[None, :],
                      mask=(o_k < K)[:, None] & m_v[None, :], other=0.0)  # [BK, BV]
        b_o += tl.dot(dot_operand(b_q), b_h)  # b_q is the next dot's operand too (R7)
        b_A += tl.dot(b_q, tl.trans(b_k))
    b_g = tl.load(g_cum + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, mask=m_t, other=0.0)  # [BT]
    b_o = b_o * tl.exp(b_g)[:, None]
    m_causal = (o_t[:, None] >= o_t[None, :]) & m_t[:, None]  # rows past the end: exp(G_i - G_j) overflows
    b_A = tl.where(m_causal, b_A * tl.exp(tl.where(m_causal, b_g[:, None] - b_g[None, :], 0.0)), 0.0)
    p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)  # [BT, BV]
    b_o = (b_o + dot_chained(b_A, b_vn, F32_CHAIN)) * scale
    tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_tv)


@triton.jit(do_not_specialize=["T", "NT", "TT", "NK", "n_tasks", "n_programs"])
def chunk_fwd_o_kernel(
    q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    F32_CHAIN: tl.constexpr = False, NK=1, RUNTIME_NK: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_fwd_o_task(i_task, q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT, NK,
                              H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN, RUNTIME_NK)
    else:
        _chunk_fwd_o_task(tl.program_id(0), q, k, v_new, h, g_cum, o, chunk_indices, cu_seqlens, scale, T, NT, TT,
                          NK, H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN, RUNTIME_NK)


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
    if backend.device_type() == "npu" and chunk_size == 64 and get_chip().default_multibuffer:
        s = dict(NPU_FWD_O_TILE)
    else:
        s = npu_tiles(FWD_O_TILES, chunk_size, q, {"BK": [128, 64, 32], "BV": [128, 64, 32]}) or {"BK": 64, "BV": 128}
    BV = min(s["BV"], dot_dim(V))
    BK = min(s["BK"], dot_dim(K))
    n_tasks = n_chunks * HV * cdiv(V, BV)
    plan = task_plan(n_tasks, "cube")
    chunk_fwd_o_kernel[plan.grid](
        q=q, k=k, v_new=v_new, h=h, g_cum=g_cum, o=o, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=BK, BV=BV,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, F32_CHAIN=f32_dot_chain(chunk_size),
        NK=cdiv(K, BK), RUNTIME_NK=a5_target(),
        **stage_launch("chunk_o", s.get("multibuffer")),
    )
    return o


@triton.jit
def _chunk_bwd_dv_local_task(
    i_task, q, k, g_cum, do, dv_local, chunk_indices, cu_seqlens, scale, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, F32_CHAIN: tl.constexpr,
):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    b_At = tl.zeros([BT, BT], dtype=tl.float32)  # [j, i] = k_j . q_i
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        p_qk = (t0 * H + i_h) * K + o_t[:, None] * (H * K) + o_k[None, :]
        b_q = tl.load(q + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_k = tl.load(k + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        b_At += tl.dot(b_k, tl.trans(b_q))
    b_g = tl.load(g_cum + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, mask=m_t, other=0.0)  # [BT]
    m_causal_t = (o_t[:, None] <= o_t[None, :]) & m_t[None, :]
    b_At = tl.where(m_causal_t, b_At * scale * tl.exp(tl.where(m_causal_t, b_g[None, :] - b_g[:, None], 0.0)), 0.0)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
        b_do = tl.load(do + p_v, mask=m_tv, other=0.0)  # [BT, BV]
        tl.store(dv_local + p_v, dot_chained(b_At, b_do, F32_CHAIN), mask=m_tv)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_bwd_dv_local_kernel(
    q, k, g_cum, do, dv_local, chunk_indices, cu_seqlens, scale, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    F32_CHAIN: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_bwd_dv_local_task(i_task, q, k, g_cum, do, dv_local, chunk_indices, cu_seqlens, scale, T, NT,
                                     TT, H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN)
    else:
        _chunk_bwd_dv_local_task(tl.program_id(0), q, k, g_cum, do, dv_local, chunk_indices, cu_seqlens, scale,
                                 T, NT, TT, H, HV, K, V, BT, BK, BV, IS_VARLEN, F32_CHAIN)


def chunk_bwd_dv_local(
    q: torch.Tensor,
    k: torch.Tensor,
    g_cum: torch.Tensor,
    do: torch.Tensor,
    scale: float,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> torch.Tensor:
    """In-chunk part of the gradient of ``v'``: ``causal(scale q . k exp(G_i - G_j))^T do``.

    Returns ``[B, T, HV, V]`` float32.
    """
    B, T, H, K = q.shape
    HV, V = do.shape[2], do.shape[3]
    dv_local = torch.empty(B, T, HV, V, dtype=torch.float32, device=q.device)
    s = npu_tiles(BWD_DV_LOCAL_TILES, chunk_size, q, {"BK": [128, 64, 32], "BV": [128, 64, 32]}) \
        or {"BK": 64, "BV": 64}
    plan = task_plan(n_chunks * HV, "cube")
    chunk_bwd_dv_local_kernel[plan.grid](
        q=q, k=k, g_cum=g_cum, do=do, dv_local=dv_local, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_chunks * HV,
        n_programs=plan.n_programs, H=H, HV=HV, K=K, V=V, BT=chunk_size,
        BK=min(s["BK"], dot_dim(K)), BV=min(s["BV"], dot_dim(V)),
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, F32_CHAIN=f32_dot_chain(chunk_size),
        **stage_launch("chunk_o", s.get("multibuffer")),
    )
    return dv_local


@triton.jit
def _chunk_bwd_dqkwg_task(
    i_task, q, k, v_new, h, dh, do, dv_new, g_cum, dq, dk, dw, dg_parts, chunk_indices, cu_seqlens, scale,
    T, NT, TT, NV,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, RUNTIME_NV: tl.constexpr,
    F32_CHAIN: tl.constexpr,
):
    NK = tl.cdiv(K, BK)
    i_c = i_task // (HV * NK)
    i_hv = (i_task // NK) % HV
    i_k = i_task % NK
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m_t = o_t < eos - t0
    m_k = o_k < K
    h_base = (tl.cast(i_c, tl.int64) * HV + i_hv) * K * V
    b_dq = tl.zeros([BT, BK], dtype=tl.float32)
    b_dk = tl.zeros([BT, BK], dtype=tl.float32)
    b_dw = tl.zeros([BT, BK], dtype=tl.float32)
    b_dS = tl.zeros([BT, BT], dtype=tl.float32)
    b_hdh = tl.zeros([BK], dtype=tl.float32)
    # off CUDA NV = cdiv(V, BV) is a runtime argument: with a compile-time trip count
    # bishengir-compile-a5 rejects its own outlined call (compiler_repros/func_call_type_mismatch.py);
    # compiled CUDA keeps the constant trip count it was timed with
    if RUNTIME_NV:
        n_v = NV
    else:
        n_v = tl.cdiv(V, BV)
    for i_v in range(n_v):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < V
        m_kv = m_k[:, None] & m_v[None, :]
        b_h = tl.load(h + h_base + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0.0)  # [BK, BV]
        b_dh = tl.load(dh + h_base + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0.0)  # [BK, BV]
        m_tv = m_t[:, None] & m_v[None, :]
        p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
        b_do = tl.load(do + p_v, mask=m_tv, other=0.0)  # [BT, BV]
        b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)  # [BT, BV]
        b_dvn = tl.load(dv_new + p_v, mask=m_tv, other=0.0)  # [BT, BV], fp32 or the input dtype
        b_dS += tl.dot(dot_operand(b_do), tl.trans(b_vn))  # b_do is read again (R7)
        b_dq += tl.dot(b_do, tl.trans(b_h))
        b_dk += tl.dot(b_vn, tl.trans(b_dh))
        if F32_CHAIN:  # A5 with 16-wide V blocks (tiles.f32_dot_chain)
            b_dw += tl.dot(b_dvn.to(tl.float32), tl.trans(b_h).to(tl.float32))
        else:
            b_dw += tl.dot(b_dvn.to(b_h.dtype), tl.trans(b_h))
        b_hdh += tl.sum(b_h.to(tl.float32) * b_dh.to(tl.float32), 1)
    m_tk = m_t[:, None] & m_k[None, :]
    # dw is complete after the V loop: stored before the in-chunk part, so that its [BT, BK] float32
    # tile is not live beside that part's [BT, BT] and [BT, BK] temporaries
    p_out = (t0 * HV + i_hv) * K + o_t[:, None] * (HV * K) + o_k[None, :]
    tl.store(dw + p_out, (-b_dw).to(dw.dtype.element_ty), mask=m_tk)
    p_qk = (t0 * H + i_h) * K + o_t[:, None] * (H * K) + o_k[None, :]
    b_q = tl.load(q + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
    b_k = tl.load(k + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
    p_gate = tl.cast(i_hv, tl.int64) * TT + t0
    b_g = tl.load(g_cum + p_gate + o_t, mask=m_t, other=0.0)  # [BT]
    i_last = tl.minimum(BT, eos - t0) - 1
    b_g_last = tl.load(g_cum + p_gate + i_last)
    # inter-chunk output term: o += scale exp(G) q h
    b_dq = b_dq * (scale * tl.exp(b_g))[:, None]
    b_dG = tl.sum(b_dq * b_q.to(tl.float32), 1)  # [BT]
    # state update term: h_next = exp(G_last) h + (k exp(G_last - G))^T v'
    b_dk = b_dk * tl.where(m_t, tl.exp(b_g_last - b_g), 0.0)[:, None]
    b_dkk = tl.sum(b_dk * b_k.to(tl.float32), 1)  # [BT]
    b_dG -= b_dkk
    b_dG_last = tl.sum(b_dkk, 0) + tl.exp(b_g_last) * tl.sum(b_hdh, 0)
    # in-chunk output term: o += causal(scale q . k exp(G_i - G_j)) v'
    m_causal = (o_t[:, None] >= o_t[None, :]) & m_t[None, :] & m_t[:, None]
    b_gamma = tl.exp(tl.where(m_causal, b_g[:, None] - b_g[None, :], 0.0))
    b_dSg = tl.where(m_causal, b_dS * b_gamma * scale, 0.0)  # d/d(q_i . k_j)
    b_S = tl.dot(dot_operand(b_q), tl.trans(b_k))  # [BT, BT] partial over this K block
    b_dSS = b_dSg * b_S
    b_dG += tl.sum(b_dSS, 1) - tl.sum(b_dSS, 0)
    b_dG += tl.where(o_t == i_last, b_dG_last, 0.0)
    b_dq += dot_chained(b_dSg, b_k, F32_CHAIN)
    # (dSg^T q) written as (q^T dSg)^T: a tl.trans of a dot result used as a dot operand is
    # miscompiled on Hopper by Triton 3.4 to 3.7.0 (wrong dk; flash-linear-attention issue 640)
    b_dk += tl.trans(dot_chained(tl.trans(b_q), b_dSg, F32_CHAIN))
    tl.store(dq + p_out, b_dq.to(dq.dtype.element_ty), mask=m_tk)
    tl.store(dk + p_out, b_dk, mask=m_tk)
    tl.store(dg_parts + (tl.cast(i_k, tl.int64) * HV + i_hv) * TT + t0 + o_t, b_dG, mask=m_t)


@triton.jit(do_not_specialize=["T", "NT", "TT", "NV", "n_tasks", "n_programs"])
def chunk_bwd_dqkwg_kernel(
    q, k, v_new, h, dh, do, dv_new, g_cum, dq, dk, dw, dg_parts, chunk_indices, cu_seqlens, scale, T, NT, TT, NV,
    n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    RUNTIME_NV: tl.constexpr = True, F32_CHAIN: tl.constexpr = False,
):
    """dq, dk, dw and the gate gradient of one chunk. UB on an A2/A3 vector core: at ``BT = 64``
    bishengir-compile (Ascend910B2, 2026-12-01) plans 186400-196384 B of the 196608 B UB (95-100%,
    K and V from 64 to 256),
    and 166048-195104 B for every ``BK``, ``BV`` in {32, 64} with or without multi-buffering
    (141152 B at 16 x 16): about twelve ``[BT, BT]`` float32 buffers (``dS``, ``S``, the gated
    products and their masks) dominate. ``chunk_size = 32`` plans 165280 B (84%), 16 plans
    149440 B. At K >= 100 the plan did not leave 10% of the UB to the compiler's planner (a
    reserved 10% overflowed by 5.6 KB at K = V = 128) while ``dw``'s ``[BT, BK]`` float32 tile stayed
    live to the end; stored right after the V loop, it does (2026-12-07, the check's reservation
    probe)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_bwd_dqkwg_task(i_task, q, k, v_new, h, dh, do, dv_new, g_cum, dq, dk, dw, dg_parts,
                                  chunk_indices, cu_seqlens, scale, T, NT, TT, NV, H, HV, K, V, BT, BK, BV, IS_VARLEN,
                                  RUNTIME_NV, F32_CHAIN)
    else:
        _chunk_bwd_dqkwg_task(tl.program_id(0), q, k, v_new, h, dh, do, dv_new, g_cum, dq, dk, dw, dg_parts,
                              chunk_indices, cu_seqlens, scale, T, NT, TT, NV, H, HV, K, V, BT, BK, BV, IS_VARLEN,
                              RUNTIME_NV, F32_CHAIN)


def chunk_bwd_dqkwg(
    q: torch.Tensor,
    k: torch.Tensor,
    v_new: torch.Tensor,
    h: torch.Tensor,
    dh: torch.Tensor,
    do: torch.Tensor,
    dv_new: torch.Tensor,
    g_cum: torch.Tensor,
    scale: float,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    dw_dtype: torch.dtype = torch.float32,
    dq_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients through the output and the state update, per value head.

    ``dw_dtype``: the dtype ``dw`` is stored in (its consumer's operand dtype,
    :func:`fla_ascend.ops.common.wy.wy_bwd_operand_dtype`). ``dq_dtype``: the dtype ``dq`` is
    stored in (fp32 while a GVA group sum follows; else the input dtype, the final ``dq``).

    Returns:
        ``(dq, dk, dw, dg_parts)``: ``dq`` ``[B, T, HV, K]`` in ``dq_dtype`` and ``dk``
        ``[B, T, HV, K]`` fp32 (per value head, before the GVA reduction; ``dk`` without the WY
        part), ``dw`` ``[B, T, HV, K]`` in ``dw_dtype``, and
        ``dg_parts`` ``[NK + 1, HV, B * T]`` fp32 whose first ``NK`` rows hold this stage's
        per-K-block gradients of the in-chunk cumulative gate (the last row is for the WY stage).
    """
    B, T, H, K = q.shape
    HV, V = do.shape[2], do.shape[3]
    # on A5 with 16-wide V blocks the float32 dot operands (f32_dot_chain) overflow UB at BK = 128
    a5_f32 = f32_dot_chain(min(NPU_DQKWG_TILE["BV"], dot_dim(V)))
    if backend.device_type() == "npu" and chunk_size == 64 and not a5_f32:
        s = dict(NPU_DQKWG_TILE)
    else:
        s = npu_tiles(BWD_DQKWG_TILES, chunk_size, q, {"BK": [64], "BV": [64, 32, 16]}) or {"BK": 64, "BV": 64}
    BK = min(s["BK"], dot_dim(K))
    NK = cdiv(K, BK)
    dq = torch.empty(B, T, HV, K, dtype=dq_dtype, device=q.device)
    dk = torch.empty(B, T, HV, K, dtype=torch.float32, device=q.device)
    dw = torch.empty(B, T, HV, K, dtype=dw_dtype, device=q.device)
    dg_parts = torch.empty(NK + 1, HV, B * T, dtype=torch.float32, device=q.device)
    n_tasks = n_chunks * HV * NK
    plan = task_plan(n_tasks, "cube")
    BV = min(s["BV"], dot_dim(V))
    chunk_bwd_dqkwg_kernel[plan.grid](
        q=q, k=k, v_new=v_new, h=h, dh=dh, do=do, dv_new=dv_new, g_cum=g_cum, dq=dq, dk=dk, dw=dw,
        dg_parts=dg_parts, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens, scale=scale,
        T=T, NT=cdiv(T, chunk_size), TT=B * T, NV=cdiv(V, BV), n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=BK, BV=BV,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, RUNTIME_NV=not backend.is_cuda_compiled(),
        F32_CHAIN=f32_dot_chain(chunk_size, BV),
        **stage_launch("dqkwg", s.get("multibuffer")),
    )
    return dq, dk, dw, dg_parts
