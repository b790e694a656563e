"""Stage 2: WY representation of a chunk, fused: ``kkt`` + ``solve_tril`` + ``w``/``u``.

Per chunk of ``BT`` tokens and value head (``k`` of the key head it shares under GVA)::

    A = strict_lower(beta_i exp(G_i - G_j) k_i . k_j)        # [BT, BT]
    Ai = (I + A)^-1
    w = Ai (beta exp(G) k),  u = Ai (beta v)

First the 16x16 diagonal blocks of ``A`` are
inverted together, by forward substitution over the 16 row positions (all blocks advance in
the same step, on a ``[BT/16, 16, 16]`` tile). With ``D = I + diag_blocks(A)`` and the strictly
block-lower rest ``E``, ``I + A = D (I + N)`` with ``N = D^-1 E`` nilpotent of order
``BT / 16 <= 4``, so ``(I + A)^-1 = (I - N)(I + N^2) D^-1``: at most four ``BT x BT`` dots.
The inverse is computed in one launch without leaving the chip, except on an NPU at ``BT = 64``
(:data:`NPU_SPLIT_INVERSE_CHUNKS`), where ``A`` and ``E``, then ``D^-1`` go through global memory
between three launches, each of whose plans fits the UB with room to spare.
"""
from __future__ import annotations

from types import MappingProxyType

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.common.tiles import dot_dim, dot_operand, dot_precision, f32_dot_chain, npu_tiles, stage_launch
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv
from fla_ascend.tiling.ub import Tile

# The UB model of the kernels (fla_ascend.tiling.ub): NPU launch plans pick their tile sizes with it,
# and `fla-ascend check` compares it with bishengir-compile's planned UB (docs/check.md). The counts of
# float32 buffers are fitted to the compiler's A2 plans (2026-12-01): the Cube + Vector stages'
# UB buffers are planned once (the compiler multi-buffers their L1 buffers).
# AI_LOAD: 1 when the launch loads the inverse (AI_MODE "load"); AI_KKT, AI_BLOCKS: the first and the last
# launch of the NPU's three-launch inverse (NPU_SPLIT_INVERSE_CHUNKS); AI_INV: 1 when one launch computes it
# (wy_fwd_mode_sizes). That launch is the one stage whose plan the compiler multi-buffers when that fits
# (BT = 16, 32). The split launches at BT = 64 (A2, 2026-12-03): "kkt" 127872 B for BK 64 and 128, "blocks"
# 102912 B at BK = BV = 64, 152064 B at 128, 109056 B at BK 128, BV 16.
WY_FWD_TILES = [
    # computing the inverse, double-buffered at BT >= 32 (``min(1, BT // 32)``) and single at BT = 16,
    # where the plans match one copy (Ascend910B2, 2026-12-07: 29504-34624 B at K >= 64, V >= 64)
    Tile(("3 * AI_INV * min(1, BT // 32)", "BT", "BT"), "fp32", "inverse: diagonal-block products"),
    Tile(("AI_INV * min(1, BT // 32)", "BT", "BK"), "fp32", "k block"),
    Tile(("3 * AI_INV * min(1, BT // 32)", "BT", "min(BK, max(16, next_pow2(V)))"), "fp32", "v, w / u blocks"),
    Tile(("3 * AI_INV * (1 - min(1, BT // 32))", "BT", "BT"), "fp32", "BT = 16: diagonal products", buffered=False),
    Tile(("AI_INV * (1 - min(1, BT // 32))", "BT", "BK"), "fp32", "BT = 16: k block", buffered=False),
    Tile(("3 * AI_INV * (1 - min(1, BT // 32))", "BT", "min(BK, max(16, next_pow2(V)))"), "fp32",
         "BT = 16: v, w / u blocks", buffered=False),
    Tile(("6 * AI_INV + AI_LOAD", "BT", "BT // 2"), "fp32", "A / Ai and the diagonal-block masks", buffered=False),
    # inverse loaded: 0.5 BT^2 + 0.75 BT (BK + BV) + 9 BT floats, the A2 plans at every BT, K, V where
    # BV <= BK (Ascend910B2, 2026-12-07; BV above BK, at K = 16 and V >= 64, plans more)
    Tile(("3 * AI_LOAD", "BT", "(BK + min(BK, max(16, next_pow2(V)))) // 4"), "fp32",
         "k, v, w / u blocks (inverse loaded)", buffered=False),
    Tile(("9 * AI_LOAD", "BT"), "fp32", "g, beta (inverse loaded)", buffered=False),
    Tile(("8 * AI_KKT + 4 * AI_BLOCKS", "BT", "BT"), "fp32", "split inverse: A, E, the products", buffered=False),
    Tile(("3 * AI_BLOCKS", "BT", "BK // 2"), "fp32", "split inverse: k, w blocks", buffered=False),
    Tile(("3 * AI_BLOCKS", "BT", "min(BK, max(16, next_pow2(V))) // 2"), "fp32", "split inverse: v, u blocks",
         buffered=False)]


def wy_fwd_mode_sizes(ai_mode: str) -> dict:
    """The UB model's mode indicators (:data:`WY_FWD_TILES`) of a :func:`chunk_wy_fwd_kernel` launch
    with ``AI_MODE = ai_mode``."""
    split = {"AI_LOAD": int(ai_mode == "load"), "AI_KKT": int(ai_mode == "kkt"), "AI_BLOCKS": int(ai_mode == "blocks")}
    return {**split, "AI_INV": 1 - sum(split.values())}


WY_DIAG_INVERSE_TILES = [Tile((8, "BT", "BT"), "fp32", "A's diagonal blocks, D^-1 and its block-diagonal scatter",
                              buffered=False)]
