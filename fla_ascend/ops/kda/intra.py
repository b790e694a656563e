"""KDA stage 2: the in-chunk matrices and the WY representation, and their backward.

Per chunk of ``BT`` tokens and value head, with the in-chunk cumulative decay ``G`` ``[BT, K]``::

    Akk = strict_lower(beta_i sum_c k_ic k_jc exp(G_ic - G_jc))      # [BT, BT]
    Aqk = causal(scale sum_c q_ic k_jc exp(G_ic - G_jc))
    Ai  = (I + Akk)^-1,  w = Ai (beta k exp(G)),  u = Ai (beta v)

The decay differs per channel, so ``Akk`` is not ``k k^T`` times one decay matrix. It is built in
rows of 16-token sub-chunks: for the rows of sub-chunk ``r`` and the columns of earlier sub-chunks,
``exp(G_i - G_j) = exp(G_i - G_n) exp(G_n - G_j)`` with ``G_n`` the decay at the sub-chunk's first
row, and both factors are at most 1 (``G`` falls along the chunk), so the product is one dot of
bounded operands; the diagonal 16 x 16 block is summed column by column with the exact
``exp(G_i - G_j)`` (on an NPU the forward forms it as ``[16, 16, DIAG_BK]`` products instead: a
seventh of the vector instructions; the backward, at chunk 32 and 64, as ``[16, 16, NPU_BWD_DIAG_BK]``
products after its K loop). No factor can overflow, whatever the gates. A sub-chunk whose decay over
its 16 tokens stays below ``diag_dot_range`` in every channel (:func:`fla_ascend.ops.common.tiles.diag_dot_range`:
32 on CUDA and on an NPU; never for float16) takes its diagonal block through the same dots instead,
the factors then within ``exp(+-range)``; the exact form stays in the other branch. The backward sums the same
products the other way, with ``G`` at a sub-chunk's last row as the reference for its columns; off an
NPU its diagonal block goes token by token, token ``j`` as a column of the rows (``exp(G_i - G_j)``)
and as a row of the columns (``exp(G_j - G_c)``), with no reduction across the rows, and two tasks
share a sub-chunk's K blocks (``CUDA_LAUNCH["kda_intra_bwd"]["k_split"]``).

The inverse is :func:`fla_ascend.ops.common.wy.wy_inverse` (the same ``(I + A)^-1`` as the gated
delta rule's).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_h import gk_last
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.common.tiles import (
    cuda_launch,
    diag_dot_range,
    dot_operand,
    dot_precision,
    f32_dot_chain,
    stage_block,
    stage_form,
    stage_launch,
)
from fla_ascend.ops.common.wy import wy_diag_inverse, wy_dot, wy_inverse, wy_inverse_from_blocks
from fla_ascend.ops.utils.math import masked_exp
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv

BC = 16
"""Rows of a sub-chunk."""
NPU_BK = 32
"""The K block of the intra backward on an NPU, and of the WY forward when it inverts. bishengir-compile's
plans at ``BK = 64`` (Ascend910B2, 2026-12-04): the intra backward 195904 B of the 196608 B UB at chunk 64
(100%). The intra forward takes :data:`NPU_INTRA_FWD_BK`."""
NPU_INTRA_FWD_BK = 64
"""The K block of the intra forward's main loop on an NPU (its diagonal block runs after the loop in
blocks of :data:`DIAG_BK`). Ascend910B2 at chunk 64 (2026-12-04): 156992 B of UB (80%) at
:data:`NPU_BK`, 152256 B (77%) at 64, 196320 B (100%) at 128."""
DIAG_BK = tl.constexpr(16)
"""The K block of the intra forward's diagonal ``[16, 16, DIAG_BK]`` products on an NPU
(:func:`_kda_intra_diag_block`). Against the column loop it replaces, the stage's estimate halved at
Kimi Linear's layer (B1 T4096 H32: 16579 -> 8223 us with 8; vector instructions per core 865k ->
133k). At 16 (2026-12-07): 5764 -> 5546 us at that layer, Ascend910B2 planning 148672 B (76%) at chunk
64 and up to 94% at chunk 32, every such plan with a reserved 10% of the UB to spare (``fla-ascend
check --full --ops chunk_kda --kernels kda_intra_fwd_kernel``, A2 and A5)."""
BWD_DIAG_CHUNKS = (32, 64)
"""Chunk sizes at which the intra backward on an NPU (elsewhere: with ``diag_block`` in its
:data:`fla_ascend.ops.common.tiles.CUDA_LAUNCH` entry) forms the diagonal block as ``[16, 16,
NPU_BWD_DIAG_BK]`` products after its K loop (:func:`_kda_intra_bwd_diag_block`) instead of a
16-step column loop in every K block. Ascend910B2, Kimi Linear's layer (B1 T4096 H32 K = V = 128,
chunk 64; ``fla-ascend estimate chunk_kda --shape kimi-linear``, 2026-12-04): vector instructions per
core 1158k -> 171k, the stage 21237 -> 13322 us (now bound by its 10.6k cross-core waits per core), UB
154336 -> 163520 B (83%). At chunk 16, where the whole stage is the diagonal block, the same form
planned 97% of UB (the column loop: 72%), so it keeps the loop. In the same form the loop's dots take
their ``dA`` tiles straight from memory (2026-12-07, same shape): cross-core waits per core 10609 ->
9580, 13322 -> 12513 us, UB 83% -> 76%. With K blocks of 64 as well the stage would be 8242 us (4792
waits), but it plans 99% of UB."""
NPU_SPLIT_BK = {9: 64, 2: 64, 4: 64}
"""The launches of the intra backward on an NPU when its parts run apart (``split_sides``): ``SIDES``
-> K block. The row side with the diagonal block, then the column side through ``Akk``, then through
``Aqk``, each with K blocks of 64 (one launch at 64 plans 99% of UB). Ascend910B2, Kimi Linear's layer
(B1 T4096 H32 K = V = 128, chunk 64; ``fla-ascend estimate chunk_kda --shape kimi-linear``,
2026-12-07): 12514 -> 10703 us, cross-core waits per core 9580 -> 5478, UB 82%, 85%, 84%. Two
launches (the column side in one) would give 9137 us but plan 97%; the row side at 32: 13168 us."""
NPU_SPLIT_MIN_K = 64
"""The intra backward on an NPU runs its parts apart only above this K and without ``cu_seqlens``:
the row launch plans 92% of A2's UB at K = 64 and 90.2% with varlen at K = 128 (2026-12-07)."""
NPU_BWD_DIAG_BK = tl.constexpr(16)
"""The K block of the intra backward's diagonal ``[16, 16, NPU_BWD_DIAG_BK]`` products on an NPU:
83% of Ascend910B2's UB at chunk 64 and 13322 us at Kimi Linear's layer, 63% and 13781 us with 8."""
NPU_WY_BWD_BLOCK = 64
"""The K and V blocks of the WY backward on an NPU at chunk 64 (:data:`NPU_BK` at 16 and 32, where 64
plans up to 100%): at chunk 64 it plans 99-100% of A2's UB with blocks of 32 and 94-97% with 64, and
the estimate halves (Kimi Linear's layer, B1 T4096 H32: 6377 -> 3226 us); the ``[BT, BT]`` gradients,
not the blocks, fill the UB (docs/check.md, "KDA"). With ``dw`` accumulated in the Cube (2026-12-08)
94-100% and 2867 us; each plan fits beside the reserved 10%."""
NPU_SPLIT_INVERSE_CHUNKS = (64,)
"""Chunk sizes at which the WY forward on an NPU forms the inverse in two launches, as the gated
delta rule's: the diagonal blocks' ``D^-1`` on the vector cores
(:func:`fla_ascend.ops.common.wy.wy_diag_inverse`, which also zeroes those blocks in ``Akk``), then
the rest of it from ``D^-1`` and the block-lower ``Akk`` (``AI_MODE = "blocks"``, stored over
``Akk``), and computes ``w``, ``u`` in a third one from the stored inverse (``"load"``, in blocks of
:data:`NPU_WY_LOAD_BLOCK`). Ascend910B2, Kimi Linear's layer (``fla-ascend estimate chunk_kda --shape
kimi-linear``, 2026-12-07): 135 + 422 us for the inverse, against 713 us in one launch (the forward
substitution on the whole tile beside the Cube's products). Slower: ``w``, ``u`` in the same launch
as the inverse's products (1236 us in blocks of 64), and the substitution in
:func:`kda_intra_fwd`'s sub-chunk tasks (the stage 5764 -> 6306 us)."""
NPU_WY_LOAD_BLOCK = 128
"""The K and V blocks of the WY forward on an NPU when it loads the inverse (the backward's
recompute): 65% of A2's UB at chunk 64, estimated 952 -> 524 us at Kimi Linear's layer (32: 21%); with
the inverse read again at each product (``RELOAD_AI``, 2026-12-07) 61% and 394 us (cross-core waits per
core 366 -> 180)."""


