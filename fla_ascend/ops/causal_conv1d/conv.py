"""Causal depthwise 1-D convolution (short convolution of GatedDeltaNet / Mamba layers).

flash-linear-attention compatible: ``causal_conv1d`` (forward and backward through autograd)
and ``causal_conv1d_update`` (decode). Semantics are in :mod:`.reference`.

Launch plans and the autograd functions live here; the ``@triton.jit`` kernels, their
live-tile declarations (UB model) and the NPU layout are in :mod:`.kernels`.
"""
from __future__ import annotations

from types import MappingProxyType

from fla_ascend.backend import launch_options

import torch
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.causal_conv1d.cp import conv_initial_state
from fla_ascend.ops.causal_conv1d.kernels import (
    SHIFT_GATHER,
    SHIFT_LOAD,
    SHIFT_SLICE,
    causal_conv1d_bwd_kernel,
    causal_conv1d_fwd_kernel,
    causal_conv1d_states_bwd_kernel,
    causal_conv1d_states_fwd_kernel,
    causal_conv1d_update_kernel,
)
from fla_ascend.ops.cp.context import check_cp_call
from fla_ascend.ops.utils.autograd import kernel_backward
from fla_ascend.ops.utils.index import prepare_chunk_indices
from fla_ascend.ops.utils.validation import (
    MAX_CONV_WIDTH,
    check_bools,
    check_same_device,
    check_tensor,
    check_varlen,
    op_errors,
)
from fla_ascend.tiling import check_int32_offsets, task_plan
from fla_ascend.tiling.grid import MAX_GRID, cuda_max_grid_x
from fla_ascend.tiling.sizes import cdiv, next_pow2

ACTIVATIONS = (None, "silu", "swish")
MAX_W = MAX_CONV_WIDTH
"""Largest kernel width accepted (16; defined as :data:`fla_ascend.ops.utils.validation.MAX_CONV_WIDTH`,
which context parallelism checks too): taps are unrolled (``W`` loads of ``x`` forward; in the
backward ``W - 1`` shifted copies of a tile, and with an activation on compiled CUDA ``2 W`` loads
of ``x``); the backward tile advances by ``BT - (W - 1)`` rows, so wide kernels redo more rows;
widths 2 to 4 are the fast case (Qwen3-Next uses 4)."""


CUDA_TILES = MappingProxyType({"fwd": (32, 128, 4), "bwd": (32, 64, 2), "grid3d": True})
"""Off-NPU ``(BT, BD, num_warps)`` of the forward and the backward sequence kernels, and whether the
CUDA forward takes the 3-D grid (:func:`_grid3d`); read-only, overridden through the active target
(``Target.overrides["causal_conv1d"]``). The tiles are from H200
A/Bs of tiles and warp counts at both conv anchors (``benchmarks/tune_tiles.py --op causal_conv1d``;
cases.md, causal_conv1d): forward at B1 T32768 D8192 0.638 ms with ``[64, 128]`` 4 warps, 0.556 ms
with ``[32, 128]`` (per-tap backward, 2026-11-30); the ``tl.gather`` backward (compiled CUDA) at
fwd+bwd B4 T4096 / B1 T32768 0.654 / 2.347 ms with ``[32, 64]`` 2 warps, against 0.816 / 3.087 for
``[64, 64]`` 8 warps and 0.891 / 3.325 for ``[32, 64]`` 4 warps (2026-11-30). ``BT`` of the
backward must exceed ``MAX_W - 1``: its gather tile advances by ``BT - (W - 1)`` rows, so it computes
``W - 1`` rows twice (3 of 32 at W = 4, 15 of 32 at W = 16; the sweep ran at W = 4 only)."""


