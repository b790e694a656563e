"""Stage 1: in-chunk cumulative sum of the log-space gate, fused with the GatedDeltaNet gate
activation, and the time-contiguous re-layout of gates and beta.

Reads ``g`` and ``beta`` ``[B, T, HV]`` (head-contiguous, one contiguous ``[BT, HV]`` tile per
chunk) and writes both as ``[HV, B * T]`` float32, time-contiguous: every later stage reads
gates along T with stride 1, which Ascend needs (a strided gate load is a strided DMA,
measured 10-35x slower by flash-linear-attention) and which coalesces on GPUs too.
"""
from __future__ import annotations

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.utils.math import sigmoid, softplus
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2

GATE_FLOOR = -110.0
"""Per-token log decays below this are replaced by it before the in-chunk cumsum (``-inf``
included; NaN is kept). Exact in float32: ``exp(x)`` for ``x <= -104`` is below half the smallest
float32 subnormal (``2^-150``), so the decay across such a token rounds to exactly 0 either way,
and every later stage only ever sees ``exp`` of a cumulative difference that spans it
(``<= GATE_FLOOR``). Without the floor one ``g = -inf`` makes ``G_i - G_j = -inf - (-inf)``
(NaN for the whole chunk and, through the state, the rest of the sequence), and a finite
``g = -1e30`` leaves nothing of the other gates in ``G`` (fp32 cancellation). The gradient of a
floored token is 0, as the exact one is (``d exp(g) / dg = exp(g) = 0``)."""
_GATE_FLOOR = tl.constexpr(GATE_FLOOR)