@triton.jit
def _kda_diag_rows(q, k, g_cum, t0, r0, i_k, i_h, i_hv, m_i, m_ge, H: tl.constexpr, HV: tl.constexpr,
                   K: tl.constexpr, BKD: tl.constexpr):
    """K block ``i_k`` (``BKD`` channels) of a sub-chunk's rows for its diagonal ``16 x 16`` block:
    ``q``, ``k`` ``[16, BKD]`` float32, ``exp(G_i - G_j)`` ``[16, 16, BKD]`` on ``m_ge`` (``<= 1``, 0
    elsewhere), and the rows' offsets ``[16, BKD]`` into ``g_cum``-shaped tensors with their mask."""
    o_s = tl.arange(0, 16)
    o_k = i_k * BKD + tl.arange(0, BKD)
    m_ik = m_i[:, None] & (o_k < K)[None, :]
    p_i = (t0 + r0 + o_s)[:, None] * (H * K) + i_h * K + o_k[None, :]
    b_q = tl.load(q + p_i, mask=m_ik, other=0.0).to(tl.float32)  # [16, BKD]
    b_k = tl.load(k + p_i, mask=m_ik, other=0.0).to(tl.float32)
    p_g = (t0 + r0 + o_s)[:, None] * (HV * K) + i_hv * K + o_k[None, :]
    b_G = tl.load(g_cum + p_g, mask=m_ik, other=0.0)
    b_e = masked_exp(b_G[:, None, :] - b_G[None, :, :], m_ge[:, :, None])  # [16, 16, BKD]
    return b_q, b_k, b_e, p_g, m_ik


@triton.jit
def _kda_intra_diag_block(q, k, g_cum, t0, r0, n_t, i_h, i_hv, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr,
                          BKD: tl.constexpr):
    """The diagonal ``16 x 16`` block of a sub-chunk's ``Aqk`` (``i >= j``) and ``Akk`` (``i > j``)
    rows, without ``scale`` / ``beta``, as ``[16, 16, BKD]`` products with the exact
    ``exp(G_i - G_j) <= 1`` (the NPU form of the column loop in :func:`_kda_intra_fwd_task`)."""
    o_s = tl.arange(0, 16)
    m_i = r0 + o_s < n_t
    m_ge = (o_s[:, None] >= o_s[None, :]) & m_i[:, None] & m_i[None, :]  # [16, 16]
    d_qk = tl.zeros([16, 16], dtype=tl.float32)
    d_kk = tl.zeros([16, 16], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BKD)):
        b_q, b_k, b_e, _, _ = _kda_diag_rows(q, k, g_cum, t0, r0, i_k, i_h, i_hv, m_i, m_ge, H, HV, K, BKD)
        b_ke = b_k[None, :, :] * b_e  # k_j exp(G_i - G_j)
        d_qk += tl.sum(b_q[:, None, :] * b_ke, 2)
        d_kk += tl.sum(b_k[:, None, :] * b_ke, 2)
    return d_qk, tl.where(o_s[:, None] > o_s[None, :], d_kk, 0.0)


@triton.jit
def _diag_out_of_range(g_cum, t0, r0, n_t, i_hv, HV: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
                       DIAG_DOT_RANGE: tl.constexpr):
    """The channels in which a sub-chunk's decay range ``G_n - G_last`` (``n`` its first row) is not
    below ``DIAG_DOT_RANGE`` (1 when that is 0). With none, its diagonal ``16 x 16`` block may go
    through the dots with the decay split at row ``n``, ``exp(G_i - G_j) = exp(G_i - G_n)
    exp(G_n - G_j)``: no factor leaves ``[exp(-range), exp(range)]``. A NaN counts; a ``-inf`` gate,
    floored to :data:`fla_ascend.ops.common.cumsum.GATE_FLOOR`, exceeds any range below 110."""
    if DIAG_DOT_RANGE > 0:
        p_0 = (t0 + tl.minimum(r0, n_t - 1)) * (HV * K) + i_hv * K
        p_1 = (t0 + tl.maximum(tl.minimum(r0 + 15, n_t - 1), 0)) * (HV * K) + i_hv * K
        b_bad = tl.zeros([BK], dtype=tl.float32)  # float: an integer compare on vectors runs scalar on A2/A3
        for i_k in range(tl.cdiv(K, BK)):
            o_k = i_k * BK + tl.arange(0, BK)
            m_k = o_k < K
            d = tl.load(g_cum + p_0 + o_k, mask=m_k, other=0.0) - tl.load(g_cum + p_1 + o_k, mask=m_k, other=0.0)
            b_bad += tl.where(d < DIAG_DOT_RANGE, 0.0, tl.where(m_k, 1.0, 0.0))
        return tl.sum(b_bad, 0)
    else:
        return 1.0


