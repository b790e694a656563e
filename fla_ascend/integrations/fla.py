"""fla-ascend as a backend of flash-linear-attention 0.6.0's own dispatch (``fla.backends``).

flash-linear-attention 0.6.0 routes some of its functions through a registry: a function decorated
with ``fla.backends.dispatch`` asks each registered backend, lowest ``priority`` first, whether it
is available and enabled, then calls the backend's ``<function>_verifier`` with the call's
arguments; the first backend whose verifier returns ``(True, None)`` runs its ``<function>``
method, and when none does, fla's own code runs. A rejection is logged once per function and
backend (logger ``fla.backends``, level INFO, the first reason only), and so is the first call a
backend takes. :func:`enable` registers one backend of type ``"fla_ascend"`` (priority -1: ahead of
fla's Ascend backends, 0, and FlashQLA / FlashKDA, 3) for each function below, through fla's public
``fla.backends.register``; nothing of fla is rebound.

Routed (flash-linear-attention 0.6.0 function -> fla-ascend):

- ``fla.ops.gated_delta_rule.chunk_gated_delta_rule`` (operation registry ``gated_delta_rule``) ->
  :func:`fla_ascend.ops.chunk_gated_delta_rule`, forward and backward (the whole op: same
  parameters).
- ``fla.ops.kda.chunk.chunk_kda`` (its own registry) -> :func:`fla_ascend.ops.chunk_kda`, forward
  and backward (the whole op: same parameters; ``A_log``, ``dt_bias`` and ``chunk_size``, which fla
  reads from ``**kwargs``, are keyword-only parameters of ours).
- ``fla.modules.causal_conv1d.ops.causal_conv1d_fwd`` / ``causal_conv1d_bwd`` (the stages that
  ``causal_conv1d``, ``ShortConvolution`` and fla's context-parallel conv call) ->
  :func:`fla_ascend.ops.causal_conv1d`; the backward stage receives the forward's inputs, not our
  saved tensors, so it runs our forward once more inside autograd and then our backward kernels.
- ``causal_conv1d_update`` (``ShortConvolution``'s decode step) -> :func:`fla_ascend.ops.causal_conv1d_update`.
- ``fla.modules.norm.l2norm.l2norm_fwd`` / ``l2norm_bwd`` (``l2norm``, ``l2_norm``, ``L2Norm``, and
  fla's own chunked op when it runs ``use_qk_l2norm_in_kernel``) -> fla-ascend's l2norm kernels.
- ``fla.modules.norm.fused_norm_gate.layer_norm_gated_fwd`` / ``layer_norm_gated_bwd`` with
  ``is_rms_norm=True`` (``rms_norm_gated``, ``FusedRMSNormGated``) -> fla-ascend's gated RMSNorm kernels.

Each forward stage returns what fla's stage returns (``y`` and the float32 ``rstd``, the residual
sum), so a backward stage left to fla (a rejected call) works on its output and the other way round.

Not routed: ``fused_recurrent_gated_delta_rule`` and ``fused_recurrent_kda`` are not dispatched
through the registry in 0.6.0 (plain functions); the inner stages of the gated delta rule
(``chunk_gated_delta_rule_fwd_intra``, ``recompute_w_u_fwd``, ...) and of KDA (operation registry
``kda``: ``kda_gate_chunk_cumsum``, ``chunk_kda_fwd_intra``, ``fused_recurrent_kda_fwd``, ...) are
dispatched but have no fla-ascend counterpart of the same contract.

``devices``: a call is taken only when its first tensor lives on one of the enabled device types.
The default, ``("npu", "cuda")``, leaves CPU tensors to fla. ``"cpu"`` routes CPU tensors to
fla-ascend's kernels under the Triton interpreter (the only way they run on a CPU; fla's own
kernels do not run there: Triton has no CPU driver), which is what the CPU tests use.

Tested (CPU, interpreter, fla-core 0.6.0 installed with ``--no-deps`` plus einops):
tests/integrations/test_fla_backend.py.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import numbers
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from fla_ascend import backend
from fla_ascend import ops as _ops
from fla_ascend.integrations.handles import Handle, Handles
from fla_ascend.ops.causal_conv1d.conv import MAX_W
from fla_ascend.ops.gated_delta_rule.chunk import CUDA_MIN_BWD_HEAD_DIM
from fla_ascend.ops.gated_delta_rule.inputs import MAX_HEAD_DIM
from fla_ascend.ops.kda.chunk import CHUNK_SIZES as KDA_CHUNK_SIZES
from fla_ascend.ops.utils import FLOAT_DTYPES, check_bools

# the kernel modules (fla_ascend.ops.norm exports functions of the same names)
_l2 = importlib.import_module("fla_ascend.ops.norm.l2norm")
_rms = importlib.import_module("fla_ascend.ops.norm.rms_norm_gated")

TESTED_FLA = "0.6.0"
"""The flash-linear-attention (``fla-core``) release whose registry and stage signatures this module
is written for; the test environments install it (``scripts/setup_env.sh``, the ``fla`` extra)."""

BACKEND_TYPE = "fla_ascend"
"""The ``backend_type`` fla's registry knows our backend by (its log lines name it: ``-> fla_ascend``)."""

