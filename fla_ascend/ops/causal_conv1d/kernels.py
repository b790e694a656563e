"""The ``@triton.jit`` kernels of the causal depthwise 1-D convolution and their live tiles (UB model).

Launched by :mod:`.conv` (launch plans, autograd, public functions); semantics are in :mod:`.reference`.

Kernels (one ``@triton.jit`` source each, task-loop launch plans; the forward also has a 3-D grid
plan on CUDA, ``_grid3d``):

- ``causal_conv1d_fwd_kernel``: a task is ``BT`` tokens x ``BD`` channels of one sequence; the
  ``W`` taps are ``W`` shifted masked loads of ``x`` (the first ``W - 1`` positions of a sequence
  read the initial state); bias, SiLU and residual are fused.
- ``causal_conv1d_bwd_kernel``: tasks overlapping by ``W - 1`` rows; each computes ``dpre`` (``dy``
  through the SiLU derivative) once per row and takes the shifted rows ``dpre[t + k]`` that ``dx[t]``
  needs from the tile itself (``_rows_from``: ``tl.gather`` on compiled CUDA, triton-ascend's slice
  ops on the NPU; under the interpreters, which have neither, from reloaded rows). With SiLU the pre-activation is
  recomputed from ``x`` on CUDA and read from the forward's stored copy elsewhere. Writes ``dx``
  (adding the final-state gradient ``dht`` of the last ``W`` tokens) and per-task partial sums of
  ``dweight`` / ``dbias`` that the host reduces with ``torch.sum`` (deterministic: no atomics).
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

import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.utils.math import sigmoid, silu
from fla_ascend.tiling.ub import Tile

SHIFT_GATHER, SHIFT_SLICE, SHIFT_LOAD = 1, 2, 3
"""How the backward tile gets ``dpre[t + k]`` (and, off CUDA's gather tile, the ``x`` rows of each
tap): ``tl.gather`` of its own rows (compiled CUDA, Triton 3.3 and later; Triton stages it through
shared memory), ``tl.extract_slice`` / ``tl.insert_slice`` of them (triton-ascend 3.2.0's extension
ops: a UB-to-UB copy on the vector core; :func:`_rows_from`), or by loading the shifted rows again
and forming ``dpre`` from them (the Triton interpreters, which have neither op, and older Triton:
the same values, row by row)."""

UNROLL_TAPS = tl.constexpr(backend.is_cuda_compiled())
"""Whether the pre-activation's tap loop is unrolled (compiled CUDA, as timed in cases.md) or a
runtime loop (NPU, interpreter): unrolled, its ``2 W`` masked window loads in one block made
bishengir-compile's sync solver (``GraphSyncSolver``) take 13-34 s per forward and backward
launch on a 2-core machine (docs/check.md)."""


# Live tiles for the UB model (fla_ascend.tiling.ub), calibrated on bishengir-compile's plan for
# Ascend910B2 (bf16, W = 4, BD = 64; docs/check.md): flags (ACT, USE_H0, HAS_DHT) enter the sizes
# as 0/1; the plans are counted in [BT, BD] fp32 tiles (and [BT, 64] ones for the states). At
# BT * BD = 4096 (no states): the forward 95488 B plain, 128256 B with SiLU; the backward 152704 B
# plain, 169088 B with SiLU. At 2048 (with states): the forward 91296 B with SiLU and an initial
# state, the backward 115456 B with SiLU, initial state and final-state gradient. The states
# backward: 43872 B.
FWD_TILES = [
    Tile(("5 + 2 * min(1, W - 1)", "BT", "BD"), "fp32", "one tap's window, accumulator, masks, casts (5 at W = 1: "
         "no shifted window; 78080 B plain at [64, 64], 2026-12-07)", buffered=False),
    Tile(("2 * ACT + 4 * USE_H0", "BT", "BD"), "fp32", "SiLU temporaries and the pre-activation store; "
         "initial-state window", buffered=False),
]
BWD_TILES = [
    Tile((10, "BT", "BD"), "fp32", "dy, dpre, dx, the x window and its shifted copies, masks", buffered=False),
    Tile(("ACT + USE_H0 + 2 * HAS_DHT", "BT", "BD"), "fp32", "pre-activation; state windows; dht",
         buffered=False),
    Tile(("USE_H0 + HAS_DHT", "BT", 64), "fp32", "state row buffers (planned per row, not per channel: "
         "89440 B at [64, 16] with both states)", buffered=False),
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
UPDATE_TILES = [  # planned 66272 B at BW 4, BD 128; 33248 B at BW 2, BD 64; 4608 B at BW 1, BD 128
    Tile(("17 * min(1, BW // 2)", "BD", "max(BW, 8)"), "fp32", "cache, weight, shifted cache, products, masks "
         "([BD, BW] rows padded to 8 elements)", buffered=False),
    Tile(("9 * (1 - min(1, BW // 2))", "BD"), "fp32", "W = 1 (no cache): x, weight, output rows", buffered=False)]


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
    i_task, x, wt, bias, residual, h0t, y, pre, chunk_indices, cu_seqlens, s_xb, s_xt, T, D, NT, ND,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr, STORE_PRE: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_c = i_task // ND
    i_d = i_task % ND
    i_b, i_n, i_t, bos, L = _seq_of_chunk(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    _conv_fwd_tile(i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, pre, s_xb, s_xt, T, D,
                   W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, STORE_PRE)


@triton.jit
def _conv_fwd_tile(
    i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, pre, s_xb, s_xt, T, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr, STORE_PRE: tl.constexpr,
):
    """The ``[BT, BD]`` output tile of chunk ``i_t`` of sequence ``i_n`` (batch row ``i_b``, start
    ``bos``, length ``L``; int64), channel block ``i_d``. ``STORE_PRE``: the pre-activation is
    written to ``pre`` (``[B, T, D]`` like ``y``) for the per-tap backward."""
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
    p_y = (i_b * T + bos + t0) * D + o_t[:, None] * D + o_d[None, :]
    m = m_t[:, None] & m_d[None, :]
    if STORE_PRE:
        tl.store(pre + p_y, b_y.to(pre.dtype.element_ty), mask=m)
    if ACT:
        b_y = silu(b_y)
    if HAS_RESIDUAL:
        b_y += tl.load(residual + p_y, mask=m, other=0.0).to(tl.float32)
    tl.store(y + p_y, b_y.to(y.dtype.element_ty), mask=m)


@triton.jit(do_not_specialize=["T", "NT", "ND", "n_tasks", "n_programs"])
def causal_conv1d_fwd_kernel(
    x, wt, bias, residual, h0t, y, pre, chunk_indices, cu_seqlens, s_xb, s_xt, T, D, NT, ND, n_tasks, n_programs,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr, USE_H0: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    GRID3D: tl.constexpr = False, STORE_PRE: tl.constexpr = False,
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
        _conv_fwd_tile(i_b, i_n, i_t, bos, L, i_d, x, wt, bias, residual, h0t, y, pre, s_xb, s_xt, T, D,
                       W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, STORE_PRE)
    elif TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _conv_fwd_task(i_task, x, wt, bias, residual, h0t, y, pre, chunk_indices, cu_seqlens, s_xb, s_xt, T,
                           D, NT, ND, W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, IS_VARLEN, STORE_PRE)
    else:
        _conv_fwd_task(tl.program_id(0), x, wt, bias, residual, h0t, y, pre, chunk_indices, cu_seqlens, s_xb,
                       s_xt, T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, HAS_RESIDUAL, USE_H0, IS_VARLEN, STORE_PRE)


@triton.jit
def _conv_bwd_task(
    i_task, x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part, chunk_indices, cu_seqlens,
    s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr, SHIFT: tl.constexpr,
):
    i_task = tl.cast(i_task, tl.int64)
    i_c = i_task // ND
    i_d = i_task % ND
    i_b, i_n, i_t, bos, L = _seq_of_chunk(i_c, chunk_indices, cu_seqlens, T, NT, IS_VARLEN)
    _conv_bwd_tile(i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part,
                   s_xb, s_xt, s_dyb, s_dyt, T, D, W, BT, BD, ACT, HAS_BIAS, USE_H0, HAS_DHT, SHIFT)


@triton.jit
def _rows_from(b, k: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, SHIFT: tl.constexpr):
    """``b`` (``[BT, BD]``) moved up by ``k`` rows: row ``t`` of the result is row ``t + k`` of ``b``
    for ``t < BT - k``; the rows after are unspecified. ``SHIFT``: :data:`SHIFT_GATHER` or
    :data:`SHIFT_SLICE`."""
    if SHIFT == 1:
        i_q = tl.broadcast_to(tl.minimum(tl.arange(0, BT) + k, BT - 1)[:, None], [BT, BD])
        r = tl.gather(b, i_q, axis=0)
    else:
        r = tl.insert_slice(b, tl.extract_slice(b, [k, 0], [BT - k, BD], [1, 1]), [0, 0], [BT - k, BD], [1, 1])
    return r


@triton.jit
def _dpre_rows(x, h0t, wt, bias, pre, dy, p_x0, s_xt, p_dy0, s_dyt, p_p0, p_h0, o_q, lo, hi, o_d, m_d, D,
               W: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr, USE_H0: tl.constexpr):
    """``dpre`` of the rows ``o_q`` (relative to the tile start): ``dy`` through the SiLU derivative
    at the pre-activation (read from ``pre`` or, when it is ``None``, recomputed from ``x``); zero
    past the sequence end."""
    m_q = o_q < hi
    m_qd = m_q[:, None] & m_d[None, :]
    b_dp = tl.load(dy + p_dy0 + o_q[:, None] * s_dyt + o_d[None, :], mask=m_qd, other=0.0).to(tl.float32)
    if ACT:
        if pre is None:
            b_p = _pre_activation(x, h0t, wt, bias, p_x0, s_xt, p_h0, o_q, lo, hi, m_q, o_d, m_d, D,
                                  W, USE_H0, HAS_BIAS)  # [BT, BD]
        else:
            b_p = tl.load(pre + p_p0 + o_q[:, None] * D + o_d[None, :], mask=m_qd, other=0.0).to(tl.float32)
        b_s = sigmoid(b_p)
        b_dp = b_dp * b_s * (1.0 + b_p * (1.0 - b_s))
    return b_dp


@triton.jit
def _materialized(b, BT: tl.constexpr, BD: tl.constexpr, SHIFT: tl.constexpr):
    """``b`` itself; with the slice ops (NPU) passed through a reshape round trip. triton-ascend
    3.2.0 moves a ``tensor.extract_slice`` of an elementwise result up into that result's inputs, so
    each of the ``W - 1`` shifted copies of ``dpre`` would recompute its sigmoid from its own shifted
    loads of ``dy`` and the pre-activation (loads it marks ``DiscreteMemAccess``); the reshape stops
    that, and ``dpre`` is computed once per row."""
    if SHIFT == 2:
        b = tl.reshape(tl.reshape(b, [BT * BD]), [BT, BD])
    return b


@triton.jit
def _conv_bwd_tile(
    i_b, i_n, i_t, bos, L, i_c, i_d, x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part,
    s_xb, s_xt, s_dyb, s_dyt, T, D,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, SHIFT: tl.constexpr,
):
    """The backward of one tile: its ``BT`` rows give ``dpre``; ``dx`` of its first
    ``BO = BT - (W - 1)`` rows (tiles advance by that) takes ``dpre[t + k]`` from the tile itself
    through :func:`_rows_from` (``SHIFT_GATHER``, ``SHIFT_SLICE``), or with ``SHIFT_LOAD`` forms it
    again from reloaded rows (:func:`_dpre_rows`). The pre-activation is recomputed from ``x`` (``pre`` is ``None``:
    compiled CUDA, as timed) or loaded from the forward's ``pre`` (``[B, T, D]``). ``dweight``: with
    ``tl.gather`` (CUDA) ``W`` window loads of ``x``; otherwise one window of ``x`` starting ``W - 1``
    rows before the tile, moved up by ``w`` rows for tap ``w`` (no reload, no cast per tap)."""
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
    p_dy0 = i_b * s_dyb + (bos + t0) * s_dyt
    p_p0 = (i_b * T + bos + t0) * D
    b_dp = _dpre_rows(x, h0t, wt, bias, pre, dy, p_x0, s_xt, p_dy0, s_dyt, p_p0, p_h0, o_r, lo, hi, o_d, m_d, D,
                      W, ACT, HAS_BIAS, USE_H0)  # [BT, BD]
    b_dp = _materialized(b_dp, BT, BD, SHIFT)
    # dx[t] = sum_k wt[W - 1 - k] * dpre[t + k]; rows t + k past the tile serve only rows it does not write
    b_dx = tl.zeros([BT, BD], dtype=tl.float32)  # [BT, BD]
    for k in tl.static_range(W):
        b_w = tl.load(wt + (W - 1 - k) * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
        if k == 0:
            b_dx += b_dp * b_w[None, :]
        elif SHIFT == 3:
            b_dx += _dpre_rows(x, h0t, wt, bias, pre, dy, p_x0, s_xt, p_dy0, s_dyt, p_p0, p_h0, o_r + k, lo, hi,
                               o_d, m_d, D, W, ACT, HAS_BIAS, USE_H0) * b_w[None, :]
        else:
            b_dx += _rows_from(b_dp, k, BT, BD, SHIFT) * b_w[None, :]
    # dweight and dbias sum over the written rows only:
    # dweight[w] = sum_t dpre[t] * x[t - (W - 1) + w] and dbias = sum_t dpre[t]
    b_dp = tl.where(m_o[:, None], b_dp, 0.0)
    p_part = i_c * W * D + o_d
    if SHIFT != 2:
        for w in tl.static_range(W):
            b_x = _load_window(x, h0t, p_x0, s_xt, p_h0, o_r + (w - (W - 1)), lo, hi, m_o, o_d, m_d, D,
                               W, USE_H0)  # [BT, BD]
            tl.store(dw_part + p_part + w * D, tl.sum(b_dp * b_x, axis=0), mask=m_d)
    else:
        b_xw = _load_window(x, h0t, p_x0, s_xt, p_h0, o_r - (W - 1), lo, hi, o_r < BT, o_d, m_d, D,
                            W, USE_H0)  # [BT, BD]: rows t0 - (W - 1) + r
        b_xw = _materialized(b_xw, BT, BD, SHIFT)
        for w in tl.static_range(W):
            if w == 0:
                b_xs = b_xw
            else:
                b_xs = _rows_from(b_xw, w, BT, BD, SHIFT)
            tl.store(dw_part + p_part + w * D, tl.sum(b_dp * b_xs, axis=0), mask=m_d)
    if HAS_BIAS:
        tl.store(db_part + i_c * D + o_d, tl.sum(b_dp, axis=0), mask=m_d)
    if HAS_DHT:
        # the final state holds x[L - W + j] in its row j (dhtt: [N, W, D]); tile row t is j = t - hi + W
        m_j = (hi - W <= o_r) & m_o
        b_dx += tl.load(dhtt + p_h0 + (o_r - hi + W)[:, None] * D + o_d[None, :], mask=m_j[:, None] & m_d[None, :],
                        other=0.0).to(tl.float32)  # [BT, BD]
    p_dx = (i_b * T + bos + t0) * D + o_r[:, None] * D + o_d[None, :]
    tl.store(dx + p_dx, b_dx.to(dx.dtype.element_ty), mask=m_o[:, None] & m_d[None, :])


@triton.jit(do_not_specialize=["T", "NT", "ND", "n_tasks", "n_programs"])
def causal_conv1d_bwd_kernel(
    x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part, chunk_indices, cu_seqlens,
    s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, n_tasks, n_programs,
    W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
    USE_H0: tl.constexpr, HAS_DHT: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    SHIFT: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _conv_bwd_task(i_task, x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part, chunk_indices,
                           cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, USE_H0,
                           HAS_DHT, IS_VARLEN, SHIFT)
    else:
        _conv_bwd_task(tl.program_id(0), x, wt, bias, h0t, pre, dy, dhtt, dx, dw_part, db_part, chunk_indices,
                       cu_seqlens, s_xb, s_xt, s_dyb, s_dyt, T, D, NT, ND, W, BT, BD, ACT, HAS_BIAS, USE_H0,
                       HAS_DHT, IS_VARLEN, SHIFT)


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