@triton.jit
def _kda_intra_fwd_task(
    i_task, q, k, g_cum, beta_t, Akk, Aqk, chunk_indices, cu_seqlens, scale, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    IS_VARLEN: tl.constexpr, DIAG_BLOCK: tl.constexpr, DIAG_DOT_RANGE: tl.constexpr,
):
    NB: tl.constexpr = BT // 16
    i_c = i_task // (HV * NB)
    i_hv = (i_task // NB) % HV
    i_r = i_task % NB
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    n_t = tl.minimum(BT, eos - t0)
    r0 = i_r * 16
    o_i = r0 + tl.arange(0, 16)  # rows of this sub-chunk (in-chunk positions)
    o_j = tl.arange(0, BT)
    m_i = o_i < n_t
    m_j = o_j < n_t
    # the diagonal block through the dots as well when the sub-chunk's decay range is small
    n_out = _diag_out_of_range(g_cum, t0, r0, n_t, i_hv, HV, K, BK, DIAG_DOT_RANGE)
    if DIAG_DOT_RANGE > 0:  # columns of earlier sub-chunks and its own (loaded), its own only with the dots
        m_load = m_j & (o_j < r0 + 16)  # a static extent: the loads stay fixed-size DMAs
        m_off = m_j & (o_j < r0 + tl.where(n_out == 0, 16, 0))
    else:  # columns of earlier sub-chunks
        m_off = m_j & (o_j < r0)
        m_load = m_off
    b_Akk = tl.zeros([16, BT], dtype=tl.float32)
    b_Aqk = tl.zeros([16, BT], dtype=tl.float32)
    o_s = tl.arange(0, 16)
    d_qk = tl.zeros([16, 16], dtype=tl.float32)  # the diagonal block (column by column)
    d_kk = tl.zeros([16, 16], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_ik = m_i[:, None] & m_k[None, :]
        p_qk_i = (t0 + o_i)[:, None] * (H * K) + i_h * K + o_k[None, :]
        b_qi = tl.load(q + p_qk_i, mask=m_ik, other=0.0).to(tl.float32)  # [16, BK]
        b_ki = tl.load(k + p_qk_i, mask=m_ik, other=0.0).to(tl.float32)
        b_Gi = tl.load(g_cum + (t0 + o_i)[:, None] * (HV * K) + i_hv * K + o_k[None, :], mask=m_ik, other=0.0)
        # (a sub-chunk past the chunk's end reads the last row; none of its products is kept)
        b_gn = tl.load(g_cum + (t0 + tl.minimum(r0, n_t - 1)) * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)
        b_fi = masked_exp(b_Gi - b_gn[None, :], m_ik)  # <= 1
        m_jk = m_off[:, None] & m_k[None, :]  # exp(G_n - G_j): <= 1 before the sub-chunk, below exp(range) in it
        m_lk = m_load[:, None] & m_k[None, :]
        b_kj = tl.load(k + (t0 + o_j)[:, None] * (H * K) + i_h * K + o_k[None, :], mask=m_lk, other=0.0)
        b_Gj = tl.load(g_cum + (t0 + o_j)[:, None] * (HV * K) + i_hv * K + o_k[None, :], mask=m_lk, other=0.0)
        b_kj = (b_kj.to(tl.float32) * masked_exp(b_gn[None, :] - b_Gj, m_jk)).to(k.dtype.element_ty)
        b_Akk += tl.dot((b_ki * b_fi).to(k.dtype.element_ty), tl.trans(b_kj))
        b_Aqk += tl.dot((b_qi * b_fi).to(k.dtype.element_ty), tl.trans(b_kj))
        if not DIAG_BLOCK:
            if n_out > 0:  # the diagonal block, column by column, exact decay
                for jj in range(16):
                    j = r0 + jj
                    t_j = t0 + tl.minimum(j, n_t - 1)  # a token past the end only meets masked rows
                    b_kr = tl.load(k + t_j * (H * K) + i_h * K + o_k, mask=m_k, other=0.0).to(tl.float32)  # [BK]
                    b_gr = tl.load(g_cum + t_j * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)
                    m_ge = m_i & (o_i >= j)
                    b_e = masked_exp(b_Gi - b_gr[None, :], m_ge[:, None])
                    b_ke = b_kr[None, :] * b_e  # [16, BK]
                    c_qk = tl.sum(b_qi * b_ke, 1)  # [16]
                    c_kk = tl.sum(tl.where((o_i > j)[:, None], b_ki * b_ke, 0.0), 1)
                    m_col = (o_s == jj)[None, :]
                    d_qk += tl.where(m_col, c_qk[:, None], 0.0)
                    d_kk += tl.where(m_col, c_kk[:, None], 0.0)
    b_beta = tl.load(beta_t + tl.cast(i_hv, tl.int64) * TT + t0 + o_i, mask=m_i, other=0.0)
    p_A = (t0 + o_i)[:, None] * (HV * BT) + i_hv * BT + o_j[None, :]
    if n_out == 0:  # the whole row from the dots: Akk strictly lower, Aqk causal
        tl.store(Akk + p_A, tl.where(o_j[None, :] < o_i[:, None], b_Akk, 0.0) * b_beta[:, None], mask=m_i[:, None])
        tl.store(Aqk + p_A, tl.where(o_j[None, :] <= o_i[:, None], b_Aqk, 0.0) * scale, mask=m_i[:, None])
    else:  # the diagonal block stored beside the rest
        if DIAG_BLOCK:  # the diagonal block's columns from their own [16, 16] tiles
            d_qk, d_kk = _kda_intra_diag_block(q, k, g_cum, t0, r0, n_t, i_h, i_hv, H, HV, K, DIAG_BK)
        m_rest = m_i[:, None] & ((o_j < r0) | (o_j >= r0 + 16))[None, :]
        tl.store(Akk + p_A, b_Akk * b_beta[:, None], mask=m_rest)
        tl.store(Aqk + p_A, b_Aqk * scale, mask=m_rest)
        p_D = (t0 + o_i)[:, None] * (HV * BT) + i_hv * BT + o_i[None, :]
        tl.store(Akk + p_D, d_kk * b_beta[:, None], mask=m_i[:, None])
        tl.store(Aqk + p_D, d_qk * scale, mask=m_i[:, None])


@triton.jit(do_not_specialize=["scale", "T", "NT", "TT", "n_tasks", "n_programs"])
def kda_intra_fwd_kernel(
    q, k, g_cum, beta_t, Akk, Aqk, chunk_indices, cu_seqlens, scale, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr, DIAG_BLOCK: tl.constexpr = False,
    DIAG_DOT_RANGE: tl.constexpr = 0.0,
):
    """``Akk`` and ``Aqk`` rows of one 16-row sub-chunk (module doc); with ``DIAG_BLOCK`` the diagonal
    block as ``[16, 16, 16]`` products (:func:`_kda_intra_diag_block`) instead of column by column."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_intra_fwd_task(i_task, q, k, g_cum, beta_t, Akk, Aqk, chunk_indices, cu_seqlens, scale, T, NT, TT,
                                H, HV, K, BT, BK, IS_VARLEN, DIAG_BLOCK, DIAG_DOT_RANGE)
    else:
        _kda_intra_fwd_task(tl.program_id(0), q, k, g_cum, beta_t, Akk, Aqk, chunk_indices, cu_seqlens, scale, T,
                            NT, TT, H, HV, K, BT, BK, IS_VARLEN, DIAG_BLOCK, DIAG_DOT_RANGE)


def kda_intra_fwd(q, k, g_cum, beta_t, scale, chunk_size, n_chunks, chunk_indices=None, cu_seqlens=None):
    """``(Akk, Aqk)``, each ``[B, T, HV, BT]`` float32 (row ``t`` of its chunk's matrix; ``Akk``
    with ``beta``, ``Aqk`` with ``scale``).

    Args:
        q, k: ``[B, T, H, K]``; g_cum: ``[B, T, HV, K]`` float32 (:func:`fla_ascend.ops.kda.gate.kda_gate_cumsum`);
        beta_t: ``[HV, B * T]`` float32.
    """
    B, T, H, K = k.shape
    HV = g_cum.shape[2]
    Akk = torch.empty(B, T, HV, chunk_size, dtype=torch.float32, device=k.device)
    Aqk = torch.empty_like(Akk)
    n_tasks = n_chunks * HV * (chunk_size // BC)
    plan = task_plan(n_tasks, "cube")
    kda_intra_fwd_kernel[plan.grid](
        q=q, k=k, g_cum=g_cum, beta_t=beta_t, Akk=Akk, Aqk=Aqk, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, BT=chunk_size, BK=stage_block("kda_intra_fwd", K, NPU_INTRA_FWD_BK),
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        DIAG_BLOCK=stage_form("kda_intra_fwd", "diag_block"), DIAG_DOT_RANGE=diag_dot_range("kda_intra_fwd", k.dtype),
        **stage_launch("kda_intra_fwd"),
    )
    return Akk, Aqk

NPU_WY_QG_BK = 64
"""The K block of the WY forward on an NPU when it loads the inverse and also forms ``qg`` (the
backward's recompute)."""


@triton.jit
def _kda_wy_fwd_task(
    i_task, q, k, v, g_cum, beta_t, Akk, Dinv, Ai, w, u, kg, qg, scale, chunk_indices, cu_seqlens, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    DOT_PRECISION: tl.constexpr, AI_MODE: tl.constexpr, IS_VARLEN: tl.constexpr, F32_CHAIN: tl.constexpr,
    RELOAD_AI: tl.constexpr, STORE_KG: tl.constexpr, STORE_QG: tl.constexpr,
):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    p_A = (t0 + o_t)[:, None] * (HV * BT) + i_hv * BT + o_t[None, :]
    b_A = tl.load(Akk + p_A, mask=m_t[:, None], other=0.0)  # [BT, BT]
    if AI_MODE == "load":  # the buffer holds the inverse already
        b_Ai = b_A
    elif AI_MODE == "blocks":  # D^-1 of the diagonal blocks in Dinv (wy_diag_inverse): the rest of the inverse
        b_X = tl.load(Dinv + p_A, mask=m_t[:, None], other=0.0)  # [BT, BT]
        b_Ai = wy_inverse_from_blocks(b_X, b_A, k.dtype.element_ty, BT, DOT_PRECISION)
        tl.store(Ai + p_A, b_Ai, mask=m_t[:, None])
    else:
        b_Ai = wy_inverse(b_A, k.dtype.element_ty, BT, DOT_PRECISION)
        if AI_MODE == "store":
            tl.store(Ai + p_A, b_Ai, mask=m_t[:, None])
    if AI_MODE != "blocks":  # "blocks" stops here; a "load" launch computes w and u
        _kda_wy_fwd_wu(b_Ai, Akk, p_A, q, k, v, g_cum, beta_t, w, u, kg, qg, scale, t0, eos, o_t, m_t, i_h, i_hv,
                       TT, H, HV, K, V, BT, BK, BV, F32_CHAIN, RELOAD_AI, STORE_KG, STORE_QG)


@triton.jit
def _kda_wy_fwd_wu(b_Ai, Ai, p_A, q, k, v, g_cum, beta_t, w, u, kg, qg, scale, t0, eos, o_t, m_t, i_h, i_hv, TT,
                   H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                   BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, F32_CHAIN: tl.constexpr,
                   RELOAD_AI: tl.constexpr, STORE_KG: tl.constexpr, STORE_QG: tl.constexpr):
    """``w = Ai (beta exp(G) k)`` and ``u = Ai (beta v)`` of one chunk and value head: from the tile
    ``b_Ai``, or with ``RELOAD_AI`` from the stored inverse (``Ai + p_A``, float32) read again at
    each product, which on an NPU reaches the cube without passing the vector cores
    (docs/ascend-rules.md R13). ``STORE_KG``, ``STORE_QG``: also the state recurrences' operands
    ``kg = k exp(G_last - G)`` and ``qg = scale q exp(G)`` (:func:`kda_wy_fwd`)."""
    b_beta = tl.load(beta_t + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, mask=m_t, other=0.0)  # [BT]
    b_Ai_k = b_Ai.to(k.dtype.element_ty)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        b_k = tl.load(k + (t0 + o_t)[:, None] * (H * K) + i_h * K + o_k[None, :], mask=m_tk, other=0.0)
        p_G = (t0 + o_t)[:, None] * (HV * K) + i_hv * K + o_k[None, :]
        b_G = tl.load(g_cum + p_G, mask=m_tk, other=0.0)
        b_eG = masked_exp(b_G, m_tk)
        b_x = b_k.to(tl.float32) * b_eG * b_beta[:, None]
        if STORE_KG:  # G_last - G <= 0 (G falls along the chunk): the factor is at most 1
            b_g_last = gk_last(g_cum, t0, eos, o_k, o_k < K, i_hv, HV, K, BT)
            tl.store(kg + p_G, (b_k.to(tl.float32) * masked_exp(b_g_last[None, :] - b_G, m_tk)).to(kg.dtype.element_ty),
                     mask=m_tk)
        if STORE_QG:
            b_q = tl.load(q + (t0 + o_t)[:, None] * (H * K) + i_h * K + o_k[None, :], mask=m_tk, other=0.0)
            tl.store(qg + p_G, (b_q.to(tl.float32) * b_eG * scale).to(qg.dtype.element_ty), mask=m_tk)
        if RELOAD_AI:
            b_w = tl.dot(tl.load(Ai + p_A, mask=m_t[:, None], other=0.0), b_x)
        elif F32_CHAIN:  # A5 at chunk 16 / 16-wide V blocks: the inverse (dot results) stays float32
            b_w = tl.dot(dot_operand(b_Ai), b_x)
        else:
            b_w = tl.dot(dot_operand(b_Ai_k), b_x.to(k.dtype.element_ty))
        tl.store(w + p_G, b_w.to(w.dtype.element_ty), mask=m_tk)
    b_Ai_v = b_Ai.to(v.dtype.element_ty)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (t0 + o_t)[:, None] * (HV * V) + i_hv * V + o_v[None, :]
        b_v = tl.load(v + p_v, mask=m_tv, other=0.0)
        if RELOAD_AI:
            b_u = tl.dot(tl.load(Ai + p_A, mask=m_t[:, None], other=0.0), b_v.to(tl.float32) * b_beta[:, None])
        elif F32_CHAIN:
            b_u = tl.dot(dot_operand(b_Ai), b_v.to(tl.float32) * b_beta[:, None])
        else:
            b_u = tl.dot(dot_operand(b_Ai_v), (b_v.to(tl.float32) * b_beta[:, None]).to(v.dtype.element_ty))
        tl.store(u + p_v, b_u.to(u.dtype.element_ty), mask=m_tv)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def kda_wy_fwd_kernel(
    q, k, v, g_cum, beta_t, Akk, Dinv, Ai, w, u, kg, qg, scale, chunk_indices, cu_seqlens, T, NT, TT, n_tasks,
    n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    DOT_PRECISION: tl.constexpr, AI_MODE: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    F32_CHAIN: tl.constexpr = False, RELOAD_AI: tl.constexpr = False, STORE_KG: tl.constexpr = False,
    STORE_QG: tl.constexpr = False,
):
    """``Ai = (I + Akk)^-1`` (stored to ``Ai`` with ``AI_MODE = "store"``, read from ``Akk`` with
    ``"load"``), ``w`` and ``u`` of one chunk and value head (module doc); ``"blocks"`` stores the
    inverse to ``Ai`` and computes no ``w``, ``u``, completing it from ``Dinv``, the inverse's
    diagonal blocks, and ``Akk`` with those blocks zeroed (:func:`fla_ascend.ops.common.wy.wy_diag_inverse`;
    ``Dinv`` is ``Akk`` in the other modes). :func:`kda_wy_fwd` passes ``Akk``'s buffer as ``Ai``: each
    task reads its tile before it writes the inverse there, and as a pointer of its own the store
    plans with fewer cross-core waits on an NPU (the ``"blocks"`` launch at Kimi Linear's layer,
    Ascend910B2, estimated: 347 -> 260 per core, 423 -> 348 us).
    ``RELOAD_AI`` (the NPU form, ``"load"`` only): each product reads the stored inverse again
    (:func:`_kda_wy_fwd_wu`). ``STORE_KG``, ``STORE_QG``: also ``kg`` and ``qg`` (:func:`kda_wy_fwd`)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_wy_fwd_task(i_task, q, k, v, g_cum, beta_t, Akk, Dinv, Ai, w, u, kg, qg, scale, chunk_indices,
                             cu_seqlens, T, NT, TT, H, HV, K, V, BT, BK, BV, DOT_PRECISION, AI_MODE, IS_VARLEN,
                             F32_CHAIN, RELOAD_AI, STORE_KG, STORE_QG)
    else:
        _kda_wy_fwd_task(tl.program_id(0), q, k, v, g_cum, beta_t, Akk, Dinv, Ai, w, u, kg, qg, scale,
                         chunk_indices, cu_seqlens, T, NT, TT, H, HV, K, V, BT, BK, BV, DOT_PRECISION, AI_MODE,
                         IS_VARLEN, F32_CHAIN, RELOAD_AI, STORE_KG, STORE_QG)


def kda_wy_fwd(k, v, g_cum, beta_t, Akk, chunk_size, n_chunks, chunk_indices=None, cu_seqlens=None,
               ai_mode="none", q=None, scale=None, store_kg=False):
    """``(w, u, kg, qg)``: ``w`` ``[B, T, HV, K]`` in k's dtype, ``u`` ``[B, T, HV, V]`` in v's dtype,
    and the state recurrences' pre-scaled operands (:func:`fla_ascend.ops.common.chunk_h.chunk_fwd_h`
    and ``chunk_bwd_dh`` with ``gk``), ``[B, T, HV, K]``: ``kg = k exp(G_last - G)`` (``G_last`` the
    decay at the chunk's last token) in k's dtype with ``store_kg``, ``qg = scale q exp(G)`` in q's
    dtype when ``q`` is given; each None otherwise. Formed here, where ``k`` and ``G`` are loaded
    anyway, they spare the sequential recurrences the ``[BT, K]`` decay tiles and their exponentials.

    Args:
        Akk: ``[B, T, HV, BT]`` float32 from :func:`kda_intra_fwd`, or its inverse (``ai_mode="load"``).
        ai_mode: ``"none"`` (invert; ``Akk`` is not needed afterwards), ``"store"`` (invert and write
            the inverse over ``Akk``), ``"load"`` (``Akk`` holds the inverse). On an NPU at a chunk size
            in :data:`NPU_SPLIT_INVERSE_CHUNKS` ``"none"`` and ``"store"`` run as three launches: the
            diagonal blocks' inverse (which also zeroes those blocks of ``Akk``), the rest of the
            inverse from it (``"blocks"``), written over ``Akk``, then ``"load"``.
        q: ``[B, T, H, K]`` to also form ``qg``, with ``scale`` (a float).
        store_kg: also form ``kg``.

    Raises:
        ValueError: an ``ai_mode`` other than these three.
    """
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    w = torch.empty(B, T, HV, K, dtype=k.dtype, device=k.device)
    u = torch.empty(B, T, HV, V, dtype=v.dtype, device=v.device)
    kg = torch.empty(B, T, HV, K, dtype=k.dtype, device=k.device) if store_kg else None
    qg = torch.empty(B, T, HV, K, dtype=q.dtype, device=q.device) if q is not None else None
    if ai_mode not in ("none", "store", "load"):
        raise ValueError(f"kda_wy_fwd: ai_mode must be 'none', 'store' or 'load', got {ai_mode!r}")
    modes = [ai_mode]
    Dinv = Akk
    if ai_mode != "load" and backend.device_type() == "npu" and chunk_size in NPU_SPLIT_INVERSE_CHUNKS:
        Dinv = torch.empty_like(Akk)
        wy_diag_inverse(Akk, Dinv, chunk_size, n_chunks, chunk_indices, cu_seqlens, zero_diag=True)
        modes = ["blocks", "load"]
    for mode in modes:
        plan = task_plan(n_chunks * HV, "cube")
        npu_block = NPU_WY_LOAD_BLOCK if mode == "load" else NPU_BK
        npu_bk = NPU_WY_QG_BK if mode == "load" and q is not None else npu_block
        BV = stage_block("kda_wy_fwd", V, npu_block)
        kda_wy_fwd_kernel[plan.grid](
            q=q, k=k, v=v, g_cum=g_cum, beta_t=beta_t, Akk=Akk, Dinv=Dinv, Ai=Akk, w=w, u=u, kg=kg, qg=qg,
            scale=1.0 if scale is None else scale, chunk_indices=chunk_indices,
            cu_seqlens=cu_seqlens, T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_chunks * HV,
            n_programs=plan.n_programs, H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=stage_block("kda_wy_fwd", K, npu_bk),
            BV=BV, DOT_PRECISION=dot_precision("wy_fwd", k.dtype), AI_MODE=mode, IS_VARLEN=cu_seqlens is not None,
            TASK_LOOP=plan.task_loop, F32_CHAIN=f32_dot_chain(chunk_size, BV),
            RELOAD_AI=mode == "load" and stage_form("kda_wy_fwd", "reload_ai"), STORE_KG=store_kg,
            STORE_QG=q is not None, **stage_launch("kda_wy_fwd"),
        )
    return w, u, kg, qg


@triton.jit
def _ai_t(b_A, SPLIT_U: tl.constexpr):
    """``Ai^T`` from the WY backward's ``[BT, BT]`` tile of the inverse: transposed here in the NPU
    form (``SPLIT_U``, a fresh tile at each dot: R7), loaded transposed otherwise."""
    if SPLIT_U:
        return tl.trans(b_A)
    else:
        return b_A


@triton.jit
def _kda_wy_bwd_u(b_A, b_dvn, b_beta, b_dAi, b_dbeta, v, dv, p_v, m_tv, dt, DOT_PRECISION: tl.constexpr,
                  SPLIT_U: tl.constexpr):
    """``u = Ai (beta v)``'s part of one V block (``dv'``'s tile ``b_dvn``): stores
    ``dv = beta (Ai^T dv')``, returns ``(dAi, dbeta)`` with its parts added."""
    b_v = tl.load(v + p_v, mask=m_tv, other=0.0).to(tl.float32)
    b_dvn = b_dvn.to(tl.float32)
    b_dy = wy_dot(_ai_t(b_A, SPLIT_U), b_dvn, dt, DOT_PRECISION)
    b_dAi += wy_dot(b_dvn, tl.trans(b_v * b_beta[:, None]), dt, DOT_PRECISION)
    b_dbeta += tl.sum(b_dy * b_v, 1)
    tl.store(dv + p_v, (b_dy * b_beta[:, None]).to(dv.dtype.element_ty), mask=m_tv)
    return b_dAi, b_dbeta


@triton.jit
def _kda_wy_bwd_task(
    i_task, q, k, v, v_new, g_cum, beta_t, Ai, h, dh, do, dv_new, dq, dk, dv, dG, dbeta_t, dAkk,
    chunk_indices, cu_seqlens, scale, T, NT, TT, NV,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr,
    RUNTIME_NV: tl.constexpr, SPLIT_U: tl.constexpr,
):
    # a V loop of one trip is a runtime count on an NPU: with the constant one bishengir-compile (A2)
    # refuses the stores it makes ('hivm.hir.store' op only support store ub to gm)
    n_v = NV if RUNTIME_NV else tl.cdiv(V, BV)
    i_c = i_task // HV
    i_hv = i_task % HV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    n_t = tl.minimum(BT, eos - t0)
    o_t = tl.arange(0, BT)
    m_t = o_t < n_t
    m_last = o_t == n_t - 1
    dt = k.dtype.element_ty
    p_A = (t0 + o_t)[:, None] * (HV * BT) + i_hv * BT + o_t[None, :]
    if SPLIT_U:  # the NPU form: the inverse as stored, transposed at each dot (_ai_t)
        b_A = tl.load(Ai + p_A, mask=m_t[:, None], other=0.0)  # [BT, BT]
    else:  # Ai^T, loaded transposed and cast once
        p_AT = (t0 + o_t)[None, :] * (HV * BT) + i_hv * BT + o_t[:, None]
        b_A = tl.load(Ai + p_AT, mask=m_t[None, :], other=0.0)
        if DOT_PRECISION == "input":
            b_A = b_A.to(dt)
    b_beta = tl.load(beta_t + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, mask=m_t, other=0.0)
    state = (tl.cast(i_c, tl.int64) * HV + i_hv) * K * V
    b_dAi = tl.zeros([BT, BT], dtype=tl.float32)
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        b_dqs = tl.zeros([BT, BK], dtype=tl.float32)
        b_dks = tl.zeros([BT, BK], dtype=tl.float32)
        b_dw = tl.zeros([BT, BK], dtype=tl.float32)
        b_dgl = tl.zeros([BK], dtype=tl.float32)
        for i_v in range(n_v):
            o_v = i_v * BV + tl.arange(0, BV)
            m_v = o_v < V
            m_tv = m_t[:, None] & m_v[None, :]
            p_v = (t0 + o_t)[:, None] * (HV * V) + i_hv * V + o_v[None, :]
            b_do = tl.load(do + p_v, mask=m_tv, other=0.0)
            b_vn = tl.load(v_new + p_v, mask=m_tv, other=0.0)
            b_dvn = tl.load(dv_new + p_v, mask=m_tv, other=0.0)
            # h: the state at the chunk's start, dh: the gradient of the state after it
            if SPLIT_U:  # [BK, BV] tiles
                m_kv = m_k[:, None] & m_v[None, :]
                p_s = state + o_k[:, None] * V + o_v[None, :]
                b_h = tl.load(h + p_s, mask=m_kv, other=0.0)
                b_dh = tl.load(dh + p_s, mask=m_kv, other=0.0)
                b_dqs += tl.dot(b_do.to(dt), tl.trans(b_h).to(dt))
                b_dks += tl.dot(b_vn.to(dt), tl.trans(b_dh).to(dt))
                b_dw += tl.dot(b_dvn.to(dt), tl.trans(b_h).to(dt))
                b_dgl += tl.sum(b_h.to(tl.float32) * b_dh.to(tl.float32), 1)
            else:  # [BV, BK] tiles, loaded transposed; u's part at the first K block, with its dv' tile
                m_vk = m_v[:, None] & m_k[None, :]
                p_sT = state + o_k[None, :] * V + o_v[:, None]
                b_hT = tl.load(h + p_sT, mask=m_vk, other=0.0).to(dt)
                b_dhT = tl.load(dh + p_sT, mask=m_vk, other=0.0)
                b_dqs += tl.dot(b_do.to(dt), b_hT)
                b_dks += tl.dot(b_vn.to(dt), b_dhT.to(dt))
                b_dw += tl.dot(b_dvn.to(dt), b_hT)
                b_dgl += tl.sum(b_hT.to(tl.float32) * b_dhT.to(tl.float32), 0)
                if i_k == 0:
                    b_dAi, b_dbeta = _kda_wy_bwd_u(b_A, b_dvn, b_beta, b_dAi, b_dbeta, v, dv, p_v, m_tv, dt,
                                                   DOT_PRECISION, SPLIT_U)
        # dw = -dv' h^T, its sign flipped once: a dot subtracted at each V block keeps its result from
        # accumulating in the cube on an NPU (Kimi Linear's layer, Ascend910B2: 2408 -> 1985 cross-core
        # waits per core, 3226 -> 2867 us estimated)
        b_dw = -b_dw
        p_k = (t0 + o_t)[:, None] * (H * K) + i_h * K + o_k[None, :]
        p_g = (t0 + o_t)[:, None] * (HV * K) + i_hv * K + o_k[None, :]
        b_q = tl.load(q + p_k, mask=m_tk, other=0.0).to(tl.float32)
        b_k = tl.load(k + p_k, mask=m_tk, other=0.0).to(tl.float32)
        b_G = tl.load(g_cum + p_g, mask=m_tk, other=0.0)
        b_gl = tl.load(g_cum + (t0 + n_t - 1) * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)  # [BK]
        b_eg = masked_exp(b_G, m_tk)
        b_dqs = b_dqs * b_eg * scale  # o = scale (q exp(G)) h + ...
        b_dks = b_dks * masked_exp(b_gl[None, :] - b_G, m_tk)  # h' = ... + (k exp(G_last - G))^T v'
        b_dG = b_q * b_dqs - b_k * b_dks
        b_dgl = b_dgl * tl.exp(b_gl) + tl.sum(b_k * b_dks, 0)
        # w = Ai x, x = beta exp(G) k
        b_x = b_k * b_eg * b_beta[:, None]
        b_dx = wy_dot(_ai_t(b_A, SPLIT_U), b_dw, dt, DOT_PRECISION)
        b_dAi += wy_dot(b_dw, tl.trans(b_x), dt, DOT_PRECISION)
        b_dkx = b_dx * b_eg * b_beta[:, None]
        b_dbeta += tl.sum(b_dx * b_k * b_eg, 1)
        b_dG += b_dkx * b_k
        b_dG = tl.where(m_last[:, None], b_dG + b_dgl[None, :], b_dG)
        tl.store(dq + p_g, b_dqs, mask=m_tk)
        tl.store(dk + p_g, b_dks + b_dkx, mask=m_tk)
        tl.store(dG + p_g, b_dG, mask=m_tk)
    if SPLIT_U:
        for i_v in range(n_v):  # u = Ai (beta v), du = dv'
            o_v = i_v * BV + tl.arange(0, BV)
            m_tv = m_t[:, None] & (o_v < V)[None, :]
            p_v = (t0 + o_t)[:, None] * (HV * V) + i_hv * V + o_v[None, :]
            b_dAi, b_dbeta = _kda_wy_bwd_u(b_A, tl.load(dv_new + p_v, mask=m_tv, other=0.0), b_beta, b_dAi, b_dbeta,
                                           v, dv, p_v, m_tv, dt, DOT_PRECISION, SPLIT_U)
    # Ai = (I + Akk)^-1  ->  dAkk = -Ai^T dAi Ai^T on the strictly lower part
    b_t = wy_dot(_ai_t(b_A, SPLIT_U), b_dAi, dt, DOT_PRECISION)
    b_dA = -wy_dot(b_t, _ai_t(b_A, SPLIT_U), dt, DOT_PRECISION)
    m_strict = (o_t[:, None] > o_t[None, :]) & m_t[:, None]
    tl.store(dAkk + p_A, tl.where(m_strict, b_dA, 0.0), mask=m_t[:, None])
    tl.store(dbeta_t + tl.cast(i_hv, tl.int64) * TT + t0 + o_t, b_dbeta, mask=m_t)


@triton.jit(do_not_specialize=["scale", "T", "NT", "TT", "NV", "n_tasks", "n_programs"])
def kda_wy_bwd_kernel(
    q, k, v, v_new, g_cum, beta_t, Ai, h, dh, do, dv_new, dq, dk, dv, dG, dbeta_t, dAkk,
    chunk_indices, cu_seqlens, scale, T, NT, TT, NV, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr, RUNTIME_NV: tl.constexpr = False, SPLIT_U: tl.constexpr = True,
):
    """Gradients from the chunk state (``q h``, ``k^T v'``, ``w h``, the state decay) and from the WY
    representation (``w``, ``u``) of one chunk and value head; ``dAkk`` for :func:`kda_intra_bwd`.
    ``SPLIT_U`` (the NPU form): ``u``'s part in a V loop of its own after the K loop, the inverse and
    the states transposed in registers; without it (the CUDA form) they are loaded transposed and
    ``u``'s part joins the first K block's V loop, reusing its ``dv'`` tile."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_wy_bwd_task(i_task, q, k, v, v_new, g_cum, beta_t, Ai, h, dh, do, dv_new, dq, dk, dv, dG, dbeta_t,
                             dAkk, chunk_indices, cu_seqlens, scale, T, NT, TT, NV, H, HV, K, V, BT, BK, BV,
                             DOT_PRECISION, IS_VARLEN, RUNTIME_NV, SPLIT_U)
    else:
        _kda_wy_bwd_task(tl.program_id(0), q, k, v, v_new, g_cum, beta_t, Ai, h, dh, do, dv_new, dq, dk, dv, dG,
                         dbeta_t, dAkk, chunk_indices, cu_seqlens, scale, T, NT, TT, NV, H, HV, K, V, BT, BK, BV,
                         DOT_PRECISION, IS_VARLEN, RUNTIME_NV, SPLIT_U)


def kda_wy_bwd(q, k, v, v_new, g_cum, beta_t, Ai, h, dh, do, dv_new, scale, chunk_size, n_chunks,
               chunk_indices=None, cu_seqlens=None):
    """State and WY gradients of every chunk.

    Args:
        q, k: ``[B, T, H, K]``; v, v_new, do: ``[B, T, HV, V]``; g_cum ``[B, T, HV, K]`` float32;
        beta_t ``[HV, B * T]`` float32; Ai ``[B, T, HV, BT]`` float32 (the inverse);
        h, dh: ``[n_chunks, HV, K, V]`` (state at each chunk's start, gradient of the state after it);
        dv_new: ``[B, T, HV, V]`` the full gradient of ``v'``.

    Returns:
        ``(dq, dk, dv, dG, dbeta_t, dAkk)``: ``dq``, ``dk``, ``dG`` ``[B, T, HV, K]`` float32 (this
        stage's parts, per value head), ``dv`` in v's dtype (final), ``dbeta_t`` ``[HV, B * T]``
        float32 (part), ``dAkk`` ``[B, T, HV, BT]`` float32.
    """
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    dq = torch.empty(B, T, HV, K, dtype=torch.float32, device=k.device)
    dk = torch.empty_like(dq)
    dG = torch.empty_like(dq)
    dv = torch.empty_like(v)
    dbeta_t = torch.empty(HV, B * T, dtype=torch.float32, device=k.device)
    dAkk = torch.empty(B, T, HV, chunk_size, dtype=torch.float32, device=k.device)
    npu_block = NPU_WY_BWD_BLOCK if chunk_size == 64 else NPU_BK
    npu = backend.device_type() == "npu"
    # V blocks of at least 32 on an NPU: at V = 16 bishengir-compile-a5 crashes on the 16-wide blocks
    BV = stage_block("kda_wy_bwd", V, npu_block, key="v_block")
    if npu:
        BV = max(BV, 32)
    plan = task_plan(n_chunks * HV, "cube")
    kda_wy_bwd_kernel[plan.grid](
        q=q, k=k, v=v, v_new=v_new, g_cum=g_cum, beta_t=beta_t, Ai=Ai, h=h, dh=dh, do=do, dv_new=dv_new,
        dq=dq, dk=dk, dv=dv, dG=dG, dbeta_t=dbeta_t, dAkk=dAkk, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        scale=scale, T=T, NT=cdiv(T, chunk_size), TT=B * T, NV=cdiv(V, BV), n_tasks=n_chunks * HV,
        n_programs=plan.n_programs, H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=stage_block("kda_wy_bwd", K, npu_block),
        BV=BV, DOT_PRECISION=dot_precision("wy_bwd", k.dtype),
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, RUNTIME_NV=npu and cdiv(V, BV) == 1,
        SPLIT_U=stage_form("kda_wy_bwd", "split_u"), **stage_launch("kda_wy_bwd"),
    )
    return dq, dk, dv, dG, dbeta_t, dAkk


@triton.jit
def _kda_intra_bwd_diag_block(q, k, g_cum, dAqk, dAkk, dq, dk, dG, b_beta, scale, t0, r0, n_t, i_h, i_hv,
                              H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
                              BKD: tl.constexpr):
    """The diagonal ``16 x 16`` block's part of :func:`_kda_intra_bwd_task` (the NPU form of its
    column loop): per K block of ``BKD`` channels, ``[16, 16, BKD]`` products with the exact
    ``exp(G_i - G_j) <= 1``, added in place to the sub-chunk's rows of ``dq``, ``dk`` and ``dG``.
    Returns the sub-chunk's ``dbeta`` part ``[16]``."""
    o_s = tl.arange(0, 16)
    m_i = r0 + o_s < n_t
    m_ge = (o_s[:, None] >= o_s[None, :]) & m_i[:, None] & m_i[None, :]  # [16, 16]: rows i, columns j
    m_gt = m_ge & (o_s[:, None] > o_s[None, :])
    p_D = (t0 + r0 + o_s)[:, None] * (HV * BT) + i_hv * BT + r0 + o_s[None, :]
    b_Pkk = tl.where(m_gt, tl.load(dAkk + p_D, mask=m_i[:, None], other=0.0), 0.0)  # without beta
    b_Pqk = tl.where(m_ge, tl.load(dAqk + p_D, mask=m_i[:, None], other=0.0), 0.0) * scale
    b_Bkk = b_Pkk * b_beta[:, None]
    b_db = tl.zeros([16], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BKD)):
        b_q, b_k, b_e, p_g, m_ik = _kda_diag_rows(q, k, g_cum, t0, r0, i_k, i_h, i_hv, m_i, m_ge, H, HV, K, BKD)
        b_ekj = b_e * b_k[None, :, :]  # k_j exp(G_i - G_j)
        b_rkk = tl.sum(b_Pkk[:, :, None] * b_ekj, 1)  # [16, BKD], row side
        b_rqk = tl.sum(b_Pqk[:, :, None] * b_ekj, 1)
        b_col = tl.sum((b_Bkk[:, :, None] * b_k[:, None, :] + b_Pqk[:, :, None] * b_q[:, None, :]) * b_e, 0)
        b_db += tl.sum(b_k * b_rkk, 1)
        b_dk = b_rkk * b_beta[:, None] + b_col
        tl.store(dq + p_g, tl.load(dq + p_g, mask=m_ik, other=0.0) + b_rqk, mask=m_ik)
        tl.store(dk + p_g, tl.load(dk + p_g, mask=m_ik, other=0.0) + b_dk, mask=m_ik)
        b_dG = b_q * b_rqk + b_k * b_rkk * b_beta[:, None] - b_k * b_col
        tl.store(dG + p_g, tl.load(dG + p_g, mask=m_ik, other=0.0) + b_dG, mask=m_ik)
    return b_db


@triton.jit
def _kda_intra_bwd_task(
    i_task, q, k, g_cum, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, chunk_indices, cu_seqlens, scale, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr, DIAG_BLOCK: tl.constexpr, SIDES: tl.constexpr,
    K_SPLIT: tl.constexpr, DIAG_DOT_RANGE: tl.constexpr,
):
    # SIDES, a bit mask: 1 the row side (earlier sub-chunks, dbeta), 8 the diagonal block, 2 the column
    # side through Akk, 4 through Aqk (later sub-chunks). A part alone needs DIAG_BLOCK (the column
    # loop serves all three).
    ROWS: tl.constexpr = SIDES % 2 == 1
    COL_K: tl.constexpr = SIDES // 2 % 2 == 1
    COL_Q: tl.constexpr = SIDES // 4 % 2 == 1
    COLS: tl.constexpr = COL_K or COL_Q
    DIAG: tl.constexpr = SIDES // 8 % 2 == 1  # the diagonal block (DIAG_BLOCK's pass after the loop)
    NB: tl.constexpr = BT // 16
    tl.static_assert(K_SPLIT == 1 or not DIAG_BLOCK, "the diagonal pass reads every K block")
    i_ks = i_task % K_SPLIT  # the task's share of the K blocks: i_ks, i_ks + K_SPLIT, ...
    i_task = i_task // K_SPLIT
    i_c = i_task // (HV * NB)
    i_hv = (i_task // NB) % HV
    i_r = i_task % NB
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    n_t = tl.minimum(BT, eos - t0)
    dt = k.dtype.element_ty
    r0 = i_r * 16
    r1 = tl.minimum(r0 + 16, n_t) - 1  # last valid row of the sub-chunk
    o_i = r0 + tl.arange(0, 16)  # the sub-chunk's tokens: its rows and its columns
    o_a = tl.arange(0, BT)  # every token of the chunk
    o_s = tl.arange(0, 16)
    m_i = o_i < n_t
    m_a = o_a < n_t
    p_beta = tl.cast(i_hv, tl.int64) * TT + t0
    b_beta_i = tl.load(beta_t + p_beta + o_i, mask=m_i, other=0.0)  # [16]
    b_beta_a = tl.load(beta_t + p_beta + o_a, mask=m_a, other=0.0)  # [BT]
    # rows of the sub-chunk ([16, BT]) and its columns ([BT, 16]) of the gradients of Akk (without
    # beta) and Aqk (without scale)
    p_row = (t0 + o_i)[:, None] * (HV * BT) + i_hv * BT + o_a[None, :]
    m_row = m_i[:, None] & m_a[None, :]
    p_col = (t0 + o_a)[:, None] * (HV * BT) + i_hv * BT + o_i[None, :]
    m_col = m_a[:, None] & m_i[None, :] & (o_a >= r0 + 16)[:, None]  # rows of later sub-chunks
    # the diagonal block through the dots as well when the sub-chunk's decay range is small (the
    # forward's rule): the row side's k exp(G_n - G) and the column side's x exp(G - G_m) then cover
    # the sub-chunk's own tokens; dA's zeros above its diagonal keep the pairs causal
    n_out = _diag_out_of_range(g_cum, t0, r0, n_t, i_hv, HV, K, BK, DIAG_DOT_RANGE)
    if DIAG_DOT_RANGE > 0:
        n_own = tl.where(n_out == 0, 16, 0)  # the sub-chunk's own tokens taken by the dots
        # its columns from its own rows on (dAkk, dAqk hold zeros above their diagonal); its own rows
        # meet a zero operand unless the dots take the diagonal block (m_after below)
        m_col = m_a[:, None] & m_i[None, :] & (o_a >= r0)[:, None]
    else:
        n_own = 0
    if not DIAG_BLOCK:  # loaded once (the NPU form reads them at each K block); SIDES == 15 here
        p_D = (t0 + o_i)[:, None] * (HV * BT) + i_hv * BT + o_i[None, :]  # the diagonal block
        b_Dkk = tl.load(dAkk + p_D, mask=m_i[:, None] & m_i[None, :], other=0.0)
        b_Dqk = tl.load(dAqk + p_D, mask=m_i[:, None] & m_i[None, :], other=0.0) * scale
        b_Pkk = tl.load(dAkk + p_row, mask=m_row, other=0.0)
        b_Pqk = tl.load(dAqk + p_row, mask=m_row, other=0.0) * scale
        b_Ckk = tl.load(dAkk + p_col, mask=m_col, other=0.0) * b_beta_a[:, None]
        b_Cqk = tl.load(dAqk + p_col, mask=m_col, other=0.0) * scale
    b_db = tl.zeros([16], dtype=tl.float32)
    for i_k in range(i_ks, tl.cdiv(K, BK), K_SPLIT):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_ik = m_i[:, None] & m_k[None, :]
        m_ak = m_a[:, None] & m_k[None, :]
        p_ki = (t0 + o_i)[:, None] * (H * K) + i_h * K + o_k[None, :]
        p_gi = (t0 + o_i)[:, None] * (HV * K) + i_hv * K + o_k[None, :]
        b_ki = tl.load(k + p_ki, mask=m_ik, other=0.0).to(tl.float32)
        b_Gi = tl.load(g_cum + p_gi, mask=m_ik, other=0.0)
        p_ka = (t0 + o_a)[:, None] * (H * K) + i_h * K + o_k[None, :]
        b_ka = tl.load(k + p_ka, mask=m_ak, other=0.0).to(tl.float32)
        b_Ga = tl.load(g_cum + (t0 + o_a)[:, None] * (HV * K) + i_hv * K + o_k[None, :], mask=m_ak, other=0.0)
        if ROWS:
            b_qi = tl.load(q + p_ki, mask=m_ik, other=0.0).to(tl.float32)
            b_gn = tl.load(g_cum + (t0 + tl.minimum(r0, n_t - 1)) * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)
            # row side, earlier sub-chunks: sum_j P_ij k_j exp(G_i - G_j) = exp(G_i - G_n) (P (k exp(G_n - G)))_i
            m_before = (m_a & (o_a < r0 + n_own))[:, None] & m_k[None, :]  # earlier sub-chunks (and its own)
            b_kb = b_ka * masked_exp(b_gn[None, :] - b_Ga, m_before)
            b_fi = masked_exp(b_Gi - b_gn[None, :], m_ik)
            if DIAG_BLOCK:  # the dA tiles straight from memory into the dots, scale and beta on the other operands
                b_rkk = wy_dot(tl.load(dAkk + p_row, mask=m_row, other=0.0), b_kb, dt, DOT_PRECISION) * b_fi
                b_rqk = wy_dot(tl.load(dAqk + p_row, mask=m_row, other=0.0), b_kb, dt, DOT_PRECISION) \
                    * (b_fi * scale)
            else:
                b_rkk = wy_dot(dot_operand(b_Pkk), b_kb, dt, DOT_PRECISION) * b_fi  # [16, BK]
                b_rqk = wy_dot(dot_operand(b_Pqk), b_kb, dt, DOT_PRECISION) * b_fi
        if COLS:
            b_gm = tl.load(g_cum + (t0 + tl.maximum(r1, 0)) * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)
            # column side, later sub-chunks: sum_i P_ij x_i exp(G_i - G_j) = exp(G_m - G_j) (P^T (x exp(G - G_m)))_j
            if DIAG_DOT_RANGE > 0:  # later sub-chunks, with the dots from its own first token on
                m_after = (m_a & (o_a >= r0 + 16 - n_own))[:, None] & m_k[None, :]
            else:
                m_after = (m_a & (o_a > r1))[:, None] & m_k[None, :]
            b_ea = masked_exp(b_Ga - b_gm[None, :], m_after)
            b_fj = masked_exp(b_gm[None, :] - b_Gi, m_ik)
            if COL_Q:
                b_qa = tl.load(q + p_ka, mask=m_ak, other=0.0).to(tl.float32)
            if DIAG_BLOCK:
                if COL_K:
                    b_col = wy_dot(tl.trans(tl.load(dAkk + p_col, mask=m_col, other=0.0)),
                                   b_ka * b_ea * b_beta_a[:, None], dt, DOT_PRECISION)
                    if COL_Q:
                        b_col += wy_dot(tl.trans(tl.load(dAqk + p_col, mask=m_col, other=0.0)),
                                        b_qa * b_ea * scale, dt, DOT_PRECISION)
                else:
                    b_col = wy_dot(tl.trans(tl.load(dAqk + p_col, mask=m_col, other=0.0)), b_qa * b_ea * scale,
                                   dt, DOT_PRECISION)
            else:
                b_col = wy_dot(tl.trans(b_Ckk), b_ka * b_ea, dt, DOT_PRECISION)
                b_col += wy_dot(tl.trans(b_Cqk), b_qa * b_ea, dt, DOT_PRECISION)
            b_col = b_col * b_fj  # [16, BK]
        if not DIAG_BLOCK:
            if n_own == 0:  # the diagonal block, token by token (the NPU form: after the loop)
                for jj in range(16):  # token j = r0 + jj, as a column of the rows and as a row of the columns
                    j = r0 + jj
                    t_j = t0 + tl.minimum(j, n_t - 1)  # a token past the end only meets masked entries
                    b_kj = tl.load(k + t_j * (H * K) + i_h * K + o_k, mask=m_k, other=0.0).to(tl.float32)  # [BK]
                    b_qj = tl.load(q + t_j * (H * K) + i_h * K + o_k, mask=m_k, other=0.0).to(tl.float32)
                    b_gj = tl.load(g_cum + t_j * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)
                    # rows i >= j of column j: P_ij k_j exp(G_i - G_j)
                    m_ge = m_i & (o_i >= j)
                    m_cj = (o_s == jj)[None, :]
                    b_pkk = tl.where(m_ge & (o_i > j), tl.sum(tl.where(m_cj, b_Dkk, 0.0), 1), 0.0)  # [16]: column j
                    b_pqk = tl.where(m_ge, tl.sum(tl.where(m_cj, b_Dqk, 0.0), 1), 0.0)
                    b_ekj = masked_exp(b_Gi - b_gj[None, :], m_ge[:, None]) * b_kj[None, :]  # [16, BK]
                    b_rkk += b_pkk[:, None] * b_ekj
                    b_rqk += b_pqk[:, None] * b_ekj
                    # columns c <= j of row j: P_jc (beta_j k_j, q_j) exp(G_j - G_c)
                    m_le = m_i & (o_i <= j) & (j + 0 * o_s < n_t)  # row j exists
                    p_rj = (t_j * HV + i_hv) * BT + o_i
                    b_beta_j = tl.load(beta_t + p_beta + tl.minimum(j, n_t - 1))
                    b_ckk = tl.load(dAkk + p_rj, mask=m_le & (o_i < j), other=0.0) * b_beta_j
                    b_cqk = tl.load(dAqk + p_rj, mask=m_le, other=0.0) * scale
                    b_f = masked_exp(b_gj[None, :] - b_Gi, m_le[:, None])  # [16, BK]
                    b_col += b_f * (b_ckk[:, None] * b_kj[None, :] + b_cqk[:, None] * b_qj[None, :])
        # Akk_ij = beta_i (sum_c k_ic k_jc exp(G_ic - G_jc)): the row side carries beta_i
        if ROWS:
            b_db += tl.sum(b_ki * b_rkk, 1)
            b_dk = b_rkk * b_beta_i[:, None]
            b_dGi = b_qi * b_rqk + b_ki * b_dk
            if COLS:
                b_dk += b_col
                b_dGi -= b_ki * b_col
            b_dq = b_rqk + tl.load(dq + p_gi, mask=m_ik, other=0.0)
            tl.store(dq + p_gi, b_dq, mask=m_ik)
        else:
            b_dk = b_col
            b_dGi = -(b_ki * b_col)
        b_dk += tl.load(dk + p_gi, mask=m_ik, other=0.0)
        b_dGi += tl.load(dG + p_gi, mask=m_ik, other=0.0)
        tl.store(dk + p_gi, b_dk, mask=m_ik)
        tl.store(dG + p_gi, b_dGi, mask=m_ik)
    if ROWS or (DIAG_BLOCK and DIAG):
        p_db = i_ks * (HV * TT) + p_beta + o_i
        if DIAG_BLOCK and DIAG:
            # the dots' path in the first branch: the estimate counts the first branch of a
            # data-dependent if (fla_ascend.compiler.planeval)
            if n_own == 16:  # the diagonal block went through the dots
                pass
            else:  # the diagonal block as [16, 16, DIAG_BK] products, added to what the loop stored
                tl.debug_barrier()
                b_db += _kda_intra_bwd_diag_block(q, k, g_cum, dAqk, dAkk, dq, dk, dG, b_beta_i, scale, t0, r0, n_t,
                                                  i_h, i_hv, H, HV, K, BT, NPU_BWD_DIAG_BK)
        tl.store(dbeta_t + p_db, tl.load(dbeta_t + p_db, mask=m_i, other=0.0) + b_db, mask=m_i)


@triton.jit(do_not_specialize=["scale", "T", "NT", "TT", "n_tasks", "n_programs"])
def kda_intra_bwd_kernel(
    q, k, g_cum, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, chunk_indices, cu_seqlens, scale, T, NT, TT,
    n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr, DIAG_BLOCK: tl.constexpr = False,
    SIDES: tl.constexpr = 15, K_SPLIT: tl.constexpr = 1, DIAG_DOT_RANGE: tl.constexpr = 0.0,
):
    """Gradients through ``Akk`` and ``Aqk`` of one 16-token sub-chunk (its rows and its
    columns), added in place to ``dq``, ``dk``, ``dG`` and ``dbeta_t``; with ``DIAG_BLOCK`` (the NPU
    form) the diagonal block in a pass of its own after the loop (:func:`_kda_intra_bwd_diag_block`),
    and the loop's dots read their ``dAkk`` / ``dAqk`` tiles from memory at each K block, with
    ``scale`` and ``beta`` applied to the other operands (docs/ascend-rules.md R13). ``SIDES``, a bit
    mask of the parts computed (all but 15 need ``DIAG_BLOCK``): 1 the row side (the sub-chunk's rows
    against earlier sub-chunks), 2 and 4 the column side (its columns against later sub-chunks)
    through ``Akk`` and through ``Aqk``, 8 the diagonal block; ``dbeta`` with 1 and with 8. Off the
    NPU form, ``K_SPLIT`` tasks share a sub-chunk's K blocks (``i_ks``, ``i_ks + K_SPLIT``, ...), each
    adding its ``dbeta`` part to its own ``[HV, B * T]`` slice of ``dbeta_t`` (``[K_SPLIT, HV, B * T]``)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_intra_bwd_task(i_task, q, k, g_cum, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, chunk_indices,
                                cu_seqlens, scale, T, NT, TT, H, HV, K, BT, BK, DOT_PRECISION, IS_VARLEN,
                                DIAG_BLOCK, SIDES, K_SPLIT, DIAG_DOT_RANGE)
    else:
        _kda_intra_bwd_task(tl.program_id(0), q, k, g_cum, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, chunk_indices,
                            cu_seqlens, scale, T, NT, TT, H, HV, K, BT, BK, DOT_PRECISION, IS_VARLEN,
                            DIAG_BLOCK, SIDES, K_SPLIT, DIAG_DOT_RANGE)


def kda_intra_bwd(q, k, g_cum, beta_t, dAqk, dAkk, dq, dk, dG, dbeta_t, scale, chunk_size, n_chunks,
                  chunk_indices=None, cu_seqlens=None):
    """Add the gradients through ``Akk`` and ``Aqk`` to ``dq``, ``dk``, ``dG`` (``[B, T, HV, K]``
    float32) and ``dbeta_t`` (``[HV, B * T]`` float32), in place.

    Args:
        dAqk: ``[B, T, HV, BT]`` float32, the gradient of ``Aqk`` (``scale`` included in ``Aqk``), zero
            above the diagonal (:func:`fla_ascend.ops.kda.output.kda_bwd_dav`);
        dAkk: ``[B, T, HV, BT]`` float32, the gradient of ``Akk`` (``beta`` included in ``Akk``), zero on
            and above the diagonal (:func:`kda_wy_bwd`). The diagonal blocks that go through the dots
            rely on those zeros.
    """
    B, T, H, K = k.shape
    HV = g_cum.shape[2]
    n_tasks = n_chunks * HV * (chunk_size // BC)
    diag = chunk_size in BWD_DIAG_CHUNKS and stage_form("kda_intra_bwd", "diag_block")
    split = diag and stage_form("kda_intra_bwd", "split_sides") and (
        backend.device_type() != "npu" or (K > NPU_SPLIT_MIN_K and cu_seqlens is None))
    # off the NPU form, K's blocks over K_SPLIT tasks per sub-chunk, each with its own dbeta part
    BK = stage_block("kda_intra_bwd", K, NPU_BK)
    k_split = 1 if diag or backend.device_type() == "npu" else min(cuda_launch("kda_intra_bwd")["k_split"],
                                                                   cdiv(K, BK))
    db = dbeta_t if k_split == 1 else torch.cat([dbeta_t[None], dbeta_t.new_zeros(k_split - 1, *dbeta_t.shape)])
    for sides in NPU_SPLIT_BK if split else (15,):
        plan = task_plan(n_tasks * k_split, "cube")
        kda_intra_bwd_kernel[plan.grid](
            q=q, k=k, g_cum=g_cum, beta_t=beta_t, dAqk=dAqk, dAkk=dAkk, dq=dq, dk=dk, dG=dG, dbeta_t=db,
            chunk_indices=chunk_indices, cu_seqlens=cu_seqlens, scale=scale, T=T, NT=cdiv(T, chunk_size), TT=B * T,
            n_tasks=n_tasks * k_split, n_programs=plan.n_programs, H=H, HV=HV, K=K, BT=chunk_size,
            BK=stage_block("kda_intra_bwd", K, NPU_SPLIT_BK[sides]) if split else BK,
            DOT_PRECISION=dot_precision("kda_intra_bwd", k.dtype), IS_VARLEN=cu_seqlens is not None,
            TASK_LOOP=plan.task_loop, DIAG_BLOCK=diag, SIDES=sides, K_SPLIT=k_split,
            DIAG_DOT_RANGE=diag_dot_range("kda_intra_bwd", k.dtype) if diag or backend.device_type() != "npu" else 0.0,
            **stage_launch("kda_intra_bwd"),
        )
    if k_split > 1:
        torch.sum(db, 0, out=dbeta_t)