WY_BWD_TILES = [Tile((8, "BT", "BT"), "fp32", "Ai, dA and temporaries", buffered=False),
    Tile((6, "BT", "BK"), "fp32", "k, dw, dk blocks", buffered=False),
    Tile(("BT", "BV"), "fp32", "v, du blocks"),
    # the products over K and V blocks: double-buffered when V spans several blocks, once when one
    # (Ascend910B2 at chunk 16, K = 64: 66240 B at V = 64, 82688 B at V = 100, 2026-12-07)
    Tile(("2 * min(1, cdiv(V, BV) - 1)", "BK", "BV"), "fp32", "products over K and V blocks"),
    Tile(("2 * (1 - min(1, cdiv(V, BV) - 1))", "BK", "BV"), "fp32", "products, one V block", buffered=False)]
NPU_WY_BWD_TILE = MappingProxyType({"BK": 128, "BV": 128})
"""NPU ``BK``, ``BV`` (each capped at ``dot_dim`` of its head dim) of :func:`chunk_wy_bwd` at
``chunk_size = 64``, chosen by the compiled plan's estimate rather than the UB model (smaller chunks
keep the model's pick): its cross-core waits fall with the number of K and V blocks. B1 T4096 H16
HV32, Ascend910B2, calibrated constants (``fla-ascend estimate chunk_gated_delta_rule --shape
qwen3next``, 2026-12-03): 2914 us at ``BK = BV = 32`` (the UB model's pick before), 1887 at
``[64, 64]``, 1474 at ``[128, 32]``, 1327 at ``[128, 64]``, 1254 at ``[128, 128]``. At ``BT = 64``
bishengir-compile plans 166-197 KB for every one of these: its planner spends the spare UB on
avoiding buffer reuse across pipes; every such plan also plans beside a reserved 10% of the UB
(:mod:`fla_ascend.compiler.reserve`, the check's probe), so the room is there."""


@triton.jit
def _diag_subst(b_D):
    """``(I + D)^-1`` of ``[NB, 16, 16]`` strictly lower blocks ``D`` by forward substitution over
    the 16 row positions (all blocks advance in the same step)."""
    o_r = tl.arange(0, 16)
    b_X = -b_D
    for r in range(2, 16):
        m_row = (o_r == r)[None, :, None]  # [1, 16, 1]
        b_a = -tl.sum(tl.where(m_row, b_D, 0.0), 1)  # [NB, 16] row r of every block
        b_a = b_a + tl.sum(b_a[:, :, None] * b_X, 1)
        b_X = tl.where(m_row, b_a[:, None, :], b_X)
    return b_X + tl.where(o_r[:, None] == o_r[None, :], 1.0, 0.0)[None, :, :]


@triton.jit
def _diag_inverse(b_A, BT: tl.constexpr):
    """``D^-1``, ``D = I + diag_blocks16(A)``, by forward substitution on the ``[BT/16, 16, 16]``
    diagonal blocks (all blocks advance together). Measured on the H200 (cases.md): half the
    time of the same substitution on the whole ``[BT, BT]`` tile."""
    NB: tl.constexpr = BT // 16
    o_b = tl.arange(0, NB)
    m_diag = o_b[:, None, None, None] == o_b[None, None, :, None]  # [NB, 1, NB, 1]
    b_D = tl.sum(tl.where(m_diag, tl.reshape(b_A, [NB, 16, NB, 16]), 0.0), 2)  # [NB, 16, 16]
    b_X = _diag_subst(b_D)
    return tl.reshape(tl.where(m_diag, b_X[:, :, None, :], 0.0), [BT, BT])


@triton.jit
def wy_dot(a, b, dt, DOT_PRECISION: tl.constexpr):
    """``a @ b`` (fp32 accumulation) of fp32 tiles at ``DOT_PRECISION`` from
    :func:`fla_ascend.ops.common.tiles.dot_precision`: ``"input"`` casts both operands to ``dt``
    (the op's input dtype) first, any other value is Triton's ``input_precision``."""
    if DOT_PRECISION == "input":
        return tl.dot(a.to(dt), b.to(dt))
    else:
        return tl.dot(a, b, input_precision=DOT_PRECISION)