PRIORITY = -1
"""Lower runs first in fla's registry: ahead of every backend 0.6.0 ships (Ascend 0, FlashQLA and
FlashKDA 3, the default 5)."""

DEVICES = ("npu", "cuda", "cpu")

NOT_DISPATCHED = {
    "fused_recurrent_gated_delta_rule": "flash-linear-attention 0.6.0 does not dispatch "
    "fused_recurrent_gated_delta_rule through its backend registry (a plain function), so no backend "
    "can take its calls; call fla_ascend.ops.fused_recurrent_gated_delta_rule directly",
    "fused_recurrent_kda": "flash-linear-attention 0.6.0 does not dispatch fused_recurrent_kda through its "
    "backend registry (a plain function; only its inner stage fused_recurrent_kda_fwd is, with another "
    "contract), so no backend can take its calls; call fla_ascend.ops.fused_recurrent_kda directly",
}
"""Functions asked about that fla 0.6.0 does not dispatch, and why they cannot be routed."""


@dataclass(frozen=True)
class Route:
    """One function of flash-linear-attention's registry that fla-ascend takes.

    Attributes:
        op: the name :func:`enable` selects it by (several stages share one).
        module: the fla module holding the dispatched function.
        function: its name (fla looks up ``<function>`` and ``<function>_verifier`` on a backend).
        operation: the operation registry it dispatches through (``"gated_delta_rule"``), or ``None``
            for a function's own registry.
        params: its parameter names in 0.6.0, checked against the installed fla.
    """
    op: str
    module: str
    function: str
    operation: str | None
    params: tuple[str, ...]


_CONV = "fla.modules.causal_conv1d.ops"
_L2 = "fla.modules.norm.l2norm"
_NORM_GATE = "fla.modules.norm.fused_norm_gate"
_CONV_FWD_PARAMS = ("x", "weight", "bias", "residual", "initial_state", "output_final_state", "activation",
                    "cu_seqlens", "cu_seqlens_cpu", "chunk_indices", "chunk_size", "layout_fallback")

ROUTES = (
    Route("chunk_gated_delta_rule", "fla.ops.gated_delta_rule.chunk", "chunk_gated_delta_rule", "gated_delta_rule",
          ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state", "use_qk_l2norm_in_kernel",
           "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "state_v_first", "cu_seqlens", "cu_seqlens_cpu",
           "chunk_indices", "cp_context", "kwargs")),
    Route("chunk_kda", "fla.ops.kda.chunk", "chunk_kda", None,
          ("q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state", "use_qk_l2norm_in_kernel",
           "use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "safe_gate", "lower_bound",
           "disable_recompute", "return_intermediate_states", "state_v_first", "cu_seqlens", "cu_seqlens_cpu",
           "cp_context", "use_graph", "max_num_seqs", "kwargs")),
    Route("causal_conv1d", _CONV, "causal_conv1d_fwd", None, _CONV_FWD_PARAMS),
    Route("causal_conv1d", _CONV, "causal_conv1d_bwd", None,
          ("x", "dy", "dht", "weight", "bias", "residual", "initial_state", "activation", "cu_seqlens",
           "cu_seqlens_cpu", "chunk_indices", "chunk_size", "layout_fallback")),
    Route("causal_conv1d_update", _CONV, "causal_conv1d_update", None,
          ("x", "cache", "residual", "weight", "bias", "activation")),
    Route("l2norm", _L2, "l2norm_fwd", None, ("x", "eps", "output_dtype")),
    Route("l2norm", _L2, "l2norm_bwd", None, ("y", "rstd", "dy", "eps")),
    Route("rms_norm_gated", _NORM_GATE, "layer_norm_gated_fwd", None,
          ("x", "g", "weight", "bias", "activation", "eps", "residual", "out_dtype", "residual_dtype", "is_rms_norm")),
    Route("rms_norm_gated", _NORM_GATE, "layer_norm_gated_bwd", None,
          ("dy", "x", "g", "weight", "bias", "activation", "eps", "mean", "rstd", "dresidual", "has_residual",
           "is_rms_norm", "x_dtype", "recompute_output")),
)
"""Every function :func:`enable` can route."""

OPS = tuple(dict.fromkeys(r.op for r in ROUTES))
"""The names :func:`enable` takes in ``ops``."""

_open: dict[str, Counter] = {}
"""op -> device type -> how many open :func:`enable` handles route it there."""

_registered: set[tuple[str, str]] = set()
"""``(module, function)`` of every route whose backend sits in fla's registry (it stays there,
reporting itself disabled while no handle routes its op: fla then dispatches as before)."""

_stats: dict[str, Counter] = {}
"""fla function -> ``"fla_ascend"`` (calls taken) and each rejection reason -> count."""

_warned_version: set[str] = set()


