"""Gated RMSNorm of GatedDeltaNet outputs: ``y = x * rstd * weight (+ bias) * act(g)``.

``rstd = 1 / sqrt(mean(x^2) + eps)`` over the last dimension, ``act`` swish (``g * sigmoid(g)``,
the default) or sigmoid. Rows are independent: a task is ``BM`` whole rows (``D <= 8192``; off
CUDA the backward takes rows wider than 2048 in column blocks). The backward writes ``dx``,
``dg`` and per-task partial sums of ``dweight`` / ``dbias`` that the host reduces with
``torch.sum`` (deterministic, no atomics).
"""
from __future__ import annotations

from types import MappingProxyType

from fla_ascend.backend import launch_options

import torch
import torch.nn as nn
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.norm.l2norm import MAX_D, check_rows, norm_launch
from fla_ascend.ops.utils.autograd import kernel_backward
from fla_ascend.ops.utils.math import sigmoid, silu
from fla_ascend.ops.utils.validation import check_bool, check_eps, check_same_device, check_tensor, op_errors
from fla_ascend.tiling import check_int32_offsets, task_plan
from fla_ascend.tiling.sizes import cdiv
from fla_ascend.tiling.ub import Tile

GATE_ACTIVATIONS = ("swish", "silu", "sigmoid")


CUDA_TILES = MappingProxyType({"fwd_tile_elems": 2048, "rows": None, "num_warps": None})
"""Off-NPU launch: ``fwd_tile_elems``, the forward's tile on CUDA; ``rows`` and ``num_warps`` of
both directions, ``None``: derived (:func:`fla_ascend.ops.norm.l2norm.norm_launch`). Read-only;
overridden through the active target (``Target.overrides["rms_norm_gated"]``). The forward's
tile: 2048 elements (16 rows at D = 128); the backward keeps ``row_block``'s default
(32 rows), which its per-task partial weight gradients prefer. H200 tile A/B (one tile for both
directions, cases.md): 16 rows 0.099 ms forward at B8 T2048 HV32 V128 against 0.113 ms with 32;
32 rows 0.376 ms fwd+bwd against 0.634 with 16. Beside fla, one process per tree: forward 0.151
ms (63% of copy) with 32 rows -> 0.100 ms (95%) with this tile; fwd+bwd unchanged."""


NPU_BWD_TILE_ELEMS = 2048
"""Elements of the backward's ``[BM, BD]`` tile off CUDA (NPU, interpreter). bishengir-compile
(Ascend910B2, bf16) planned 182528-184448 B of the 196608 B UB for 4096-element tiles (32 rows
at D = 128) and overflowed at D = 8192 (245824 B needed for one 8192-wide row): rows wider
than this are processed in ``NDC`` column blocks, two passes (docs/check.md)."""

BWD_TILES = [Tile((8, "BM", "BD"), "fp32", "x, g, dy and their float32 products"),
             Tile((4, "BD"), "fp32", "weight, bias, partial dweight / dbias rows (loop-carried: planned once; "
                  "135296 B at BM = 1, BD = 2048, 2026-12-07)", buffered=False)]
"""Live tiles of the backward for the UB model, calibrated on bishengir-compile's plan
(Ascend910B2, bf16, 2048-element tiles): 130784 B at D = 128, 144256 B at D = 1024, 163940 B at
D = 8192 (four column blocks)."""