NPU_BD, NPU_BT = 64, 64
"""NPU channel tile of both sequence kernels (capped at ``next_pow2(D)``) and the largest token tile;
the token tile is ``NPU_ELEMENTS // BD`` up to ``NPU_BT`` (narrower channel tiles plan more UB per
row: the backward with both states 177504 B at ``[128, 16]``, 89440 B at ``[64, 16]``)."""
NPU_ELEMENTS = MappingProxyType({"plain": 4096, "states": 2048, "states-w1": 1024})
"""Elements of the NPU ``[BT, BD]`` tile: 4096 without states, 2048 with an initial state or a
final-state gradient, whose windows put the 4096-element plans above 90% of the UB of an A2/A3
vector core (:data:`.kernels.FWD_TILES`, :data:`.kernels.BWD_TILES`), 1024 for ``W = 1`` with states
(the backward planned 180352 B, 92%, at ``[32, 64]`` for D 64 and 100). From the compiled plan's
estimate at B4 T4096 D4096 W4 with SiLU on Ascend910B2, constants before the calibration
(``fla-ascend estimate causal_conv1d --shape conv-b4-t4096``; cases.md, causal_conv1d): the
backward 857 us at ``[64, 64]`` against 1024 at ``[32, 64]``, 983 at ``[64, 32]`` and 893 at
``[32, 128]`` (UB 96%); the forward 578 us at
``[64, 64]`` against 720 at ``[16, 128]`` and 513 at ``[64, 128]`` (UB 93%)."""


def _tiles(D: int, stage: str, states: bool = False, W: int = 4) -> tuple[int, int, int]:
    """``(BT, BD, num_warps)``: token and channel tile of the ``stage`` (``"fwd"`` or ``"bwd"``)
    sequence kernel and its warp count (CUDA only).

    NPU: ``BD = min(NPU_BD, next_pow2(D))`` and ``BT = min(NPU_BT, NPU_ELEMENTS / BD)``, the smaller tile when
    the launch reads or writes ``states`` (an initial state, a final-state gradient; smaller again
    for kernel width ``W = 1``). Elsewhere
    :data:`CUDA_TILES` (with the active target's overrides).
    """
    if backend.device_type() == "npu":
        BD = min(NPU_BD, next_pow2(D))
        kind = ("states-w1" if W == 1 else "states") if states else "plain"
        return min(NPU_BT, NPU_ELEMENTS[kind] // BD), BD, 4
    BT, BD, num_warps = backend.table("causal_conv1d", CUDA_TILES)[stage]
    return BT, min(BD, next_pow2(D)), num_warps


# ----------------------------------------------------------------------------- launchers


def _n_chunks(B: int, T: int, BT: int, chunk_indices: torch.Tensor | None) -> tuple[int, int]:
    NT = cdiv(T, BT)
    return NT, (chunk_indices.shape[0] if chunk_indices is not None else B * NT)


def _grid3d(*dims: int) -> tuple[int, int, int] | None:
    """The forward's 3-D launch grid ``dims`` (channel blocks, chunks, batch rows) on a CUDA GPU,
    where every dimension fits (x up to 2^31 - 1, y and z up to 65535); ``None`` elsewhere (the
    NPU and the interpreter use the task plan). On the H200 the conv anchors' forward took 0.115 /
    0.421 ms with this grid against 0.122 / 0.450 ms with the 1-D task plan (B4 T4096 D4096 /
    B1 T32768 D8192, one process: ``benchmarks/ab_launch_plans.py``, cases.md). The x limit is the
    active target's :func:`fla_ascend.tiling.grid.cuda_max_grid_x`; ``CUDA_TILES["grid3d"]`` off
    (a target override) gives ``None``."""
    if not backend.is_cuda_compiled() or not backend.table("causal_conv1d", CUDA_TILES)["grid3d"]:
        return None
    x, y, z = dims
    return dims if 1 <= x <= cuda_max_grid_x() and 1 <= y <= MAX_GRID and 1 <= z <= MAX_GRID else None


def _state_rows(state: torch.Tensor | None) -> torch.Tensor | None:
    """A conv state ``[N, D, W]`` re-laid out as ``[N, W, D]`` (contiguous; ``None`` stays ``None``).

    The kernels read state rows next to token rows of ``x`` (channel axis innermost); reading
    ``[N, D, W]`` directly would be a DMA with innermost stride ``W`` (docs/ascend-rules.md, R5). The copy is
    ``N * D * W`` elements, small next to ``x``.
    """
    return None if state is None else state.transpose(1, 2).contiguous()


def causal_conv1d_fwd(x, wt, bias, residual, h0t, activation, cu_seqlens, chunk_indices, BT, BD, num_warps,
                      store_pre=False):
    """Launch the forward: ``x`` ``[B, T, D]`` (channel stride 1), ``wt`` ``[W, D]``, ``h0t`` the
    initial state as ``[N, W, D]`` (see :func:`_state_rows`) or ``None``. Returns ``(y, pre)``: ``y``
    ``[B, T, D]`` contiguous in ``x.dtype`` and, with ``store_pre``, the pre-activation (bias plus
    taps, before SiLU) in the same layout and dtype for the per-tap backward, else ``None``."""
    B, T, D = x.shape
    W = wt.shape[0]
    NT, NC = _n_chunks(B, T, BT, chunk_indices)
    ND = cdiv(D, BD)
    y = torch.empty(B, T, D, dtype=x.dtype, device=x.device)
    pre = torch.empty_like(y) if store_pre else None
    plan = task_plan(NC * ND, "vector")
    grid3d = _grid3d(ND, NC if cu_seqlens is not None else NT, 1 if cu_seqlens is not None else B)
    causal_conv1d_fwd_kernel[grid3d or plan.grid](
        x=x, wt=wt, bias=bias, residual=residual, h0t=h0t, y=y, pre=pre, chunk_indices=chunk_indices,
        cu_seqlens=cu_seqlens, s_xb=x.stride(0), s_xt=x.stride(1), T=T, D=D, NT=NT, ND=ND,
        n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BT=BT, BD=BD,
        ACT=activation is not None, HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None,
        USE_H0=h0t is not None, IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        GRID3D=grid3d is not None, STORE_PRE=store_pre, **launch_options(num_warps=num_warps),
    )
    return y, pre


def causal_conv1d_states_fwd(x, W, h0t, cu_seqlens, BD, dtype):
    """Final states ``[N, D, W]`` in ``dtype``: the last ``W`` inputs of each sequence (``h0t``: the
    initial state as ``[N, W, D]`` or ``None``)."""
    B, T, D = x.shape
    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
    ND = cdiv(D, BD)
    ht = torch.empty(N, D, W, dtype=dtype, device=x.device)
    plan = task_plan(N * ND, "vector")
    causal_conv1d_states_fwd_kernel[plan.grid](
        x=x, h0t=h0t, ht=ht, cu_seqlens=cu_seqlens, s_xb=x.stride(0), s_xt=x.stride(1), T=T, D=D,
        ND=ND, n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BW=next_pow2(W), BD=BD,
        USE_H0=h0t is not None, IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=4),
    )
    return ht