# ----------------------------------------------------------------------------- checks
def _rejects(op: str, t: object) -> str | None:
    """Why a call whose first tensor is ``t`` stays with fla (devices), or ``None``."""
    if not isinstance(t, torch.Tensor):
        return f"the first argument is a {type(t).__name__}, not a tensor"
    dev = t.device.type
    allowed = _open.get(op, Counter())
    if allowed[dev] <= 0:
        on = sorted(d for d, n in allowed.items() if n > 0)
        return f"{dev} tensors: fla-ascend is enabled for {on} (enable(devices=...))"
    if dev == "cpu" and not backend.is_interpreter():
        return "cpu tensors: fla-ascend's kernels run on the CPU only under the Triton interpreter"
    return None


def _float_rows(name: str, t: torch.Tensor, max_d: int = _l2.MAX_D) -> str | None:
    if t.dtype not in FLOAT_DTYPES:
        return f"{name} of dtype {t.dtype}: fla-ascend takes {[str(d) for d in FLOAT_DTYPES]}"
    if t.dim() == 0 or t.numel() == 0:
        return f"{name} of shape {tuple(t.shape)}: empty"
    if t.shape[-1] > max_d:
        return f"{name}'s last dimension {t.shape[-1]} is above fla-ascend's {max_d}"
    if t.numel() >= 2 ** 31:
        return f"{name} has {t.numel()} elements: fla-ascend's norms index with int32"
    return None


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


_CHUNK_KWARGS = {"use_gate_in_kernel", "A_log", "dt_bias", "chunk_size", "transpose_state_layout"}


def _chunk_gated_delta_rule_rejects(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                    use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                                    allow_neg_eigval=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                                    chunk_indices=None, cp_context=None, **kwargs):
    reason = _rejects("chunk_gated_delta_rule", q)
    if reason:
        return reason
    if cp_context is not None:
        return ("cp_context is flash-linear-attention's context parallelism (FLACPContext); fla-ascend's "
                "takes its own (fla_ascend.ops.cp.build_cp_context)")
    unknown = sorted(set(kwargs) - _CHUNK_KWARGS)
    if unknown:
        return f"keyword arguments {unknown} are not fla-ascend's"
    if not kwargs.get("use_gate_in_kernel") and (kwargs.get("A_log") is not None or kwargs.get("dt_bias") is not None):
        return "A_log / dt_bias without use_gate_in_kernel=True: fla ignores them, fla-ascend refuses them"
    if not isinstance(v, torch.Tensor) or q.dim() != 4 or v.dim() != 4:
        return "q or v is not a 4-D tensor"
    K, V = q.shape[-1], v.shape[-1]
    if max(K, V) > MAX_HEAD_DIM:
        return f"head dims K={K}, V={V}: fla-ascend's state recurrence takes at most {MAX_HEAD_DIM}"
    if backend.is_interpreter() and torch.bfloat16 in (q.dtype, k.dtype, v.dtype):
        return "bfloat16 under the Triton interpreter (its tl.dot on bfloat16 is wrong)"
    if (backend.is_cuda_compiled() and min(K, V) < CUDA_MIN_BWD_HEAD_DIM
            and _needs_grad(q, k, v, g, beta, initial_state, kwargs.get("A_log"), kwargs.get("dt_bias"))):
        return f"a backward with K={K}, V={V} on CUDA: fla-ascend's needs K and V >= {CUDA_MIN_BWD_HEAD_DIM}"
    return None


_KDA_KWARGS = {"A_log", "dt_bias", "chunk_size", "transpose_state_layout"}
"""The names flash-linear-attention 0.6.0's ``chunk_kda`` reads from ``**kwargs`` (it ignores any
other); ours takes these four and refuses the rest."""


