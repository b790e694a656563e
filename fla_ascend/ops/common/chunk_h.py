"""Stage 3: the inter-chunk state recurrence (sequential over chunks).

Per sequence, value head and ``BV`` slice of the state ``h`` ``[K, V]`` (fp32, kept on chip)::

    for each chunk:  store h (the state at the chunk's start)
                     v' = u - w h                      (the chunk's corrected values)
                     h  = exp(G_last) h + (k exp(G_last - G))^T v'

This is the sequential part of the chunked algorithm; its parallelism is ``N * HV * V / BV``.
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_index import seq_bounds
from fla_ascend.ops.common.tiles import (
    cuda_launch,
    dot_chained,
    dot_dim,
    f32_dot_chain,
    launch_first_fitting,
    npu_tiles,
)
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.chips import get_chip
from fla_ascend.tiling.sizes import cdiv
from fla_ascend.tiling.ub import Tile

# The UB model of the kernels (fla_ascend.tiling.ub): NPU launch plans pick their tile sizes with it,
# and `fla-ascend check` compares it with bishengir-compile's planned UB (docs/check.md). The counts of
# float32 buffers are fitted to the compiler's A2 plans (2026-12-01): the Cube + Vector stages'
# UB buffers are planned once (the compiler multi-buffers their L1 buffers).
FWD_H_TILES = [Tile((2, "BK", "BV"), "fp32", "state h, its update", buffered=False),
    Tile((2, "BT", "BV"), "fp32", "u, v_new", buffered=False), Tile(("BT", 16), "fp32", "g", buffered=False)]
BWD_DH_TILES = [Tile((5, "BK", "BV // 2"), "fp32", "dh, its update, temporaries (2.5 tiles: the A2 plans at K = 256, "
                     "2026-12-07)", buffered=False),
    Tile(("BT", "BK"), "fp32", "q / k / w block", buffered=False), Tile(("BT", 16), "fp32", "g", buffered=False)]


@triton.jit
def gk_last(g_cum, t0, eos, o_k, m_k, i_hv, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr):
    """The per-channel decay of a chunk's last token, ``[BK]``, from ``g_cum`` ``[B * T, HV, K]``
    float32 (KDA)."""
    return tl.load(g_cum + (t0 + tl.minimum(BT, eos - t0) - 1) * (HV * K) + i_hv * K + o_k, mask=m_k, other=0.0)


@triton.jit
def _chunk_fwd_h_task(
    i_task, k, w, u, g_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, IS_VARLEN: tl.constexpr,
    F32_CHAIN: tl.constexpr, GK: tl.constexpr,
):
    NV = tl.cdiv(V, BV)
    i_n = i_task // (HV * NV)
    i_hv = (i_task // NV) % HV
    i_v = i_task % NV
    i_h = i_hv // (HV // H)
    bos, eos, boc = seq_bounds(i_n, cu_seqlens, chunk_offsets, T, NT, IS_VARLEN)
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_h = m_k[:, None] & m_v[None, :]
    p_state = o_k[:, None] * V + o_v[None, :]
    state_base = (tl.cast(i_n, tl.int64) * HV + i_hv) * K * V
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        b_h += tl.load(h0 + state_base + p_state, mask=m_h, other=0.0).to(tl.float32)
    for i_t in range(0, tl.cdiv(eos - bos, BT)):
        t0 = bos + i_t * BT
        m_t = o_t < eos - t0
        tl.store(h + ((boc + i_t) * HV + i_hv) * K * V + p_state, b_h.to(h.dtype.element_ty), mask=m_h)
        b_w = tl.load(w + (t0 * HV + i_hv) * K + o_t[:, None] * (HV * K) + o_k[None, :],
                      mask=m_t[:, None] & m_k[None, :], other=0.0)  # [BT, BK]
        p_u = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_v = tl.load(u + p_u, mask=m_tv, other=0.0).to(tl.float32)  # [BT, BV]
        b_v -= dot_chained(b_w, b_h, F32_CHAIN)  # F32_CHAIN: A5 with 16-wide V blocks
        tl.store(v_new + p_u, b_v.to(v_new.dtype.element_ty), mask=m_tv)
        b_k = tl.load(k + (t0 * H + i_h) * K + o_t[:, None] * (H * K) + o_k[None, :],
                      mask=m_t[:, None] & m_k[None, :], other=0.0)  # [BT, BK]
        if GK:  # a decay per key channel (KDA): g_cum is [B * T, HV, K], k is k exp(G_last - G)
            b_g_last = gk_last(g_cum, t0, eos, o_k, m_k, i_hv, HV, K, BT)
            b_h = b_h * tl.exp(b_g_last)[:, None] + dot_chained(tl.trans(b_k), b_v, F32_CHAIN)
        else:
            p_gate = tl.cast(i_hv, tl.int64) * TT + t0
            b_g = tl.load(g_cum + p_gate + o_t, mask=m_t, other=0.0)  # [BT]
            b_g_last = tl.load(g_cum + p_gate + tl.minimum(BT, eos - t0) - 1)
            b_v = tl.where(m_t[:, None], b_v * tl.exp(b_g_last - b_g)[:, None], 0.0)
            b_h = b_h * tl.exp(b_g_last) + dot_chained(tl.trans(b_k), b_v, F32_CHAIN)
    if STORE_FINAL_STATE:
        tl.store(ht + state_base + p_state, b_h, mask=m_h)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_fwd_h_kernel(
    k, w, u, g_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, NT, TT, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr, F32_CHAIN: tl.constexpr = False, GK: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_fwd_h_task(i_task, k, w, u, g_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, NT, TT,
                              H, HV, K, V, BT, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE, IS_VARLEN,
                              F32_CHAIN, GK)
    else:
        _chunk_fwd_h_task(tl.program_id(0), k, w, u, g_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, NT,
                          TT, H, HV, K, V, BT, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE, IS_VARLEN,
                          F32_CHAIN, GK)


NPU_GK_WIDE_K_BV = MappingProxyType({"A2": 64, "A5": 32})
"""``BV`` of the forward state recurrence's per-channel-decay variant (``gk``, chunk_kda) at
``K > 128`` on an NPU, by chip generation, from bishengir-compile's plans (``kda-K256-BT64``,
2026-12-07, with ``k`` pre-scaled by the WY stage): Ascend910B2 plans 139776 B (71% of UB) at the UB
model's pick, 64; Ascend910_9599 plans 230400 B (91%) at 64 and 181248 B (71%) at 32."""