def _bwd_shift() -> int:
    """How the backward tile takes ``dpre`` (and, off CUDA, ``x``) of the rows below a row
    (:data:`.kernels.SHIFT_GATHER`, ...): ``tl.gather`` on compiled CUDA with a Triton that has it
    (3.3 and later), the slice ops of triton-ascend compiled for the NPU, reloaded rows elsewhere (the
    interpreters, older Triton). Timed on the H200 in cases.md."""
    if backend.is_cuda_compiled() and hasattr(tl, "gather"):
        return SHIFT_GATHER
    if backend.device_type() == "npu" and not backend.is_interpreter():
        return SHIFT_SLICE
    return SHIFT_LOAD


def _bwd_step(BT: int, W: int) -> int:
    """Tokens between consecutive backward tiles, ``BT - (W - 1)``: a tile's last ``W - 1`` rows
    only feed the rows before them.

    Raises:
        ValueError: ``BT`` is not above ``W - 1`` (a tile table error).
    """
    if BT <= W - 1:
        raise ValueError(f"the backward tile needs BT > W - 1, got BT={BT}, W={W}")
    return BT - (W - 1)


def causal_conv1d_bwd(x, wt, bias, h0t, pre, dy, dht, activation, cu_seqlens, chunk_indices, chunk_size, BT, BD,
                      num_warps):
    """Launch the backward (``h0t``: the initial state as ``[N, W, D]`` or ``None``; ``pre``: the
    forward's pre-activation ``[B, T, D]`` (stored with the activation off compiled CUDA), or ``None``
    to recompute it from ``x``; ``dht``: the
    final-state gradient ``[N, D, W]`` or ``None``; ``chunk_indices``: the varlen chunk list for
    chunks of ``chunk_size`` tokens (the forward's), rebuilt here when the tile's step
    (:func:`_bwd_step`) differs). Returns ``(dx [B, T, D] in
    x.dtype, dwt [W, D] float32, db [D] float32 or None, dh0 [N, D, W] in the initial state's dtype
    or None)``."""
    B, T, D = x.shape
    W = wt.shape[0]
    step = _bwd_step(BT, W)
    if cu_seqlens is not None and step != chunk_size:
        chunk_indices = prepare_chunk_indices(cu_seqlens, step)
    NT, NC = _n_chunks(B, T, step, chunk_indices)
    ND = cdiv(D, BD)
    if dy.stride(-1) != 1:
        dy = dy.contiguous()
    dhtt = _state_rows(dht)
    dx = torch.empty(B, T, D, dtype=x.dtype, device=x.device)
    dw_part = torch.empty(NC, W, D, dtype=torch.float32, device=x.device)
    db_part = torch.empty(NC, D, dtype=torch.float32, device=x.device) if bias is not None else None
    plan = task_plan(NC * ND, "vector")
    common = dict(x=x, wt=wt, bias=bias, h0t=h0t, dy=dy, dhtt=dhtt, cu_seqlens=cu_seqlens,
                  s_xb=x.stride(0), s_xt=x.stride(1), s_dyb=dy.stride(0), s_dyt=dy.stride(1), T=T, D=D, ND=ND)
    causal_conv1d_bwd_kernel[plan.grid](
        **common, pre=pre, dx=dx, dw_part=dw_part, db_part=db_part, chunk_indices=chunk_indices, NT=NT,
        n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BT=BT, BD=BD, ACT=activation is not None,
        HAS_BIAS=bias is not None, USE_H0=h0t is not None, HAS_DHT=dht is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, SHIFT=_bwd_shift(),
        **launch_options(num_warps=num_warps),
    )
    dwt = dw_part.sum(0)
    db = db_part.sum(0) if db_part is not None else None
    dh0 = None
    if h0t is not None:
        N = h0t.shape[0]
        dh0 = torch.empty(N, D, W, dtype=h0t.dtype, device=x.device)
        plan = task_plan(N * ND, "vector")
        causal_conv1d_states_bwd_kernel[plan.grid](
            **common, dh0=dh0, n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W,
            BW=next_pow2(W), BD=BD, ACT=activation is not None, HAS_BIAS=bias is not None,
            HAS_DHT=dht is not None, IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
            **launch_options(num_warps=4),
        )
    return dx, dwt, db, dh0