def _chunk_kda_rejects(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                       use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                       allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
                       return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                       cp_context=None, use_graph=False, max_num_seqs=None, **kwargs):
    """Why fla's ``chunk_kda`` call stays with fla, or ``None``: what fla 0.6.0 accepts and
    :func:`fla_ascend.ops.chunk_kda` would refuse or does not implement. A call both refuse
    (mismatched shapes, ``HV`` not a multiple of ``H``, invalid ``cu_seqlens``, ...) is not looked
    at here: ours raises its own error."""
    reason = _rejects("chunk_kda", q)
    if reason:
        return reason
    if cp_context is not None:
        return ("cp_context is flash-linear-attention's context parallelism (FLACPContext); fla-ascend's chunk_kda "
                "has none")
    flags = dict(output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                 use_gate_in_kernel=use_gate_in_kernel, use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                 allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, disable_recompute=disable_recompute,
                 return_intermediate_states=return_intermediate_states, state_v_first=state_v_first,
                 use_graph=use_graph)
    if "transpose_state_layout" in kwargs:
        flags["transpose_state_layout"] = kwargs["transpose_state_layout"]
    try:
        check_bools("chunk_kda", **flags)
    except TypeError as e:
        return f"{e} (fla takes any value by its truth, fla-ascend a bool only)"
    if use_graph:
        return "use_graph=True (a fixed-shape chunk list for graph capture): not implemented by fla-ascend"
    unknown = sorted(set(kwargs) - _KDA_KWARGS)
    if unknown:
        return f"keyword arguments {unknown}: fla ignores them, fla-ascend refuses them"
    A_log, dt_bias = kwargs.get("A_log"), kwargs.get("dt_bias")
    if not use_gate_in_kernel and (A_log is not None or dt_bias is not None):
        return "A_log / dt_bias without use_gate_in_kernel=True: fla ignores them, fla-ascend refuses them"
    chunk_size = kwargs.get("chunk_size", 64)
    if (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
            or chunk_size not in KDA_CHUNK_SIZES):
        return f"chunk_size={chunk_size!r}: fla-ascend's chunk_kda takes an int in {KDA_CHUNK_SIZES}"
    named = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, A_log=A_log, dt_bias=dt_bias)
    for name, t in named.items():
        if t is None and name in ("initial_state", "A_log", "dt_bias"):
            continue
        if not isinstance(t, torch.Tensor):
            return f"{name} is a {type(t).__name__}, not a tensor"
        if t.dtype not in FLOAT_DTYPES:
            return f"{name} of dtype {t.dtype}: fla-ascend takes {[str(d) for d in FLOAT_DTYPES]}"
    if q.dim() != 4 or v.dim() != 4:
        return "q or v is not a 4-D tensor"
    T, K, HV, V = q.shape[1], q.shape[3], v.shape[2], v.shape[3]
    if T < 1 or min(K, V) < 1:
        return f"an empty call (T={T}, K={K}, V={V}): fla-ascend's chunk_kda needs T, K, V >= 1"
    if max(K, V) > MAX_HEAD_DIM:
        return f"head dims K={K}, V={V}: fla-ascend's state recurrence takes at most {MAX_HEAD_DIM}"
    if A_log is not None and tuple(A_log.shape) != (HV,):
        return (f"A_log of shape {tuple(A_log.shape)}: fla reads any tensor of HV={HV} elements, fla-ascend's "
                f"chunk_kda takes [{HV}]")
    if dt_bias is not None and tuple(dt_bias.shape) != (HV * K,):
        return (f"dt_bias of shape {tuple(dt_bias.shape)}: fla reads any tensor of HV * K={HV * K} elements, "
                f"fla-ascend's chunk_kda takes [{HV * K}]")
    if lower_bound is not None and (isinstance(lower_bound, bool) or not isinstance(lower_bound, numbers.Real)
                                    or not (math.isfinite(lower_bound) and lower_bound < 0)):
        return f"lower_bound={lower_bound!r}: fla-ascend takes a finite negative float"
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)
                              or not math.isfinite(scale)):
        return f"scale={scale!r}: fla-ascend takes a finite float"
    if backend.is_interpreter() and torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype) == \
            torch.bfloat16:
        return "bfloat16 under the Triton interpreter (its tl.dot on bfloat16 is wrong)"
    if (backend.is_cuda_compiled() and min(K, V) < CUDA_MIN_BWD_HEAD_DIM
            and _needs_grad(q, k, v, g, beta, initial_state, A_log, dt_bias)):
        return f"a backward with K={K}, V={V} on CUDA: fla-ascend's needs K and V >= {CUDA_MIN_BWD_HEAD_DIM}"
    return None


def _conv_rejects(op, x, weight, activation):
    reason = _rejects(op, x)
    if reason:
        return reason
    if not isinstance(weight, torch.Tensor):
        return "weight is None"
    if weight.dim() != 2 or not 1 <= weight.shape[1] <= MAX_W:
        return f"weight of shape {tuple(weight.shape)}: fla-ascend takes [D, W] with W <= {MAX_W}"
    if activation not in (None, "silu", "swish"):
        return f"activation {activation!r}"
    if x.dim() not in (3, 4) or x.dtype not in FLOAT_DTYPES:
        return f"x of shape {tuple(x.shape)}, dtype {x.dtype}"
    return None


def _causal_conv1d_fwd_rejects(x, weight, bias=None, residual=None, initial_state=None, output_final_state=False,
                               activation=None, cu_seqlens=None, cu_seqlens_cpu=None, chunk_indices=None,
                               chunk_size=64, layout_fallback=False):
    return _conv_rejects("causal_conv1d", x, weight, activation)


def _causal_conv1d_bwd_rejects(x, dy, dht, weight=None, bias=None, residual=None, initial_state=None,
                               activation=None, cu_seqlens=None, cu_seqlens_cpu=None, chunk_indices=None,
                               chunk_size=64, layout_fallback=False):
    return _conv_rejects("causal_conv1d", x, weight, activation)


def _causal_conv1d_update_rejects(x, cache, residual=None, weight=None, bias=None, activation=None):
    reason = _rejects("causal_conv1d_update", x)
    if reason:
        return reason
    if activation not in (None, "silu", "swish"):
        return f"activation {activation!r}"
    if not isinstance(cache, torch.Tensor) or not cache.is_contiguous():
        return "cache is not a contiguous tensor (fla-ascend updates it in place)"
    if isinstance(weight, torch.Tensor) and cache.dim() == 3 and cache.shape[-1] != weight.shape[-1]:
        return f"a cache of width {cache.shape[-1]} with W={weight.shape[-1]}: fla-ascend keeps W columns"
    return None


