"""Validation of the gated delta rule's arguments, shared by the chunked and recurrent ops."""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import torch

from fla_ascend.ops.utils import FLOAT_DTYPES, check_cu_seqlens, check_same_device, check_tensor, op_errors

MAX_HEAD_DIM = 256
"""Largest K and V: the state recurrence keeps a whole ``[K, BV]`` state slice on chip."""


@dataclass
class GatedDeltaRuleInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    scale: float
    initial_state: torch.Tensor | None
    cu_seqlens: torch.Tensor | None
    A_log: torch.Tensor | None
    dt_bias: torch.Tensor | None
    N: int


def validate_inputs(
    op: str, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias,
    output_final_state=False,
) -> GatedDeltaRuleInputs:
    """Check shapes, dtypes, devices and varlen boundaries; return contiguous inputs.

    Raises:
        TypeError, ValueError: see :func:`fla_ascend.ops.chunk_gated_delta_rule`; messages start
            with ``op`` and name the argument, the expected and the actual value.
    """
    with op_errors(op):
        check_tensor("q", q, (None, None, None, None))
        B, T, H, K = q.shape
        for name, t in (("k", k), ("v", v)):
            if isinstance(t, torch.Tensor) and t.dtype != q.dtype:
                raise TypeError(f"{name} must have q's dtype {q.dtype}, got {t.dtype}")
        check_tensor("k", k, (B, T, H, K), dtypes=(q.dtype,))
        check_tensor("v", v, (B, T, None, None), dtypes=(q.dtype,))
        HV, V = v.shape[2], v.shape[3]
        if T < 1:
            raise ValueError(f"sequence length T must be >= 1, got T={T} (q shape {tuple(q.shape)})")
        if H < 1 or HV % H != 0:
            raise ValueError(f"v's head count HV must be a multiple of q/k's H (GVA), got HV={HV}, H={H}")
        for name, size in (("K", K), ("V", V)):
            if not 1 <= size <= MAX_HEAD_DIM:
                raise ValueError(f"head dim {name} must be in [1, {MAX_HEAD_DIM}], got {name}={size}")
        check_tensor("g", g, (B, T, HV), dtypes=FLOAT_DTYPES)
        check_tensor("beta", beta, (B, T, HV), dtypes=FLOAT_DTYPES)
        if use_gate_in_kernel:
            if A_log is None:
                raise ValueError("use_gate_in_kernel=True requires A_log of shape [HV]; got A_log=None")
            check_tensor("A_log", A_log, (HV,), dtypes=FLOAT_DTYPES)
            if dt_bias is not None:
                check_tensor("dt_bias", dt_bias, (HV,), dtypes=FLOAT_DTYPES)
        else:
            if A_log is not None or dt_bias is not None:
                given = " and ".join(n for n, t in (("A_log", A_log), ("dt_bias", dt_bias)) if t is not None)
                warnings.warn(f"{op}: {given} given with use_gate_in_kernel=False are ignored (g is used as the "
                              "log decay as it is); pass use_gate_in_kernel=True to compute the gate from them",
                              UserWarning, stacklevel=3)
            A_log = dt_bias = None
        if cu_seqlens is not None:
            check_cu_seqlens(cu_seqlens, B, T)
            N = cu_seqlens.numel() - 1
        else:
            N = B
        if initial_state is not None:
            check_tensor("initial_state", initial_state, (N, HV, K, V), dtypes=FLOAT_DTYPES)
        check_same_device(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, cu_seqlens=cu_seqlens,
                          A_log=A_log, dt_bias=dt_bias)
        if scale is None:
            scale = K ** -0.5
        elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
            raise TypeError(f"scale must be a float, got {type(scale).__name__}")
        elif not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")
        if not isinstance(output_final_state, bool):
            raise TypeError(f"output_final_state must be a bool, got {type(output_final_state).__name__}")

    def c(x):
        return None if x is None else x.contiguous()

    return GatedDeltaRuleInputs(
        q=c(q), k=c(k), v=c(v), g=c(g), beta=c(beta), scale=float(scale), initial_state=c(initial_state),
        cu_seqlens=c(cu_seqlens), A_log=c(A_log), dt_bias=c(dt_bias), N=N,
    )