FLA_CHUNK_SIZE = 64
"""Chunk length of the ``chunk_indices`` :func:`causal_conv1d` accepts (flash-linear-attention's
conv default)."""


def _conv_chunk_indices(cu_seqlens, BT, chunk_indices=None, cu_seqlens_cpu=None):
    """The varlen task list for ``BT``-token tiles. From ``chunk_indices`` of
    :data:`FLA_CHUNK_SIZE`-token chunks when ``BT`` divides it: each row ``(i_n, i_t)`` becomes
    ``(i_n, i_t * r + j)`` for ``j < r = 64 / BT`` (a fixed-size expansion, nothing read back from
    the device; tiles past a sequence's end are fully masked and write zero partial sums).
    Otherwise from ``cu_seqlens_cpu`` when given, else from ``cu_seqlens``."""
    if cu_seqlens is None:
        return None
    if chunk_indices is not None and FLA_CHUNK_SIZE % BT == 0:
        r = FLA_CHUNK_SIZE // BT
        ci = chunk_indices.to(torch.int32)
        sub = torch.arange(r, dtype=torch.int32, device=ci.device)
        i_n = ci[:, :1].expand(-1, r).reshape(-1)
        i_t = (ci[:, 1:] * r + sub[None, :]).reshape(-1)
        return torch.stack([i_n, i_t], 1).contiguous()
    return prepare_chunk_indices(cu_seqlens, BT, cu_seqlens_cpu)