def _l2norm_fwd_rejects(x, eps=1e-6, output_dtype=None):
    reason = _rejects("l2norm", x) or _float_rows("x", x)
    if reason:
        return reason
    if output_dtype is not None and output_dtype not in FLOAT_DTYPES:
        return f"output_dtype {output_dtype}"
    return None


def _l2norm_bwd_rejects(y, rstd, dy, eps=1e-6):
    return _rejects("l2norm", y) or _float_rows("y", y)


def _norm_gate_rejects(x, g, activation, is_rms_norm):
    reason = _rejects("rms_norm_gated", x)
    if reason:
        return reason
    if not is_rms_norm:
        return "is_rms_norm=False (a gated LayerNorm): fla-ascend has the gated RMSNorm only"
    if activation not in _rms.GATE_ACTIVATIONS:
        return f"activation {activation!r}"
    if x.dim() != 2:
        return f"x of shape {tuple(x.shape)}: fla's stage takes [T, D]"
    return _float_rows("x", x) or (_float_rows("g", g) if isinstance(g, torch.Tensor) else None)


def _layer_norm_gated_fwd_rejects(x, g, weight, bias, activation="swish", eps=1e-5, residual=None, out_dtype=None,
                                  residual_dtype=None, is_rms_norm=False):
    reason = _norm_gate_rejects(x, g, activation, is_rms_norm)
    if reason:
        return reason
    if out_dtype is not None and out_dtype not in FLOAT_DTYPES:
        return f"out_dtype {out_dtype}"
    return None


def _layer_norm_gated_bwd_rejects(dy, x, g, weight, bias, activation="swish", eps=1e-5, mean=None, rstd=None,
                                  dresidual=None, has_residual=False, is_rms_norm=False, x_dtype=None,
                                  recompute_output=False):
    reason = _norm_gate_rejects(x, g, activation, is_rms_norm)
    if reason:
        return reason
    if recompute_output:
        return "recompute_output=True (the fused norm + linear modules): not implemented by fla-ascend"
    if not isinstance(rstd, torch.Tensor) or not isinstance(g, torch.Tensor):
        return "rstd or g is None"
    return None


# ----------------------------------------------------------------------------- adapters
def _chunk_gated_delta_rule(*args, **kwargs):
    """fla's ``chunk_gated_delta_rule`` call, as it is, to ours (same parameters)."""
    return _ops.chunk_gated_delta_rule(*args, **kwargs)


def _chunk_kda(*args, **kwargs):
    """fla's ``chunk_kda`` call, as it is, to ours (same parameters; fla's ``**kwargs`` names are
    our keyword-only ones)."""
    return _ops.chunk_kda(*args, **kwargs)


def _flat_channels(t, weight):
    """``[B, T, H, P]`` -> ``[B, T, H * P]`` when the last axis is not ``weight``'s ``D`` (fla's rule)."""
    if t is not None and t.dim() == 4 and t.shape[-1] != weight.shape[0]:
        return t.reshape(*t.shape[:2], -1)
    return t


def _causal_conv1d_fwd(x, weight, bias=None, residual=None, initial_state=None, output_final_state=False,
                       activation=None, cu_seqlens=None, cu_seqlens_cpu=None, chunk_indices=None, chunk_size=64,
                       layout_fallback=False):
    """fla's forward stage: ``(y of x's shape, final_state [N, D, W] or None)``, no autograd graph.
    ``chunk_indices`` of another chunk size than 64 are rebuilt from ``cu_seqlens``; ``layout_fallback``
    (fla's own Ascend layout switch) is not needed by our kernels."""
    shape = x.shape
    x3, res3 = _flat_channels(x, weight), _flat_channels(residual, weight)
    with torch.no_grad():
        y, ht = _ops.causal_conv1d(x3, weight, bias, res3, initial_state, output_final_state, activation, "triton",
                                   cu_seqlens, cu_seqlens_cpu, chunk_indices if chunk_size == 64 else None)
    return y.view(shape), ht


def _causal_conv1d_bwd(x, dy, dht, weight=None, bias=None, residual=None, initial_state=None, activation=None,
                       cu_seqlens=None, cu_seqlens_cpu=None, chunk_indices=None, chunk_size=64,
                       layout_fallback=False):
    """fla's backward stage: ``(dx, dweight, dbias, dresidual, dinitial_state)``. Runs our forward
    on detached copies inside autograd, then our backward through ``torch.autograd.grad``."""
    shape = x.shape
    x3 = _flat_channels(x, weight)
    leaves = [t.detach().requires_grad_() if t is not None else None for t in (x3, weight, bias, initial_state)]
    with torch.enable_grad():
        y, ht = _ops.causal_conv1d(leaves[0], leaves[1], leaves[2], None, leaves[3], dht is not None, activation,
                                   "triton", cu_seqlens, cu_seqlens_cpu, chunk_indices if chunk_size == 64 else None)
        outs, grads = [y], [dy.reshape(y.shape)]
        if dht is not None:
            outs.append(ht)
            grads.append(dht)
        wanted = [t for t in leaves if t is not None]
        got = iter(torch.autograd.grad(outs, wanted, grads, allow_unused=True))
    dx, dw, db, dh0 = (next(got) if t is not None else None for t in leaves)
    if dh0 is None and initial_state is not None:
        dh0 = torch.zeros_like(initial_state)
    return dx.view(shape), dw, db, dy if residual is not None else None, dh0