def wy_bwd_operand_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype in which ``Ai``, ``dw`` and ``dv'`` reach the WY backward's dots, and so the
    dtype ``Ai`` and ``dw`` are stored in (``dv'``: :func:`dv_operand_dtype`): ``dtype`` (the op's
    input dtype) when that stage's dot precision is ``"input"``
    (:func:`fla_ascend.ops.common.tiles.dot_precision`: bf16 on CUDA), because :func:`wy_dot`
    casts every operand to it before the dot and none is used outside a dot (the same bits at
    half the bytes); float32 otherwise."""
    return dtype if dot_precision("wy_bwd", dtype) == "input" else torch.float32


DV_OPERAND_MIN_K = 64
DV_OPERAND_MIN_V = 32
"""Smallest key and value head dims at which ``dv'`` is stored in :func:`wy_bwd_operand_dtype`
(see :func:`dv_operand_dtype`)."""


def dv_operand_dtype(dtype: torch.dtype, K: int, V: int) -> torch.dtype:
    """The dtype ``dv'`` (the reverse recurrence's output, read by the dq/dk/dw stage and the WY
    backward, both only through dots that cast it to the input dtype first) is stored in:
    :func:`wy_bwd_operand_dtype` when ``K >= DV_OPERAND_MIN_K`` and ``V >= DV_OPERAND_MIN_V``,
    float32 otherwise.

    Hopper rule, measured: with a bf16 ``dv'``, the dq/dk/dw stage compiled by Triton 3.6.0 for
    the H200 gave a wrong ``dq`` (rel-RMSE about 1, NaN ``dg``) at K = 32 (V = 60, 64, 128) and an
    illegal address at K = V = 1, while every GPU-tier case with K >= 64 passed; those all have
    V >= 32, so smaller V keeps float32 too (cases.md, 2026-11-30). The kernel's source is the
    same for both dtypes; only the load's element type differs.
    """
    if K >= DV_OPERAND_MIN_K and V >= DV_OPERAND_MIN_V:
        return wy_bwd_operand_dtype(dtype)
    return torch.float32


def off_npu_slabs(BK: int, BV: int) -> tuple[int, int]:
    """``(BK, BV)`` of the two WY stages off the NPU: at least 32 wide, and the V slab never
    narrower than the K slab (masks cover the padding). On the H200 (Triton 3.6) BK = 64 with
    BV = 32 faulted with an illegal address in the WY forward and computed a wrong u (forward,
    ``Ai`` loaded) or dv (backward), and 16 x 16 slabs faulted in an A/B at K = 128, V = 32;
    every shape of the GPU tier with slabs >= 32 and BV >= BK was right (cases.md, Hopper
    findings)."""
    BK = max(BK, 32)
    return BK, max(BV, BK)


@triton.jit
def wy_inverse(b_A, dt, BT: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """``(I + A)^-1`` of a strictly lower-triangular ``[BT, BT]`` fp32 tile (BT in 16, 32, 64);
    its dots go through :func:`wy_dot` with ``dt`` and ``DOT_PRECISION``."""
    o_i = tl.arange(0, BT)
    m_blk = (o_i[:, None] // 16) == (o_i[None, :] // 16)
    b_X = _diag_inverse(b_A, BT)
    if BT > 16:
        b_E = tl.where(m_blk, 0.0, b_A)  # [BT, BT] strictly block-lower part
        b_N = wy_dot(dot_operand(b_X), b_E, dt, DOT_PRECISION)  # b_X is read again (R7)
        b_Y = b_X - wy_dot(dot_operand(b_N), b_X, dt, DOT_PRECISION)
        if BT > 32:
            b_N2 = wy_dot(b_N, b_N, dt, DOT_PRECISION)
            b_Y = b_Y + wy_dot(b_N2, b_Y, dt, DOT_PRECISION)
    else:
        b_Y = b_X
    return b_Y


@triton.jit
def wy_inverse_from_blocks(b_X, b_E, dt, BT: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """:func:`wy_inverse` from its two parts (the NPU form at ``BT = 64``, whose steps run in three
    launches): ``b_X = D^-1`` (block diagonal, :func:`chunk_wy_diag_inverse_kernel`) and ``b_E``,
    the strictly block-lower part of ``A``, both ``[BT, BT]`` fp32; the same four products."""
    if BT > 16:
        b_N = wy_dot(dot_operand(b_X), b_E, dt, DOT_PRECISION)  # b_X is read again (R7)
        b_Y = b_X - wy_dot(dot_operand(b_N), b_X, dt, DOT_PRECISION)
        if BT > 32:
            b_N2 = wy_dot(b_N, b_N, dt, DOT_PRECISION)
            b_Y = b_Y + wy_dot(b_N2, b_Y, dt, DOT_PRECISION)
    else:
        b_Y = b_X
    return b_Y


@triton.jit
def _chunk_wy_fwd_task(
    i_task, k, v, g_cum, beta_t, w, u, Ai, A_off, chunk_indices, cu_seqlens, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    DOT_PRECISION: tl.constexpr, AI_MODE: tl.constexpr, IS_VARLEN: tl.constexpr, F32_CHAIN: tl.constexpr,
    STORE_AI: tl.constexpr, PLAIN_BT16: tl.constexpr,
):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    p_gate = tl.cast(i_hv, tl.int64) * TT + t0 + o_t
    b_g = tl.load(g_cum + p_gate, mask=m_t, other=0.0)  # [BT]
    b_beta = tl.load(beta_t + p_gate, mask=m_t, other=0.0)  # [BT]

    k_base = k + (t0 * H + i_h) * K
    if AI_MODE == "load":
        p_Ai = Ai + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]
        b_Ai = tl.load(p_Ai, mask=m_t[:, None], other=0.0).to(tl.float32)  # [BT, BT]
    elif AI_MODE == "blocks":  # NPU_SPLIT_INVERSE_CHUNKS, last launch: D^-1 (block diagonal) in Ai, E in A_off
        p_Ai = Ai + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]
        b_X = tl.load(p_Ai, mask=m_t[:, None], other=0.0)  # [BT, BT]
        b_E = tl.load(A_off + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :], mask=m_t[:, None],
                      other=0.0)  # [BT, BT]
        b_Ai = wy_inverse_from_blocks(b_X, b_E, k.dtype.element_ty, BT, DOT_PRECISION)
        if STORE_AI:
            tl.store(p_Ai, b_Ai.to(Ai.dtype.element_ty), mask=m_t[:, None])
    else:
        b_A = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(tl.cdiv(K, BK)):
            o_k = i_k * BK + tl.arange(0, BK)
            b_k = tl.load(k_base + o_t[:, None] * (H * K) + o_k[None, :],
                          mask=m_t[:, None] & (o_k < K)[None, :], other=0.0)  # [BT, BK]
            b_A += tl.dot(b_k, tl.trans(b_k))
        m_lower = (o_t[:, None] > o_t[None, :]) & m_t[:, None]  # rows past the sequence end would overflow exp
        b_A = tl.where(m_lower, b_A * b_beta[:, None] * tl.exp(tl.where(m_lower, b_g[:, None] - b_g[None, :], 0.0)),
                       0.0)
        if AI_MODE == "kkt":  # NPU_SPLIT_INVERSE_CHUNKS, first launch: A in Ai, its strictly block-lower E in A_off
            p_Ai = Ai + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]
            tl.store(p_Ai, b_A, mask=m_t[:, None])
            m_off = o_t[:, None] >= (o_t // 16 * 16 + 16)[None, :]
            tl.store(A_off + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :],
                     tl.where(m_off, b_A, 0.0), mask=m_t[:, None])
        else:
            if PLAIN_BT16 and BT == 16:  # the one diagonal block is the tile: no masked extraction (docstring)
                b_Ai = tl.reshape(_diag_subst(tl.reshape(b_A, [1, 16, 16])), [BT, BT])
            else:
                b_Ai = wy_inverse(b_A, k.dtype.element_ty, BT, DOT_PRECISION)  # [BT, BT]
            if AI_MODE == "store":
                p_Ai = Ai + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]
                tl.store(p_Ai, b_Ai.to(Ai.dtype.element_ty), mask=m_t[:, None])
    if AI_MODE != "kkt":
        _chunk_wy_fwd_wu(b_Ai, b_g, b_beta, k_base, w, v, u, t0, i_hv, o_t, m_t, H, HV, K, V, BK, BV, F32_CHAIN)


@triton.jit
def _chunk_wy_fwd_wu(b_Ai, b_g, b_beta, k_base, w, v, u, t0, i_hv, o_t, m_t,
                     H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                     BK: tl.constexpr, BV: tl.constexpr, F32_CHAIN: tl.constexpr):
    """``w = Ai (beta exp(G) k)``, ``u = Ai (beta v)`` of one chunk."""
    b_Ai_k = b_Ai.to(k_base.dtype.element_ty)
    b_kscale = b_beta * tl.exp(b_g)  # [BT]
    w_base = w + (t0 * HV + i_hv) * K
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = m_t[:, None] & (o_k < K)[None, :]
        b_k = tl.load(k_base + o_t[:, None] * (H * K) + o_k[None, :], mask=m_k, other=0.0)  # [BT, BK]
        if F32_CHAIN:  # A5 at chunk 16 or with 16-wide V blocks (tiles.f32_dot_chain)
            b_w = tl.dot(dot_operand(b_Ai), b_k.to(tl.float32) * b_kscale[:, None])  # [BT, BK]
        else:
            b_w = tl.dot(dot_operand(b_Ai_k), (b_k * b_kscale[:, None]).to(b_k.dtype))  # [BT, BK]
        tl.store(w_base + o_t[:, None] * (HV * K) + o_k[None, :], b_w.to(w.dtype.element_ty), mask=m_k)
    b_Ai_v = b_Ai.to(v.dtype.element_ty)
    v_base = v + (t0 * HV + i_hv) * V
    u_base = u + (t0 * HV + i_hv) * V
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = m_t[:, None] & (o_v < V)[None, :]
        b_v = tl.load(v_base + o_t[:, None] * (HV * V) + o_v[None, :], mask=m_v, other=0.0)  # [BT, BV]
        if F32_CHAIN:
            b_u = tl.dot(dot_operand(b_Ai), b_v.to(tl.float32) * b_beta[:, None])  # [BT, BV]
        else:
            b_u = tl.dot(dot_operand(b_Ai_v), (b_v * b_beta[:, None]).to(b_v.dtype))  # [BT, BV]
        tl.store(u_base + o_t[:, None] * (HV * V) + o_v[None, :], b_u.to(u.dtype.element_ty), mask=m_v)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_wy_fwd_kernel(
    k, v, g_cum, beta_t, w, u, Ai, chunk_indices, cu_seqlens, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    DOT_PRECISION: tl.constexpr, AI_MODE: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    F32_CHAIN: tl.constexpr = False, A_off=None, STORE_AI: tl.constexpr = False, PLAIN_BT16: tl.constexpr = False,
):
    """Stage 2 forward (module doc). UB on an A2/A3 vector core (bishengir-compile, Ascend910B2,
    2026-12-03): at ``BT = 64`` an NPU computes the inverse in three launches
    (:data:`NPU_SPLIT_INVERSE_CHUNKS`): ``AI_MODE = "kkt"`` plans 127872 B (65% of the 196608 B UB),
    :func:`chunk_wy_diag_inverse_kernel` 118144 B (60%), ``"blocks"`` 152064 B (77%) at
    ``BK = BV = 128`` (102912-109056 B at smaller blocks). In one launch (``"none"`` / ``"store"``,
    the other backends' form) it planned 195136-196608 B (99-100%, 2026-12-01): the ``[BT/16, 16,
    BT/16, 16]`` diagonal-block masks and zero tiles are hoisted out of the task loop and stay live
    beside the four ``BT x BT`` products. ``chunk_size = 32`` plans 166272 B (85%), 16 plans
    61568 B; a launch that loads the inverse (``AI_MODE = "load"``) 35072-59648 B.

    ``A_off`` (``"kkt"``, ``"blocks"``): float32 ``[B, T, HV, BT]``, the strictly block-lower part
    ``E`` of each chunk's ``A``; ``STORE_AI`` (``"blocks"``): write the inverse over ``Ai``.
    ``PLAIN_BT16`` (NPU launches): at ``BT = 16`` the one diagonal block is the tile, reshaped
    without :func:`_diag_inverse`'s ``[1, 16, 1, 16]`` masked extraction, on which
    bishengir-compile-a5 (Ascend910_9599, ascendnpu-ir 1.2.0) ran past 900 s (2026-12-03; 0.6 s
    without it, planning 72256 B of A5's UB; the A2 plan stays 61568 B)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_wy_fwd_task(i_task, k, v, g_cum, beta_t, w, u, Ai, A_off, chunk_indices, cu_seqlens, T, NT, TT,
                               H, HV, K, V, BT, BK, BV, DOT_PRECISION, AI_MODE, IS_VARLEN, F32_CHAIN, STORE_AI,
                               PLAIN_BT16)
    else:
        _chunk_wy_fwd_task(tl.program_id(0), k, v, g_cum, beta_t, w, u, Ai, A_off, chunk_indices, cu_seqlens, T, NT,
                           TT, H, HV, K, V, BT, BK, BV, DOT_PRECISION, AI_MODE, IS_VARLEN, F32_CHAIN, STORE_AI,
                           PLAIN_BT16)

