"""L2 normalisation over the last dimension: ``y = x / sqrt(sum(x^2) + eps)``.

Used by GatedDeltaNet on ``q`` and ``k`` (``use_qk_l2norm_in_kernel=True``). Rows are
independent: a task is a block of ``BM`` rows, each held whole (``BD = next_pow2(D)``,
``D <= 8192``) so one load and one store per element suffice. The forward keeps the
per-row ``rstd = 1 / sqrt(sum(x^2) + eps)`` in float32 for the backward:
``dx = rstd * (dy - y * sum(dy * y))`` with ``y = x * rstd``.
"""
from __future__ import annotations

from types import MappingProxyType

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.utils.autograd import kernel_backward
from fla_ascend.ops.utils.validation import FLOAT_DTYPES, check_eps, check_same_device, check_tensor, op_errors
from fla_ascend.tiling import check_int32_offsets, task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2

MAX_D = 8192
"""Largest last dimension a row tile holds (rows up to D = 8192 are supported)."""

# Elements of one float32 [BM, BD] tile. Live tiles per task: about 3 (x, y / dy, product),
# each charged twice by Ascend's automatic multibuffer: 3 x 8192 x 4 B x 2 = 192 KiB would be the
# whole UB of an A2/A3 vector core (docs/ascend-rules.md, R4), so tiles stay at 4096 elements where D allows.
_TILE_ELEMS = 4096
CUDA_TILES = MappingProxyType({"tile_elems": 1024, "rows": None, "num_warps": None})
"""l2norm's off-NPU launch: ``tile_elems``, the elements of a task's tile on CUDA; ``rows`` (rows
per task) and ``num_warps``, ``None``: derived (:func:`row_block`; 4 warps up to ``BD = 2048``, else
8). Read-only; overridden through the active target (``Target.overrides["l2norm"]``), where ``rows``
applies under the interpreter too. The tile: H200 A/B in one process (``benchmarks/tune_tiles.py``,
cases.md) at B8 T2048 H32 K128: 8 rows (1024 elements) 0.069 ms forward, 0.260 ms forward+backward;
32 rows 0.122 / 0.456 ms. A later side-by-side run (one process per case) measured 0.077 / 0.593 ms
with 8 rows: the forward gain held there, the forward+backward one is not confirmed."""


def check_rows(x: object) -> int:
    """``x`` of a row-wise norm: a float tensor ``[..., D]`` with ``1 <= D <= MAX_D``; returns ``D``.

    Raises:
        TypeError: not a float tensor.
        ValueError: no dimension, ``D`` out of range, or not on the kernels' device.
    """
    check_tensor("x", x)
    check_same_device(x=x)
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension [..., D], got a 0-dim tensor")
    D = x.shape[-1]
    if not 1 <= D <= MAX_D:
        raise ValueError(f"x's last dimension D must be in [1, {MAX_D}], got {D}")
    return D


def norm_launch(op: str, table, D: int, cuda_tile_elems: int = _TILE_ELEMS) -> tuple[int, int, int]:
    """``(BM, BD, num_warps)`` of a row-norm launch: :func:`row_block` for ``cuda_tile_elems``,
    then the active target's overrides of launch table ``op`` (``table`` is the module's
    ``CUDA_TILES``): ``rows`` off the NPU, ``num_warps`` (CUDA only; 4 up to ``BD = 2048``, else 8)."""
    t = backend.table(op, table)
    BM, BD = row_block(D, cuda_tile_elems)
    if t["rows"] is not None and backend.device_type() != "npu":
        BM = t["rows"]
    return BM, BD, t["num_warps"] or (4 if BD <= 2048 else 8)