def _causal_conv1d_update(x, cache, residual=None, weight=None, bias=None, activation=None):
    """fla's decode step: ``(y of x's shape, cache)``, ``cache`` updated in place."""
    return _ops.causal_conv1d_update(x, cache, residual, weight, bias, activation)


def _l2norm_fwd(x, eps=1e-6, output_dtype=None):
    """fla's forward stage: ``(y of x's shape in output_dtype, rstd [...] float32)``, ``rstd = 1 /
    sqrt(sum(x^2) + eps)`` per row as fla's."""
    D = x.shape[-1]
    y, rstd = _l2.l2norm_fwd(x.reshape(-1, D).contiguous(), eps, output_dtype)
    return y.view(x.shape), rstd.view(x.shape[:-1])


def _l2norm_bwd(y, rstd, dy, eps=1e-6):
    """fla's backward stage from the saved ``y`` and ``rstd``: our kernel reads ``x``, recovered in
    float32 as ``y / rstd`` (one elementwise pass). Returns ``dx`` in ``y``'s dtype."""
    D = y.shape[-1]
    r = rstd.reshape(-1).float().contiguous()
    x = y.reshape(-1, D).float() / r[:, None]
    dx = _l2.l2norm_bwd(x, r, dy.reshape(-1, D).contiguous())
    return dx.to(y.dtype).view(y.shape)


def _layer_norm_gated_fwd(x, g, weight, bias, activation="swish", eps=1e-5, residual=None, out_dtype=None,
                          residual_dtype=None, is_rms_norm=False):
    """fla's forward stage (RMSNorm): ``(y, None, rstd, residual_out or x)``. With a residual (or a
    ``residual_dtype`` other than ``x``'s) the float32 sum is formed with torch ops, stored in
    ``residual_dtype`` and normalised as fla's kernel does."""
    if residual is not None:
        residual_dtype = residual.dtype
    keep = residual is not None or (residual_dtype is not None and residual_dtype != x.dtype)
    total = x
    if residual is not None:
        total = x.float() + residual.float()
    elif keep:
        total = x.float()
    y, rstd = _rms.rms_norm_gated_fwd(total.contiguous(), g.contiguous() if g is not None else None, weight, bias,
                                      eps, activation != "sigmoid")
    y = y.to(out_dtype or x.dtype)
    return y, None, rstd, total.to(residual_dtype) if keep else x


def _layer_norm_gated_bwd(dy, x, g, weight, bias, activation="swish", eps=1e-5, mean=None, rstd=None,
                          dresidual=None, has_residual=False, is_rms_norm=False, x_dtype=None,
                          recompute_output=False):
    """fla's backward stage (RMSNorm): ``(dx, dg, dweight, dbias, dresidual_in)``; ``dresidual`` is
    added to ``dx`` in float32, ``dx`` / ``dg`` come back in ``x_dtype`` (fla's rule)."""
    dx, dg, dw, db = _rms.rms_norm_gated_bwd(x.contiguous(), g.contiguous(), weight, bias, rstd.contiguous(),
                                             dy.contiguous(), activation != "sigmoid")
    if dresidual is not None:
        dx = dx.float() + dresidual.float()
    dres_in = dx.to(x.dtype) if has_residual else None
    dx = dx.to(x_dtype or x.dtype)
    dg = dg.to(x_dtype or g.dtype)
    dw = dw.to(weight.dtype) if dw is not None else None
    db = db.to(bias.dtype) if db is not None else None
    return dx, dg, dw, db, dres_in


ADAPTERS: dict[str, tuple[Callable, Callable]] = {
    "chunk_gated_delta_rule": (_chunk_gated_delta_rule, _chunk_gated_delta_rule_rejects),
    "chunk_kda": (_chunk_kda, _chunk_kda_rejects),
    "causal_conv1d_fwd": (_causal_conv1d_fwd, _causal_conv1d_fwd_rejects),
    "causal_conv1d_bwd": (_causal_conv1d_bwd, _causal_conv1d_bwd_rejects),
    "causal_conv1d_update": (_causal_conv1d_update, _causal_conv1d_update_rejects),
    "l2norm_fwd": (_l2norm_fwd, _l2norm_fwd_rejects),
    "l2norm_bwd": (_l2norm_bwd, _l2norm_bwd_rejects),
    "layer_norm_gated_fwd": (_layer_norm_gated_fwd, _layer_norm_gated_fwd_rejects),
    "layer_norm_gated_bwd": (_layer_norm_gated_bwd, _layer_norm_gated_bwd_rejects),
}
"""fla function -> (what runs in its place, the check that says why a call stays with fla or ``None``).
Looked up at each call."""


