"""``fused_recurrent_gated_delta_rule``: token-by-token gated delta rule for decode and short
prefill (forward only). One task per (sequence, value head, ``BV`` slice of the state): the
``[K, BV]`` fp32 state slice stays on chip for the whole sequence, so the state is read and
written once per call; at T = 1 (decode) that state traffic is the whole cost.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.backend import launch_options
from fla_ascend.ops.gated_delta_rule.inputs import validate_inputs
from fla_ascend.ops.utils.autograd import check_forward_only
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2
from fla_ascend.tiling.ub import Tile, fit_tiles


@triton.jit
def _fused_recurrent_task(
    i_task, q, k, v, g, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, T,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_QK_L2NORM: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr,
):
    NV = tl.cdiv(V, BV)
    i_n = tl.cast(i_task // (HV * NV), tl.int64)
    i_hv = (i_task // NV) % HV
    i_v = i_task % NV
    i_h = i_hv // (HV // H)
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        bos = i_n * T
        eos = bos + T
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_h = m_k[:, None] & m_v[None, :]
    p_state = (i_n * HV + i_hv) * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        b_h += tl.load(h0 + p_state, mask=m_h, other=0.0).to(tl.float32)
    if USE_GATE:
        b_A = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
        if HAS_DT_BIAS:
            b_dt = tl.load(dt_bias + i_hv).to(tl.float32)
    for t in range(bos, eos):
        p_qk = (t * H + i_h) * K + o_k
        b_q = tl.load(q + p_qk, mask=m_k, other=0.0).to(tl.float32)  # [BK]
        b_k = tl.load(k + p_qk, mask=m_k, other=0.0).to(tl.float32)  # [BK]
        if USE_QK_L2NORM:
            b_q = b_q * tl.rsqrt(tl.sum(b_q * b_q) + 1e-6)
            b_k = b_k * tl.rsqrt(tl.sum(b_k * b_k) + 1e-6)
        p_v = (t * HV + i_hv) * V + o_v
        b_v = tl.load(v + p_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
        b_g = tl.load(g + t * HV + i_hv).to(tl.float32)
        b_beta = tl.load(beta + t * HV + i_hv).to(tl.float32)
        if USE_GATE:
            if HAS_DT_BIAS:
                b_g = b_g + b_dt
            b_g = -b_A * tl.where(b_g > 20.0, b_g, tl.log(1.0 + tl.exp(tl.minimum(b_g, 20.0))))
        b_h = b_h * tl.exp(b_g)
        b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], 0) * scale  # [BV]
        tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_FINAL_STATE:
        tl.store(ht + p_state, b_h, mask=m_h)


@triton.jit(do_not_specialize=["T", "n_tasks", "n_programs"])
def fused_recurrent_gated_delta_rule_kernel(
    q, k, v, g, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, T, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_QK_L2NORM: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _fused_recurrent_task(i_task, q, k, v, g, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, T,
                                  H, HV, K, V, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE, USE_QK_L2NORM,
                                  USE_GATE, HAS_DT_BIAS, IS_VARLEN)
    else:
        _fused_recurrent_task(tl.program_id(0), q, k, v, g, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, T,
                              H, HV, K, V, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE, USE_QK_L2NORM,
                              USE_GATE, HAS_DT_BIAS, IS_VARLEN)


CUDA_WARPS = 2
"""Warps per program on CUDA. H200 A/B (``benchmarks/tune_tiles.py``, cases.md): with ``BV = 32``,
2 warps reach 83-84% (B64) and 92% (B256) of copy bandwidth at T = 1, 4 warps 76% / 82%."""


RECURRENT_TILES = [
    *(Tile(("BK", "BV"), "fp32", name) for name in ("state h", "h * k / h * q", "decayed h", "k v^T update")),
    Tile(("BK",), "in", "q load"), Tile(("BK",), "in", "k load"), Tile(("BV",), "in", "v load"),
    Tile(("BK",), "fp32", "q"), Tile(("BK",), "fp32", "k"), Tile(("BV",), "fp32", "v"), Tile(("BV",), "fp32", "o"),
    Tile((128,), "fp32", "scalars: g, beta, norms, one-element reductions"),
    Tile((60, "BV"), "fp32", "per-step [BV] temporaries (31776 B planned at BK = 16, BV = 64)"),
]
"""Live tiles of :func:`fused_recurrent_gated_delta_rule_kernel` for the UB model, for a launch
with ``multibuffer=False``. bishengir-compile (Ascend910B2) then plans four ``[BK, BV]`` fp32
buffers (the state and the products of one time step) plus the per-token vectors: 133540 B at
``BK = 128, BV = 64``. With multi-buffering on it first tries to double them and, where that
overflows, retries with code motion and multi-buffering off and plans five: 167204 B at
``BK = 128, BV = 64``, and 264960 B (an overflow) at ``BK = 256, BV = 64``. Hence the NPU plan
below."""

NPU_UB_MARGIN = 0.9
"""Share of UB the NPU plan lets :data:`RECURRENT_TILES` take (the model is calibrated to be at
least the compiler's plan, docs/check.md)."""


def _recurrent_tiles(K: int, V: int, x: torch.Tensor) -> tuple[int, dict]:
    """``(BV, Ascend launch options)``. CUDA: ``BV = 32`` (enough programs to saturate HBM at
    decode batch sizes). NPU: the largest ``BV`` of 64, 32, 16, 8 whose :data:`RECURRENT_TILES`
    fit :data:`NPU_UB_MARGIN` of UB single-buffered (``BV = 64`` at ``K <= 128``, 32 at
    ``K = 256``), launched with ``multibuffer=False``: one time step's loads are a few hundred
    bytes, so double-buffering would only halve ``BV``. Elsewhere up to 64."""
    if backend.device_type() == "cuda":
        return min(32, next_pow2(V)), {}
    if backend.device_type() == "npu":
        cands = [b for b in (64, 32, 16, 8) if b <= max(8, next_pow2(V))]
        bv = fit_tiles(RECURRENT_TILES, {"BV": cands}, fixed={"BK": next_pow2(K), "in_bytes": x.element_size()},
                       multibuffer=1, margin=NPU_UB_MARGIN)["BV"]
        return bv, {"multibuffer": False}
    return min(64, next_pow2(V)), {}


def fused_recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    *,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Recurrent gated delta rule (forward only), same arguments, shapes and results as
    :func:`fla_ascend.ops.chunk_gated_delta_rule` (without ``chunk_size``).

    Use it for decode (``T = 1``, with ``initial_state`` from the previous step) and short
    prefills. Gradients are not supported: inputs that require grad raise.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` in q's dtype; ``final_state``
        ``[N, HV, K, V]`` float32 or ``None``.

    Raises:
        TypeError, ValueError: as :func:`fla_ascend.ops.chunk_gated_delta_rule`;
        RuntimeError: an input requires grad while grad mode is on.
    """
    x = validate_inputs(
        "fused_recurrent_gated_delta_rule", q, k, v, g, beta, scale, initial_state, cu_seqlens,
        use_gate_in_kernel, A_log, dt_bias, output_final_state,
    )
    check_forward_only("fused_recurrent_gated_delta_rule",
                       "use chunk_gated_delta_rule for training or call it under torch.no_grad()",
                       q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, A_log=A_log, dt_bias=dt_bias)
    B, T, H, K = x.q.shape
    HV, V = x.v.shape[2], x.v.shape[3]
    o = torch.empty(B, T, HV, V, dtype=x.q.dtype, device=x.q.device)
    ht = torch.empty(x.N, HV, K, V, dtype=torch.float32, device=x.q.device) if output_final_state else None
    BV, npu_options = _recurrent_tiles(K, V, x.q)
    n_tasks = x.N * HV * cdiv(V, BV)
    plan = task_plan(n_tasks, "vector")
    fused_recurrent_gated_delta_rule_kernel[plan.grid](
        q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, A_log=x.A_log, dt_bias=x.dt_bias, o=o,
        h0=x.initial_state, ht=ht, cu_seqlens=x.cu_seqlens, scale=x.scale, T=T,
        n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BK=next_pow2(K), BV=BV,
        USE_INITIAL_STATE=x.initial_state is not None, STORE_FINAL_STATE=output_final_state,
        USE_QK_L2NORM=use_qk_l2norm_in_kernel, USE_GATE=x.A_log is not None, HAS_DT_BIAS=x.dt_bias is not None,
        IS_VARLEN=x.cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        **launch_options(num_warps=CUDA_WARPS, **npu_options),
    )
    return o, ht
