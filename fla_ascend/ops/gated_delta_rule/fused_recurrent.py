"""``fused_recurrent_gated_delta_rule``: token-by-token gated delta rule for decode and short
prefill (forward only: it runs with grad mode on, a backward through it raises). One task per
(sequence, value head, ``BV`` slice of the state): the ``[K, BV]`` fp32 state slice stays on chip
for the whole sequence, so the state is read and written once per call; at T = 1 (decode) that
state traffic is the whole cost. Optional per-token decays (``g`` scalar, ``gk`` per key row,
``gv`` per value column), beta (``[B, T, HV]``, per value column, or absent), beta logits and a
V-first state layout are constexpr flags, as flash-linear-attention 0.6.0's arguments. The gate
activation in the kernel applies to ``g`` (GatedDeltaNet: ``A_log``, ``dt_bias`` ``[HV]``) or, with
``GATE_GK``, to ``gk`` (Kimi Delta Attention, :mod:`fla_ascend.ops.kda.fused_recurrent`: ``dt_bias``
``[HV * K]``), either ``-exp(A_log) * softplus(x + dt_bias)`` or, with ``USE_LOWER_BOUND``,
``lower_bound * sigmoid(exp(A_log) * (x + dt_bias))`` (``A_log`` optional there).
"""
from __future__ import annotations

from types import MappingProxyType

from fla_ascend.backend import launch_options

import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.gated_delta_rule.inputs import check_extra_kwargs, validate_inputs
from fla_ascend.ops.utils import check_bools
from fla_ascend.ops.utils.math import sigmoid, softplus
from fla_ascend.tiling import task_plan
from fla_ascend.tiling.sizes import cdiv, next_pow2
from fla_ascend.tiling.ub import Tile, fit_tiles


@triton.jit
def _gate(x, b_A, lower_bound, HAS_A_LOG: tl.constexpr, USE_LOWER_BOUND: tl.constexpr):
    """The log decay from the raw gate input ``x`` (``dt_bias`` added already); ``b_A`` is
    ``exp(A_log)``, unused without ``HAS_A_LOG``."""
    if USE_LOWER_BOUND:
        if HAS_A_LOG:
            x = b_A * x
        return lower_bound * sigmoid(x)
    else:
        return -b_A * softplus(x)


