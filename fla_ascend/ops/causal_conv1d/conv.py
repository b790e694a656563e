"""Causal depthwise 1-D convolution (short convolution of GatedDeltaNet / Mamba layers).

flash-linear-attention compatible: ``causal_conv1d`` (forward and backward through autograd)
and ``causal_conv1d_update`` (decode). Semantics are in :mod:`.reference`.

Kernels (one ``@triton.jit`` source each, task-loop launch plans; the forward also has a 3-D grid
plan on CUDA, ``_grid3d``):

- ``causal_conv1d_fwd_kernel``: a task is ``BT`` tokens x ``BD`` channels of one sequence; the
  ``W`` taps are ``W`` shifted masked loads of ``x`` (the first ``W - 1`` positions of a sequence
  read the initial state); bias, SiLU and residual are fused.
- ``causal_conv1d_bwd_kernel``: same tasks; recomputes the pre-activation where SiLU is on, writes
  ``dx`` (adding the final-state gradient ``dht`` of the last ``W`` tokens) and per-task partial
  sums of ``dweight`` / ``dbias`` that the host reduces with ``torch.sum`` (deterministic: no atomics).
  Two tiles: on the NPU and under the interpreter each tap loads and recomputes its shifted rows
  (``_conv_bwd_tile_taps``); on compiled CUDA the tile computes ``dpre`` once per row and reads the
  shifted rows with ``tl.gather``, its tasks overlapping by ``W - 1`` rows (``_conv_bwd_tile_gather``).
- ``causal_conv1d_states_fwd_kernel`` / ``causal_conv1d_states_bwd_kernel``: per (sequence,
  channel block) final state, and the initial-state gradient ``dh0`` (conv taps that read the
  state plus ``dht`` for sequences shorter than ``W``).
- ``causal_conv1d_update_kernel``: one decode token per sequence; shifts the cache in place.

NPU layout (docs/ascend-rules.md, R5: the innermost loaded or stored axis must be contiguous): the weight
is read as ``[W, D]`` (transposed once on the host) so each tap is a contiguous ``[BD]`` row; token
tiles of ``x`` are read with the channel axis innermost (stride 1), also for strided views; the
states the kernels read (``initial_state``, the final-state gradient) are re-laid out once on the
host from ``[N, D, W]`` to ``[N, W, D]`` (small: ``W`` rows of ``D``), so a state row lines up with a
token row; states the kernels write (final state, ``dh0``) keep the public ``[N, D, W]`` layout and
are stored as ``[BD, BW]`` tiles (``tl.trans`` on chip), contiguous along ``W``. Halo rows before
the sequence start or past its end are masked.

triton-ascend 3.2.0's adapter (``triton-to-linalg``) crashes on a load mask ``o + k >= s`` (``o``
an ``arange``, ``s`` a runtime scalar) repeated over unrolled taps; the same bound written
``s <= o + k`` lowers. Lower bounds against runtime scalars are written that way here.
"""
from __future__ import annotations

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.causal_conv1d.cp import conv_initial_state
from fla_ascend.ops.cp.context import check_cp_call
from fla_ascend.ops.utils.autograd import kernel_backward
from fla_ascend.ops.utils.index import prepare_chunk_indices
from fla_ascend.ops.utils.math import sigmoid, silu
from fla_ascend.ops.utils.validation import (
    MAX_CONV_WIDTH,
    check_bools,
    check_same_device,
    check_tensor,
    check_varlen,
    op_errors,
)
from fla_ascend.tiling import check_int32_offsets, task_plan
from fla_ascend.tiling.grid import CUDA_MAX_GRID_X, MAX_GRID
from fla_ascend.tiling.sizes import cdiv, next_pow2
from fla_ascend.tiling.ub import Tile

ACTIVATIONS = (None, "silu", "swish")
MAX_W = MAX_CONV_WIDTH
"""Largest kernel width accepted (16; defined as :data:`fla_ascend.ops.utils.validation.MAX_CONV_WIDTH`,
which context parallelism checks too): taps are unrolled (``W`` loads forward; in the backward with
an activation ``W * W`` on the NPU and under the interpreter, ``2 W`` with compiled CUDA's gather
tile); widths 2 to 4 are the fast case (Qwen3-Next uses 4)."""


CUDA_TILES = {"fwd": (32, 128, 4), "bwd": (32, 64, 2)}
"""Off-NPU ``(BT, BD, num_warps)`` of the forward and the backward sequence kernels, from H200
A/Bs of tiles and warp counts at both conv anchors (``benchmarks/tune_tiles.py --op causal_conv1d``;
cases.md, causal_conv1d): forward at B1 T32768 D8192 0.638 ms with ``[64, 128]`` 4 warps, 0.556 ms
with ``[32, 128]`` (per-tap backward, 2026-11-30); the ``tl.gather`` backward (compiled CUDA) at
fwd+bwd B4 T4096 / B1 T32768 0.654 / 2.347 ms with ``[32, 64]`` 2 warps, against 0.816 / 3.087 for
``[64, 64]`` 8 warps and 0.891 / 3.325 for ``[32, 64]`` 4 warps (2026-11-30). ``BT`` of the
backward must exceed ``MAX_W - 1``: its gather tile advances by ``BT - (W - 1)`` rows, so it computes
``W - 1`` rows twice (3 of 32 at W = 4, 15 of 32 at W = 16; the sweep ran at W = 4 only)."""


