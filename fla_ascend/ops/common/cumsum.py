"""Stage 1: in-chunk cumulative sum of the log-space gate, fused with the GatedDeltaNet gate
activation, and the time-contiguous re-layout of gates and beta.

Reads ``g`` and ``beta`` ``[B, T, HV]`` (head-contiguous, one contiguous ``[BT, HV]`` tile per
chunk) and writes both as ``[HV, B * T]`` float32, time-contiguous: every later stage reads
gates along T with stride 1, which Ascend needs (a strided gate load is a strided DMA,
measured 10-35x slower by flash-linear-attention) and which coalesces on GPUs too.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend.backend import launch_options
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.tiling import task_plan


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
        # softplus with torch's threshold 20: x above it is returned as is
        b_sp = tl.where(b_g > 20.0, b_g, tl.log(1.0 + tl.exp(tl.minimum(b_g, 20.0))))
        b_g = tl.where(m, -tl.exp(b_A)[None, :] * b_sp, 0.0)
    b_g = tl.cumsum(b_g, axis=0)
    p_out = o_h[None, :].to(tl.int64) * TT + t0 + o_t[:, None]
    tl.store(g_cum + p_out, b_g, mask=m)
    tl.store(beta_t + p_out, b_beta, mask=m)


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
        T=T, NT=triton.cdiv(T, chunk_size), TT=TT, n_tasks=n_chunks, n_programs=plan.n_programs,
        HV=HV, BT=chunk_size, BH=triton.next_power_of_2(HV),
        USE_GATE=A_log is not None, HAS_DT_BIAS=dt_bias is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=4),
    )
    return g_cum, beta_t
