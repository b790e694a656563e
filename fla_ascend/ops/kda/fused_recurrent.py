"""``fused_recurrent_kda``: token-by-token Kimi Delta Attention for decode and short prefill
(forward only: it runs with grad mode on, a backward through it raises).

KDA is the gated delta rule with a per-key-row decay, so this op runs the gated delta rule's
fused recurrent kernel (:mod:`fla_ascend.ops.gated_delta_rule.fused_recurrent`) with ``g`` as its
``gk``; KDA's gate activation (``-exp(A_log) * softplus(g + dt_bias)``, or the lower-bound form) is
that kernel's ``GATE_GK`` constexpr branch. One task per (sequence, value head, ``BV`` slice of the
state), as there.
"""
from __future__ import annotations

import math
import numbers

import torch

from fla_ascend.ops.gated_delta_rule.fused_recurrent import FusedRecurrentFunction, fused_recurrent_gated_delta_rule_fwd
from fla_ascend.ops.gated_delta_rule.inputs import check_extra_kwargs, validate_inputs
from fla_ascend.ops.utils import FLOAT_DTYPES, check_bools, check_same_device, check_tensor, op_errors

OP = "fused_recurrent_kda"

NOT_IMPLEMENTED_KWARGS = ("ssm_state_indices", "num_accepted_tokens")
"""flash-linear-attention's continuous-batching arguments of the kernel (a state pool indexed per
sequence, speculative decoding's accepted-token counts): refused unless ``None``."""


def _check_kda_args(q, v, g, beta, A_log, dt_bias, lower_bound, use_gate_in_kernel):
    """The KDA-specific arguments; shapes from the already checked ``q`` and ``v``. Returns
    ``(A_log, dt_bias)`` flattened to ``[HV]`` and ``[HV * K]`` (or ``None``)."""
    B, T, H, K = q.shape
    HV = v.shape[2]
    with op_errors(OP):
        check_tensor("g", g, (B, T, HV, K), dtypes=FLOAT_DTYPES)
        if lower_bound is not None:
            if isinstance(lower_bound, bool) or not isinstance(lower_bound, numbers.Real):
                raise TypeError(f"lower_bound must be a float or None, got {type(lower_bound).__name__}")
            if not math.isfinite(lower_bound) or lower_bound > 0:
                raise ValueError(f"lower_bound must be a finite log decay <= 0 (e.g. -5.0), got {lower_bound}")
        if not use_gate_in_kernel:
            given = [n for n, t in (("A_log", A_log), ("dt_bias", dt_bias), ("lower_bound", lower_bound))
                     if t is not None]
            if given:
                raise ValueError(f"{' and '.join(given)} given with use_gate_in_kernel=False would not be used (g is "
                                 "taken as the log decay as it is); pass use_gate_in_kernel=True to compute the gate "
                                 "from them, or leave them None")
            return None, None
        if A_log is None and lower_bound is None:
            raise ValueError("use_gate_in_kernel=True requires A_log of shape [HV] (or lower_bound, for "
                             "lower_bound * sigmoid(g + dt_bias)); got A_log=None and lower_bound=None")
        if A_log is not None:
            check_tensor("A_log", A_log, None, dtypes=FLOAT_DTYPES)
            if A_log.numel() != HV or max(A_log.shape, default=1) != A_log.numel():
                raise ValueError(f"A_log must have shape [HV] = [{HV}] (or HV elements with singleton dims, "
                                 f"as Kimi Linear's [1, 1, HV, 1]), got {tuple(A_log.shape)}")
            A_log = A_log.reshape(HV)
        if dt_bias is not None:
            check_tensor("dt_bias", dt_bias, None, dtypes=FLOAT_DTYPES)
            if tuple(dt_bias.shape) not in ((HV * K,), (HV, K)):
                raise ValueError(f"dt_bias must have shape [HV * K] = [{HV * K}] or [HV, K] = [{HV}, {K}], "
                                 f"got {tuple(dt_bias.shape)}")
            dt_bias = dt_bias.reshape(HV * K)
        check_same_device(q=q, g=g, A_log=A_log, dt_bias=dt_bias)
    return A_log, dt_bias