@triton.jit
def _fused_recurrent_task(
    i_task, q, k, v, g, gk, gv, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, lower_bound, T,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_QK_L2NORM: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr,
    USE_G: tl.constexpr, USE_GK: tl.constexpr, USE_GV: tl.constexpr, USE_BETA: tl.constexpr,
    BETA_SIGMOID: tl.constexpr, NEG_EIGVAL: tl.constexpr, STATE_V_FIRST: tl.constexpr, BETA_PER_V: tl.constexpr,
    GATE_GK: tl.constexpr, HAS_A_LOG: tl.constexpr, USE_LOWER_BOUND: tl.constexpr,
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
    # the on-chip tile is [BK, BV] in both layouts; a V-first state ([V, K] per head) is moved as
    # [BV, BK] tiles, contiguous along K (docs/ascend-rules.md, R5), and transposed on chip
    if STATE_V_FIRST:
        p_state = (i_n * HV + i_hv) * K * V + o_v[:, None] * K + o_k[None, :]
        m_s = m_v[:, None] & m_k[None, :]
    else:
        p_state = (i_n * HV + i_hv) * K * V + o_k[:, None] * V + o_v[None, :]
        m_s = m_k[:, None] & m_v[None, :]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        if STATE_V_FIRST:
            b_h += tl.trans(tl.load(h0 + p_state, mask=m_s, other=0.0).to(tl.float32))  # [BK, BV]
        else:
            b_h += tl.load(h0 + p_state, mask=m_s, other=0.0).to(tl.float32)
    b_A = 1.0
    if USE_GATE:
        if HAS_A_LOG:
            b_A = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
        if HAS_DT_BIAS:
            if GATE_GK:  # dt_bias [HV * K]: one per key row
                b_dt = tl.load(dt_bias + i_hv * K + o_k, mask=m_k, other=0.0).to(tl.float32)  # [BK]
            else:
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
        if USE_BETA:
            if BETA_PER_V:  # beta [B, T, HV, V]: one per value column
                b_beta = tl.load(beta + p_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
            else:
                b_beta = tl.load(beta + t * HV + i_hv).to(tl.float32)
            if BETA_SIGMOID:
                b_beta = 1.0 / (1.0 + tl.exp(-b_beta))
                if NEG_EIGVAL:
                    b_beta = b_beta * 2.0
        else:
            b_beta = 1.0
        if USE_G:
            b_g = tl.load(g + t * HV + i_hv).to(tl.float32)
            if USE_GATE and not GATE_GK:
                if HAS_DT_BIAS:
                    b_g = b_g + b_dt
                b_g = _gate(b_g, b_A, lower_bound, HAS_A_LOG, USE_LOWER_BOUND)
            b_h = b_h * tl.exp(b_g)
        if USE_GK:
            b_gk = tl.load(gk + (t * HV + i_hv) * K + o_k, mask=m_k, other=0.0).to(tl.float32)  # [BK]
            if USE_GATE and GATE_GK:
                if HAS_DT_BIAS:
                    b_gk = b_gk + b_dt
                b_gk = _gate(b_gk, b_A, lower_bound, HAS_A_LOG, USE_LOWER_BOUND)  # [BK]
            b_h = b_h * tl.exp(b_gk)[:, None]
        if USE_GV:
            b_gv = tl.load(gv + p_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
            b_h = b_h * tl.exp(b_gv)[None, :]
        b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], 0) * scale  # [BV]
        tl.store(o + p_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_FINAL_STATE:
        if STATE_V_FIRST:
            tl.store(ht + p_state, tl.trans(b_h), mask=m_s)
        else:
            tl.store(ht + p_state, b_h, mask=m_s)


@triton.jit(do_not_specialize=["T", "n_tasks", "n_programs"])
def fused_recurrent_gated_delta_rule_kernel(
    q, k, v, g, gk, gv, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale, lower_bound, T, n_tasks, n_programs,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_QK_L2NORM: tl.constexpr,
    USE_GATE: tl.constexpr, HAS_DT_BIAS: tl.constexpr, IS_VARLEN: tl.constexpr, TASK_LOOP: tl.constexpr,
    USE_G: tl.constexpr = True, USE_GK: tl.constexpr = False, USE_GV: tl.constexpr = False,
    USE_BETA: tl.constexpr = True, BETA_SIGMOID: tl.constexpr = False, NEG_EIGVAL: tl.constexpr = False,
    STATE_V_FIRST: tl.constexpr = False, BETA_PER_V: tl.constexpr = False,
    GATE_GK: tl.constexpr = False, HAS_A_LOG: tl.constexpr = True, USE_LOWER_BOUND: tl.constexpr = False,
):
    if TASK_LOOP:
        for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
            _fused_recurrent_task(i_task, q, k, v, g, gk, gv, beta, A_log, dt_bias, o, h0, ht, cu_seqlens, scale,
                                  lower_bound, T, H, HV, K, V, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE,
                                  USE_QK_L2NORM, USE_GATE, HAS_DT_BIAS, IS_VARLEN, USE_G, USE_GK, USE_GV, USE_BETA,
                                  BETA_SIGMOID, NEG_EIGVAL, STATE_V_FIRST, BETA_PER_V, GATE_GK, HAS_A_LOG,
                                  USE_LOWER_BOUND)
    else:
        _fused_recurrent_task(tl.program_id(0), q, k, v, g, gk, gv, beta, A_log, dt_bias, o, h0, ht, cu_seqlens,
                              scale, lower_bound, T, H, HV, K, V, BK, BV, USE_INITIAL_STATE, STORE_FINAL_STATE,
                              USE_QK_L2NORM, USE_GATE, HAS_DT_BIAS, IS_VARLEN, USE_G, USE_GK, USE_GV, USE_BETA,
                              BETA_SIGMOID, NEG_EIGVAL, STATE_V_FIRST, BETA_PER_V, GATE_GK, HAS_A_LOG,
                              USE_LOWER_BOUND)


CUDA_TILES = MappingProxyType({"bv": 32, "num_warps": 2})
"""Off-NPU launch of the kernel: ``bv``, the value slice of the state on CUDA (enough programs to
saturate HBM at decode batch sizes), and ``num_warps`` per program. Read-only; overridden through
the active target (``Target.overrides["fused_recurrent_gated_delta_rule"]``), where an overridden
``bv`` applies under the interpreter too. H200 A/B (``benchmarks/tune_tiles.py``, cases.md): with
``BV = 32``, 2 warps reach 83-84% (B64) and 92% (B256) of copy bandwidth at T = 1, 4 warps 76% / 82%."""


RECURRENT_TILES = [
    *(Tile(("BK", "BV"), "fp32", name) for name in ("state h", "h * k / h * q", "decayed h", "k v^T update")),
    Tile(("BK",), "in", "q load"), Tile(("BK",), "in", "k load"), Tile(("BV",), "in", "v load"),
    Tile(("BK",), "fp32", "q"), Tile(("BK",), "fp32", "k"), Tile(("BV",), "fp32", "v"), Tile(("BV",), "fp32", "o"),
    Tile((128,), "fp32", "scalars: g, beta, norms, one-element reductions"),
    Tile((60, "BV"), "fp32", "per-step [BV] temporaries (31776 B planned at BK = 16, BV = 64)"),
    # a V-first state plans about nine [BK, BV] fp32 tiles and 42 [BK] vectors (Ascend910B2, lower-bound gate,
    # 2026-12-07: 159200 B at BK 64, BV 64; 169312 B at BK 128, BV 32; 116128 B at BK 256, BV 8 and 189984 B at
    # BV 16), fitted as five more [BK, BV] tiles (the transposed state and its staging) and the vectors
    Tile(("5 * STATE_V_FIRST", "BK", "BV"), "fp32", "a V-first state's transposed and staged tiles"),
    Tile(("42 * STATE_V_FIRST", "BK"), "fp32", "a V-first state's per-key vectors"),
    Tile(("USE_GK", "BK"), "fp32", "gk row decays"), Tile(("USE_GV", "BV"), "fp32", "gv column decays"),
    Tile(("4 * GATE_GK", "BK"), "fp32", "the per-row gate activation: dt_bias row, softplus or sigmoid temporaries"),
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


def _recurrent_tiles(K: int, V: int, x: torch.Tensor, flags: dict | None = None) -> tuple[int, dict]:
    """``(BV, Ascend launch options)``. CUDA: :data:`CUDA_TILES`' ``bv`` (32). NPU: the largest
    ``BV`` of 64, 32, 16, 8 whose :data:`RECURRENT_TILES` fit :data:`NPU_UB_MARGIN` of UB
    single-buffered (``BV = 64`` at ``K <= 128``, 32 at ``K = 256``), launched with
    ``multibuffer=False``: one time step's loads are a few hundred bytes, so double-buffering would
    only halve ``BV``. Elsewhere up to 64. ``flags``: the kernel's ``STATE_V_FIRST``, ``USE_GK``,
    ``USE_GV``, ``GATE_GK`` (0/1; default 0), which add tiles. A ``bv`` in the active target's overrides applies
    off the NPU (CUDA and the interpreter)."""
    if backend.device_type() == "cuda":
        return min(backend.table("fused_recurrent_gated_delta_rule", CUDA_TILES)["bv"], next_pow2(V)), {}
    if backend.device_type() == "npu":
        cands = [b for b in (64, 32, 16, 8) if b <= max(8, next_pow2(V))]
        bv = fit_tiles(RECURRENT_TILES, {"BV": cands},
                       fixed={"BK": next_pow2(K), "in_bytes": x.element_size(),
                              "STATE_V_FIRST": 0, "USE_GK": 0, "USE_GV": 0, "GATE_GK": 0, **(flags or {})},
                       multibuffer=1, margin=NPU_UB_MARGIN)["BV"]
        return bv, {"multibuffer": False}
    over = backend.current().overrides.get("fused_recurrent_gated_delta_rule", {})
    return min(over.get("bv", 64), next_pow2(V)), {}


def fused_recurrent_gated_delta_rule_fwd(x, output_final_state, use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel,
                                         allow_neg_eigval, state_v_first, *, use_gate_in_kernel=None, gate_gk=False,
                                         lower_bound=None, out=None, final_state=None):
    """Launch the kernel on validated inputs ``x`` (:class:`GatedDeltaRuleInputs`). Returns ``(o, final_state)``.

    Keyword-only (checked by the caller): ``use_gate_in_kernel`` (default: ``x.A_log`` given),
    ``gate_gk`` (the gate activation applies to ``x.gk`` with ``dt_bias`` ``[HV * K]``), ``lower_bound``
    (a float: the lower-bound activation), ``out`` (a contiguous ``[B, T, HV, V]`` tensor in v's dtype to
    write ``o`` into) and ``final_state`` (a contiguous float32 state tensor to write the final state
    into, possibly ``x.initial_state`` itself: each task reads its state slice before it writes it)."""
    B, T, H, K = x.q.shape
    HV, V = x.v.shape[2], x.v.shape[3]
    if use_gate_in_kernel is None:
        use_gate_in_kernel = x.A_log is not None
    o = out if out is not None else torch.empty(B, T, HV, V, dtype=x.v.dtype, device=x.q.device)  # v's dtype
    ht = final_state
    if output_final_state and ht is None:
        ht = torch.empty(x.N, HV, *((V, K) if state_v_first else (K, V)), dtype=torch.float32, device=x.q.device)
    BV, npu_options = _recurrent_tiles(K, V, x.q, {"STATE_V_FIRST": int(state_v_first), "USE_GK": int(x.gk is not None),
                                                   "USE_GV": int(x.gv is not None),
                                                   "GATE_GK": int(gate_gk and use_gate_in_kernel)})
    n_tasks = x.N * HV * cdiv(V, BV)
    plan = task_plan(n_tasks, "vector")
    fused_recurrent_gated_delta_rule_kernel[plan.grid](
        q=x.q, k=x.k, v=x.v, g=x.g, gk=x.gk, gv=x.gv, beta=x.beta, A_log=x.A_log, dt_bias=x.dt_bias, o=o,
        h0=x.initial_state, ht=ht, cu_seqlens=x.cu_seqlens, scale=x.scale,
        lower_bound=0.0 if lower_bound is None else float(lower_bound), T=T,
        n_tasks=n_tasks, n_programs=plan.n_programs,
        H=H, HV=HV, K=K, V=V, BK=next_pow2(K), BV=BV,
        USE_INITIAL_STATE=x.initial_state is not None, STORE_FINAL_STATE=ht is not None,
        USE_QK_L2NORM=use_qk_l2norm_in_kernel, USE_GATE=use_gate_in_kernel, HAS_DT_BIAS=x.dt_bias is not None,
        IS_VARLEN=x.cu_seqlens is not None, TASK_LOOP=plan.task_loop,
        USE_G=x.g is not None, USE_GK=x.gk is not None, USE_GV=x.gv is not None, USE_BETA=x.beta is not None,
        BETA_SIGMOID=use_beta_sigmoid_in_kernel, NEG_EIGVAL=allow_neg_eigval, STATE_V_FIRST=state_v_first,
        BETA_PER_V=x.beta is not None and x.beta.dim() == 4,
        GATE_GK=gate_gk, HAS_A_LOG=x.A_log is not None, USE_LOWER_BOUND=lower_bound is not None,
        **launch_options(num_warps=backend.table("fused_recurrent_gated_delta_rule", CUDA_TILES)["num_warps"],
                         **npu_options),
    )
    return o, ht


class FusedRecurrentFunction(torch.autograd.Function):
    """Forward in autograd (so it runs with grad mode on, as flash-linear-attention's does); the
    backward refuses, naming the op (``op``, ``chunk_op``: the public op and its chunked counterpart)."""

    @staticmethod
    def forward(ctx, x, output_final_state, flags, options, *tensors):
        options = dict(options)
        ctx.op, ctx.chunk_op = options.pop("op", "fused_recurrent_gated_delta_rule"), options.pop(
            "chunk_op", "chunk_gated_delta_rule")
        result = fused_recurrent_gated_delta_rule_fwd(x, output_final_state, *flags, **options)
        # a final state written into an input (inplace_final_state) is returned as that tensor
        ctx.mark_dirty(*[t for t in tensors if t is options.get("final_state")])
        return result

    @staticmethod
    def backward(ctx, do, dht):
        raise NotImplementedError(
            f"{ctx.op} has no backward (it is the decode op, as in flash-linear-attention): "
            f"use {ctx.chunk_op} for training, or detach its outputs"
        )


def fused_recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None = None,
    gk: torch.Tensor | None = None,
    gv: torch.Tensor | None = None,
    beta: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Recurrent gated delta rule (forward only), flash-linear-attention 0.6.0's
    ``fused_recurrent_gated_delta_rule`` (same parameters, positional order, defaults and returns).

    Use it for decode (``T = 1``, with ``initial_state`` from the previous step) and short
    prefills. Per token and value head, the state ``h`` ``[K, V]`` is decayed by ``exp(g_t)``
    (scalar), ``exp(gk_t)`` (per row) and ``exp(gv_t)`` (per column), whichever are given (a plain
    delta rule when none is), then updated as in :func:`fla_ascend.ops.chunk_gated_delta_rule`.

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]`` (as the chunked op).
        g: ``[B, T, HV]`` log decay in ``[-inf, 0]`` (the raw gate input with ``use_gate_in_kernel``),
            or ``None``.
        gk: ``[B, T, HV, K]`` log decay per key dim, or ``None``.
        gv: ``[B, T, HV, V]`` log decay per value dim, or ``None``.
        beta: ``[B, T, HV]``, ``[B, T, HV, V]`` (one per value column), or ``None`` (all ones).
        scale, initial_state, output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        A_log, dt_bias, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first, cu_seqlens:
            as :func:`fla_ascend.ops.chunk_gated_delta_rule`.
        **kwargs: the deprecated ``transpose_state_layout``; other names raise ``TypeError``.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` in v's dtype (flash-linear-attention's rule;
        q, k, v may have different float dtypes, each read as float32); ``final_state``
        ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``) float32 or ``None``.

    Raises:
        TypeError, ValueError: as :func:`fla_ascend.ops.chunk_gated_delta_rule` (``g`` missing with
            ``use_gate_in_kernel``).
        NotImplementedError: from a backward through its outputs (it runs forward with grad mode
            on; gradients are not implemented, as in flash-linear-attention).
    """
    op = "fused_recurrent_gated_delta_rule"
    (output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
     state_v_first) = check_bools(
        op, output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_gate_in_kernel=use_gate_in_kernel, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first)
    state_v_first = check_extra_kwargs(op, kwargs, state_v_first)
    x = validate_inputs(
        op, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias,
        output_final_state, gk=gk, gv=gv, gates_optional=True, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first,
    )
    flags = (use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first)
    inputs = [t for t in (q, k, v, g, gk, gv, beta, initial_state, A_log, dt_bias) if t is not None]
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        # in the graph, so that a backward reaches FusedRecurrentFunction.backward and its message
        return FusedRecurrentFunction.apply(x, output_final_state, flags, {}, *inputs)
    return fused_recurrent_gated_delta_rule_fwd(x, output_final_state, *flags)
