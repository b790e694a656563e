"""Validation of KDA's arguments (the gated delta rule's checks, with KDA's per-channel gate)."""
from __future__ import annotations

import math
import numbers

import torch

from fla_ascend.ops.gated_delta_rule.inputs import GatedDeltaRuleInputs, validate_inputs
from fla_ascend.ops.utils import FLOAT_DTYPES, check_tensor, op_errors


def validate_kda_inputs(
    op: str, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias, lower_bound,
    output_final_state=False, *, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
    cu_seqlens_cpu=None, chunk_indices=None, chunk_size=None,
) -> GatedDeltaRuleInputs:
    """Check KDA's inputs; return them contiguous, ``g`` as :attr:`GatedDeltaRuleInputs.gk`.

    ``g`` is ``[B, T, HV, K]``; with ``use_gate_in_kernel`` ``A_log`` is ``[HV]`` (required unless
    ``lower_bound`` is given) and ``dt_bias`` ``[HV * K]``; ``lower_bound`` a finite negative float
    (used with ``use_gate_in_kernel``). The rest as
    :func:`fla_ascend.ops.gated_delta_rule.inputs.validate_inputs`.

    Raises:
        TypeError, ValueError: messages start with ``op`` and name the argument, the expected and
            the actual value.
    """
    x = validate_inputs(
        op, q, k, v, None, beta, scale, initial_state, cu_seqlens, False, None, None, output_final_state,
        gates_optional=True, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, state_v_first=state_v_first, cu_seqlens_cpu=cu_seqlens_cpu,
        chunk_indices=chunk_indices, chunk_size=chunk_size,
    )
    with op_errors(op):
        HV, K = v.shape[2], q.shape[3]
        check_tensor("g", g, (q.shape[0], q.shape[1], HV, K), dtypes=FLOAT_DTYPES)
        if g.device != q.device:
            raise ValueError(f"g must be on q's device {q.device}, got {g.device}")
        if beta is None or beta.dim() != 3:
            check_tensor("beta", beta, (q.shape[0], q.shape[1], HV), dtypes=FLOAT_DTYPES)
        if lower_bound is not None:
            if isinstance(lower_bound, bool) or not isinstance(lower_bound, numbers.Real):
                raise TypeError(f"lower_bound must be a float or None, got {type(lower_bound).__name__}")
            if not (math.isfinite(lower_bound) and lower_bound < 0):
                raise ValueError(f"lower_bound must be a finite negative float, got {lower_bound}")
        if use_gate_in_kernel:
            if A_log is None and lower_bound is None:
                raise ValueError("use_gate_in_kernel=True requires A_log of shape [HV] unless lower_bound is set; "
                                 "got A_log=None")
            if A_log is not None:
                check_tensor("A_log", A_log, (HV,), dtypes=FLOAT_DTYPES)
            if dt_bias is not None:
                check_tensor("dt_bias", dt_bias, (HV * K,), dtypes=FLOAT_DTYPES)
        else:
            given = [n for n, t in (("A_log", A_log), ("dt_bias", dt_bias)) if t is not None]
            if given:
                raise ValueError(f"{' and '.join(given)} given with use_gate_in_kernel=False would not be used "
                                 "(g is taken as the log decay as it is); pass use_gate_in_kernel=True, or leave "
                                 "them None")
        for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
            if isinstance(t, torch.Tensor) and t.device != q.device:
                raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    x.gk = g.contiguous()
    x.A_log = None if A_log is None else A_log.contiguous()
    x.dt_bias = None if dt_bias is None else dt_bias.contiguous()
    return x