def _tiles(D: int, stage: str) -> tuple[int, int, int]:
    """``(BT, BD, num_warps)``: token and channel tile of the ``stage`` (``"fwd"`` or ``"bwd"``)
    sequence kernel and its warp count (CUDA only).

    NPU: one float32 ``[BT, BD]`` tile is 8 KiB (2048 elements), for both stages. The backward, the
    largest, holds one tap's window loads of ``x`` and of the state, ``dy``, ``dht`` and the
    accumulators: with bf16, W = 4, ``[16, 128]`` tiles bishengir-compile plans 148864 B of the
    196608 B UB of an A2/A3 vector core (:data:`BWD_TILES`; docs/check.md). Elsewhere
    :data:`CUDA_TILES`.
    """
    if backend.device_type() == "npu":
        BD = min(128, next_pow2(D))
        return max(8, 2048 // BD), BD, 4
    BT, BD, num_warps = CUDA_TILES[stage]
    return BT, min(BD, next_pow2(D)), num_warps


UNROLL_TAPS = tl.constexpr(backend.is_cuda_compiled())
"""Whether the pre-activation's tap loop is unrolled (compiled CUDA, as timed in cases.md) or a
runtime loop (NPU, interpreter): unrolled, its ``2 W`` masked window loads in one block made
bishengir-compile's sync solver (``GraphSyncSolver``) take 13-34 s per forward and backward
launch on a 2-core machine (docs/check.md)."""


# Live tiles for the UB model (fla_ascend.tiling.ub), calibrated on bishengir-compile's plan for
# Ascend910B2 (bf16, W = 4, [BT, BD] = [16, 128]; docs/check.md): flags (ACT, USE_H0, HAS_DHT)
# enter the sizes as 0/1. The sequence kernels' plans are counted in [BT, BD] fp32 tiles: the
# forward 57184 B plain, 83552 B with SiLU and an initial state; the backward 90976 B plain,
# 148864 B with SiLU, initial state and final-state gradient. The states backward: 43872 B.
# BT * BD is 2048 for every D (see _tiles), so the counts hold for every D.
FWD_TILES = [
    Tile((7, "BT", "BD"), "fp32", "one tap's window, masks, accumulator, casts", buffered=False),
    Tile(("ACT + USE_H0", "BT", "BD"), "fp32", "initial-state window, SiLU temporaries"),
]
BWD_TILES = [
    Tile((14, "BT", "BD"), "fp32", "dy and window loads of one tap, dx and dpre accumulators, masks",
         buffered=False),
    Tile(("ACT + USE_H0 + HAS_DHT", "BT", "BD"), "fp32", "recomputed pre-activation, state window, dht"),
]
STATES_BWD_TILES = [
    Tile((4, "BW", "BD"), "fp32", "dh, dht, weight taps, product"),
    Tile((12, "BD"), "fp32", "rows of dy, x, state, weight, pre-activation"),
    Tile(("BD", 16), "in", "[BD, BW] transposed store (W padded to 16)"),
    Tile(("BD", 8), "fp32", "transpose temporary"),
]
STATES_FWD_TILES = [  # planned 32704 B at BW 4, BD 128; 13600 B at BW 2, BD 64; 2304 B at BW 1, BD 16
    Tile((12, "BW", "BD"), "fp32", "window loads and masks", buffered=False),
    Tile((4, "BD", "max(BW, 8)"), "fp32", "the transposed [BD, BW] store (BW padded to 8: 32 B rows)",
         buffered=False)]
UPDATE_TILES = [  # planned 66272 B at BW 4, BD 128; 33248 B at BW 2, BD 64
    Tile((17, "BD", "max(BW, 8)"), "fp32", "cache, weight, shifted cache, products, masks ([BD, BW] rows padded "
         "to 8 elements)", buffered=False)]


@triton.jit
def _seq_of_chunk(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN: tl.constexpr):
    """Batch row ``i_b``, sequence ``i_n``, chunk ``i_t``, start ``bos`` and length ``L`` (int64)."""
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_c * 2).to(tl.int64)
        i_t = tl.load(chunk_indices + i_c * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        L = tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos
        i_b = i_n * 0
    else:
        i_n = i_c // NT
        i_t = i_c % NT
        bos = i_n * 0
        L = i_n * 0 + T
        i_b = i_n
    return i_b, i_n, i_t, bos, L


@triton.jit
def _seq_bounds(i_n, cu_seqlens, T, IS_VARLEN: tl.constexpr):
    """Batch row ``i_b``, start ``bos`` and length ``L`` (int64) of sequence ``i_n``."""
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        L = tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos
        i_b = i_n * 0
    else:
        bos = i_n * 0
        L = i_n * 0 + T
        i_b = i_n
    return i_b, bos, L


@triton.jit
def _load_window(x, h0t, p_x0, s_xt, p_h0, o_r, lo, hi, m_row, o_d, m_d, D,
                 W: tl.constexpr, USE_H0: tl.constexpr):
    """Input rows ``o_r`` (relative to the tile start; the sequence spans ``[lo, hi)``) as a float32
    ``[R, BD]`` tile: ``x`` inside the sequence, initial-state rows before it, zeros elsewhere.
    ``h0t`` is the initial state re-laid out as ``[N, W, D]``: its row ``W + s`` is position ``s < 0``."""
    m_x = (lo <= o_r) & (o_r < hi) & m_row  # lower bound written `s <= o` (adapter crash, see module doc)
    b_x = tl.load(x + p_x0 + o_r[:, None] * s_xt + o_d[None, :], mask=m_x[:, None] & m_d[None, :],
                  other=0.0).to(tl.float32)  # [R, BD]
    if USE_H0:
        m_h = (lo - W <= o_r) & (o_r < lo) & m_row
        b_x += tl.load(h0t + p_h0 + (o_r - lo + W)[:, None] * D + o_d[None, :], mask=m_h[:, None] & m_d[None, :],
                       other=0.0).to(tl.float32)  # [R, BD]
    return b_x


@triton.jit
def _pre_activation(x, h0t, wt, bias, p_x0, s_xt, p_h0, o_r, lo, hi, m_row, o_d, m_d, D,
                    W: tl.constexpr, USE_H0: tl.constexpr, HAS_BIAS: tl.constexpr):
    """``bias + sum_w wt[w] * x[o_r - (W - 1) + w]`` as a float32 ``[R, BD]`` tile."""
    b_y = tl.zeros([o_r.shape[0], o_d.shape[0]], dtype=tl.float32)  # [R, BD]
    if HAS_BIAS:
        b_y += tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)[None, :]
    if UNROLL_TAPS:
        for w in tl.static_range(W):
            b_y += _tap(x, h0t, wt, p_x0, s_xt, p_h0, o_r, lo, hi, m_row, o_d, m_d, D, w, W, USE_H0)
    else:
        for w in tl.range(0, W):
            b_y += _tap(x, h0t, wt, p_x0, s_xt, p_h0, o_r, lo, hi, m_row, o_d, m_d, D, w, W, USE_H0)
    return b_y