@triton.jit
def _chunk_wy_diag_inverse_task(i_task, Ai, X, chunk_indices, cu_seqlens, T, NT, HV: tl.constexpr,
                                BT: tl.constexpr, IS_VARLEN: tl.constexpr, ZERO_DIAG: tl.constexpr):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    NB: tl.constexpr = BT // 16
    o_b = tl.arange(0, NB)
    o_r = tl.arange(0, 16)
    o_t = tl.arange(0, BT)
    base = Ai + (t0 * HV + i_hv) * BT
    x_base = X + (t0 * HV + i_hv) * BT
    r_3 = o_b[:, None, None] * 16 + o_r[None, :, None]  # [NB, 16, 1] row in the chunk
    # the diagonal blocks of A, read straight from memory: no masked reshape of the [BT, BT] tile
    p_D = base + r_3 * (HV * BT) + o_b[:, None, None] * 16 + o_r[None, None, :]
    b_D = tl.load(p_D, mask=r_3 < eos - t0, other=0.0)  # [NB, 16, 16]
    b_X = _diag_subst(b_D)
    if ZERO_DIAG:  # A keeps its strictly block-lower part only
        tl.store(p_D, tl.zeros([NB, 16, 16], dtype=tl.float32), mask=r_3 < eos - t0)
    m_diag = o_b[:, None, None, None] == o_b[None, None, :, None]  # [NB, 1, NB, 1]
    tl.store(x_base + o_t[:, None] * (HV * BT) + o_t[None, :],
             tl.reshape(tl.where(m_diag, b_X[:, :, None, :], 0.0), [BT, BT]), mask=(o_t < eos - t0)[:, None])