def _check_out(out, v):
    with op_errors(OP):
        check_tensor("out", out, tuple(v.shape), dtypes=(v.dtype,))
        if not out.is_contiguous():
            raise ValueError("out must be contiguous (the kernel writes it in place), got a non-contiguous tensor "
                             f"with strides {out.stride()}")
        check_same_device(v=v, out=out)


def fused_recurrent_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False,
    lower_bound: float | None = None,
    state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Recurrent Kimi Delta Attention (forward only), flash-linear-attention 0.6.0's
    ``fused_recurrent_kda`` (same parameters, positional order, defaults and returns).

    Use it for decode (``T = 1``, with ``initial_state`` from the previous step) and short
    prefills. Per token and value head, the state ``h`` ``[K, V]`` is decayed per key row by
    ``exp(g_t)`` and updated by the delta rule::

        h = diag(exp(g_t)) h;  v' = beta_t (v_t - h^T k_t);  h = h + k_t v'^T;  o_t = h^T (scale q_t)

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]`` (GVA when ``HV > H``: value head ``i`` reads
            query/key head ``i // (HV / H)``); ``K, V <= 256``. Any float dtypes, read as float32.
        g: ``[B, T, HV, K]`` log decay (``<= 0``), or the raw gate input with ``use_gate_in_kernel``.
        beta: ``[B, T, HV]`` or ``[B, T, HV, V]`` (one per value column); logits with
            ``use_beta_sigmoid_in_kernel``.
        A_log: ``[HV]`` (or ``HV`` elements with singleton dims, as Kimi Linear's ``[1, 1, HV, 1]``),
            only with ``use_gate_in_kernel``.
        dt_bias: ``[HV * K]`` or ``[HV, K]``, added to ``g`` before the activation, or ``None``; only
            with ``use_gate_in_kernel``.
        scale: query scale, default ``K ** -0.5``.
        initial_state: ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``), any float dtype
            (read as float32), or ``None`` (zeros).
        output_final_state: also return the state after the last token.
        use_qk_l2norm_in_kernel: L2-normalise q and k per head (``x / sqrt(sum x^2 + 1e-6)``).
        use_gate_in_kernel: ``g`` is the raw gate input; the decay is
            ``-exp(A_log) * softplus(g + dt_bias)``, or with ``lower_bound``
            ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))`` (``A_log`` may then be ``None``:
            ``lower_bound * sigmoid(g + dt_bias)``), per value head ``hv`` and key row ``k``
            (``dt_bias[hv * K + k]``).
        use_beta_sigmoid_in_kernel: ``beta`` holds logits: ``sigmoid(beta)`` is used.
        allow_neg_eigval: ``2 sigmoid(beta)`` (needs ``use_beta_sigmoid_in_kernel``).
        lower_bound: a float ``<= 0`` (e.g. ``-5.0``) selecting the lower-bound gate, or ``None``;
            only with ``use_gate_in_kernel``.
        state_v_first: states are ``[N, HV, V, K]`` (the deprecated ``transpose_state_layout``
            keyword is honoured with a ``DeprecationWarning``).
        cu_seqlens: ``[N + 1]`` int boundaries of packed sequences (``B == 1``); empty sequences are
            allowed (their output rows do not exist; their final state is the initial state).
        **kwargs: flash-linear-attention's kernel-level keywords: ``out`` (a contiguous
            ``[B, T, HV, V]`` tensor of v's dtype: ``o`` is written into it and it is returned),
            ``inplace_final_state`` (``True``: the final state is written into ``initial_state``,
            which must then be a contiguous float32 tensor, and returned; default ``False``, as the
            public op of flash-linear-attention), ``ssm_state_indices`` / ``num_accepted_tokens``
            (only ``None``); ``transpose_state_layout``. Other names raise ``TypeError``.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` in v's dtype; ``final_state`` ``[N, HV, K, V]``
        (``[N, HV, V, K]`` with ``state_v_first``) float32, or ``None`` without
        ``output_final_state`` (and without ``inplace_final_state``).

    Raises:
        TypeError: a non-tensor or non-float tensor argument, a flag that is not a bool, a
            ``lower_bound`` or ``scale`` that is not a real number, an unknown keyword argument.
        ValueError: wrong shapes (``g`` not ``[B, T, HV, K]``, ``beta`` missing, ``A_log`` /
            ``dt_bias`` of the wrong size, ``HV`` not a multiple of ``H``, ``K`` or ``V`` above 256),
            bad ``cu_seqlens``, tensors on different devices, ``A_log`` / ``dt_bias`` /
            ``lower_bound`` without ``use_gate_in_kernel``, ``use_gate_in_kernel`` with neither
            ``A_log`` nor ``lower_bound``, a ``lower_bound`` above 0 or not finite,
            ``allow_neg_eigval`` without ``use_beta_sigmoid_in_kernel``, a bad ``out``, an
            ``inplace_final_state`` without a contiguous float32 ``initial_state`` (or with one that
            requires grad). Messages start with ``fused_recurrent_kda`` and name the argument.
        NotImplementedError: ``ssm_state_indices`` or ``num_accepted_tokens`` given; a backward
            through the outputs (forward only, as in flash-linear-attention).
    """
    (output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
     state_v_first) = check_bools(
        OP, output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_gate_in_kernel=use_gate_in_kernel, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first)
    kwargs = dict(kwargs)
    for name in NOT_IMPLEMENTED_KWARGS:
        if kwargs.pop(name, None) is not None:
            raise NotImplementedError(f"{OP}: {name} (continuous batching over a state pool) is not implemented "
                                      "by fla-ascend; pass None and gather the states per sequence")
    out = kwargs.pop("out", None)
    inplace_final_state, = check_bools(OP, inplace_final_state=kwargs.pop("inplace_final_state", False))
    state_v_first = check_extra_kwargs(OP, kwargs, state_v_first)
    if beta is None:
        raise ValueError(f"{OP}: beta must be a tensor of shape [B, T, HV] or [B, T, HV, V], got None")
    x = validate_inputs(
        OP, q, k, v, None, beta, scale, initial_state, cu_seqlens, False, None, None, output_final_state,
        gates_optional=True, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
        state_v_first=state_v_first,
    )
    A_log, dt_bias = _check_kda_args(q, v, g, beta, A_log, dt_bias, lower_bound, use_gate_in_kernel)
    x.gk, x.A_log, x.dt_bias = g.contiguous(), None if A_log is None else A_log.contiguous(), \
        None if dt_bias is None else dt_bias.contiguous()
    if out is not None:
        _check_out(out, v)
    final_state = None
    if inplace_final_state:
        with op_errors(OP):
            if initial_state is None or initial_state.dtype != torch.float32 or not initial_state.is_contiguous():
                got = ("None" if initial_state is None
                       else f"{initial_state.dtype}, contiguous={initial_state.is_contiguous()}")
                raise ValueError(f"inplace_final_state=True needs initial_state as a contiguous float32 tensor "
                                 f"(the final state is written into it), got {got}")
            if initial_state.requires_grad and torch.is_grad_enabled():
                raise ValueError("inplace_final_state=True cannot overwrite an initial_state that requires grad")
        final_state = initial_state
    options = dict(use_gate_in_kernel=use_gate_in_kernel, gate_gk=True,
                   lower_bound=float(lower_bound) if use_gate_in_kernel and lower_bound is not None else None,
                   out=out, final_state=final_state)
    flags = (use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first)
    inputs = [t for t in (q, k, v, g, beta, initial_state, A_log, dt_bias) if t is not None]
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        # in the graph, so that a backward reaches FusedRecurrentFunction.backward and its message
        return FusedRecurrentFunction.apply(x, output_final_state, flags,
                                            {**options, "op": OP, "chunk_op": "chunk_kda"}, *inputs)
    return fused_recurrent_gated_delta_rule_fwd(x, output_final_state, *flags, **options)