@triton.jit
def _rms_gated_fwd_task(
    i_m, x, g, weight, bias, y, rstd, M, D, eps,
    BM: tl.constexpr, BD: tl.constexpr, HAS_G: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    SWISH: tl.constexpr,
):
    r0 = tl.cast(i_m, tl.int64) * BM
    o_r = tl.arange(0, BM)
    o_d = tl.arange(0, BD)
    m_r = o_r < M - r0
    m_d = o_d < D
    m = m_r[:, None] & m_d[None, :]
    p = r0 * D + o_r[:, None] * D + o_d[None, :]
    b_x = tl.load(x + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD]
    b_rstd = 1.0 / tl.sqrt(tl.sum(b_x * b_x, axis=1) / D + eps)  # [BM]
    b_y = b_x * b_rstd[:, None]  # [BM, BD]
    if HAS_WEIGHT:
        b_y = b_y * tl.load(weight + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        b_y = b_y + tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
    if HAS_G:
        b_g = tl.load(g + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD]
        if SWISH:
            b_y = b_y * silu(b_g)
        else:
            b_y = b_y * sigmoid(b_g)
    tl.store(y + p, b_y.to(y.dtype.element_ty), mask=m)
    tl.store(rstd + r0 + o_r, b_rstd, mask=m_r)


@triton.jit(do_not_specialize=["M", "eps", "n_tasks", "n_programs"])
def rms_norm_gated_fwd_kernel(
    x, g, weight, bias, y, rstd, M, D, eps, n_tasks, n_programs,
    BM: tl.constexpr, BD: tl.constexpr, HAS_G: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    SWISH: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    """``y`` and ``rstd`` of ``BM`` whole rows per task. UB on an A2/A3 vector core
    (bishengir-compile, Ascend910B2, bf16, 2026-12-01): 125344-131456 B (64-67%) up to D = 1024,
    but 180388 B (92%) at D = 8192, where one task is a single 8192-wide row (``x``, ``g`` and their
    float32 products live together); it fits, and it plans beside a reserved 10% of the UB (the
    check's reservation probe, 2026-12-07). Column blocks (as the backward) would free it."""
    if TASK_LOOP:
        for i_m in tl.range(tl.program_id(0), n_tasks, n_programs):
            _rms_gated_fwd_task(i_m, x, g, weight, bias, y, rstd, M, D, eps, BM, BD, HAS_G, HAS_WEIGHT, HAS_BIAS,
                                SWISH)
    else:
        _rms_gated_fwd_task(tl.program_id(0), x, g, weight, bias, y, rstd, M, D, eps, BM, BD, HAS_G, HAS_WEIGHT,
                            HAS_BIAS, SWISH)


@triton.jit
def _rms_gated_bwd_tile(x, g, weight, bias, dy, b_rstd, p, m, o_d, m_d, HAS_G: tl.constexpr,
                        HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, SWISH: tl.constexpr):
    """One ``[BM, BD]`` tile of the backward at offsets ``p`` (columns ``o_d``): the normed input
    ``xh``, the gradient ``dn`` of the normed value (through the gate), ``dg`` (``dn`` without a
    gate) and ``dxh``, the gradient of ``xh``."""
    b_xh = tl.load(x + p, mask=m, other=0.0).to(tl.float32) * b_rstd[:, None]  # [BM, BD]
    b_dn = tl.load(dy + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD] gradient of the normed value
    b_dg = b_dn
    if HAS_WEIGHT:
        b_w = tl.load(weight + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
    if HAS_G:
        b_n = b_xh
        if HAS_WEIGHT:
            b_n = b_n * b_w[None, :]
        if HAS_BIAS:
            b_n = b_n + tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
        b_g = tl.load(g + p, mask=m, other=0.0).to(tl.float32)  # [BM, BD]
        b_s = sigmoid(b_g)
        if SWISH:
            b_dg = b_dn * b_n * b_s * (1.0 + b_g * (1.0 - b_s))
            b_dn = b_dn * b_g * b_s
        else:
            b_dg = b_dn * b_n * b_s * (1.0 - b_s)
            b_dn = b_dn * b_s
    b_dxh = b_dn
    if HAS_WEIGHT:
        b_dxh = b_dxh * b_w[None, :]
    return b_xh, b_dn, b_dg, b_dxh


@triton.jit
def _rms_gated_bwd_store(b_xh, b_dn, b_dg, b_dxh, b_c, b_rstd, dg, dw_part, db_part, dx, i_m, p, m, o_d, m_d, D,
                         HAS_G: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """The stores of one tile: ``dg``, the task's partial ``dweight`` / ``dbias`` of columns ``o_d``,
    and ``dx`` (``b_c``: ``sum(dxh * xh) / D`` of each row, over all its columns)."""
    if HAS_G:
        tl.store(dg + p, b_dg.to(dg.dtype.element_ty), mask=m)
    if HAS_WEIGHT:
        tl.store(dw_part + i_m * D + o_d, tl.sum(b_dn * b_xh, axis=0), mask=m_d)
    if HAS_BIAS:
        tl.store(db_part + i_m * D + o_d, tl.sum(b_dn, axis=0), mask=m_d)
    b_dx = (b_dxh - b_xh * b_c[:, None]) * b_rstd[:, None]
    tl.store(dx + p, b_dx.to(dx.dtype.element_ty), mask=m)


@triton.jit
def _rms_gated_bwd_task(
    i_m, x, g, weight, bias, rstd, dy, dx, dg, dw_part, db_part, M, D,
    BM: tl.constexpr, BD: tl.constexpr, NDC: tl.constexpr, HAS_G: tl.constexpr, HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr, SWISH: tl.constexpr,
):
    i_m = tl.cast(i_m, tl.int64)
    r0 = i_m * BM
    o_r = tl.arange(0, BM)
    o_d = tl.arange(0, BD)
    m_r = o_r < M - r0
    b_rstd = tl.load(rstd + r0 + o_r, mask=m_r, other=0.0)  # [BM]
    if NDC == 1:
        # the whole row in one tile
        m_d = o_d < D
        m = m_r[:, None] & m_d[None, :]
        p = r0 * D + o_r[:, None] * D + o_d[None, :]
        b_xh, b_dn, b_dg, b_dxh = _rms_gated_bwd_tile(x, g, weight, bias, dy, b_rstd, p, m, o_d, m_d,
                                                      HAS_G, HAS_WEIGHT, HAS_BIAS, SWISH)
        b_c = tl.sum(b_dxh * b_xh, axis=1) / D  # [BM]
        _rms_gated_bwd_store(b_xh, b_dn, b_dg, b_dxh, b_c, b_rstd, dg, dw_part, db_part, dx, i_m, p, m, o_d, m_d,
                             D, HAS_G, HAS_WEIGHT, HAS_BIAS)
    else:
        # NDC column blocks of BD (wide rows on the NPU, where one row would not fit UB): a first
        # pass sums dxh * xh over the row, a second recomputes each block and stores it
        b_c = tl.zeros([BM], dtype=tl.float32)  # [BM]
        for i_d in tl.range(0, NDC):
            o_dd = i_d * BD + o_d
            m_d = o_dd < D
            m = m_r[:, None] & m_d[None, :]
            p = r0 * D + o_r[:, None] * D + o_dd[None, :]
            b_xh, b_dn, b_dg, b_dxh = _rms_gated_bwd_tile(x, g, weight, bias, dy, b_rstd, p, m, o_dd, m_d,
                                                          HAS_G, HAS_WEIGHT, HAS_BIAS, SWISH)
            b_c += tl.sum(b_dxh * b_xh, axis=1)
        b_c = b_c / D
        for i_d in tl.range(0, NDC):
            o_dd = i_d * BD + o_d
            m_d = o_dd < D
            m = m_r[:, None] & m_d[None, :]
            p = r0 * D + o_r[:, None] * D + o_dd[None, :]
            b_xh, b_dn, b_dg, b_dxh = _rms_gated_bwd_tile(x, g, weight, bias, dy, b_rstd, p, m, o_dd, m_d,
                                                          HAS_G, HAS_WEIGHT, HAS_BIAS, SWISH)
            _rms_gated_bwd_store(b_xh, b_dn, b_dg, b_dxh, b_c, b_rstd, dg, dw_part, db_part, dx, i_m, p, m, o_dd,
                                 m_d, D, HAS_G, HAS_WEIGHT, HAS_BIAS)


@triton.jit(do_not_specialize=["M", "n_tasks", "n_programs"])
def rms_norm_gated_bwd_kernel(
    x, g, weight, bias, rstd, dy, dx, dg, dw_part, db_part, M, D, n_tasks, n_programs,
    BM: tl.constexpr, BD: tl.constexpr, HAS_G: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    SWISH: tl.constexpr, TASK_LOOP: tl.constexpr, NDC: tl.constexpr = 1,
):
    if TASK_LOOP:
        for i_m in tl.range(tl.program_id(0), n_tasks, n_programs):
            _rms_gated_bwd_task(i_m, x, g, weight, bias, rstd, dy, dx, dg, dw_part, db_part, M, D, BM, BD, NDC,
                                HAS_G, HAS_WEIGHT, HAS_BIAS, SWISH)
    else:
        _rms_gated_bwd_task(tl.program_id(0), x, g, weight, bias, rstd, dy, dx, dg, dw_part, db_part, M, D, BM, BD,
                            NDC, HAS_G, HAS_WEIGHT, HAS_BIAS, SWISH)


def rms_norm_gated_fwd(x, g, weight, bias, eps, swish):
    """Launch the forward on ``x`` (and ``g``) ``[M, D]`` contiguous. Returns ``(y, rstd [M] float32)``."""
    M, D = x.shape
    BM, BD, num_warps = norm_launch("rms_norm_gated", CUDA_TILES, D,
                                    backend.table("rms_norm_gated", CUDA_TILES)["fwd_tile_elems"])
    y = torch.empty_like(x)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    plan = task_plan(cdiv(M, BM), "vector")
    rms_norm_gated_fwd_kernel[plan.grid](
        x=x, g=g, weight=weight, bias=bias, y=y, rstd=rstd, M=M, D=D, eps=float(eps), n_tasks=plan.n_tasks,
        n_programs=plan.n_programs, BM=BM, BD=BD, HAS_G=g is not None, HAS_WEIGHT=weight is not None,
        HAS_BIAS=bias is not None, SWISH=swish, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=num_warps),
    )
    return y, rstd


def rms_norm_gated_bwd(x, g, weight, bias, rstd, dy, swish):
    """Launch the backward. Returns ``(dx, dg or None, dweight float32 or None, dbias float32 or None)``."""
    M, D = x.shape
    BM, BD, num_warps = norm_launch("rms_norm_gated", CUDA_TILES, D)
    NDC = 1
    if not backend.is_cuda_compiled() and BM * BD > NPU_BWD_TILE_ELEMS:
        BM, BD = max(1, NPU_BWD_TILE_ELEMS // BD), min(BD, NPU_BWD_TILE_ELEMS)
        NDC = cdiv(D, BD)
    n_tasks = cdiv(M, BM)
    dx = torch.empty_like(x)
    dg = torch.empty_like(g) if g is not None else None
    dw_part = torch.empty(n_tasks, D, dtype=torch.float32, device=x.device) if weight is not None else None
    db_part = torch.empty(n_tasks, D, dtype=torch.float32, device=x.device) if bias is not None else None
    plan = task_plan(n_tasks, "vector")
    rms_norm_gated_bwd_kernel[plan.grid](
        x=x, g=g, weight=weight, bias=bias, rstd=rstd, dy=dy, dx=dx, dg=dg, dw_part=dw_part, db_part=db_part,
        M=M, D=D, n_tasks=plan.n_tasks, n_programs=plan.n_programs, BM=BM, BD=BD, HAS_G=g is not None,
        HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None, SWISH=swish, TASK_LOOP=plan.task_loop, NDC=NDC,
        **launch_options(num_warps=num_warps),
    )
    dw = dw_part.sum(0) if dw_part is not None else None
    db = db_part.sum(0) if db_part is not None else None
    return dx, dg, dw, db


class RMSNormGatedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, weight, bias, eps, swish):
        shape = x.shape
        D = shape[-1]
        x2 = x.reshape(-1, D).contiguous()
        g2 = g.reshape(-1, D).contiguous() if g is not None else None
        y, rstd = rms_norm_gated_fwd(x2, g2, weight, bias, eps, swish)
        ctx.save_for_backward(x2, g2, weight, bias, rstd)
        ctx.swish = swish
        ctx.shape = shape
        return y.view(shape)

    @staticmethod
    @kernel_backward("rms_norm_gated")
    def backward(ctx, dy):
        x2, g2, weight, bias, rstd = ctx.saved_tensors
        dy2 = dy.reshape(x2.shape).contiguous()
        dx, dg, dw, db = rms_norm_gated_bwd(x2, g2, weight, bias, rstd, dy2, ctx.swish)
        shape = ctx.shape
        return (
            dx.view(shape),
            dg.view(shape) if dg is not None else None,
            dw.to(weight.dtype) if dw is not None else None,
            db.to(bias.dtype) if db is not None else None,
            None,
            None,
        )


class RMSNormFunction(RMSNormGatedFunction):
    """:class:`RMSNormGatedFunction` as :func:`rms_norm` calls it (no gate): its double-backward
    refusal names ``rms_norm``."""

    @staticmethod
    @kernel_backward("rms_norm")
    def backward(ctx, dy):
        return RMSNormGatedFunction.backward.__wrapped__(ctx, dy)


def rms_norm_gated(
    x: torch.Tensor,
    g: torch.Tensor | None,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    activation: str = "swish",
    residual: torch.Tensor | None = None,
    prenorm: bool = False,
    residual_in_fp32: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Gated RMSNorm over the last dimension, flash-linear-attention's ``rms_norm_gated`` argument order.

    ``y = x / sqrt(mean(x^2, -1) + eps) * weight + bias``, then times ``g * sigmoid(g)``
    (``activation="swish"`` or ``"silu"``) or ``sigmoid(g)`` (``"sigmoid"``). Math in float32.
    Differentiable in ``x``, ``g``, ``weight`` and ``bias``.

    Args:
        x: ``[..., D]`` float32 / float16 / bfloat16, ``1 <= D <= 8192``.
        g: gate of ``x``'s shape (any float dtype), or ``None`` for a plain RMSNorm.
        weight, bias: ``[D]`` or ``None``.
        activation: ``"swish"`` (default), ``"silu"`` or ``"sigmoid"``.
        residual: ``[..., D]`` like ``x``, or ``None``: the norm reads ``x + residual`` (summed in
            float32), as flash-linear-attention's pre-norm residual path.
        prenorm: also return the sum ``x + residual`` (the next block's residual): in
            ``residual``'s dtype, else float32 with ``residual_in_fp32``, else ``x``'s (``x`` itself
            without a residual).
        residual_in_fp32: without ``residual``, the returned residual is ``x`` in float32.
        eps: float >= 0, default ``1e-6`` as in flash-linear-attention's function (the
            :class:`FusedRMSNormGated` module defaults to ``1e-5``, Qwen3-Next's ``rms_norm_eps``).

    Returns:
        ``y`` with ``x``'s shape and dtype; ``(y, residual_out)`` with ``prenorm``.

    The residual sum is formed with torch ops before the kernel (one extra elementwise pass), not
    inside it.

    Raises (messages start with ``rms_norm_gated:``):
        TypeError: non-tensor / non-float inputs, or ``eps`` not a number.
        ValueError: unknown activation, shape mismatches (``g`` vs ``x``, ``weight``/``bias`` vs ``D``),
            ``D`` out of range, negative ``eps``, tensors on several devices.
    """
    return _rms_norm("rms_norm_gated", x, g, weight, bias, activation, residual, prenorm, residual_in_fp32, eps)


def _rms_norm_gated(x, g, weight, bias, activation, eps, function):
    if x.numel() == 0:  # no rows: an empty y that is still in the graph of every input (zero gradients)
        y = x.clone()
        for t in (g, weight, bias):
            if t is not None:
                y = y + (t.sum() * 0).to(y.dtype)
        return y
    return function.apply(x, g, weight, bias, eps, activation != "sigmoid")


class FusedRMSNormGated(nn.Module):
    """Gated RMSNorm module (flash-linear-attention's ``FusedRMSNormGated``): ``weight`` ``[hidden_size]``
    initialised to ones, no bias; ``forward(x, g)`` calls :func:`rms_norm_gated`.

    Args:
        hidden_size: ``D``, the normalised (last) dimension.
        elementwise_affine: learn ``weight`` (default ``True``).
        eps: default ``1e-5``.
        activation: ``"swish"`` (default), ``"silu"`` or ``"sigmoid"``.

    Raises:
        ValueError: unknown activation or ``hidden_size`` outside ``[1, 8192]``.
        TypeError: ``elementwise_affine`` not a bool.
    """

    def __init__(self, hidden_size: int, elementwise_affine: bool = True, eps: float = 1e-5,
                 activation: str = "swish", device=None, dtype=None) -> None:
        super().__init__()
        if activation not in GATE_ACTIVATIONS:
            raise ValueError(f"FusedRMSNormGated: activation must be one of {GATE_ACTIVATIONS}, got {activation!r}")
        if not 1 <= hidden_size <= MAX_D:
            raise ValueError(f"FusedRMSNormGated: hidden_size must be in [1, {MAX_D}], got {hidden_size}")
        with op_errors("FusedRMSNormGated"):
            elementwise_affine = check_bool("elementwise_affine", elementwise_affine)
        self.hidden_size = hidden_size
        self.elementwise_affine = elementwise_affine
        self.eps = eps
        self.activation = activation
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.ones_(self.weight)

    def extra_repr(self) -> str:
        return f"{self.hidden_size}, eps={self.eps}, activation={self.activation!r}"

    def forward(self, x: torch.Tensor, g: torch.Tensor | None = None, residual=None, prenorm: bool = False,
                residual_in_fp32: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``x``, ``g`` ``[..., hidden_size]`` -> ``[..., hidden_size]`` in ``x.dtype`` (and the
        residual sum with ``prenorm``; see :func:`rms_norm_gated`).

        Raises:
            ValueError: ``x``'s last dimension is not ``hidden_size`` (else as :func:`rms_norm_gated`).
        """
        if isinstance(x, torch.Tensor) and x.dim() and x.shape[-1] != self.hidden_size:
            raise ValueError(f"FusedRMSNormGated: x's last dimension must be hidden_size={self.hidden_size}, "
                             f"got {x.shape[-1]} (x shape {tuple(x.shape)})")
        return rms_norm_gated(x, g, self.weight, self.bias, self.activation, residual, prenorm, residual_in_fp32,
                              self.eps)


def _rms_norm(op, x, g, weight, bias, activation, residual, prenorm, residual_in_fp32, eps):
    """:func:`rms_norm_gated`'s body; errors are prefixed by ``op`` (the public function called)."""
    function = RMSNormFunction if op == "rms_norm" else RMSNormGatedFunction
    with op_errors(op):
        if activation not in GATE_ACTIVATIONS:
            raise ValueError(f"activation must be one of {GATE_ACTIVATIONS}, got {activation!r}")
        D = check_rows(x)
        if g is not None:
            check_tensor("g", g)
            if g.shape != x.shape:
                raise ValueError(f"g must have x's shape {tuple(x.shape)}, got {tuple(g.shape)}")
        if weight is not None:
            check_tensor("weight", weight, shape=(D,))
        if bias is not None:
            check_tensor("bias", bias, shape=(D,))
        eps = check_eps(eps)
        if residual is not None:
            check_tensor("residual", residual)
            if residual.shape != x.shape:
                raise ValueError(f"residual must have x's shape {tuple(x.shape)}, got {tuple(residual.shape)}")
        prenorm, residual_in_fp32 = check_bool("prenorm", prenorm), check_bool("residual_in_fp32", residual_in_fp32)
        check_same_device(x=x, g=g, weight=weight, bias=bias, residual=residual)
        check_int32_offsets("x", x.numel())
    if residual is None and not residual_in_fp32:
        y = _rms_norm_gated(x, g, weight, bias, activation, eps, function)
        return (y, x) if prenorm else y
    total = x.float() if residual is None else x.float() + residual.float()
    residual_out = total.to(residual.dtype if residual is not None else torch.float32)
    y = _rms_norm_gated(total, g, weight, bias, activation, eps, function).to(x.dtype)
    return (y, residual_out) if prenorm else y

def rms_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None = None,
    eps: float = 1e-5,
    prenorm: bool = False,
    residual_in_fp32: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm without a gate, flash-linear-attention's ``rms_norm`` argument order:
    :func:`rms_norm_gated` with ``g=None`` (same kernel, same residual path and errors; messages start
    with ``rms_norm:``)."""
    return _rms_norm("rms_norm", x, None, weight, bias, "swish", residual, prenorm, residual_in_fp32, eps)
