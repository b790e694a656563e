"""KDA stage 1: the in-chunk cumulative sum of the per-channel log decay, fused with KDA's gate
activation, and its backward (a reverse cumsum with the activation's chain rule).

Reads ``g`` ``[B, T, HV, K]`` and writes ``G`` ``[B, T, HV, K]`` float32, one ``[BT, BK]`` tile per
(chunk, value head, K block). Decays below :data:`fla_ascend.ops.common.cumsum.GATE_FLOOR` (``-inf``
included) are floored as in the gated delta rule's gate stage, with the same exactness argument.
"""
from __future__ import annotations

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common.chunk_index import chunk_bounds
from fla_ascend.ops.common.cumsum import GATE_FLOOR
from fla_ascend.ops.utils.math import sigmoid, softplus
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2

_GATE_FLOOR = tl.constexpr(GATE_FLOOR)
GATE_BK = 64
"""Widest K block of the gate tiles (``[BT, BK]`` float32)."""
NPU_GATE_BK = 32
"""The K block of the gate stages with the activation in the kernel on an NPU: at ``BK = 64`` and
chunk 64 bishengir-compile plans 175744-191424 B of the 196608 B UB (Ascend910B2, 2026-12-03)."""


@triton.jit
def _gate_tile(i_task, chunk_indices, cu_seqlens, T, NT, HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr,
               BK: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Task ``i_task``'s ``(chunk, value head, K block)``, the K-block count, its K offsets and mask,
    and the ``[BT, BK]`` tile's mask and element offsets into a ``[B * T, HV, K]`` tensor."""
    NK = tl.cdiv(K, BK)
    i_c = i_task // (HV * NK)
    i_hv = (i_task // NK) % HV
    i_kb = i_task % NK
    i_n, i_t, bos, eos = chunk_bounds(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    t0 = bos + i_t * BT
    o_t = tl.arange(0, BT)
    o_k = i_kb * BK + tl.arange(0, BK)
    m_k = o_k < K
    m = (o_t < eos - t0)[:, None] & m_k[None, :]
    return i_c, i_hv, i_kb, NK, o_k, m_k, m, (t0 + o_t)[:, None] * (HV * K) + i_hv * K + o_k[None, :]


@triton.jit
def _gate_input(g, dt_bias, p, m, i_hv, o_k, m_k, K: tl.constexpr, HAS_DT_BIAS: tl.constexpr):
    """The raw gate input tile plus ``dt_bias`` (float32)."""
    b_x = tl.load(g + p, mask=m, other=0.0).to(tl.float32)
    if HAS_DT_BIAS:
        b_x = b_x + tl.load(dt_bias + i_hv * K + o_k, mask=m_k, other=0.0).to(tl.float32)[None, :]
    return b_x


@triton.jit
def _kda_gate_cumsum_task(
    i_task, g, A_log, dt_bias, g_cum, chunk_indices, cu_seqlens, lower_bound, T, NT,
    HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_A: tl.constexpr, HAS_DT_BIAS: tl.constexpr, LOWER_BOUND: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_c, i_hv, i_kb, NK, o_k, m_k, m, p = _gate_tile(i_task, chunk_indices, cu_seqlens, T, NT, HV, K, BT, BK,
                                                    IS_VARLEN)
    if USE_GATE:
        b_x = _gate_input(g, dt_bias, p, m, i_hv, o_k, m_k, K, HAS_DT_BIAS)
        if LOWER_BOUND:
            if HAS_A:
                b_x = b_x * tl.exp(tl.load(A_log + i_hv).to(tl.float32))
            b_g = lower_bound * sigmoid(b_x)
        else:
            b_g = -tl.exp(tl.load(A_log + i_hv).to(tl.float32)) * softplus(b_x)
        b_g = tl.where(m, b_g, 0.0)
    else:
        b_g = tl.load(g + p, mask=m, other=0.0).to(tl.float32)
    # floored decays are counted apart and added once per position (as the gated delta rule's gate stage)
    m_floor = b_g < _GATE_FLOOR  # NaN stays NaN
    b_g = tl.cumsum(tl.where(m_floor, 0.0, b_g), axis=0) + tl.cumsum(tl.where(m_floor, 1.0, 0.0), axis=0) * _GATE_FLOOR
    tl.store(g_cum + p, b_g, mask=m)


@triton.jit(do_not_specialize=["lower_bound", "T", "NT", "n_tasks", "n_programs"])
def kda_gate_cumsum_kernel(
    g, A_log, dt_bias, g_cum, chunk_indices, cu_seqlens, lower_bound, T, NT, n_tasks, n_programs,
    HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_A: tl.constexpr, HAS_DT_BIAS: tl.constexpr, LOWER_BOUND: tl.constexpr,
    IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_gate_cumsum_task(i_task, g, A_log, dt_bias, g_cum, chunk_indices, cu_seqlens, lower_bound, T, NT,
                                  HV, K, BT, BK, USE_GATE, HAS_A, HAS_DT_BIAS, LOWER_BOUND, IS_VARLEN)
    else:
        _kda_gate_cumsum_task(tl.program_id(0), g, A_log, dt_bias, g_cum, chunk_indices, cu_seqlens, lower_bound,
                              T, NT, HV, K, BT, BK, USE_GATE, HAS_A, HAS_DT_BIAS, LOWER_BOUND, IS_VARLEN)


def _gate_bk(K: int, use_gate: bool) -> int:
    npu = use_gate and backend.device_type() == "npu"
    return min(NPU_GATE_BK if npu else GATE_BK, next_pow2(K))


def kda_gate_cumsum(
    g: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    use_gate: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float | None = None,
) -> torch.Tensor:
    """In-chunk cumsum ``G`` of the per-channel log decay (after KDA's gate activation with
    ``use_gate``: ``-exp(A_log) softplus(g + dt_bias)``, or with ``lower_bound``
    ``lower_bound * sigmoid(exp(A_log) (g + dt_bias))``, ``A_log`` optional there;
    :func:`fla_ascend.ops.kda.reference.kda_gate`).

    Args:
        g: ``[B, T, HV, K]``, any float dtype, contiguous.
        chunk_size, n_chunks, chunk_indices, cu_seqlens: the chunking (``n_chunks`` over all sequences).
        A_log: ``[HV]``; dt_bias: ``[HV * K]``; any float dtype, contiguous.

    Returns:
        ``G`` ``[B, T, HV, K]`` float32.
    """
    B, T, HV, K = g.shape
    g_cum = torch.empty(B, T, HV, K, dtype=torch.float32, device=g.device)
    BK = _gate_bk(K, use_gate)
    n_tasks = n_chunks * HV * cdiv(K, BK)
    plan = task_plan(n_tasks, "vector")
    kda_gate_cumsum_kernel[plan.grid](
        g=g, A_log=A_log, dt_bias=dt_bias, g_cum=g_cum, chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        lower_bound=0.0 if lower_bound is None else float(lower_bound),
        T=T, NT=cdiv(T, chunk_size), n_tasks=n_tasks, n_programs=plan.n_programs,
        HV=HV, K=K, BT=chunk_size, BK=BK, USE_GATE=use_gate, HAS_A=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None, LOWER_BOUND=lower_bound is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, **launch_options(num_warps=4),
    )
    return g_cum


@triton.jit
def _kda_gate_cumsum_bwd_task(
    i_task, g, A_log, dt_bias, dG, dg, dA_parts, ddt_parts, chunk_indices, cu_seqlens, lower_bound, T, NT,
    HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_A: tl.constexpr, HAS_DT_BIAS: tl.constexpr, LOWER_BOUND: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_c, i_hv, i_kb, NK, o_k, m_k, m, p = _gate_tile(i_task, chunk_indices, cu_seqlens, T, NT, HV, K, BT, BK,
                                                    IS_VARLEN)
    b_dG = tl.load(dG + p, mask=m, other=0.0)
    b_dg = tl.sum(b_dG, 0)[None, :] - tl.cumsum(b_dG, axis=0) + b_dG  # reverse cumsum over the chunk
    if USE_GATE:
        b_x = _gate_input(g, dt_bias, p, m, i_hv, o_k, m_k, K, HAS_DT_BIAS)
        if LOWER_BOUND:
            if HAS_A:
                b_a = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
                b_z = b_x * b_a
            else:
                b_z = b_x
            b_s = sigmoid(b_z)
            m_drop = (lower_bound * b_s < _GATE_FLOOR) | (m == 0)
            b_dz = tl.where(m_drop, 0.0, b_dg * lower_bound * b_s * (1.0 - b_s))
            if HAS_A:
                b_dx = b_dz * b_a
                tl.store(dA_parts + (tl.cast(i_c, tl.int64) * HV + i_hv) * NK + i_kb, tl.sum(tl.sum(b_dz * b_z, 1), 0))
            else:
                b_dx = b_dz
        else:
            b_a = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
            b_sp = softplus(b_x)
            # a decay the forward floored has gradient 0 (also where a * softplus is inf)
            m_drop = (-b_a * b_sp < _GATE_FLOOR) | (m == 0)
            b_dx = tl.where(m_drop, 0.0, -b_dg * b_a * sigmoid(b_x))
            tl.store(dA_parts + (tl.cast(i_c, tl.int64) * HV + i_hv) * NK + i_kb,
                     tl.sum(tl.sum(tl.where(m_drop, 0.0, -b_dg * b_a * b_sp), 1), 0))
        if HAS_DT_BIAS:
            tl.store(ddt_parts + (tl.cast(i_c, tl.int64) * HV + i_hv) * K + o_k, tl.sum(b_dx, 0), mask=m_k)
        b_dg = b_dx
    else:
        b_x = tl.load(g + p, mask=m, other=0.0).to(tl.float32)
        b_dg = tl.where(b_x < _GATE_FLOOR, 0.0, b_dg)  # floored in the forward: gradient 0
    tl.store(dg + p, b_dg.to(dg.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["lower_bound", "T", "NT", "n_tasks", "n_programs"])
def kda_gate_cumsum_bwd_kernel(
    g, A_log, dt_bias, dG, dg, dA_parts, ddt_parts, chunk_indices, cu_seqlens, lower_bound, T, NT, n_tasks,
    n_programs,
    HV: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_A: tl.constexpr, HAS_DT_BIAS: tl.constexpr, LOWER_BOUND: tl.constexpr,
    IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _kda_gate_cumsum_bwd_task(i_task, g, A_log, dt_bias, dG, dg, dA_parts, ddt_parts, chunk_indices,
                                      cu_seqlens, lower_bound, T, NT, HV, K, BT, BK, USE_GATE, HAS_A, HAS_DT_BIAS,
                                      LOWER_BOUND, IS_VARLEN)
    else:
        _kda_gate_cumsum_bwd_task(tl.program_id(0), g, A_log, dt_bias, dG, dg, dA_parts, ddt_parts, chunk_indices,
                                  cu_seqlens, lower_bound, T, NT, HV, K, BT, BK, USE_GATE, HAS_A, HAS_DT_BIAS,
                                  LOWER_BOUND, IS_VARLEN)


def kda_gate_cumsum_bwd(
    g: torch.Tensor,
    dG: torch.Tensor,
    chunk_size: int,
    n_chunks: int,
    chunk_indices: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    use_gate: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    lower_bound: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Backward of :func:`kda_gate_cumsum`.

    Args:
        g: the op's gate input ``[B, T, HV, K]`` (raw with ``use_gate``).
        dG: ``[B, T, HV, K]`` float32, the gradient of ``G``.

    Returns:
        ``(dg, dA_log, ddt_bias)``: ``dg`` in g's dtype; ``dA_log`` ``[HV]`` and ``ddt_bias``
        ``[HV * K]`` float32 (``None`` when not used), reduced over chunks in a fixed order.
    """
    B, T, HV, K = g.shape
    BK = _gate_bk(K, use_gate)
    NK = cdiv(K, BK)
    dg = torch.empty_like(g)
    has_a = use_gate and A_log is not None
    has_dt = use_gate and dt_bias is not None
    dA_parts = torch.empty(n_chunks, HV, NK, dtype=torch.float32, device=g.device) if has_a else None
    ddt_parts = torch.empty(n_chunks, HV, K, dtype=torch.float32, device=g.device) if has_dt else None
    n_tasks = n_chunks * HV * NK
    plan = task_plan(n_tasks, "vector")
    kda_gate_cumsum_bwd_kernel[plan.grid](
        g=g, A_log=A_log, dt_bias=dt_bias, dG=dG, dg=dg, dA_parts=dA_parts, ddt_parts=ddt_parts,
        chunk_indices=chunk_indices, cu_seqlens=cu_seqlens,
        lower_bound=0.0 if lower_bound is None else float(lower_bound),
        T=T, NT=cdiv(T, chunk_size), n_tasks=n_tasks, n_programs=plan.n_programs,
        HV=HV, K=K, BT=chunk_size, BK=BK, USE_GATE=use_gate, HAS_A=A_log is not None,
        HAS_DT_BIAS=dt_bias is not None, LOWER_BOUND=lower_bound is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, **launch_options(num_warps=4),
    )
    dA_log = dA_parts.sum((0, 2)) if has_a else None
    ddt_bias = ddt_parts.sum(0).reshape(HV * K) if has_dt else None
    return dg, dA_log, ddt_bias