@triton.jit(do_not_specialize=["T", "NT", "n_tasks", "n_programs"])
def chunk_wy_diag_inverse_kernel(Ai, X, chunk_indices, cu_seqlens, T, NT, n_tasks, n_programs, HV: tl.constexpr,
                                 BT: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
                                 ZERO_DIAG: tl.constexpr = False):
    """Second of the three launches of :func:`chunk_wy_fwd` on an NPU at ``chunk_size = 64``
    (:data:`NPU_SPLIT_INVERSE_CHUNKS`; KDA's WY forward runs it the same way), on the vector cores:
    reads the ``16 x 16`` diagonal blocks ``D`` of each chunk's ``A`` (``Ai``, float32
    ``[B, T, HV, BT]``, written by the first launch) and writes ``D^-1`` (block diagonal, zero
    elsewhere) to ``X`` (the same layout; ``X`` may be ``Ai`` itself)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_wy_diag_inverse_task(i_task, Ai, X, chunk_indices, cu_seqlens, T, NT, HV, BT, IS_VARLEN, ZERO_DIAG)
    else:
        _chunk_wy_diag_inverse_task(tl.program_id(0), Ai, X, chunk_indices, cu_seqlens, T, NT, HV, BT, IS_VARLEN,
                                    ZERO_DIAG)


def wy_diag_inverse(A: torch.Tensor, X: torch.Tensor, chunk_size: int, n_chunks: int,
                    chunk_indices: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                    zero_diag: bool = False) -> None:
    """Write ``D^-1``, the inverse of ``I`` plus the ``16 x 16`` diagonal blocks of each chunk's
    strictly lower ``A`` (float32 ``[B, T, HV, chunk_size]``, contiguous), block diagonal and zero
    elsewhere, to ``X`` (the same shape and dtype; ``A`` itself allowed unless ``zero_diag``), with
    :func:`chunk_wy_diag_inverse_kernel` on the vector cores. ``zero_diag``: also set those blocks of
    ``A`` to zero, leaving its strictly block-lower part. :func:`wy_inverse_from_blocks` completes the
    inverse from ``D^-1`` and that part.

    Raises:
        ValueError: ``A`` not a contiguous float32 ``[B, T, HV, chunk_size]`` tensor, ``X`` not of its
            shape, dtype and device, or ``X`` sharing ``A``'s memory with ``zero_diag``.
    """
    if A.dtype != torch.float32 or A.dim() != 4 or A.shape[3] != chunk_size or not A.is_contiguous():
        raise ValueError(f"wy_diag_inverse: A must be a contiguous float32 [B, T, HV, {chunk_size}] tensor, got "
                         f"{A.dtype} {list(A.shape)}{'' if A.is_contiguous() else ', not contiguous'}")
    if X.shape != A.shape or X.dtype != A.dtype or X.device != A.device or not X.is_contiguous():
        raise ValueError(f"wy_diag_inverse: X must be a contiguous {A.dtype} {list(A.shape)} tensor on {A.device}, "
                         f"got {X.dtype} {list(X.shape)} on {X.device}")
    if zero_diag and X.data_ptr() == A.data_ptr():
        raise ValueError("wy_diag_inverse: with zero_diag=True, X must not be A (D^-1 and the zeroed blocks "
                         "would be written to the same elements)")
    T, HV = A.shape[1], A.shape[2]
    plan = task_plan(n_chunks * HV, "vector")
    chunk_wy_diag_inverse_kernel[plan.grid](
        Ai=A, X=X, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens, T=T, NT=cdiv(T, chunk_size),
        n_tasks=n_chunks * HV, n_programs=plan.n_programs, HV=HV, BT=chunk_size,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, ZERO_DIAG=zero_diag, **backend.launch_options())


NPU_WY_FWD_BK_CANDIDATES = (128, 64, 32)
"""``BK`` candidates of :func:`chunk_wy_fwd` on an NPU (the UB model picks the largest that fits)."""
NPU_WY_FWD_BK = MappingProxyType({32: (64, 32)})
"""``BK`` candidates of :func:`chunk_wy_fwd` on an NPU when it computes the inverse (``AI_MODE``
``"none"`` / ``"store"``), by chunk size (otherwise :data:`NPU_WY_FWD_BK_CANDIDATES`). At chunk 32
the model's pick of 128 plans 182656-194944 B (93-99% of Ascend910B2's UB) for ``K >= 100`` with
``V >= 64``, where the model is 0.86-0.92 of the plan; with at most 64 every chunk-32 launch plans at
most 170368 B (87%; ``fla-ascend check --full --kernels chunk_wy_fwd_kernel``, 2026-12-07)."""
NPU_WY_BWD_BK = MappingProxyType({32: (32,)})
"""``BK`` candidates of :func:`chunk_wy_bwd` on an NPU, by chunk size (otherwise 64 and 32, the UB
model picking; chunk 64 takes :data:`NPU_WY_BWD_TILE`). At chunk 32 the model's pick of 64 plans
183584-186016 B (93-95% of Ascend910B2's UB) for ``K >= 64`` with ``V >= 64`` (with ``BV`` capped at
32 as well: up to 95%); at 32 every chunk-32 launch plans at most 162464 B (83%; ``fla-ascend check
--full --kernels chunk_wy_bwd_kernel``, 2026-12-07)."""

NPU_SPLIT_INVERSE_CHUNKS = (64,)
"""Chunk sizes at which :func:`chunk_wy_fwd` computes the inverse in three launches on an NPU:
``AI_MODE = "kkt"`` (``A`` and its strictly block-lower part ``E``, stored as float32),
:func:`chunk_wy_diag_inverse_kernel` (``D^-1`` over ``A``), ``AI_MODE = "blocks"``
(:func:`wy_inverse_from_blocks`, then ``w``, ``u``). In one launch bishengir-compile plans
99-100% of an A2 vector core's UB at ``BT = 64``: the diagonal-block extraction's ``[BT/16, 16,
BT/16, 16]`` masks and zero tiles are hoisted out of the task loop and stay live beside the
products."""


def chunk_wy_fwd(
    k: torch.Tensor,
    v: torch.Tensor,
    g_cum: torch.Tensor,
    beta_t: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    store_ai: bool = False,
    Ai: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """WY representation ``w``, ``u`` (and optionally ``Ai = (I + A)^-1``) of every chunk.

    Args:
        k: ``[B, T, H, K]``; v: ``[B, T, HV, V]``; contiguous, same float dtype.
        g_cum, beta_t: ``[HV, B * T]`` float32 from :func:`chunk_gate_cumsum`.
        chunk_size: ``BT`` in {16, 32, 64}.
        n_chunks, chunk_indices, cu_seqlens: as in :func:`chunk_gate_cumsum`.
        store_ai: also return ``Ai`` ``[B, T, HV, BT]`` (row ``t`` of its chunk's inverse) in
            :func:`wy_bwd_operand_dtype`, for :func:`chunk_wy_bwd` (and for a later call with
            ``Ai``).
        Ai: an ``Ai`` stored by an earlier call on the same inputs: ``w`` and ``u`` are then
            computed from it, without forming ``A`` and its inverse again (the backward's
            recompute; the same bits as the earlier call's ``w``, ``u``, because that call's
            dots read ``Ai`` in the same operand dtype).

    Returns:
        ``(w, u, Ai)``: ``w`` ``[B, T, HV, K]`` in k's dtype, ``u`` ``[B, T, HV, V]`` in v's dtype,
        ``Ai`` (stored or given) or ``None``.

    Raises:
        ValueError: both ``store_ai`` and ``Ai``; an ``Ai`` of another shape (another chunk size),
            device, or not contiguous.
    """
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    if store_ai and Ai is not None:
        raise ValueError("chunk_wy_fwd: store_ai=True computes Ai; pass either store_ai or Ai, not both")
    if Ai is not None:
        want = (B, T, HV, chunk_size)
        if tuple(Ai.shape) != want or not Ai.is_contiguous() or Ai.device != k.device:
            raise ValueError(f"chunk_wy_fwd: Ai must be a contiguous {list(want)} tensor on {k.device} (from a "
                             f"store_ai call with the same chunk_size), got shape {list(Ai.shape)} on {Ai.device}"
                             f"{'' if Ai.is_contiguous() else ', not contiguous'}")
    ai_mode = "load" if Ai is not None else "store" if store_ai else "none"
    w = torch.empty(B, T, HV, K, dtype=k.dtype, device=k.device)
    u = torch.empty(B, T, HV, V, dtype=v.dtype, device=v.device)
    if store_ai:
        Ai = torch.empty(B, T, HV, chunk_size, dtype=wy_bwd_operand_dtype(k.dtype), device=k.device)
    split = backend.device_type() == "npu" and ai_mode != "load" and chunk_size in NPU_SPLIT_INVERSE_CHUNKS
    common = dict(k=k, v=v, g_cum=g_cum, beta_t=beta_t, w=w, u=u, chunk_indices=chunk_indices,
                  cu_seqlens=cu_seqlens, T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_chunks * HV,
                  H=H, HV=HV, K=K, V=V, BT=chunk_size, DOT_PRECISION=dot_precision("wy_fwd", k.dtype),
                  IS_VARLEN=cu_seqlens is not None)

    def launch(mode, Ai, **extra):
        bks = NPU_WY_FWD_BK_CANDIDATES
        if mode in ("none", "store"):
            bks = NPU_WY_FWD_BK.get(chunk_size, bks)
        s = npu_tiles(WY_FWD_TILES, chunk_size, k, {"BK": list(bks)}, V=V, **wy_fwd_mode_sizes(mode)) or {}
        BK = min(s.get("BK", 64), dot_dim(K))
        BV = min(s.get("BK", 64), dot_dim(V))
        if not s:
            BK, BV = off_npu_slabs(BK, BV)
        plan = task_plan(n_chunks * HV, "cube")
        chunk_wy_fwd_kernel[plan.grid](
            **common, Ai=Ai, n_programs=plan.n_programs, BK=BK, BV=BV, AI_MODE=mode, TASK_LOOP=plan.task_loop,
            F32_CHAIN=f32_dot_chain(chunk_size, BV), PLAIN_BT16=backend.device_type() == "npu", **extra,
            **stage_launch("wy_fwd", s.get("multibuffer")))

    if not split:
        launch(ai_mode, Ai)
        return w, u, Ai
    # A, then D^-1 over it, in the Ai buffer (float32 on an NPU, where dot_precision is "ieee"); E beside it
    A_buf = Ai if Ai is not None and Ai.dtype == torch.float32 else \
        torch.empty(B, T, HV, chunk_size, dtype=torch.float32, device=k.device)
    E = torch.empty(B, T, HV, chunk_size, dtype=torch.float32, device=k.device)
    launch("kkt", A_buf, A_off=E)
    wy_diag_inverse(A_buf, A_buf, chunk_size, n_chunks, chunk_indices, cu_seqlens)
    launch("blocks", A_buf, A_off=E, STORE_AI=store_ai)
    if store_ai and A_buf is not Ai:
        Ai.copy_(A_buf)
    return w, u, Ai


@triton.jit
def _chunk_wy_bwd_task(
    i_task, k, v, g_cum, beta_t, Ai, dw, du, dk_in, dk, dv, dbeta_t, dg_parts, chunk_indices, cu_seqlens,
    T, NT, TT, NK_PARTS,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_c = i_task // HV
    i_hv = i_task % HV
    i_h = i_hv // (HV // H)
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    m_t = o_t < eos - t0
    p_gate = tl.cast(i_hv, tl.int64) * TT + t0 + o_t
    b_g = tl.load(g_cum + p_gate, mask=m_t, other=0.0)  # [BT]
    b_beta = tl.load(beta_t + p_gate, mask=m_t, other=0.0)  # [BT]
    b_Ai = tl.load(Ai + (t0 * HV + i_hv) * BT + o_t[:, None] * (HV * BT) + o_t[None, :],
                   mask=m_t[:, None], other=0.0)  # [BT, BT]
    b_kscale = b_beta * tl.exp(b_g)  # [BT]
    dt = k.dtype.element_ty  # operand dtype of wy_dot's "input" precision
    b_dAi = tl.zeros([BT, BT], dtype=tl.float32)
    b_KK = tl.zeros([BT, BT], dtype=tl.float32)
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    b_dG = tl.zeros([BT], dtype=tl.float32)
    k_base = (t0 * H + i_h) * K
    d_base = (t0 * HV + i_hv) * K
    # w = Ai (beta exp(G) k). dk is not stored here: it is completed in the last loop, so each
    # program writes it once (a global store read back by the same program is a race on GPUs:
    # another thread of the block may load the element before it is written).
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        b_k = tl.load(k + k_base + o_t[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0.0)  # [BT, BK]
        b_dw = tl.load(dw + d_base + o_t[:, None] * (HV * K) + o_k[None, :], mask=m_tk, other=0.0)  # [BT, BK]
        b_kf = b_k.to(tl.float32)
        b_dAi += wy_dot(dot_operand(b_dw), tl.trans(b_kf * b_kscale[:, None]), dt, DOT_PRECISION)
        b_KK += tl.dot(b_k, tl.trans(b_k))
        b_kdx = tl.sum(wy_dot(tl.trans(b_Ai), b_dw, dt, DOT_PRECISION) * b_kf, 1)  # [BT]
        b_dbeta += tl.exp(b_g) * b_kdx
        b_dG += b_kscale * b_kdx
    # u = Ai (beta v)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
        b_v = tl.load(v + p_v, mask=m_tv, other=0.0).to(tl.float32)  # [BT, BV]
        b_du = tl.load(du + p_v, mask=m_tv, other=0.0)  # [BT, BV], read only by dots
        b_dAi += wy_dot(dot_operand(b_du), tl.trans(b_v * b_beta[:, None]), dt, DOT_PRECISION)
        b_dY = wy_dot(tl.trans(b_Ai), b_du, dt, DOT_PRECISION)  # [BT, BV]
        b_dbeta += tl.sum(b_dY * b_v, 1)
        tl.store(dv + p_v, (b_dY * b_beta[:, None]).to(dv.dtype.element_ty), mask=m_tv)
    # Ai = (I + A)^-1  ->  dA = -Ai^T dAi Ai^T on the strictly lower part
    m_lower = (o_t[:, None] > o_t[None, :]) & m_t[:, None]
    b_dA = wy_dot(b_dAi, tl.trans(b_Ai), dt, DOT_PRECISION)
    b_dA = -wy_dot(tl.trans(b_Ai), b_dA, dt, DOT_PRECISION)
    b_dA = tl.where(m_lower, b_dA, 0.0)
    # A = beta_i exp(G_i - G_j) k_i . k_j
    b_gamma = tl.exp(tl.where(m_lower, b_g[:, None] - b_g[None, :], 0.0))
    b_dAg = b_dA * b_gamma  # [BT, BT]
    b_dbeta += tl.sum(b_dAg * b_KK, 1)
    b_dAA = b_dAg * b_KK * b_beta[:, None]
    b_dG += tl.sum(b_dAA, 1) - tl.sum(b_dAA, 0)
    b_dKK = b_dAg * b_beta[:, None]  # d/d(k_i . k_j)
    # dk = dk_in + (Ai^T dw) beta exp(G) + dKK k + dKK^T k
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_tk = m_t[:, None] & (o_k < K)[None, :]
        b_k = tl.load(k + k_base + o_t[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0.0).to(tl.float32)
        p_d = d_base + o_t[:, None] * (HV * K) + o_k[None, :]
        b_dw = tl.load(dw + p_d, mask=m_tk, other=0.0)  # [BT, BK]
        b_dk = tl.load(dk_in + p_d, mask=m_tk, other=0.0)
        b_dk += wy_dot(tl.trans(b_Ai), b_dw, dt, DOT_PRECISION) * b_kscale[:, None]
        b_dk += wy_dot(dot_operand(b_dKK), b_k, dt, DOT_PRECISION)
        # (dKK^T k) as (k^T dKK)^T: never tl.trans a dot result into a dot (Hopper miscompile, chunk_o.py)
        b_dk += tl.trans(wy_dot(tl.trans(b_k), b_dKK, dt, DOT_PRECISION))
        tl.store(dk + p_d, b_dk.to(dk.dtype.element_ty), mask=m_tk)
    tl.store(dbeta_t + p_gate, b_dbeta, mask=m_t)
    tl.store(dg_parts + (NK_PARTS * HV + i_hv) * TT + t0 + o_t, b_dG, mask=m_t)


@triton.jit(do_not_specialize=["T", "NT", "TT", "NK_PARTS", "n_tasks", "n_programs"])
def chunk_wy_bwd_kernel(
    k, v, g_cum, beta_t, Ai, dw, du, dk_in, dk, dv, dbeta_t, dg_parts, chunk_indices, cu_seqlens,
    T, NT, TT, NK_PARTS, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, DOT_PRECISION: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr,
):
    """Stage 2 backward. UB on an A2/A3 vector core: at ``BT = 64`` bishengir-compile (Ascend910B2,
    2026-12-01) plans 188928 B of the 196608 B UB (96%) at K = 100 to 256, and all of it (196608 B)
    at K = V = 64: the ``[BT, BT]`` float32 gradients of ``A`` and their temporaries dominate, not
    the ``BK``/``BV`` slabs. ``chunk_size = 32`` plans 150784 B (77%), 16 plans 99264 B. Its buffers
    occupy at most 124928 B (64%) at any one point at K = V = 128 (the compiler's memory display):
    the plan fills the rest to avoid cross-pipe reuse, and it plans beside a reserved 10% of the UB
    at every K the check compiles (:mod:`fla_ascend.compiler.reserve`, 2026-12-07)."""
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_wy_bwd_task(i_task, k, v, g_cum, beta_t, Ai, dw, du, dk_in, dk, dv, dbeta_t, dg_parts,
                               chunk_indices, cu_seqlens, T, NT, TT, NK_PARTS, H, HV, K, V, BT, BK, BV,
                               DOT_PRECISION, IS_VARLEN)
    else:
        _chunk_wy_bwd_task(tl.program_id(0), k, v, g_cum, beta_t, Ai, dw, du, dk_in, dk, dv, dbeta_t, dg_parts,
                           chunk_indices, cu_seqlens, T, NT, TT, NK_PARTS, H, HV, K, V, BT, BK, BV,
                           DOT_PRECISION, IS_VARLEN)


def chunk_wy_bwd(
    k: torch.Tensor,
    v: torch.Tensor,
    g_cum: torch.Tensor,
    beta_t: torch.Tensor,
    Ai: torch.Tensor,
    dw: torch.Tensor,
    du: torch.Tensor,
    dk_in: torch.Tensor,
    dg_parts: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    dk_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients through the WY representation (``w``, ``u`` and ``Ai = (I + A)^-1``).

    Args:
        k: ``[B, T, H, K]``; v: ``[B, T, HV, V]``; g_cum, beta_t: ``[HV, B * T]`` fp32;
        Ai: ``[B, T, HV, BT]`` from :func:`chunk_wy_fwd`; dw: ``[B, T, HV, K]``; both in
        :func:`wy_bwd_operand_dtype` of k's dtype;
        du: ``[B, T, HV, V]`` (the gradient of ``v'``), fp32 or :func:`wy_bwd_operand_dtype`;
        dk_in: ``[B, T, HV, K]`` fp32, the other stages' dk, to which this stage's part is added; dg_parts:
        ``[NK + 1, HV, B * T]``, whose last row this stage writes.
        dk_dtype: the dtype of the returned ``dk``: float32 writes the sum in place into
        ``dk_in``; another dtype (the input dtype, when no GVA sum follows) writes it to a new
        tensor.

    Returns:
        ``(dk, dv, dbeta_t)``: ``dk`` ``[B, T, HV, K]`` in ``dk_dtype`` (per value head), ``dv``
        in v's dtype, ``dbeta_t`` ``[HV, B * T]`` fp32.
    """
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    # in place: each element is read, then written once by the same program
    dk = dk_in if dk_dtype == dk_in.dtype else torch.empty_like(dk_in, dtype=dk_dtype)
    dv = torch.empty_like(v)
    dbeta_t = torch.empty_like(beta_t)
    if backend.device_type() == "npu" and chunk_size == 64:
        s = dict(NPU_WY_BWD_TILE)
    else:
        s = npu_tiles(WY_BWD_TILES, chunk_size, k, {"BK": list(NPU_WY_BWD_BK.get(chunk_size, (64, 32))),
                                                     "BV": [64, 32, 16]}, V=V)
    BK, BV = min((s or {}).get("BK", 64), dot_dim(K)), min((s or {}).get("BV", 64), dot_dim(V))
    if s is None:
        BK, BV = off_npu_slabs(BK, BV)
    plan = task_plan(n_chunks * HV, "cube")
    chunk_wy_bwd_kernel[plan.grid](
        k=k, v=v, g_cum=g_cum, beta_t=beta_t, Ai=Ai, dw=dw, du=du, dk_in=dk_in, dk=dk, dv=dv, dbeta_t=dbeta_t,
        dg_parts=dg_parts, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        T=T, NT=cdiv(T, chunk_size), TT=B * T, NK_PARTS=dg_parts.shape[0] - 1,
        n_tasks=n_chunks * HV, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BT=chunk_size,
        BK=BK, BV=BV,
        DOT_PRECISION=dot_precision("wy_bwd", k.dtype), IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **stage_launch("wy_bwd", (s or {}).get("multibuffer")),
    )
    return dk, dv, dbeta_t
