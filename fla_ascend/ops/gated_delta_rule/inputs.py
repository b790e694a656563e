"""Validation of the gated delta rule's arguments, shared by the chunked and recurrent ops."""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import torch

from fla_ascend.ops.utils import FLOAT_DTYPES, check_bools, check_same_device, check_tensor, check_varlen, op_errors

MAX_HEAD_DIM = 256
"""Largest K and V: the state recurrence keeps a whole ``[K, BV]`` state slice on chip."""


@dataclass
class GatedDeltaRuleInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor | None
    beta: torch.Tensor | None
    scale: float
    initial_state: torch.Tensor | None
    cu_seqlens: torch.Tensor | None
    A_log: torch.Tensor | None
    dt_bias: torch.Tensor | None
    N: int
    gk: torch.Tensor | None = None
    gv: torch.Tensor | None = None
    cu_seqlens_cpu: torch.Tensor | None = None
    chunk_indices: torch.Tensor | None = None


def validate_inputs(
    op: str, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias,
    output_final_state=False, *, gk=None, gv=None, gates_optional=False, use_beta_sigmoid_in_kernel=False,
    allow_neg_eigval=False, state_v_first=False, cu_seqlens_cpu=None, chunk_indices=None,
    chunk_size=None,
) -> GatedDeltaRuleInputs:
    """Check shapes, dtypes, devices and varlen boundaries; return contiguous inputs.

    ``gates_optional`` (the fused recurrent op): ``g`` and ``beta`` may be ``None``, ``beta`` may be
    ``[B, T, HV, V]``, and ``gk``
    ``[B, T, HV, K]`` / ``gv`` ``[B, T, HV, V]`` may be given. ``state_v_first``: ``initial_state``
    is ``[N, HV, V, K]``. ``cu_seqlens_cpu`` / ``chunk_indices`` (of ``chunk_size``-token chunks): see
    :func:`fla_ascend.ops.utils.check_varlen`. The flags are bools already (the ops check them first,
    :func:`fla_ascend.ops.utils.check_bools`).

    Raises:
        TypeError, ValueError: see :func:`fla_ascend.ops.chunk_gated_delta_rule`; messages start
            with ``op`` and name the argument, the expected and the actual value.
    """
    with op_errors(op):
        check_tensor("q", q, (None, None, None, None))
        B, T, H, K = q.shape
        check_tensor("k", k, (B, T, H, K))
        check_tensor("v", v, (B, T, None, None))
        HV, V = v.shape[2], v.shape[3]
        if T < 1:
            raise ValueError(f"sequence length T must be >= 1, got T={T} (q shape {tuple(q.shape)})")
        if H < 1 or HV % H != 0:
            raise ValueError(f"v's head count HV must be a multiple of q/k's H (GVA), got HV={HV}, H={H}")
        for name, size in (("K", K), ("V", V)):
            if not 1 <= size <= MAX_HEAD_DIM:
                raise ValueError(f"head dim {name} must be in [1, {MAX_HEAD_DIM}], got {name}={size}")
        if not gates_optional or g is not None:
            check_tensor("g", g, (B, T, HV), dtypes=FLOAT_DTYPES)
        if gates_optional and isinstance(beta, torch.Tensor) and beta.dim() == 4:  # per value column
            check_tensor("beta", beta, (B, T, HV, V), dtypes=FLOAT_DTYPES)
        elif not gates_optional or beta is not None:
            check_tensor("beta", beta, (B, T, HV), dtypes=FLOAT_DTYPES)
        if gk is not None:
            check_tensor("gk", gk, (B, T, HV, K), dtypes=FLOAT_DTYPES)
        if gv is not None:
            check_tensor("gv", gv, (B, T, HV, V), dtypes=FLOAT_DTYPES)
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            raise ValueError("allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True (beta = 2 sigmoid(beta)), "
                             "got use_beta_sigmoid_in_kernel=False")
        if use_gate_in_kernel:
            if g is None:
                raise ValueError("use_gate_in_kernel=True requires g (the raw gate input) of shape [B, T, HV]; "
                                 "got g=None")
            if A_log is None:
                raise ValueError("use_gate_in_kernel=True requires A_log of shape [HV]; got A_log=None")
            check_tensor("A_log", A_log, (HV,), dtypes=FLOAT_DTYPES)
            if dt_bias is not None:
                check_tensor("dt_bias", dt_bias, (HV,), dtypes=FLOAT_DTYPES)
        else:
            if A_log is not None or dt_bias is not None:
                given = " and ".join(n for n, t in (("A_log", A_log), ("dt_bias", dt_bias)) if t is not None)
                raise ValueError(f"{given} given with use_gate_in_kernel=False would not be used (g is taken as "
                                 "the log decay as it is); pass use_gate_in_kernel=True to compute the gate from "
                                 "them, or leave them None")
        cu_seqlens, cu_seqlens_cpu, chunk_indices = check_varlen(cu_seqlens, cu_seqlens_cpu, chunk_indices, B, T,
                                                                 chunk_size)
        N = B if cu_seqlens is None else cu_seqlens.numel() - 1
        if initial_state is not None:
            check_tensor("initial_state", initial_state, (N, HV, V, K) if state_v_first else (N, HV, K, V),
                         dtypes=FLOAT_DTYPES)
        check_same_device(q=q, k=k, v=v, g=g, gk=gk, gv=gv, beta=beta, initial_state=initial_state,
                          cu_seqlens=cu_seqlens, chunk_indices=chunk_indices, A_log=A_log, dt_bias=dt_bias)
        if scale is None:
            scale = K ** -0.5
        elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale must be a float, got {type(scale).__name__}")
        elif not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")

    def c(x):
        return None if x is None else x.contiguous()

    return GatedDeltaRuleInputs(
        q=c(q), k=c(k), v=c(v), g=c(g), beta=c(beta), scale=float(scale), initial_state=c(initial_state),
        cu_seqlens=c(cu_seqlens), A_log=c(A_log), dt_bias=c(dt_bias), N=N, gk=c(gk), gv=c(gv),
        cu_seqlens_cpu=cu_seqlens_cpu, chunk_indices=c(chunk_indices),
    )


def check_extra_kwargs(op: str, kwargs: dict, state_v_first: bool) -> bool:
    """flash-linear-attention's ``**kwargs`` of the gated delta rule ops: the deprecated
    ``transpose_state_layout`` (renamed ``state_v_first``; a ``DeprecationWarning``) is honoured;
    ``head_first`` raises ``DeprecationWarning`` as flash-linear-attention does; any other name is
    refused. Returns ``state_v_first``.

    Raises:
        ValueError: both ``state_v_first`` and ``transpose_state_layout`` given.
        DeprecationWarning: ``head_first`` given (inputs are ``[B, T, H, ...]``).
        TypeError: an unknown keyword argument.
    """
    kwargs = dict(kwargs)
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError(f"{op}: pass either state_v_first or the deprecated transpose_state_layout, not both")
        warnings.warn(f"{op}: transpose_state_layout is deprecated; it is named state_v_first",
                      DeprecationWarning, stacklevel=3)
        state_v_first = check_bools(op, transpose_state_layout=kwargs.pop("transpose_state_layout"))[0]
    if "head_first" in kwargs:
        raise DeprecationWarning(f"{op}: head_first was removed; inputs are [B, T, H, ...]")
    if kwargs:
        raise TypeError(f"{op}: unexpected keyword arguments {sorted(kwargs)}")
    return state_v_first
