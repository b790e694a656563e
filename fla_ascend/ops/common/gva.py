"""Last backward stage under GVA (``HV > H``): the group sum of per-value-head gradients.

With grouped value attention the ``G = HV / H`` value heads of a group read the same ``q`` and
``k`` head, so ``dq`` and ``dk`` are the sums over the group of what each value head's stages
produce (``[B, T, HV, K]`` float32). This stage adds the ``G`` slices in a fixed order
(``g = 0 .. G - 1``, float32) and stores ``[B, T, H, K]`` in the input dtype, in one pass: one
read of the float32 buffer and one write of the result. On the H200 it replaced a torch
``view(...).sum(3).to(dtype)`` (a reduction kernel and a cast, 0.77 ms of an 8.9 ms fwd+bwd step
at B1 T32768 H16 HV32; cases.md).

A task is ``BM`` rows of ``[B * T * H]`` with the whole (padded) ``K`` on chip.
"""
from __future__ import annotations

import operator
from types import MappingProxyType

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.tiling import check_int32_offsets, task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2
from fla_ascend.tiling.ub import Tile

TILE_ELEMS = 4096
"""Elements of one ``[BM, BK]`` task. UB: bishengir-compile plans 81920 B (five float32 tiles: the
slices loaded, the sum, multi-buffered) of the 196608 B of an A2/A3 vector core (docs/check.md)."""

TILES = MappingProxyType({"tile_elems": TILE_ELEMS})
"""The stage's launch table, every backend: ``tile_elems`` (:data:`TILE_ELEMS`). Read-only; A/Bs
override it through the active target (``Target.overrides["gva_group_sum"]``)."""

GVA_SUM_TILES = [Tile((5, "BM", "BK"), "fp32", "slices of value heads, group sum (bishengir-compile's A2 plan)",
                      buffered=False)]


@triton.jit
def _gva_group_sum_task(i_m, x, y, M, K, G, BM: tl.constexpr, BK: tl.constexpr):
    r0 = tl.cast(i_m, tl.int64) * BM
    o_r = tl.arange(0, BM)
    o_k = tl.arange(0, BK)
    m = (o_r < tl.minimum(M - r0, BM).to(tl.int32))[:, None] & (o_k < K)[None, :]
    # int64 scalar bases, int32 offsets inside the tile (docs/ascend-rules.md, R6)
    x_t = x + r0 * G * K
    p_x = o_r[:, None] * (G * K) + o_k[None, :]  # row r of the task, slice 0 of its group
    b_s = tl.zeros([BM, BK], dtype=tl.float32)
    for i_g in range(0, G):  # fixed order: the sum does not depend on the launch
        b_s += tl.load(x_t + i_g * K + p_x, mask=m, other=0.0).to(tl.float32)  # [BM, BK]
    tl.store(y + r0 * K + o_r[:, None] * K + o_k[None, :], b_s.to(y.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["M", "G", "n_tasks", "n_programs"])
def gva_group_sum_kernel(
    x, y, M, K, G, n_tasks, n_programs, BM: tl.constexpr, BK: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_m in tl.range(tl.program_id(0), n_tasks, n_programs):
            _gva_group_sum_task(i_m, x, y, M, K, G, BM, BK)
    else:
        _gva_group_sum_task(tl.program_id(0), x, y, M, K, G, BM, BK)


def gva_group_sum(x: torch.Tensor, H: int, dtype: torch.dtype) -> torch.Tensor:
    """Sum the value heads of each GVA group: ``y[b, t, h] = sum_g x[b, t, h * G + g]``.

    Args:
        x: ``[B, T, HV, K]`` float32, contiguous; value head ``i`` belongs to key head
            ``i // G`` with ``G = HV / H`` (the GVA rule of ``chunk_gated_delta_rule``).
        H: number of key heads; ``HV`` must be a multiple of it.
        dtype: dtype of the result (the input dtype of ``q`` / ``k``); the sum is float32 and
            rounded once.

    Returns:
        ``[B, T, H, K]`` in ``dtype``.

    Raises:
        TypeError: ``x`` not float32, ``dtype`` not a floating dtype, ``H`` not an int.
        ValueError: ``x`` not 4-D and contiguous, ``H < 1``, ``HV`` not a multiple of ``H``, or a group so
            large that one task's offsets (``BM * G * K``) would not fit in int32.
    """
    if x.dim() != 4 or not x.is_contiguous():
        raise ValueError(f"gva_group_sum: x must be a contiguous [B, T, HV, K] tensor, got shape {tuple(x.shape)}"
                         f" (contiguous={x.is_contiguous()})")
    if x.dtype != torch.float32:
        raise TypeError(f"gva_group_sum: x must be float32 (the per-value-head gradients), got {x.dtype}")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"gva_group_sum: dtype must be a floating torch.dtype, got {dtype!r}")
    try:
        H = operator.index(H)
    except TypeError:
        raise TypeError(f"gva_group_sum: H must be an int, got {H!r}") from None
    B, T, HV, K = x.shape
    if H < 1:
        raise ValueError(f"gva_group_sum: H must be >= 1, got {H}")
    if HV % H:
        raise ValueError(f"gva_group_sum: HV={HV} must be a multiple of H={H}")
    y = torch.empty(B, T, H, K, dtype=dtype, device=x.device)
    M = B * T * H
    if M == 0 or K == 0:
        return y
    BK = next_pow2(K)
    BM = max(1, min(backend.table("gva_group_sum", TILES)["tile_elems"] // BK, next_pow2(M)))
    G = HV // H
    check_int32_offsets(f"gva_group_sum: one task's span of x ({BM} rows x G={G} x K={K})", BM * G * K)
    plan = task_plan(cdiv(M, BM), "vector")
    gva_group_sum_kernel[plan.grid](
        x=x, y=y, M=M, K=K, G=G, n_tasks=plan.n_tasks, n_programs=plan.n_programs, BM=BM, BK=BK,
        TASK_LOOP=plan.task_loop, **launch_options(num_warps=4),
    )
    return y