@triton.jit
def _chunk_gate_cumsum_task(
    i_c, g, beta, A_log, dt_bias, g_cum, beta_t, chunk_indices, cu_seqlens, T, NT, TT,
    HV: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    o_h = tl.arange(0, BH)
    m_t = o_t < eos - t0
    m_h = o_h < HV
    m = m_t[:, None] & m_h[None, :]
    p_in = t0 * HV + o_t[:, None] * HV + o_h[None, :]
    b_g = tl.load(g + p_in, mask=m, other=0.0).to(tl.float32)  # [BT, BH]
    b_beta = tl.load(beta + p_in, mask=m, other=0.0).to(tl.float32)  # [BT, BH]
    if USE_GATE:
        b_A = tl.load(A_log + o_h, mask=m_h, other=0.0).to(tl.float32)  # [BH]
        if HAS_DT_BIAS:
            b_g = b_g + tl.load(dt_bias + o_h, mask=m_h, other=0.0).to(tl.float32)[None, :]
        # softplus with torch's threshold 20, accurate for very negative x (ops.utils.math)
        b_sp = softplus(b_g)
        b_g = tl.where(m, -tl.exp(b_A)[None, :] * b_sp, 0.0)
    # floored tokens (a reset of the state) are counted apart from the other gates and added once
    # per position, so a reset costs the rest of the chunk one rounding at |G| ~ 110, not a
    # running sum carried at that magnitude
    m_floor = b_g < _GATE_FLOOR  # NaN stays NaN
    b_g = tl.cumsum(tl.where(m_floor, 0.0, b_g), axis=0) \
        + tl.cumsum(tl.where(m_floor, 1.0, 0.0), axis=0) * _GATE_FLOOR  # [BT, BH]
    # store [BH, BT] tiles so the innermost stored axis (T) is contiguous
    p_out = o_h[:, None].to(tl.int64) * TT + t0 + o_t[None, :]
    m_out = m_h[:, None] & m_t[None, :]
    tl.store(g_cum + p_out, tl.trans(b_g), mask=m_out)
    tl.store(beta_t + p_out, tl.trans(b_beta), mask=m_out)


@triton.jit(do_not_specialize=["T", "NT", "TT", "n_tasks", "n_programs"])
def chunk_gate_cumsum_kernel(
    g, beta, A_log, dt_bias, g_cum, beta_t, chunk_indices, cu_seqlens, T, NT, TT, n_tasks, n_programs,
    HV: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_c in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_gate_cumsum_task(i_c, g, beta, A_log, dt_bias, g_cum, beta_t, chunk_indices, cu_seqlens,
                                    T, NT, TT, HV, BT, BH, USE_GATE, HAS_DT_BIAS, IS_VARLEN)
    else:
        _chunk_gate_cumsum_task(tl.program_id(0), g, beta, A_log, dt_bias, g_cum, beta_t, chunk_indices,
                                cu_seqlens, T, NT, TT, HV, BT, BH, USE_GATE, HAS_DT_BIAS, IS_VARLEN)


def chunk_gate_cumsum(
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """In-chunk cumsum of ``g`` (after the gate activation when ``A_log`` is given) and ``beta``
    re-laid out time-contiguous.

    Args:
        g, beta: ``[B, T, HV]``, any float dtype, contiguous.
        chunk_size: ``BT``.
        n_chunks: total chunks over all sequences (``B * cdiv(T, BT)`` or ``len(chunk_indices)``).
        chunk_indices: ``[n_chunks, 2]`` int32 ``(i_n, i_t)`` rows for varlen, else ``None``.
        cu_seqlens: ``[N + 1]`` varlen boundaries, else ``None``.
        A_log, dt_bias: ``[HV]``; with ``A_log`` the activation
            ``-exp(A_log) * softplus(g + dt_bias)`` is applied first.

    Returns:
        ``(g_cum, beta_t)``, both ``[HV, B * T]`` float32.
    """
    B, T, HV = g.shape
    TT = B * T
    g_cum = torch.empty(HV, TT, dtype=torch.float32, device=g.device)
    beta_t = torch.empty_like(g_cum)
    plan = task_plan(n_chunks, "vector")
    chunk_gate_cumsum_kernel[plan.grid](
        g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, g_cum=g_cum, beta_t=beta_t,
        chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        T=T, NT=cdiv(T, chunk_size), TT=TT, n_tasks=n_chunks, n_programs=plan.n_programs,
        HV=HV, BT=chunk_size, BH=next_pow2(HV),
        USE_GATE=A_log is not None, HAS_DT_BIAS=dt_bias is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=4),
    )
    return g_cum, beta_t


@triton.jit
def _chunk_gate_cumsum_bwd_task(
    i_c, g, A_log, dt_bias, dg_parts, dbeta_t, dg, dbeta, dA_log_parts, ddt_bias_parts, chunk_indices, cu_seqlens,
    T, NT, TT, NP,
    HV: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    o_h = tl.arange(0, BH)
    m_t = o_t < eos - t0
    m_h = o_h < HV
    m_ht = m_h[:, None] & m_t[None, :]
    p_ht = o_h[:, None].to(tl.int64) * TT + t0 + o_t[None, :]
    b_dG = tl.zeros([BH, BT], dtype=tl.float32)
    for i_p in range(0, NP):
        b_dG += tl.load(dg_parts + tl.cast(i_p, tl.int64) * HV * TT + p_ht, mask=m_ht, other=0.0)
    # G = cumsum(g) within the chunk  ->  dg = reverse cumsum of dG
    b_dg = tl.sum(b_dG, 1)[:, None] - tl.cumsum(b_dG, axis=1) + b_dG  # [BH, BT]
    m_th = m_t[:, None] & m_h[None, :]
    p_th = t0 * HV + o_t[:, None] * HV + o_h[None, :]
    b_dg = tl.trans(b_dg)  # [BT, BH]
    b_x = tl.load(g + p_th, mask=m_th, other=0.0).to(tl.float32)  # [BT, BH]
    if USE_GATE:
        if HAS_DT_BIAS:
            b_x = b_x + tl.load(dt_bias + o_h, mask=m_h, other=0.0).to(tl.float32)[None, :]
        b_a = tl.exp(tl.load(A_log + o_h, mask=m_h, other=0.0).to(tl.float32))  # [BH]
        b_sp = softplus(b_x)
        # a token the forward floored (GATE_FLOOR) has gradient 0 (also where a * softplus is inf);
        # NaN gates are not floored and keep their NaN gradient
        m_drop = (-b_a[None, :] * b_sp < _GATE_FLOOR) | (m_th == 0)  # [BT, BH]
        b_dx = tl.where(m_drop, 0.0, -b_dg * b_a[None, :] * sigmoid(b_x))
        p_part = tl.cast(i_c, tl.int64) * HV + o_h
        tl.store(dA_log_parts + p_part, tl.sum(tl.where(m_drop, 0.0, -b_dg * b_a[None, :] * b_sp), 0), mask=m_h)
        if HAS_DT_BIAS:
            tl.store(ddt_bias_parts + p_part, tl.sum(b_dx, 0), mask=m_h)
        b_dg = b_dx
    else:
        b_dg = tl.where(b_x < _GATE_FLOOR, 0.0, b_dg)  # floored in the forward: gradient 0
    tl.store(dg + p_th, b_dg.to(dg.dtype.element_ty), mask=m_th)
    b_db = tl.load(dbeta_t + p_ht, mask=m_ht, other=0.0)  # [BH, BT]
    tl.store(dbeta + p_th, tl.trans(b_db).to(dbeta.dtype.element_ty), mask=m_th)


@triton.jit(do_not_specialize=["T", "NT", "TT", "NP", "n_tasks", "n_programs"])
def chunk_gate_cumsum_bwd_kernel(
    g, A_log, dt_bias, dg_parts, dbeta_t, dg, dbeta, dA_log_parts, ddt_bias_parts, chunk_indices, cu_seqlens,
    T, NT, TT, NP, n_tasks, n_programs,
    HV: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_c in tl.range(tl.program_id(0), n_tasks, n_programs):
            _chunk_gate_cumsum_bwd_task(i_c, g, A_log, dt_bias, dg_parts, dbeta_t, dg, dbeta, dA_log_parts,
                                        ddt_bias_parts, chunk_indices, cu_seqlens, T, NT, TT, NP,
                                        HV, BT, BH, USE_GATE, HAS_DT_BIAS, IS_VARLEN)
    else:
        _chunk_gate_cumsum_bwd_task(tl.program_id(0), g, A_log, dt_bias, dg_parts, dbeta_t, dg, dbeta,
                                    dA_log_parts, ddt_bias_parts, chunk_indices, cu_seqlens, T, NT, TT, NP,
                                    HV, BT, BH, USE_GATE, HAS_DT_BIAS, IS_VARLEN)


def chunk_gate_cumsum_bwd(
    g: torch.Tensor,
    beta: torch.Tensor,
    dg_parts: torch.Tensor,
    dbeta_t: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Backward of :func:`chunk_gate_cumsum`: sums the per-stage gate gradients, undoes the
    in-chunk cumsum (a reverse cumsum), applies the gate activation's chain rule and lays
    ``dg`` and ``dbeta`` back out as ``[B, T, HV]``.

    Args:
        g, beta: the op's inputs ``[B, T, HV]`` (``g`` raw when ``A_log`` is given).
        dg_parts: ``[NP, HV, B * T]`` fp32 gradients of the cumulative gate, summed here.
        dbeta_t: ``[HV, B * T]`` fp32.

    Returns:
        ``(dg, dbeta, dA_log, ddt_bias)``: ``dg``/``dbeta`` in g's/beta's dtype; ``dA_log``
        ``[HV]`` fp32 and ``ddt_bias`` ``[HV]`` fp32 (``None`` without ``A_log`` / ``dt_bias``),
        reduced over chunks in a fixed order (deterministic).
    """
    B, T, HV = g.shape
    dg = torch.empty_like(g)
    dbeta = torch.empty_like(beta)
    use_gate = A_log is not None
    dA_log_parts = torch.empty(n_chunks, HV, dtype=torch.float32, device=g.device) if use_gate else None
    ddt_parts = torch.empty(n_chunks, HV, dtype=torch.float32, device=g.device) if dt_bias is not None else None
    plan = task_plan(n_chunks, "vector")
    chunk_gate_cumsum_bwd_kernel[plan.grid](
        g=g, A_log=A_log, dt_bias=dt_bias, dg_parts=dg_parts, dbeta_t=dbeta_t, dg=dg, dbeta=dbeta,
        dA_log_parts=dA_log_parts, ddt_bias_parts=ddt_parts, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        T=T, NT=cdiv(T, chunk_size), TT=B * T, NP=dg_parts.shape[0], n_tasks=n_chunks,
        n_programs=plan.n_programs, HV=HV, BT=chunk_size, BH=next_pow2(HV),
        USE_GATE=use_gate, HAS_DT_BIAS=dt_bias is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=4),
    )
    dA_log = dA_log_parts.sum(0) if use_gate else None
    ddt_bias = ddt_parts.sum(0) if ddt_parts is not None else None
    return dg, dbeta, dA_log, ddt_bias