class CausalConv1dFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, residual, initial_state, output_final_state, activation, cu_seqlens,
                fla_chunk_indices=None, cu_seqlens_cpu=None):
        D, W = weight.shape
        BT, BD, num_warps = _tiles(D, "fwd", initial_state is not None, W)
        chunk_indices = _conv_chunk_indices(cu_seqlens, BT, fla_chunk_indices, cu_seqlens_cpu)
        wt = weight.t().contiguous()  # [W, D]: each tap a contiguous row (NPU layout rule)
        h0t = _state_rows(initial_state)  # [N, W, D]: state rows contiguous along D (NPU layout rule)
        # the per-tap backward reads the pre-activation instead of recomputing it W times per tile
        store_pre = activation is not None and _bwd_shift() != SHIFT_GATHER and any(ctx.needs_input_grad[:5])
        y, pre = causal_conv1d_fwd(x, wt, bias, residual, h0t, activation, cu_seqlens, chunk_indices, BT, BD,
                                   num_warps, store_pre)
        ht = None
        if output_final_state:
            ht = causal_conv1d_states_fwd(x, W, h0t, cu_seqlens, BD, x.dtype)
        ctx.save_for_backward(x, wt, bias, h0t, pre, cu_seqlens, chunk_indices, fla_chunk_indices, cu_seqlens_cpu)
        ctx.meta = (activation, weight.dtype, residual is not None, BT)
        return y, ht

    @staticmethod
    @kernel_backward("causal_conv1d")
    def backward(ctx, dy, dht):
        x, wt, bias, h0t, pre, cu_seqlens, chunk_indices, fla_chunk_indices, cu_seqlens_cpu = ctx.saved_tensors
        activation, w_dtype, has_residual, fwd_BT = ctx.meta
        BT, BD, num_warps = _tiles(wt.shape[1], "bwd", h0t is not None or dht is not None, wt.shape[0])
        step = _bwd_step(BT, wt.shape[0])
        if cu_seqlens is not None and step != fwd_BT:
            chunk_indices, fwd_BT = _conv_chunk_indices(cu_seqlens, step, fla_chunk_indices, cu_seqlens_cpu), step
        dx, dwt, db, dh0 = causal_conv1d_bwd(x, wt, bias, h0t, pre, dy, dht, activation, cu_seqlens, chunk_indices,
                                             fwd_BT, BT, BD, num_warps)
        dw = dwt.t().to(w_dtype)
        db = db.to(bias.dtype) if db is not None else None
        dres = dy if has_residual else None
        return dx, dw, db, dres, dh0, None, None, None, None, None


# ----------------------------------------------------------------------------- public API


def _check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of None, 'silu', 'swish'; got {activation!r}")
    return None if activation is None else "silu"


def _check_weight(weight, D):
    check_tensor("weight", weight)
    if weight.dim() == 3 and weight.shape[1] == 1:  # nn.Conv1d depthwise layout [D, 1, W]
        weight = weight.squeeze(1)
    if weight.dim() != 2 or weight.shape[0] != D:
        raise ValueError(f"weight must have shape [D={D}, W] (or [D, 1, W]), got {tuple(weight.shape)}")
    W = weight.shape[1]
    if not 1 <= W <= MAX_W:
        raise ValueError(f"weight's kernel width W must be in [1, {MAX_W}], got {W}")
    return weight, W


BACKENDS = ("triton",)
"""``backend`` values :func:`causal_conv1d` honours: our Triton kernels. flash-linear-attention's
``"cuda"`` (the causal-conv1d package) and ``"mix"`` raise ``NotImplementedError``."""


def _check_backend(op, backend):
    if backend in BACKENDS:
        return
    if backend in ("cuda", "mix"):
        raise NotImplementedError(f"{op}: backend={backend!r} (flash-linear-attention's causal-conv1d CUDA path) is "
                                  f"not implemented here; use backend='triton' (fla-ascend's kernels)")
    raise ValueError(f"{op}: backend must be one of 'triton', 'cuda', 'mix', got {backend!r}")