def _stage_name(stage: str, gk: bool) -> str:
    """The :data:`fla_ascend.ops.common.tiles.CUDA_LAUNCH` entry of a state recurrence (``"fwd_h"`` or
    ``"bwd_dh"``): its ``_gk`` entry for the per-channel decay (KDA)."""
    return f"{stage}_gk" if gk else stage


def _state_launches(stage: str, N: int, HV: int, K: int, V: int, tiles, chunk_size: int,
                    x: torch.Tensor, gk: bool = False) -> list[tuple[int, dict]]:
    """Candidate ``(BV, launch options)`` of a state recurrence (``stage`` "fwd_h" or "bwd_dh"),
    most preferred first.

    On an NPU one candidate: the largest ``BV`` that fits the UB with the whole ``K`` on chip
    (``multibuffer`` off when only unbuffered fits), at most :data:`NPU_GK_WIDE_K_BV` for the
    forward's ``gk`` variant at ``K > 128``. On CUDA (the table entry ``stage``, with ``gk`` its
    ``_gk`` entry) the largest of the entry's ``BV`` values that still gives one program per SM
    (the recurrence is latency-bound, so parallelism beats tile size) at the table's ``num_stages``
    for this ``K``, then the same ``BV``
    with fewer stages, then each narrower ``BV`` down to 16, again from that ``num_stages`` down to 1:
    the fallbacks for shared memory (:func:`fla_ascend.ops.common.tiles.launch_first_fitting`).
    Elsewhere (the interpreter) one candidate, ``BV = min(64, dot_dim(V))``. A ``BV`` above
    ``dot_dim(V)`` is clipped to it (and duplicates dropped).

    Raises:
        ValueError: the CUDA table entry's ``num_stages`` is below 1.
    """
    fit = npu_tiles(tiles, chunk_size, x, {"BV": [64, 32, 16]}, BK=dot_dim(K))
    if fit is not None and gk and stage == "fwd_h" and K > 128:
        fit["BV"] = min(fit["BV"], NPU_GK_WIDE_K_BV["A5" if get_chip().compile_on_910_95 else "A2"])
    if fit is not None:
        return [(min(fit["BV"], dot_dim(V)), backend.launch_options(multibuffer=fit.get("multibuffer")))]
    if not backend.is_cuda_compiled():
        return [(min(64, dot_dim(V)), {})]
    entry = cuda_launch(_stage_name(stage, gk))
    stages = entry["num_stages"]
    if isinstance(stages, Mapping):  # largest dot_dim(K) served -> stages
        stages = stages[min((k for k in stages if k >= dot_dim(K)), default=max(stages))]
    if stages < 1:
        raise ValueError(f"CUDA_LAUNCH[{_stage_name(stage, gk)!r}]['num_stages'] must be >= 1, got {stages}")
    table = sorted(entry["bv"], reverse=True)
    first = next((bv for bv in table if N * HV * cdiv(V, bv) >= backend.num_cores("cube")), table[-1])
    widths = [bv for bv in sorted(set(table) | {16}, reverse=True) if bv <= first]
    out = []
    for bv in dict.fromkeys(min(bv, dot_dim(V)) for bv in widths):
        out += [(bv, backend.launch_options(num_warps=entry["num_warps"], num_stages=ns))
                for ns in range(stages, 0, -1)]
    return out