@triton.jit
def _tap(x, h0t, wt, p_x0, s_xt, p_h0, o_r, lo, hi, m_row, o_d, m_d, D, w, W: tl.constexpr, USE_H0: tl.constexpr):
    """Tap ``w`` of the pre-activation: ``wt[w] * x[o_r - (W - 1) + w]`` as a float32 ``[R, BD]`` tile."""
    b_w = tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
    b_x = _load_window(x, h0t, p_x0, s_xt, p_h0, o_r + (w - (W - 1)), lo, hi, m_row, o_d, m_d, D,
                       W, USE_H0)  # [R, BD]
    return b_x * b_w[None, :]


@triton.jit
def _conv_fwd_task(
    i_task, x, wt, bias, residual, h0t, y, chunk_indices, cu_seqlens, s_xb, s_xt, T, D, NT, ND,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_c = i_task // ND
    i_d = i_task % ND
    i_b, i_n, i_t, bos, L = _seq_of_chunk(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    _conv_fwd_tile(i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, s_xb, s_xt, T, D,
                   W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0)


@triton.jit
def _conv_fwd_tile(
    i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, s_xb, s_xt, T, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr,
):
    """The ``[BT, BD]`` output tile of chunk ``i_t`` of sequence ``i_n`` (batch row ``i_b``, start
    ``bos``, length ``L``; int64), channel block ``i_d``."""
    t0 = i_t * BT
    lo = (-t0).to(tl.int32)
    hi = (L - t0).to(tl.int32)
    o_t = tl.arange(0, BT)
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_t = o_t < hi
    p_x0 = i_b * s_xb + (bos + t0) * s_xt
    p_h0 = i_n * W * D
    b_y = _pre_activation(x, h0t, wt, bias, p_x0, s_xt, p_h0, o_t, lo, hi, m_t, o_d, m_d, D,
                          W, USE_H0, HAS_BIAS)  # [BT, BD]
    if ACT:
        b_y = silu(b_y)
    p_y = (i_b * T + bos + t0) * D + o_t[:, None] * D + o_d[None, :]
    m = m_t[:, None] & m_d[None, :]
    if HAS_RESIDUAL:
        b_y += tl.load(residual + p_y, mask=m, other=0.0).to(tl.float32)
    tl.store(y + p_y, b_y.to(y.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["T", "NT", "ND", "n_tasks", "n_programs"])
def causal_conv1d_fwd_kernel(
    x, wt, bias, residual, h0t, y, chunk_indices, cu_seqlens, s_xb, s_xt, T, D, NT, ND, n_tasks, n_programs,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    GRID3D: tl.constexpr = False,
):
    if GRID3D:
        # grid (ND, NT, B), or (ND, NC, 1) for varlen: the tile from the program ids, no division
        i_d = tl.program_id(0).to(tl.int64)
        if IS_VARLEN:
            i_b, i_n, i_t, bos, L = _seq_of_chunk(tl.program_id(1), chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
        else:
            i_b = tl.program_id(2).to(tl.int64)
            i_n = i_b
            i_t = tl.program_id(1).to(tl.int64)
            bos = i_b * 0
            L = i_b * 0 + T
        _conv_fwd_tile(i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, s_xb, s_xt, T, D,
                       W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0)
    elif TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _conv_fwd_task(i_task, x, wt, bias, residual, h0t, y, chunk_indices, cu_seqlens, s_xb, s_xt, T, D,
                           NT, ND, W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, IS_VARLEN)
    else:
        _conv_fwd_task(tl.program_id(0), x, wt, bias, residual, h0t, y, chunk_indices, cu_seqlens, s_xb, s_xt,
                       T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, IS_VARLEN)


@triton.jit
def _conv_bwd_task(
    i_task, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part, chunk_indices, cu_seqlens,
    s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr, SHIFT_GATHER: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_c = i_task // ND
    i_d = i_task % ND
    i_b, i_n, i_t, bos, L = _seq_of_chunk(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    if SHIFT_GATHER:
        _conv_bwd_tile_gather(i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part,
                              s_xb, s_xt, s_dyb, s_dyt, T, D, W, BT, BD, ACT, HAS_BIAS, USE_H0, HAS_DHT)
    else:
        _conv_bwd_tile_taps(i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part,
                            s_xb, s_xt, s_dyb, s_dyt, T, D, W, BT, BD, ACT, HAS_BIAS, USE_H0, HAS_DHT)


@triton.jit
def _conv_bwd_tile_taps(
    i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part,
    s_xb, s_xt, s_dyb, s_dyt, T, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr,
):
    """The backward of the ``[BT, BD]`` tile of chunk ``i_t`` (tiles advance by ``BT``): ``dpre`` of
    the rows ``t + k`` that ``dx[t]`` needs is loaded and recomputed per tap ``k`` (NPU, interpreter)."""
    t0 = i_t * BT
    lo = (-t0).to(tl.int32)
    hi = (L - t0).to(tl.int32)
    o_t = tl.arange(0, BT)
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_t = o_t < hi
    p_x0 = i_b * s_xb + (bos + t0) * s_xt
    p_dy0 = i_b * s_dyb + (bos + t0) * s_dyt
    p_h0 = i_n * W * D
    b_dx = tl.zeros([BT, BD], dtype=tl.float32)  # [BT, BD]
    b_dp0 = tl.zeros([BT, BD], dtype=tl.float32)  # [BT, BD] dpre of the tile's own rows (k = 0)
    # dx[t] = sum_k wt[W - 1 - k] * dpre[t + k]. A runtime loop over k (last iteration k = 0): one
    # tap's loads are live at a time (UB); unrolled, the W x W window loads of the recomputed
    # pre-activation overflow the UB of an A2/A3 vector core.
    for j in tl.range(0, W):
        k = W - 1 - j
        o_q = o_t + k
        m_q = o_q < hi
        b_dp = tl.load(dy + p_dy0 + o_q[:, None] * s_dyt + o_d[None, :], mask=m_q[:, None] & m_d[None, :],
                       other=0.0).to(tl.float32)  # [BT, BD]
        if ACT:
            b_p = _pre_activation(x, h0t, wt, bias, p_x0, s_xt, p_h0, o_q, lo, hi, m_q, o_d, m_d, D,
                                  W, USE_H0, HAS_BIAS)  # [BT, BD]
            b_s = sigmoid(b_p)
            b_dp = b_dp * b_s * (1.0 + b_p * (1.0 - b_s))
        b_w = tl.load(wt + j * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
        b_dx += b_dp * b_w[None, :]
        # the last iteration's tile, selected rather than assigned: a loaded tile carried out of a
        # runtime loop crashes bishengir-compile-a5 (tests/check/compiler_repros/loop_carried_load.py)
        b_dp0 = tl.where(j == W - 1, b_dp, b_dp0)
    # b_dp0 is zero past the sequence end (its dy load was masked by m_t); the weight loop stays a
    # runtime loop on the NPU (one window load live at a time)
    _conv_bwd_tile_finish(b_dx, b_dp0, x, h0t, dhtt, dx, dw_part, db_part, i_b, i_c, bos, t0, lo, hi, o_t, m_t,
                          o_d, m_d, p_x0, s_xt, p_h0, T, D, W, HAS_BIAS, USE_H0, HAS_DHT, False)


@triton.jit
def _conv_bwd_tile_gather(
    i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part,
    s_xb, s_xt, s_dyb, s_dyt, T, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr,
):
    """The backward with ``dpre`` computed once per row (CUDA): the tile's ``BT`` rows give ``dpre``,
    ``dx`` of its first ``BT - (W - 1)`` rows (tiles advance by that) reads ``dpre[t + k]`` from the
    tile itself through ``tl.gather`` (which Triton stages through shared memory) instead of loading
    ``dy`` and recomputing the pre-activation for every tap: per tile, 1 load of ``dy`` and ``2 W`` of
    ``x`` with the activation (``W`` for the pre-activation, ``W`` for ``dweight``), against ``W`` and
    ``W * W + W`` in :func:`_conv_bwd_tile_taps`."""
    BO: tl.constexpr = BT - (W - 1)
    t0 = i_t * BO
    lo = (-t0).to(tl.int32)
    hi = (L - t0).to(tl.int32)
    o_r = tl.arange(0, BT)
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_r = o_r < hi
    m_o = (o_r < BO) & m_r  # the rows this tile writes
    p_x0 = i_b * s_xb + (bos + t0) * s_xt
    p_h0 = i_n * W * D
    b_dp = tl.load(dy + i_b * s_dyb + (bos + t0) * s_dyt + o_r[:, None] * s_dyt + o_d[None, :],
                   mask=m_r[:, None] & m_d[None, :], other=0.0).to(tl.float32)  # [BT, BD]
    if ACT:
        b_p = _pre_activation(x, h0t, wt, bias, p_x0, s_xt, p_h0, o_r, lo, hi, m_r, o_d, m_d, D,
                              W, USE_H0, HAS_BIAS)  # [BT, BD]
        b_s = sigmoid(b_p)
        b_dp = b_dp * b_s * (1.0 + b_p * (1.0 - b_s))
    # dx[t] = sum_k wt[W - 1 - k] * dpre[t + k]; rows t + k past the tile serve only rows it does not write
    b_dx = tl.zeros([BT, BD], dtype=tl.float32)  # [BT, BD]
    for k in tl.static_range(W):
        b_w = tl.load(wt + (W - 1 - k) * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
        if k == 0:
            b_dx += b_dp * b_w[None, :]
        else:
            i_q = tl.broadcast_to(tl.minimum(o_r + k, BT - 1)[:, None], [BT, BD])
            b_dx += tl.gather(b_dp, i_q, axis=0) * b_w[None, :]
    # dweight and dbias sum over the written rows only
    b_dp = tl.where(m_o[:, None], b_dp, 0.0)
    _conv_bwd_tile_finish(b_dx, b_dp, x, h0t, dhtt, dx, dw_part, db_part, i_b, i_c, bos, t0, lo, hi, o_r, m_o,
                          o_d, m_d, p_x0, s_xt, p_h0, T, D, W, HAS_BIAS, USE_H0, HAS_DHT, True)


@triton.jit
def _conv_bwd_tile_finish(
    b_dx, b_dp, x, h0t, dhtt, dx, dw_part, db_part, i_b, i_c, bos, t0, lo, hi, o_t, m_t, o_d, m_d, p_x0, s_xt,
    p_h0, T, D, W: tl.constexpr, HAS_BIAS: tl.constexpr, USE_H0: tl.constexpr, HAS_DHT: tl.constexpr,
    UNROLL: tl.constexpr,
):
    """The stores both backward tiles end with, for the rows ``m_t`` the tile writes (``b_dp``: their
    ``dpre``, zero in every other row): the task's partial ``dweight`` and ``dbias``, and ``dx``
    (``b_dx``) with the final-state gradient added. ``UNROLL``: the weight loop unrolled (CUDA's
    gather tile) or a runtime loop (the per-tap tile: one window load live at a time in the UB)."""
    # partial dweight[w] = sum_t dpre[t] * x[t - (W - 1) + w] and dbias = sum_t dpre[t]
    p_part = i_c * W * D + o_d
    if UNROLL:
        for w in tl.static_range(W):
            _store_dweight_part(b_dp, x, h0t, dw_part, p_part, w, p_x0, s_xt, p_h0, o_t, lo, hi, m_t, o_d, m_d, D,
                                W, USE_H0)
    else:
        for w in tl.range(0, W):
            _store_dweight_part(b_dp, x, h0t, dw_part, p_part, w, p_x0, s_xt, p_h0, o_t, lo, hi, m_t, o_d, m_d, D,
                                W, USE_H0)
    if HAS_BIAS:
        tl.store(db_part + i_c * D + o_d, tl.sum(b_dp, axis=0), mask=m_d)
    if HAS_DHT:
        # the final state holds x[L - W + j] in its row j (dhtt: [N, W, D]); tile row t is j = t - hi + W
        m_j = (hi - W <= o_t) & m_t
        b_dx += tl.load(dhtt + p_h0 + (o_t - hi + W)[:, None] * D + o_d[None, :], mask=m_j[:, None] & m_d[None, :],
                        other=0.0).to(tl.float32)  # [BT, BD]
    p_dx = (i_b * T + bos + t0) * D + o_t[:, None] * D + o_d[None, :]
    tl.store(dx + p_dx, b_dx.to(dx.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])


@triton.jit
def _store_dweight_part(b_dp, x, h0t, dw_part, p_part, w, p_x0, s_xt, p_h0, o_t, lo, hi, m_t, o_d, m_d, D,
                        W: tl.constexpr, USE_H0: tl.constexpr):
    """``dw_part[w] = sum_t dpre[t] * x[t - (W - 1) + w]`` over the tile's rows ``m_t``."""
    b_x = _load_window(x, h0t, p_x0, s_xt, p_h0, o_t + (w - (W - 1)), lo, hi, m_t, o_d, m_d, D,
                       W, USE_H0)  # [BT, BD]
    tl.store(dw_part + p_part + w * D, tl.sum(b_dp * b_x, axis=0), mask=m_d)


@triton.jit(do_not_specialize=["T", "NT", "ND", "n_tasks", "n_programs"])
def causal_conv1d_bwd_kernel(
    x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part, chunk_indices, cu_seqlens,
    s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, n_tasks, n_programs,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    SHIFT_GATHER: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _conv_bwd_task(i_task, x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part, chunk_indices, cu_seqlens,
                           s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, USE_H0, HAS_DHT,
                           IS_VARLEN, SHIFT_GATHER)
    else:
        _conv_bwd_task(tl.program_id(0), x, wt, bias, h0t, dy, dhtt, dx, dw_part, db_part, chunk_indices,
                       cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, USE_H0,
                       HAS_DHT, IS_VARLEN, SHIFT_GATHER)


@triton.jit
def _states_fwd_task(
    i_task, x, h0t, ht, cu_seqlens, s_xb, s_xt, T, D, ND,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_n = i_task // ND
    i_d = i_task % ND
    i_b, bos, L = _seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
    L32 = L.to(tl.int32)
    o_w = tl.arange(0, BW)
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_w = o_w < W
    # row j of the final state is position L - W + j of the sequence
    b_h = _load_window(x, h0t, i_b * s_xb + bos * s_xt, s_xt, i_n * W * D, o_w + L32 - W, 0, L32, m_w, o_d, m_d, D,
                       W, USE_H0)  # [BW, BD]
    # stored in the public [N, D, W] layout as a [BD, BW] tile: contiguous along W
    tl.store(ht + i_n * D * W + o_d[:, None] * W + o_w[None, :], tl.trans(b_h).to(ht.dtype.element_ty),
             mask=m_d[:, None] & m_w[None, :])


@triton.jit(do_not_specialize=["T", "ND", "n_tasks", "n_programs"])
def causal_conv1d_states_fwd_kernel(
    x, h0t, ht, cu_seqlens, s_xb, s_xt, T, D, ND, n_tasks, n_programs,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr,
    TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _states_fwd_task(i_task, x, h0t, ht, cu_seqlens, s_xb, s_xt, T, D, ND, W, BW, BD, USE_H0, IS_VARLEN)
    else:
        _states_fwd_task(tl.program_id(0), x, h0t, ht, cu_seqlens, s_xb, s_xt, T, D, ND, W, BW, BD, USE_H0,
                         IS_VARLEN)


@triton.jit
def _states_bwd_task(
    i_task, x, wt, bias, h0t, dy, dhtt, dh0, cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D, ND,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_n = i_task // ND
    i_d = i_task % ND
    i_b, bos, L = _seq_bounds(i_n, cu_seqlens, T, IS_VARLEN)
    L32 = L.to(tl.int32)
    o_c = tl.arange(0, BW)  # state column (a row of the [BW, BD] tiles)
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_c = o_c < W
    p_x0 = i_b * s_xb + bos * s_xt
    p_dy0 = i_b * s_dyb + bos * s_dyt
    p_h0 = i_n * W * D
    b_dh = tl.zeros([BW, BD], dtype=tl.float32)  # [BW, BD]
    # Column c of the state is position c - W; it feeds tap w = c - 1 - p of the output at position
    # p = 0 .. W - 2 (when inside the sequence). One runtime loop over p with the pre-activation of
    # row p as [BD] rows: bishengir-compile's sync solver took 100-667 s on the former unrolled
    # W x W [BW, BD] window loads (docs/check.md).
    for p in tl.range(0, tl.minimum(L32, W - 1)):
        b_dp = tl.load(dy + p_dy0 + p * s_dyt + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
        if ACT:
            b_pre = tl.zeros([BD], dtype=tl.float32)  # [BD]
            if HAS_BIAS:
                b_pre += tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)
            # tap w reads position p - (W - 1) + w: state row p + 1 + w before the sequence, x after
            for w in tl.range(0, W - 1 - p):
                b_pre += tl.load(h0t + p_h0 + (p + 1 + w) * D + o_d, mask=m_d, other=0.0).to(tl.float32) * \
                    tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
            for w in tl.range(W - 1 - p, W):
                b_pre += tl.load(x + p_x0 + (p - (W - 1) + w) * s_xt + o_d, mask=m_d, other=0.0).to(tl.float32) * \
                    tl.load(wt + w * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
            b_s = sigmoid(b_pre)
            b_dp = b_dp * b_s * (1.0 + b_pre * (1.0 - b_s))
        m_w = (p + 1 <= o_c) & m_c  # tap o_c - 1 - p >= 0 (bound written `s <= o`, see module doc)
        b_w = tl.load(wt + (o_c - 1 - p)[:, None] * D + o_d[None, :], mask=m_w[:, None] & m_d[None, :],
                      other=0.0).to(tl.float32)  # [BW, BD]
        b_dh += b_w * b_dp[None, :]
    if HAS_DHT:
        # a sequence shorter than W passes columns L .. W - 1 of h0 to columns 0 .. W - 1 - L of ht
        m_j = (L32 <= o_c) & m_c
        b_dh += tl.load(dhtt + p_h0 + (o_c - L32)[:, None] * D + o_d[None, :], mask=m_j[:, None] & m_d[None, :],
                        other=0.0).to(tl.float32)  # [BW, BD]
    # stored in the public [N, D, W] layout as a [BD, BW] tile: contiguous along W
    tl.store(dh0 + i_n * D * W + o_d[:, None] * W + o_c[None, :], tl.trans(b_dh).to(dh0.dtype.element_ty),
             mask=m_d[:, None] & m_c[None, :])


@triton.jit(do_not_specialize=["T", "ND", "n_tasks", "n_programs"])
def causal_conv1d_states_bwd_kernel(
    x, wt, bias, h0t, dy, dhtt, dh0, cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D, ND, n_tasks, n_programs,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _states_bwd_task(i_task, x, wt, bias, h0t, dy, dhtt, dh0, cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D,
                             ND, W, BW, BD, ACT, HAS_BIAS, HAS_DHT, IS_VARLEN)
    else:
        _states_bwd_task(tl.program_id(0), x, wt, bias, h0t, dy, dhtt, dh0, cu_seqlens, s_xb, s_xt, s_dyb, s_dyt,
                         T, D, ND, W, BW, BD, ACT, HAS_BIAS, HAS_DHT, IS_VARLEN)


@triton.jit
def _update_task(
    i_task, x, cache, weight, bias, residual, y, s_xn, D, ND,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_n = i_task // ND
    i_d = i_task % ND
    o_d = i_d.to(tl.int32) * BD + tl.arange(0, BD)
    o_w = tl.arange(0, BW)
    m_d = o_d < D
    m_w = o_w < W
    m = m_d[:, None] & m_w[None, :]
    # the cache is [D, W] per sequence (W innermost); the weight is read in the same [D, W] layout
    p_c = i_n * D * W + o_d[:, None] * W + o_w[None, :]
    b_c = tl.load(cache + p_c + 1, mask=m_d[:, None] & (o_w + 1 < W)[None, :], other=0.0).to(tl.float32)  # [BD, BW]
    b_x = tl.load(x + i_n * s_xn + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
    b_c = tl.where((o_w == W - 1)[None, :], b_x[:, None], b_c)
    b_w = tl.load(weight + o_d[:, None] * W + o_w[None, :], mask=m, other=0.0).to(tl.float32)  # [BD, BW]
    b_y = tl.sum(b_c * b_w, axis=1)  # [BD]
    if HAS_BIAS:
        b_y += tl.load(bias + o_d, mask=m_d, other=0.0).to(tl.float32)
    if ACT:
        b_y = silu(b_y)
    if HAS_RESIDUAL:
        b_y += tl.load(residual + i_n * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(y + i_n * D + o_d, b_y.to(y.dtype.element_ty), mask=m_d)
    # the shifted cache is written over itself: every thread must have read its window first
    # (position w is read by the thread writing w - 1; when W spans several threads of a GPU
    # block, a store could otherwise land before another thread's load)
    tl.debug_barrier()
    tl.store(cache + p_c, b_c.to(cache.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["ND", "n_tasks", "n_programs"])
def causal_conv1d_update_kernel(
    x, cache, weight, bias, residual, y, s_xn, D, ND, n_tasks, n_programs,
    W: tl.constexpr, BW: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _update_task(i_task, x, cache, weight, bias, residual, y, s_xn, D, ND, W, BW, BD, ACT, HAS_BIAS,
                         HAS_RESIDUAL)
    else:
        _update_task(tl.program_id(0), x, cache, weight, bias, residual, y, s_xn, D, ND, W, BW, BD, ACT,
                     HAS_BIAS, HAS_RESIDUAL)


# ----------------------------------------------------------------------------- launchers


def _n_chunks(B: int, T: int, BT: int, chunk_indices: torch.Tensor | None) -> tuple[int, int]:
    NT = cdiv(T, BT)
    return NT, (chunk_indices.shape[0] if chunk_indices is not None else B * NT)


def _grid3d(*dims: int) -> tuple[int, int, int] | None:
    """The forward's 3-D launch grid ``dims`` (channel blocks, chunks, batch rows) on a CUDA GPU,
    where every dimension fits (x up to 2^31 - 1, y and z up to 65535); ``None`` elsewhere (the
    NPU and the interpreter use the task plan). On the H200 the conv anchors' forward took 0.115 /
    0.421 ms with this grid against 0.122 / 0.450 ms with the 1-D task plan (B4 T4096 D4096 /
    B1 T32768 D8192, one process: ``benchmarks/ab_launch_plans.py``, cases.md)."""
    if not backend.is_cuda_compiled():
        return None
    x, y, z = dims
    return dims if 1 <= x <= CUDA_MAX_GRID_X and 1 <= y <= MAX_GRID and 1 <= z <= MAX_GRID else None


def _state_rows(state: torch.Tensor | None) -> torch.Tensor | None:
    """A conv state ``[N, D, W]`` re-laid out as ``[N, W, D]`` (contiguous; ``None`` stays ``None``).

    The kernels read state rows next to token rows of ``x`` (channel axis innermost); reading
    ``[N, D, W]`` directly would be a DMA with innermost stride ``W`` (docs/ascend-rules.md, R5). The copy is
    ``N * D * W`` elements, small next to ``x``.
    """
    return None if state is None else state.transpose(1, 2).contiguous()


def causal_conv1d_fwd(x, wt, bias, residual, h0t, activation, cu_seqlens, chunk_indices, BT, BD, num_warps):
    """Launch the forward: ``x`` ``[B, T, D]`` (channel stride 1), ``wt`` ``[W, D]``, ``h0t`` the
    initial state as ``[N, W, D]`` (see :func:`_state_rows`) or ``None``. Returns ``y`` ``[B, T, D]``
    contiguous in ``x.dtype``."""
    B, T, D = x.shape
    W = wt.shape[0]
    NT, NC = _n_chunks(B, T, BT, chunk_indices)
    ND = cdiv(D, BD)
    y = torch.empty(B, T, D, dtype=x.dtype, device=x.device)
    plan = task_plan(NC * ND, "vector")
    grid3d = _grid3d(ND, NC if cu_seqlens is not None else NT, 1 if cu_seqlens is not None else B)
    causal_conv1d_fwd_kernel[grid3d or plan.grid](
        x=x, wt=wt, bias=bias, residual=residual, h0t=h0t, y=y, chunk_indices=chunk_indices,
        cu_seqlens=cu_seqlens, s_xb=x.stride(0), s_xt=x.stride(1), T=T, D=D, NT=NT, ND=ND,
        n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BT=BT, BD=BD,
        ACT=activation is not None, HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None,
        USE_H0=h0t is not None, IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        GRID3D=grid3d is not None, **launch_options(num_warps=num_warps),
    )
    return y


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


def _bwd_shift_gather() -> bool:
    """Whether the backward reads the shifted ``dpre`` rows through ``tl.gather`` (compiled CUDA
    with a Triton that has it: 3.3 and later) instead of recomputing them per tap (the NPU, whose UB
    holds one tap's loads at a time, the interpreter, and older Triton). Timed on the H200 in
    cases.md."""
    return backend.is_cuda_compiled() and hasattr(tl, "gather")


def _bwd_step(BT: int, W: int, gather: bool) -> int:
    """Tokens between consecutive backward tiles: ``BT``, or ``BT - (W - 1)`` with the gather tile
    (its last ``W - 1`` rows only feed the rows before them).

    Raises:
        ValueError: the gather tile's ``BT`` is not above ``W - 1`` (a tile table error).
    """
    if gather and BT <= W - 1:
        raise ValueError(f"the gather backward tile needs BT > W - 1, got BT={BT}, W={W}")
    return BT - (W - 1) if gather else BT


def causal_conv1d_bwd(x, wt, bias, h0t, dy, dht, activation, cu_seqlens, chunk_indices, chunk_size, BT, BD,
                      num_warps, gather=False):
    """Launch the backward (``h0t``: the initial state as ``[N, W, D]`` or ``None``; ``dht``: the
    final-state gradient ``[N, D, W]`` or ``None``; ``chunk_indices``: the varlen chunk list for
    chunks of ``chunk_size`` tokens (the forward's), rebuilt here when the tile's step
    (:func:`_bwd_step`) differs; ``gather``: the ``tl.gather`` tile). Returns ``(dx [B, T, D] in
    x.dtype, dwt [W, D] float32, db [D] float32 or None, dh0 [N, D, W] in the initial state's dtype
    or None)``."""
    B, T, D = x.shape
    W = wt.shape[0]
    step = _bwd_step(BT, W, gather)
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
        **common, dx=dx, dw_part=dw_part, db_part=db_part, chunk_indices=chunk_indices, NT=NT,
        n_tasks=plan.n_tasks, n_programs=plan.n_programs, W=W, BT=BT, BD=BD, ACT=activation is not None,
        HAS_BIAS=bias is not None, USE_H0=h0t is not None, HAS_DHT=dht is not None,
        IS_VARLEN=cu_seqlens is not None, TASK_LOOP=plan.task_loop, SHIFT_GATHER=gather,
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
        BT, BD, num_warps = _tiles(D, "fwd")
        chunk_indices = _conv_chunk_indices(cu_seqlens, BT, fla_chunk_indices, cu_seqlens_cpu)
        wt = weight.t().contiguous()  # [W, D]: each tap a contiguous row (NPU layout rule)
        h0t = _state_rows(initial_state)  # [N, W, D]: state rows contiguous along D (NPU layout rule)
        y = causal_conv1d_fwd(x, wt, bias, residual, h0t, activation, cu_seqlens, chunk_indices, BT, BD, num_warps)
        ht = None
        if output_final_state:
            ht = causal_conv1d_states_fwd(x, W, h0t, cu_seqlens, BD, x.dtype)
        ctx.save_for_backward(x, wt, bias, h0t, cu_seqlens, chunk_indices, fla_chunk_indices, cu_seqlens_cpu)
        ctx.meta = (activation, weight.dtype, residual is not None, BT)
        return y, ht

    @staticmethod
    @kernel_backward("causal_conv1d")
    def backward(ctx, dy, dht):
        x, wt, bias, h0t, cu_seqlens, chunk_indices, fla_chunk_indices, cu_seqlens_cpu = ctx.saved_tensors
        activation, w_dtype, has_residual, fwd_BT = ctx.meta
        BT, BD, num_warps = _tiles(wt.shape[1], "bwd")
        gather = _bwd_shift_gather()
        step = _bwd_step(BT, wt.shape[0], gather)
        if cu_seqlens is not None and step != fwd_BT:
            chunk_indices, fwd_BT = _conv_chunk_indices(cu_seqlens, step, fla_chunk_indices, cu_seqlens_cpu), step
        dx, dwt, db, dh0 = causal_conv1d_bwd(x, wt, bias, h0t, dy, dht, activation, cu_seqlens, chunk_indices,
                                             fwd_BT, BT, BD, num_warps, gather)
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