def causal_conv1d(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    activation: str | None = None,
    backend: str | None = "triton",
    cu_seqlens: torch.Tensor | None = None,
    cu_seqlens_cpu: torch.LongTensor | None = None,
    chunk_indices: torch.LongTensor | None = None,
    cp_context: object | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Causal depthwise convolution over time, flash-linear-attention 0.6.0's ``causal_conv1d``
    (same parameters, positional order, defaults and returns).

    ``y[b, t, d] = act(bias[d] + sum_w weight[d, w] * x[b, t - (W - 1) + w, d]) + residual[b, t, d]``,
    where positions before a sequence's start read columns ``1 .. W - 1`` of ``initial_state``
    (zeros without one). Differentiable in ``x``, ``weight``, ``bias``, ``residual`` and
    ``initial_state``, including through the returned final state.

    Args:
        x: ``[B, T, D]`` float32 / float16 / bfloat16. Any strides with the channel axis of stride 1
            (a ``q``/``k``/``v`` slice of one projection) are read without a copy.
        weight: ``[D, W]`` (or ``nn.Conv1d``'s depthwise ``[D, 1, W]``), ``1 <= W <= 16``.
        bias: ``[D]`` or ``None``.
        residual: ``[B, T, D]`` added after the activation, or ``None``.
        initial_state: ``[N, D, W]``, the last ``W`` inputs before each sequence (newest in column
            ``W - 1``); ``N = B``, or the number of sequences with ``cu_seqlens``.
        output_final_state: also return the final state ``[N, D, W]`` in ``x``'s dtype (as
            flash-linear-attention; ``initial_state`` may have any float dtype).
        activation: ``None``, ``"silu"`` or ``"swish"`` (the same function).
        backend: ``"triton"`` (default; our kernels). ``"cuda"`` / ``"mix"`` raise ``NotImplementedError``.
        cu_seqlens: ``[N + 1]`` int32/int64 boundaries of sequences packed along ``T`` (needs
            ``B == 1``); sequences may be shorter than ``W`` (even empty). Read on the host (one
            device-to-host copy) unless ``cu_seqlens_cpu`` or ``chunk_indices`` is given.
        cu_seqlens_cpu: the same boundaries on the CPU: validated and used for the task list
            instead of reading ``cu_seqlens`` back.
        chunk_indices: ``[NT, 2]`` rows ``(sequence, chunk)`` of 64-token chunks
            (:func:`fla_ascend.ops.utils.prepare_chunk_indices` with chunk size 64, as
            flash-linear-attention builds them); expanded to the kernel's tiles on the device. Only
            compiled CUDA's backward, whose tiles overlap, rebuilds its list from ``cu_seqlens_cpu``
            or, without it, from ``cu_seqlens`` (a device-to-host copy).
        cp_context: context parallelism: a :func:`fla_ascend.ops.cp.build_cp_context` context built
            with ``conv1d_kernel_size=W``; ``x`` is then this rank's ``[1, T_local, D]`` slice, the
            ``W - 1`` tokens before it come from the other ranks, ``cu_seqlens`` (and
            ``cu_seqlens_cpu``, ``chunk_indices``) are replaced by the context's local ones and
            ``final_state`` is None (docs/cp.md).
        **kwargs: ``seq_idx=None`` is accepted (other values raise ``NotImplementedError``); any
            other name raises ``TypeError``.

    Returns:
        ``(y, final_state)``: ``y`` ``[B, T, D]`` contiguous in ``x.dtype``; ``final_state`` or ``None``.

    Raises (messages start with ``causal_conv1d:``):
        TypeError: non-tensor or non-float arguments, ``weight`` missing, unknown keyword arguments.
        ValueError: wrong shapes, ``D`` or ``W`` mismatches between ``x``, ``weight``, ``bias``,
            ``residual`` and ``initial_state``, unknown activation or backend, invalid ``cu_seqlens``
            / ``cu_seqlens_cpu`` / ``chunk_indices`` (including ``B != 1``), tensors on several
            devices, or more than 2**31 - 1 elements; with ``cp_context``, ``W`` other than its
            ``conv1d_kernel_size``.
        NotImplementedError: ``backend`` ``"cuda"`` / ``"mix"`` or ``seq_idx`` not ``None``; with
            ``cp_context``, ``initial_state`` or ``output_final_state``.
        Under ``cp_context`` also those of :func:`fla_ascend.ops.cp.context.check_cp_call`.
    """
    op = "causal_conv1d"
    _check_backend(op, backend)
    output_final_state, = check_bools(op, output_final_state=output_final_state)
    if cp_context is not None:
        cu_seqlens = check_cp_call(op, cp_context, x, initial_state, output_final_state)
        cu_seqlens_cpu, chunk_indices = cp_context.cu_seqlens_cpu, None
    if kwargs.get("seq_idx") is not None:
        raise NotImplementedError(f"{op}: seq_idx (per-token sequence ids) is not implemented; pass cu_seqlens")
    with op_errors(op):
        unknown = set(kwargs) - {"seq_idx"}
        if unknown:
            raise TypeError(f"unexpected keyword arguments {sorted(unknown)}")
        if weight is None:
            raise TypeError("weight [D, W] is required; got None")
        check_tensor("x", x)
        if x.dim() != 3:
            raise ValueError(f"x must have shape [B, T, D], got {tuple(x.shape)}")
        B, T, D = x.shape
        if D < 1:
            raise ValueError(f"x must have at least one channel, got D={D} (x shape {tuple(x.shape)})")
        weight, W = _check_weight(weight, D)
        if cp_context is not None and W != cp_context.conv1d_kernel_size:
            raise ValueError(f"weight's kernel width W={W} differs from cp_context's conv1d_kernel_size="
                             f"{cp_context.conv1d_kernel_size} (pass conv1d_kernel_size=W to build_cp_context)")
        activation = _check_activation(activation)
        if bias is not None:
            check_tensor("bias", bias, shape=(D,))
        if residual is not None:
            check_tensor("residual", residual, shape=(B, T, D))
            residual = residual.contiguous()
        cu_seqlens, cu_seqlens_cpu, chunk_indices = check_varlen(cu_seqlens, cu_seqlens_cpu, chunk_indices, B, T,
                                                                 FLA_CHUNK_SIZE)
        N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
        if initial_state is not None:
            check_tensor("initial_state", initial_state)
            if initial_state.dim() != 3 or initial_state.shape[:2] != (N, D):
                raise ValueError(f"initial_state must have shape [N={N}, D={D}, W={W}], "
                                 f"got {tuple(initial_state.shape)}")
            if initial_state.shape[2] != W:
                raise ValueError(f"initial_state's width must equal weight's W={W}, got {initial_state.shape[2]}")
        check_same_device(x=x, weight=weight, bias=bias, residual=residual, initial_state=initial_state,
                          cu_seqlens=cu_seqlens, chunk_indices=chunk_indices)
        check_int32_offsets("x", B * T * D)
    if x.stride(-1) != 1:
        x = x.contiguous()
    if cp_context is not None:
        initial_state = conv_initial_state(x, W, cp_context)
    return CausalConv1dFunction.apply(x, weight, bias, residual, initial_state, output_final_state, activation,
                                      cu_seqlens, chunk_indices, cu_seqlens_cpu)


def _conv_update_fwd(x2, cache, weight, bias, residual, activation):
    """Launch the decode kernel: ``x2`` ``[N, D]`` (channel stride 1), ``cache`` ``[N, D, W]``
    contiguous (updated in place). Returns ``y`` ``[N, D]``."""
    N, D = x2.shape
    W = weight.shape[1]
    BD = min(128, next_pow2(D))
    ND = cdiv(D, BD)
    y = torch.empty(N, D, dtype=x2.dtype, device=x2.device)
    plan = task_plan(N * ND, "vector")
    causal_conv1d_update_kernel[plan.grid](
        x=x2, cache=cache, weight=weight, bias=bias, residual=residual, y=y, s_xn=x2.stride(0), D=D, ND=ND,
        n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BW=next_pow2(W), BD=BD,
        ACT=activation is not None, HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None,
        TASK_LOOP=plan.task_loop, **launch_options(num_warps=4),
    )
    return y


class CausalConv1dUpdateFunction(torch.autograd.Function):
    """The decode step inside autograd, so that it runs with grad mode on (as flash-linear-attention's
    does); the backward refuses."""

    @staticmethod
    def forward(ctx, x2, cache, weight, bias, residual, activation):
        return _conv_update_fwd(x2, cache, weight, bias, residual, activation)

    @staticmethod
    def backward(ctx, dy):
        raise NotImplementedError("causal_conv1d_update has no backward (it is the decode step, as in "
                                  "flash-linear-attention): use causal_conv1d for training, or detach its output")


def causal_conv1d_update(
    x: torch.Tensor,
    cache: torch.Tensor,
    residual: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step of :func:`causal_conv1d` per sequence, flash-linear-attention 0.6.0's
    ``causal_conv1d_update`` (same parameters and order).

    The cache is shifted left by one column, ``x`` written into column ``W - 1``, and the output is
    ``act(bias + sum_w weight[:, w] * cache[:, :, w]) + residual``. It runs with grad mode on; a
    backward through its output raises ``NotImplementedError``.

    Args:
        x: ``[N, D]``, ``[N, 1, D]`` / ``[1, N, D]`` (one token per sequence), or ``[N, 1, H, P]``
            with ``H > 1`` (flattened to ``D = H * P``; flash-linear-attention flattens only when
            ``P`` is not ``weight``'s ``D``, so a 4-D ``[N, 1, 1, D]`` raises there and here);
            channel stride 1.
        cache: ``[N, D, W]``, contiguous; updated in place.
        residual: like ``x``, or ``None``.
        weight: ``[D, W]`` or ``[D, 1, W]``; ``None`` means all ones (the sum of the window).
        bias: ``[D]`` or ``None``.
        activation: ``None``, ``"silu"`` or ``"swish"``.

    Returns:
        ``(y, cache)``: ``y`` with ``x``'s shape and dtype; the same ``cache`` object, updated.

    Raises (messages start with ``causal_conv1d_update``):
        TypeError: non-float tensors.
        ValueError: shape / ``D`` / ``W`` mismatches, non-contiguous cache, unknown activation.
        NotImplementedError: from a backward through ``y``.
    """
    with op_errors("causal_conv1d_update"):
        check_tensor("x", x)
        shape = x.shape
        if x.dim() == 4 and x.shape[1] == 1 and x.shape[2] > 1:  # [N, 1, H, P]: one token of H heads
            x = x.reshape(x.shape[0], 1, -1)
        if x.dim() == 3 and (x.shape[0] == 1 or x.shape[1] == 1):
            x2 = x.reshape(-1, x.shape[-1]) if x.shape[1] == 1 else x[0]
        elif x.dim() == 2:
            x2 = x
        else:
            raise ValueError(f"x must have shape [N, D], [N, 1, D], [1, N, D] or [N, 1, H, P] (H > 1 heads of P "
                             f"channels, D = H * P), got {tuple(shape)}")
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        N, D = x2.shape
        check_tensor("cache", cache)
        if weight is None:
            if cache.dim() != 3:
                raise ValueError(f"cache must have shape [N={N}, D={D}, W], got {tuple(cache.shape)}")
            weight = torch.ones(D, cache.shape[2], dtype=cache.dtype, device=cache.device)
        weight, W = _check_weight(weight, D)
        activation = _check_activation(activation)
        if cache.dim() != 3 or cache.shape[:2] != (N, D):
            raise ValueError(f"cache must have shape [N={N}, D={D}, W={W}], got {tuple(cache.shape)}")
        if cache.shape[2] != W:
            raise ValueError(f"cache's width must equal weight's W={W}, got {cache.shape[2]}")
        if not cache.is_contiguous():
            raise ValueError("cache must be contiguous (it is updated in place)")
        if bias is not None:
            check_tensor("bias", bias, shape=(D,))
        if residual is not None:
            check_tensor("residual", residual)
            if residual.numel() != N * D:
                raise ValueError(f"residual must have x's shape {tuple(shape)}, got {tuple(residual.shape)}")
            residual = residual.reshape(N, D).contiguous()
        check_same_device(x=x, cache=cache, weight=weight, bias=bias, residual=residual)
    weight = weight.contiguous()
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x2, weight, bias, residual)):
        y = CausalConv1dUpdateFunction.apply(x2, cache, weight, bias, residual, activation)
    else:
        y = _conv_update_fwd(x2, cache, weight, bias, residual, activation)
    return y.view(shape), cache