# ----------------------------------------------------------------------------- fla's registry
def _fla_version(fla) -> str:
    version = getattr(fla, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version("fla-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _import_fla(name: str, version: str = "not installed"):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top == "fla":
            raise ImportError(f"fla_ascend.integrations.fla needs flash-linear-attention {TESTED_FLA} (installed: "
                              f"{version}; {name} not found): pip install 'fla-core=={TESTED_FLA}' "
                              "(or: pip install 'fla-ascend[fla]')") from e
        raise ImportError(f"flash-linear-attention {version} imports {e.name}, which is not installed "
                          f"(fla-core installed without its dependencies): pip install {top}") from e
    except RuntimeError as e:
        if "active driver" not in str(e):
            raise
        raise ImportError(f"flash-linear-attention {version} could not be imported ({name}): its triton.autotune "
                          "decorators need an active Triton driver when the module is imported, and there is none "
                          f"(triton-ascend without an NPU): {e}") from e


def check_fla() -> str:
    """Import flash-linear-attention and check that its backend registry and the functions this
    module routes are those of 0.6.0; returns the installed version.

    A release other than :data:`TESTED_FLA` whose registry and routed signatures match gets a
    ``UserWarning`` (once per version) and is used.

    Raises:
        ImportError: fla (or a package it imports, such as einops) is not installed; the message names
            the expected version and the pip command.
        RuntimeError: the registry API or a routed function differs from 0.6.0's (the message names the
            installed and the expected version and what differs), or ``FLA_DISABLE_BACKEND_DISPATCH=1``
            turned fla's dispatch off.
    """
    fla = _import_fla("fla")
    version = _fla_version(fla)

    def differs(what: str) -> RuntimeError:
        return RuntimeError(f"fla_ascend.integrations.fla is written for flash-linear-attention {TESTED_FLA}'s "
                            f"backend registry; the installed fla-core {version} differs: {what}. Install "
                            f"fla-core=={TESTED_FLA}")

    if importlib.util.find_spec("fla.backends") is None:
        raise differs("it has no fla.backends module (0.5.x keeps a registry of another API in fla.ops.backends)")
    fb = _import_fla("fla.backends", version)

    base = getattr(fb, "BaseBackend", None)
    missing = [n for n in ("BaseBackend", "register", "dispatch") if not callable(getattr(fb, n, None))]
    missing += [f"BaseBackend.{n}" for n in ("verify", "get_implementation", "is_enabled", "is_available")
                if base is not None and not hasattr(base, n)]
    if missing:
        raise differs(f"fla.backends lacks {', '.join(missing)}")
    if getattr(fb, "_DISPATCH_DISABLED", False):
        raise RuntimeError("FLA_DISABLE_BACKEND_DISPATCH=1 is set: flash-linear-attention dispatches no call to "
                           "any backend, so fla-ascend cannot take them; unset it")
    reg_params = list(inspect.signature(fb.register).parameters)
    if reg_params[:2] != ["entry_point", "backend"]:
        raise differs(f"fla.backends.register takes {reg_params}, not (entry_point, *, backend, verifier, env_var)")
    for route in ROUTES:
        module = _import_fla(route.module, version)
        fn = getattr(module, route.function, None)
        if fn is None:
            raise differs(f"{route.module} has no {route.function}")
        params = tuple(inspect.signature(inspect.unwrap(fn)).parameters)
        if params != route.params:
            raise differs(f"{route.module}.{route.function} takes {list(params)}, 0.6.0's takes {list(route.params)}")
    if version != TESTED_FLA and version not in _warned_version:
        _warned_version.add(version)
        warnings.warn(f"fla_ascend.integrations.fla is tested with flash-linear-attention {TESTED_FLA}; installed: "
                      f"fla-core {version} (its registry and the routed signatures match)", stacklevel=3)
    return version


def _backend_class(route: Route, base: type) -> type:
    """A backend class for one route: fla instantiates it in ``register``."""
    name = route.function

    def is_available(cls) -> bool:
        return True

    def is_enabled(self) -> bool:
        return any(n > 0 for n in _open.get(route.op, Counter()).values())

    def verifier(self, *args, **kwargs):
        try:
            reason = ADAPTERS[name][1](*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - arguments the check cannot read: the call stays with fla
            reason = f"{type(e).__name__}: {e}"
        if reason is None:
            return True, None
        _stats.setdefault(name, Counter())[reason] += 1
        return False, reason

    def implementation(self, *args, **kwargs):
        _stats.setdefault(name, Counter())["fla_ascend"] += 1
        return ADAPTERS[name][0](*args, **kwargs)

    return type(f"FlaAscend_{name}", (base,), {
        "__doc__": f"fla-ascend's kernels for fla's {route.module}.{name} (fla_ascend.integrations.fla).",
        "backend_type": BACKEND_TYPE, "priority": PRIORITY, "package_name": None, "env_var": None,
        "is_available": classmethod(is_available), "is_enabled": is_enabled,
        name: implementation, f"{name}_verifier": verifier,
    })


def _register(route: Route, version: str) -> None:
    key = (route.module, route.function)
    if key in _registered:
        return
    import fla.backends as fb

    entry = route.operation if route.operation else getattr(importlib.import_module(route.module), route.function)
    try:
        fb.register(entry)(_backend_class(route, fb.BaseBackend))
    except KeyError as e:
        raise RuntimeError(f"fla-core {version}: {route.module}.{route.function} is not dispatched through "
                           f"fla.backends (it is in flash-linear-attention {TESTED_FLA})") from e
    _registered.add(key)


# ----------------------------------------------------------------------------- public API
def _selected(ops: Iterable[str] | str | None) -> list[str]:
    if ops is None:
        return list(OPS)
    if isinstance(ops, str):
        ops = [ops]
    chosen = []
    for op in ops:
        if op in NOT_DISPATCHED:
            raise ValueError(f"enable: {NOT_DISPATCHED[op]}")
        if op not in OPS:
            raise ValueError(f"enable: unknown op {op!r}; the ops fla-ascend routes: {list(OPS)}")
        if op not in chosen:
            chosen.append(op)
    return chosen


def _devices(devices: Iterable[str] | str) -> list[str]:
    if isinstance(devices, str):
        devices = [devices]
    devices = list(dict.fromkeys(devices))
    bad = [d for d in devices if d not in DEVICES]
    if bad or not devices:
        raise ValueError(f"enable: devices must be a non-empty subset of {DEVICES}, got {devices}")
    return devices


def _release(token: tuple[list[str], list[str]]) -> None:
    """One closed handle's ops and devices: an op (on a device) goes back to flash-linear-attention's
    dispatch only when no other open handle routes it."""
    ops, devices = token
    for op in ops:
        counts = _open.get(op)
        if counts is None:
            continue
        for d in devices:
            counts[d] -= 1
        if not any(n > 0 for n in counts.values()):
            del _open[op]


_HANDLES = Handles(_release)


def enable(ops: Iterable[str] | str | None = None, devices: Iterable[str] | str = ("npu", "cuda")) -> Handle:
    """Register fla-ascend as a backend of flash-linear-attention's registry, so that fla's own
    calls (``fla.ops.gated_delta_rule.chunk_gated_delta_rule``, ``fla.ops.kda.chunk_kda``,
    ``fla.modules.ShortConvolution``, ...) run fla-ascend's kernels where fla-ascend supports the
    arguments.

    Args:
        ops: names from :data:`OPS` (``"chunk_gated_delta_rule"``, ``"chunk_kda"``, ``"causal_conv1d"``,
            ``"causal_conv1d_update"``, ``"l2norm"``, ``"rms_norm_gated"``), or one such name; ``None``
            (default): all of them.
        devices: device types whose tensors are routed: ``"npu"``, ``"cuda"``, ``"cpu"`` (the last only
            under the Triton interpreter, fla-ascend's CPU mode; fla's own kernels do not run on a CPU).
            Default ``("npu", "cuda")``.

    Returns:
        A handle; ``with enable(): ...`` returns the ops to fla's own dispatch when the block ends,
        except where an enclosing (still open) ``enable`` routes them too: blocks nest (counted per op
        and device). :func:`disable` ends every handle at once.

    A call fla-ascend does not support (an argument, a dtype, a device, a size; see :func:`stats`)
    stays with flash-linear-attention's own code; fla logs the first rejection of each function
    (logger ``fla.backends``, INFO).

    Raises:
        ValueError: an unknown op or device, or an op 0.6.0 does not dispatch
            (``fused_recurrent_gated_delta_rule``, ``fused_recurrent_kda``).
        ImportError, RuntimeError: from :func:`check_fla` (fla missing, or its registry not 0.6.0's).
    """
    chosen = _selected(ops)
    devs = _devices(devices)
    version = check_fla()
    for route in ROUTES:
        if route.op in chosen:
            _register(route, version)
    for op in chosen:
        counts = _open.setdefault(op, Counter())
        for d in devs:
            counts[d] += 1
    return _HANDLES.open((chosen, devs))


def disable() -> None:
    """Return every op to flash-linear-attention's own dispatch (a no-op when nothing is enabled),
    whatever handles are open. Our backends stay listed in fla's registry, disabled: fla then picks
    exactly the backends it picked before :func:`enable`."""
    _HANDLES.end_all()
    _open.clear()


def enabled() -> dict[str, tuple[str, ...]]:
    """The ops routed now, each with the device types it is routed for: ``{op: ("cpu", ...)}``."""
    return {op: tuple(sorted(d for d, n in c.items() if n > 0)) for op, c in _open.items()}


def stats() -> dict[str, dict[str, int]]:
    """What fla's registry did with fla-ascend, per fla function: ``{"l2norm_fwd": {"fla_ascend": 3,
    "<rejection reason>": 1}}``: ``"fla_ascend"`` counts the calls our kernels took, every other key a
    reason a call stayed with fla (all of them, where fla logs only a function's first). Counted
    since import or :func:`reset_stats`."""
    return {fn: dict(c) for fn, c in _stats.items()}


def reset_stats() -> None:
    """Empty :func:`stats`."""
    _stats.clear()