def chunk_fwd_h(
    k: torch.Tensor,
    w: torch.Tensor,
    u: torch.Tensor,
    g_cum: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    N: int,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    chunk_offsets: torch.Tensor | None = None,
    gk: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Run the state recurrence over all chunks.

    Args:
        k: ``[B, T, H, K]``; w: ``[B, T, HV, K]``; u: ``[B, T, HV, V]``; g_cum: ``[HV, B * T]`` fp32,
            or with ``gk`` a decay per key channel ``[B, T, HV, K]`` fp32 (KDA: the state's rows decay
            by ``exp(G_last)``, of which only the chunks' last rows are read, and ``k`` is the
            pre-scaled ``k exp(G_last - G)`` ``[B, T, HV, K]``, from
            :func:`fla_ascend.ops.kda.intra.kda_wy_fwd`).
        chunk_size, n_chunks: ``BT`` and the total number of chunks.
        N: number of sequences (``B``, or ``len(cu_seqlens) - 1``).
        initial_state: ``[N, HV, K, V]`` (any float dtype; read as fp32) or ``None``.
        output_final_state: also return the final state.
        cu_seqlens, chunk_offsets: varlen boundaries and cumulative chunk counts ``[N + 1]``.

    Returns:
        ``(h, v_new, final_state)``: ``h`` ``[n_chunks, HV, K, V]`` in k's dtype (state at each
        chunk's start), ``v_new`` like ``u``, ``final_state`` ``[N, HV, K, V]`` fp32 or ``None``.
    """
    B, T, H, K = k.shape
    HV, V = u.shape[2], u.shape[3]
    h = torch.empty(n_chunks, HV, K, V, dtype=k.dtype, device=k.device)
    v_new = torch.empty_like(u)
    ht = torch.empty(N, HV, K, V, dtype=torch.float32, device=k.device) if output_final_state else None
    def launch(cfg):
        BV, options = cfg
        n_tasks = N * HV * cdiv(V, BV)
        plan = task_plan(n_tasks, "cube")
        chunk_fwd_h_kernel[plan.grid](
            k=k, w=w, u=u, g_cum=g_cum, h=h, v_new=v_new, h0=initial_state, ht=ht,
            cu_seqlens=cu_seqlens, chunk_offsets=chunk_offsets,
            T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_tasks, n_programs=plan.n_programs,
            H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=dot_dim(K), BV=BV,
            USE_INITIAL_STATE=initial_state is not None, STORE_FINAL_STATE=output_final_state,
            IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
            F32_CHAIN=f32_dot_chain(chunk_size, BV),
            GK=gk, **options,
        )

    launch_first_fitting(_stage_name("fwd_h", gk), (k.device, k.dtype, K, V, chunk_size, gk),
                         _state_launches("fwd_h", N, HV, K, V, FWD_H_TILES, chunk_size, k, gk), launch,
                         what=f"K={K}, V={V}, {k.dtype}, chunk_size={chunk_size}")
    return h, v_new, ht


@triton.jit
def _chunk_bwd_dh_task(
    i_task, q, k, w, g_cum, do, dv_local, dh, dv_new, dht, dh0, cu_seqlens, chunk_offsets, scale, T, NT, TT,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_FINAL_STATE_GRADIENT: tl.constexpr, USE_INITIAL_STATE: tl.constexpr, IS_VARLEN: tl.constexpr,
    F32_CHAIN: tl.constexpr, GK: tl.constexpr,
):
    NV = tl.cdiv(V, BV)
    i_n = i_task // (HV * NV)
    i_hv = (i_task // NV) % HV
    i_v = i_task % NV
    i_h = i_hv // (HV // H)
    bos, eos, boc = seq_bounds(i_n, cu_seqlens, chunk_offsets, T, NT, IS_VARLEN)
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_h = m_k[:, None] & m_v[None, :]
    p_state = o_k[:, None] * V + o_v[None, :]
    state_base = (tl.cast(i_n, tl.int64) * HV + i_hv) * K * V
    b_dh = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_FINAL_STATE_GRADIENT:
        b_dh += tl.load(dht + state_base + p_state, mask=m_h, other=0.0).to(tl.float32)
    NT_n = tl.cdiv(eos - bos, BT)
    for i_r in range(0, NT_n):
        i_t = NT_n - 1 - i_r
        t0 = bos + i_t * BT
        m_t = o_t < eos - t0
        tl.store(dh + ((boc + i_t) * HV + i_hv) * K * V + p_state, b_dh.to(dh.dtype.element_ty), mask=m_h)
        m_tk = m_t[:, None] & m_k[None, :]
        p_qk = (t0 * H + i_h) * K + o_t[:, None] * (H * K) + o_k[None, :]
        b_k = tl.load(k + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        p_v = (t0 * HV + i_hv) * V + o_t[:, None] * (HV * V) + o_v[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_q = tl.load(q + p_qk, mask=m_tk, other=0.0)  # [BT, BK]
        if GK:  # a decay per key channel (KDA): g_cum is [B * T, HV, K], k and q pre-scaled
            b_dv = dot_chained(b_k, b_dh, F32_CHAIN) + tl.load(dv_local + p_v, mask=m_tv, other=0.0)  # [BT, BV]
            b_qd = b_q
            b_decay = tl.exp(gk_last(g_cum, t0, eos, o_k, m_k, i_hv, HV, K, BT))[:, None]  # [BK, 1]
        else:
            p_gate = tl.cast(i_hv, tl.int64) * TT + t0
            b_g = tl.load(g_cum + p_gate + o_t, mask=m_t, other=0.0)  # [BT]
            b_g_last = tl.load(g_cum + p_gate + tl.minimum(BT, eos - t0) - 1)
            # the decay scales the dot's rows after it, so k enters the dot as loaded (H200, B8 T2048:
            # 0.539 -> 0.328 ms with 3 pipeline stages; presumably k then stays in the pipelined
            # shared-memory buffer, not checked in the SASS: cases.md)
            # F32_CHAIN: A5 with 16-wide V blocks (tiles.f32_dot_chain)
            b_dv = dot_chained(b_k, b_dh, F32_CHAIN) * tl.where(m_t, tl.exp(b_g_last - b_g), 0.0)[:, None] \
                + tl.load(dv_local + p_v, mask=m_tv, other=0.0)  # [BT, BV]
            b_qd = (b_q * (tl.exp(b_g) * scale)[:, None]).to(b_q.dtype)
            b_decay = tl.exp(b_g_last)
        tl.store(dv_new + p_v, b_dv.to(dv_new.dtype.element_ty), mask=m_tv)
        b_do = tl.load(do + p_v, mask=m_tv, other=0.0)  # [BT, BV]
        b_w = tl.load(w + (t0 * HV + i_hv) * K + o_t[:, None] * (HV * K) + o_k[None, :], mask=m_tk, other=0.0)
        b_dh = b_dh * b_decay + tl.dot(tl.trans(b_qd), b_do.to(b_qd.dtype)) \
            - dot_chained(tl.trans(b_w), b_dv, F32_CHAIN)
    if USE_INITIAL_STATE:
        tl.store(dh0 + state_base + p_state, b_dh, mask=m_h)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_bwd_dh_kernel(
    q, k, w, g_cum, do, dv_local, dh, dv_new, dht, dh0, cu_seqlens, chunk_offsets, scale, T, NT, TT,
    n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_FINAL_STATE_GRADIENT: tl.constexpr, USE_INITIAL_STATE: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr, F32_CHAIN: tl.constexpr = False, GK: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_bwd_dh_task(i_task, q, k, w, g_cum, do, dv_local, dh, dv_new, dht, dh0, cu_seqlens,
                               chunk_offsets, scale, T, NT, TT, H, HV, K, V, BT, BK, BV,
                               USE_FINAL_STATE_GRADIENT, USE_INITIAL_STATE, IS_VARLEN, F32_CHAIN, GK)
    else:
        _chunk_bwd_dh_task(tl.program_id(0), q, k, w, g_cum, do, dv_local, dh, dv_new, dht, dh0, cu_seqlens,
                           chunk_offsets, scale, T, NT, TT, H, HV, K, V, BT, BK, BV,
                           USE_FINAL_STATE_GRADIENT, USE_INITIAL_STATE, IS_VARLEN, F32_CHAIN, GK)


def chunk_bwd_dh(
    q: torch.Tensor,
    k: torch.Tensor,
    w: torch.Tensor,
    g_cum: torch.Tensor,
    do: torch.Tensor,
    dv_local: torch.Tensor,
    scale: float,
    chunk_size: int,
    n_chunks: int,
    N: int,
    dht: torch.Tensor | None,
    need_dh0: bool,
    cu_seqlens: torch.Tensor | None = None,
    chunk_offsets: torch.Tensor | None = None,
    dv_dtype: torch.dtype = torch.float32,
    gk: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Reverse state recurrence of the backward pass.

    With ``dH`` the gradient of the state after a chunk (``dht`` after the last one)::

        dv' = dv_local + (k exp(G_last - G)) dH
        dH  <- exp(G_last) dH + scale (q exp(G))^T do - w^T dv'

    Args:
        q, k: ``[B, T, H, K]``; w: ``[B, T, HV, K]``; g_cum: ``[HV, B * T]`` fp32;
        do: ``[B, T, HV, V]``; dv_local: ``[B, T, HV, V]`` fp32 (in-chunk part of dv').
        dht: ``[N, HV, K, V]`` gradient of the final state, or ``None``.
        need_dh0: return the gradient of the initial state.
        dv_dtype: the dtype ``dv_new`` is stored in: its consumers' operand dtype
            (:func:`fla_ascend.ops.common.wy.dv_operand_dtype`; both feed it only to dots).
        gk: ``g_cum`` is a decay per key channel ``[B, T, HV, K]`` fp32 (KDA; :func:`chunk_fwd_h`):
            then ``k`` is ``k exp(G_last - G)`` and ``q`` is ``scale q exp(G)``, both ``[B, T, HV, K]``
            (:func:`fla_ascend.ops.kda.intra.kda_wy_fwd`), and ``scale`` is not read.

    Returns:
        ``(dh, dv_new, dh0)``: ``dh`` ``[n_chunks, HV, K, V]`` in k's dtype (gradient of the state
        after each chunk), ``dv_new`` ``[B, T, HV, V]`` in ``dv_dtype`` (full gradient of v'), ``dh0``
        ``[N, HV, K, V]`` fp32 or ``None``.
    """
    B, T, H, K = k.shape
    HV, V = do.shape[2], do.shape[3]
    dh = torch.empty(n_chunks, HV, K, V, dtype=k.dtype, device=k.device)
    dv_new = torch.empty(B, T, HV, V, dtype=dv_dtype, device=k.device)
    dh0 = torch.empty(N, HV, K, V, dtype=torch.float32, device=k.device) if need_dh0 else None
    def launch(cfg):
        BV, options = cfg
        n_tasks = N * HV * cdiv(V, BV)
        plan = task_plan(n_tasks, "cube")
        chunk_bwd_dh_kernel[plan.grid](
            q=q, k=k, w=w, g_cum=g_cum, do=do, dv_local=dv_local, dh=dh, dv_new=dv_new, dht=dht, dh0=dh0,
            cu_seqlens=cu_seqlens, chunk_offsets=chunk_offsets, scale=scale,
            T=T, NT=cdiv(T, chunk_size), TT=B * T, n_tasks=n_tasks, n_programs=plan.n_programs,
            H=H, HV=HV, K=K, V=V, BT=chunk_size, BK=dot_dim(K), BV=BV,
            USE_FINAL_STATE_GRADIENT=dht is not None, USE_INITIAL_STATE=need_dh0,
            IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
            F32_CHAIN=f32_dot_chain(chunk_size, BV),
            GK=gk, **options,
        )

    launch_first_fitting(_stage_name("bwd_dh", gk), (k.device, k.dtype, dv_local.dtype, dv_dtype, K, V, chunk_size, gk),
                         _state_launches("bwd_dh", N, HV, K, V, BWD_DH_TILES, chunk_size, k, gk), launch,
                         what=f"K={K}, V={V}, {k.dtype}, chunk_size={chunk_size}")
    return dh, dv_new, dh0