def row_block(D: int, cuda_tile_elems: int = _TILE_ELEMS) -> tuple[int, int]:
    """``(BM, BD)``: rows per task and the padded row width for a row length ``D``; a task holds
    about ``_TILE_ELEMS`` elements (the UB budget above), or ``cuda_tile_elems`` on a CUDA GPU."""
    BD = next_pow2(D)
    elems = cuda_tile_elems if backend.is_cuda_compiled() else _TILE_ELEMS
    BM = max(1, elems // BD)
    return BM, BD


@triton.jit
def _l2norm_fwd_task(i_m, x, y, rstd, M, D, eps, BM: tl.constexpr, BD: tl.constexpr):
    r0 = tl.cast(i_m, tl.int64) * BM
    o_r = tl.arange(0, BM)
    o_d = tl.arange(0, BD)
    m_r = o_r < M - r0
    m_d = o_d < D
    m = m_r[:, None] & m_d[None, :]
    p = r0 * D + o_r[:, None] * D + o_d[None, :]
    b_x = tl.load(x + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD]
    b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) + eps)  # [BM]
    tl.store(y + p, (b_x * b_rstd[:, None]).to(y.dtype.element_ty), mask=m)
    tl.store(rstd + r0 + o_r, b_rstd, mask=m_r)


@triton.jit(do_not_specialize=["M", "eps", "n_tasks", "n_programs"])
def l2norm_fwd_kernel(
    x, y, rstd, M, D, eps, n_tasks, n_programs,
    BM: tl.constexpr, BD: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_m in tl.range(tl.program_id(0), n_tasks, n_programs):
            _l2norm_fwd_task(i_m, x, y, rstd, M, D, eps, BM, BD)
    else:
        _l2norm_fwd_task(tl.program_id(0), x, y, rstd, M, D, eps, BM, BD)


@triton.jit
def _l2norm_bwd_task(i_m, x, rstd, dy, dx, M, D, BM: tl.constexpr, BD: tl.constexpr):
    r0 = tl.cast(i_m, tl.int64) * BM
    o_r = tl.arange(0, BM)
    o_d = tl.arange(0, BD)
    m_r = o_r < M - r0
    m_d = o_d < D
    m = m_r[:, None] & m_d[None, :]
    p = r0 * D + o_r[:, None] * D + o_d[None, :]
    b_rstd = tl.load(rstd + r0 + o_r, mask=m_r, other=0.0)  # [BM]
    b_y = tl.load(x + p, mask=m, other=0.0).to(tl.float32) * b_rstd[:, None]  # [BM, BD]
    b_dy = tl.load(dy + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD]
    b_dot = tl.sum(b_dy * b_y, axis=1)  # [BM]
    b_dx = (b_dy - b_y * b_dot[:, None]) * b_rstd[:, None]  # [BM, BD]
    tl.store(dx + p, b_dx.to(dx.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["M", "n_tasks", "n_programs"])
def l2norm_bwd_kernel(
    x, rstd, dy, dx, M, D, n_tasks, n_programs,
    BM: tl.constexpr, BD: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    """``dx`` of ``BM`` whole rows per task. UB on an A2/A3 vector core (bishengir-compile,
    Ascend910B2, bf16, 2026-12-01): 107360-109952 B (55%) up to D = 1024, but 180292 B (92%) at
    D = 8192, where one task is a single 8192-wide row and its float32 copies of ``x``, ``dy`` and
    ``dx`` are live together; it fits, and it plans beside a reserved 10% of the UB (the check's
    reservation probe, 2026-12-07). Column blocks (as the gated RMSNorm backward) would free it."""
    if TASK_LOOP:
        for i_m in tl.range(tl.program_id(0), n_tasks, n_programs):
            _l2norm_bwd_task(i_m, x, rstd, dy, dx, M, D, BM, BD)
    else:
        _l2norm_bwd_task(tl.program_id(0), x, rstd, dy, dx, M, D, BM, BD)


def l2norm_fwd(x: torch.Tensor, eps: float,
               output_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the forward on ``x`` ``[M, D]`` (contiguous). Returns ``(y [M, D] in output_dtype
    (default x.dtype), rstd [M] float32)``."""
    M, D = x.shape
    BM, BD, num_warps = norm_launch("l2norm", CUDA_TILES, D, backend.table("l2norm", CUDA_TILES)["tile_elems"])
    y = torch.empty_like(x, dtype=output_dtype or x.dtype)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    plan = task_plan(cdiv(M, BM), "vector")
    l2norm_fwd_kernel[plan.grid](
        x=x, y=y, rstd=rstd, M=M, D=D, eps=float(eps), n_tasks=plan.n_tasks, n_programs=plan.n_programs,
        BM=BM, BD=BD, TASK_LOOP=plan.task_loop, **launch_options(num_warps=num_warps),
    )
    return y, rstd


def l2norm_bwd(x: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Launch the backward: ``x``, ``dy`` ``[M, D]`` contiguous, ``rstd`` ``[M]`` float32.
    Returns ``dx`` ``[M, D]`` in ``x.dtype``."""
    M, D = x.shape
    BM, BD, num_warps = norm_launch("l2norm", CUDA_TILES, D, backend.table("l2norm", CUDA_TILES)["tile_elems"])
    dx = torch.empty_like(x)
    plan = task_plan(cdiv(M, BM), "vector")
    l2norm_bwd_kernel[plan.grid](
        x=x, rstd=rstd, dy=dy, dx=dx, M=M, D=D, n_tasks=plan.n_tasks, n_programs=plan.n_programs,
        BM=BM, BD=BD, TASK_LOOP=plan.task_loop, **launch_options(num_warps=num_warps),
    )
    return dx


class L2NormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, eps: float, output_dtype: torch.dtype | None = None):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        y, rstd = l2norm_fwd(x2, eps, output_dtype)
        ctx.save_for_backward(x2, rstd)
        ctx.shape = shape
        return y.view(shape)

    @staticmethod
    @kernel_backward("l2norm")
    def backward(ctx, dy: torch.Tensor):
        x2, rstd = ctx.saved_tensors
        dy2 = dy.reshape(x2.shape).contiguous()
        dx = l2norm_bwd(x2, rstd, dy2)
        return dx.view(ctx.shape), None, None


def l2norm(x: torch.Tensor, eps: float = 1e-6, output_dtype: torch.dtype | None = None) -> torch.Tensor:
    """L2-normalise ``x`` over its last dimension: ``y = x / sqrt(sum(x^2, -1) + eps)``.

    Same name and rule as flash-linear-attention's ``l2norm`` (eps inside the square root).
    Differentiable (autograd); the backward is a Triton kernel too.

    Args:
        x: ``[..., D]``, float32 / float16 / bfloat16, any leading shape, ``1 <= D <= 8192``.
            Non-contiguous input is copied once.
        eps: added to the sum of squares, float >= 0. Default ``1e-6``.
        output_dtype: dtype of ``y`` (float32 / float16 / bfloat16); default ``x``'s. The kernel
            stores it directly (no extra cast pass); the gradient comes back in ``x``'s dtype.

    Returns:
        ``y`` with the shape of ``x``, in ``output_dtype`` (computed in float32).

    Raises (messages start with ``l2norm:``):
        TypeError: ``x`` not a float tensor, ``eps`` not a number, ``output_dtype`` not a float dtype.
        ValueError: ``x`` has no dimension, ``D`` is 0 or above 8192, ``eps`` negative, or ``x``
            has 2**31 elements or more.
    """
    with op_errors("l2norm"):
        check_rows(x)
        eps = check_eps(eps)
        if output_dtype is not None and output_dtype not in FLOAT_DTYPES:
            raise TypeError(f"output_dtype must be one of {[str(d) for d in FLOAT_DTYPES]} or None, got {output_dtype}")
        check_int32_offsets("x", x.numel())
    if x.numel() == 0:
        return x.clone().to(output_dtype or x.dtype)
    return L2NormFunction.apply(x, eps, output_dtype)


l2_norm = l2norm
"""flash-linear-attention's second name of :func:`l2norm`."""
