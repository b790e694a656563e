"""Run Hugging Face transformers' linear-attention models on fla-ascend's kernels.

transformers 5.x looks up its kernel names once, when a modeling module is imported:
``chunk_gated_delta_rule`` and ``fused_recurrent_gated_delta_rule`` (GatedDeltaNet models),
``chunk_kda`` and ``fused_recurrent_kda`` (Kimi Linear), all from flash-linear-attention, and
``causal_conv1d_fn`` / ``causal_conv1d_update`` (from Dao's causal-conv1d package); without those
packages it binds its slow PyTorch fallbacks. Each modeling module holds the bound function under a
module-level name (``torch_chunk_gated_delta_rule``, ``torch_recurrent_gated_delta_rule``,
``chunk_kimi_delta_attention``, ``recurrent_kimi_delta_attention``, ``causal_conv1d_fn``,
``causal_conv1d_update``) that its layers call. :func:`enable` replaces those names with adapters
over our ops; :func:`disable` puts the originals back.

Adapters:

- the gated delta rule ops and ``fused_recurrent_kda`` take flash-linear-attention's arguments,
  which ours share; keyword arguments our op does not name are dropped, as transformers does for the
  package it binds;
- ``chunk_kda``: transformers calls it with its fallback's signature, ``(query, key, value, g, beta,
  chunk_size=64, initial_state, output_final_state, use_qk_l2norm_in_kernel, **kwargs)``, where
  flash-linear-attention's ``chunk_kda`` has ``scale`` in the sixth place and reads ``chunk_size``
  from its keyword arguments: :func:`kimi_chunk_kda` maps the one onto the other. It is installed
  only when :func:`fla_ascend.ops.kda.chunk_kda` exists (:func:`enable` leaves transformers' own
  ``chunk_kimi_delta_attention`` in place otherwise, and says so in :func:`unavailable`);
- ``causal_conv1d_fn(x, weight, bias, seq_idx, initial_states, return_final_states,
  final_states_out, activation)`` follows causal-conv1d's interface: ``x`` ``[B, D, T]`` is read
  as its transpose ``[B, T, D]``, a view (no copy) whenever ``x`` is itself the transpose of a
  contiguous ``[B, T, D]`` tensor, as in every transformers model found; the output is returned as
  a ``[B, D, T]`` view of our ``[B, T, D]`` result. ``initial_states`` ``[B, D, W - 1]`` gets a
  zero column in front (our states hold ``W`` columns; the oldest one is never read);
- ``causal_conv1d_update(x, conv_state, weight, bias, activation, cache_seqlens,
  conv_state_indices)``: ``x`` ``[B, D]`` or ``[B, D, T]``, ``conv_state`` ``[B, D, W]`` updated in
  place by our decode kernel (``T > 1`` runs it token by token).

Tested (CPU, float32, transformers 5.24.0; tests/integrations): Qwen3-Next and Qwen3.5 (prefill,
padded batch, cached decode, training gradients) and Kimi Linear (cached decode; prefill and training
with ``chunk_kda``) against transformers' own PyTorch path.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from fla_ascend.integrations.handles import Handle, Handles
from fla_ascend.ops import (
    causal_conv1d,
    causal_conv1d_update,
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    fused_recurrent_kda,
)
from fla_ascend.ops.utils import check_bools

TESTED_TRANSFORMERS = "5.24.0"
"""The transformers release the tests run against (``scripts/setup_env.sh``); the ``transformers``
extra allows ``>=5.24,<6``."""

KERNEL_NAMES = ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "chunk_kda", "fused_recurrent_kda",
                "causal_conv1d_fn", "causal_conv1d_update")

_DECORATED = re.compile(r'@use_kernel_func_from_hub_with_fallback\(\s*"(\w+)"[^)]*\)\s*\ndef (\w+)\(')

_patched: dict[tuple[str, str], Callable] = {}
"""``(module name, attribute)`` -> the original function, for every name :func:`enable` replaced."""

_counts: dict[tuple[str, str], int] = {}
"""``(module name, attribute)`` -> how many :func:`enable` handles that replaced it are still open:
the original comes back when the last one closes (nested ``with enable(...)`` blocks)."""


def _keep_named(fn: Callable) -> Callable:
    """``fn`` called with only the keyword arguments it names (transformers passes its own kwargs,
    such as ``position_ids``, through to the kernel call and filters them the same way)."""
    names = {n for n, p in inspect.signature(fn).parameters.items() if p.kind is not p.VAR_KEYWORD}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return fn(*args, **{k: v for k, v in kwargs.items() if k in names})
    return call


def conv1d_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    seq_idx: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    return_final_states: bool = False,
    final_states_out: torch.Tensor | None = None,
    activation: str | None = None,
    cu_seqlens: torch.Tensor | None = None,
):
    """causal-conv1d's ``causal_conv1d_fn`` over :func:`fla_ascend.ops.causal_conv1d`.

    Args:
        x: ``[B, D, T]``; read without a copy when its channel stride is 1.
        weight: ``[D, W]``; bias: ``[D]`` or ``None``.
        seq_idx: only ``None`` (per-token sequence ids are not implemented; ``cu_seqlens`` is).
        initial_states: ``[B, D, W - 1]`` or ``None``.
        return_final_states: also return the last ``W - 1`` inputs ``[B, D, W - 1]``.
        final_states_out: ``[B, D, W - 1]`` to write the final states into, or ``None``.
        activation: ``None``, ``"silu"`` or ``"swish"``.
        cu_seqlens: ``[N + 1]`` packed-sequence boundaries with ``B == 1`` (transformers passes it by
            this name for packed batches in some models).

    Returns:
        ``y`` ``[B, D, T]`` (a view of a contiguous ``[B, T, D]`` tensor), or ``(y, final_states)``.

    Raises:
        NotImplementedError: ``seq_idx`` not ``None``.
        TypeError: ``return_final_states`` not a bool.
    """
    if seq_idx is not None:
        raise NotImplementedError("causal_conv1d_fn: seq_idx is not implemented by fla-ascend; pass cu_seqlens")
    h0 = None
    if initial_states is not None:
        h0 = torch.cat([initial_states.new_zeros(*initial_states.shape[:2], 1), initial_states], dim=-1)
    return_final_states, = check_bools("causal_conv1d_fn", return_final_states=return_final_states)
    want = return_final_states or final_states_out is not None
    y, ht = causal_conv1d(x.transpose(1, 2), weight, bias, None, h0, want, activation, cu_seqlens=cu_seqlens)
    y = y.transpose(1, 2)
    if not return_final_states:
        return y
    final = ht[..., 1:]
    if final_states_out is not None:
        final = final_states_out.copy_(final)
    return y, final


def conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    cache_seqlens: torch.Tensor | None = None,
    conv_state_indices: torch.Tensor | None = None,
):
    """causal-conv1d's ``causal_conv1d_update`` over :func:`fla_ascend.ops.causal_conv1d_update`.

    Args:
        x: ``[B, D]`` or ``[B, D, T]``; weight ``[D, W]``; bias ``[D]`` or ``None``.
        conv_state: ``[B, D, W]``, contiguous, updated in place.
        activation: ``None``, ``"silu"`` or ``"swish"``.
        cache_seqlens, conv_state_indices: only ``None``.

    Returns:
        ``y`` of ``x``'s shape.

    Raises:
        NotImplementedError: ``cache_seqlens`` / ``conv_state_indices`` given, or a state width
            other than ``W``.
    """
    for name, t in (("cache_seqlens", cache_seqlens), ("conv_state_indices", conv_state_indices)):
        if t is not None:
            raise NotImplementedError(f"causal_conv1d_update: {name} is not implemented by fla-ascend; pass None")
    if conv_state.dim() == 3 and conv_state.shape[-1] != weight.shape[-1]:
        raise NotImplementedError(f"causal_conv1d_update: a conv_state of width {conv_state.shape[-1]} with a "
                                  f"kernel of width W={weight.shape[-1]} is not implemented; "
                                  "fla-ascend keeps W columns")
    if x.dim() == 2:
        return causal_conv1d_update(x, conv_state, None, weight, bias, activation)[0]
    steps = [causal_conv1d_update(x[..., t], conv_state, None, weight, bias, activation)[0]
             for t in range(x.shape[-1])]
    return torch.stack(steps, dim=-1)


def _chunk_kda() -> Callable | None:
    """:func:`fla_ascend.ops.kda.chunk_kda`, or ``None`` where this build has no chunked KDA op."""
    return getattr(importlib.import_module("fla_ascend.ops.kda"), "chunk_kda", None)


def kimi_chunk_kda(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int = 64,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    **kwargs,
):
    """transformers' ``chunk_kimi_delta_attention`` over :func:`fla_ascend.ops.kda.chunk_kda`.

    Args:
        query, key: ``[B, T, H, K]``; value: ``[B, T, HV, V]``; g: ``[B, T, HV, K]`` log decay (Kimi
            Linear computes its gate before the call); beta: ``[B, T, HV]``.
        chunk_size: passed on as ``chunk_kda``'s ``chunk_size`` keyword when it is not 64 (its default).
        initial_state: ``[N, HV, K, V]`` or ``None``; output_final_state, use_qk_l2norm_in_kernel: as
            ``chunk_kda``.
        **kwargs: those ``chunk_kda`` names (``cu_seqlens``, ...) are passed on; the rest
            (transformers' own, such as ``position_ids``) are dropped.

    Returns:
        ``(o [B, T, HV, V], final_state or None)``.

    Raises:
        NotImplementedError: this build has no ``chunk_kda``.
    """
    fn = _chunk_kda()
    if fn is None:
        raise NotImplementedError("chunk_kimi_delta_attention: fla_ascend.ops.kda.chunk_kda is not available in "
                                  "this build; enable() leaves transformers' own function in place then")
    names = {n for n, p in inspect.signature(fn).parameters.items() if p.kind is not p.VAR_KEYWORD}
    kept = {k: v for k, v in kwargs.items() if k in names}
    if chunk_size != 64:
        kept["chunk_size"] = chunk_size
    return fn(query, key, value, g, beta, initial_state=initial_state, output_final_state=output_final_state,
              use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, **kept)


ADAPTERS: dict[str, Callable] = {
    "chunk_gated_delta_rule": _keep_named(chunk_gated_delta_rule),
    "fused_recurrent_gated_delta_rule": _keep_named(fused_recurrent_gated_delta_rule),
    "chunk_kda": kimi_chunk_kda,
    "fused_recurrent_kda": _keep_named(fused_recurrent_kda),
    "causal_conv1d_fn": _keep_named(conv1d_fn),
    "causal_conv1d_update": conv1d_update,
}
"""transformers' kernel name -> the function installed in its place."""


def unavailable() -> list[str]:
    """Kernel names of :data:`KERNEL_NAMES` that :func:`enable` leaves to transformers because the op
    behind the adapter is not in this build (``chunk_kda`` without :func:`fla_ascend.ops.kda.chunk_kda`)."""
    return [] if _chunk_kda() is not None else ["chunk_kda"]


@functools.lru_cache(maxsize=1)
def find_models() -> dict[str, dict[str, str]]:
    """Every transformers modeling module that binds one of :data:`KERNEL_NAMES`, found by
    reading the installed sources (nothing imported): ``{module name: {kernel name: attribute}}``.

    Raises:
        ModuleNotFoundError: transformers is not installed (``pip install 'fla-ascend[transformers]'``).
    """
    spec = importlib.util.find_spec("transformers.models")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fla_ascend.integrations.transformers needs transformers: "
                                  "pip install 'fla-ascend[transformers]'")
    found: dict[str, dict[str, str]] = {}
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).glob("*/modeling_*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            names = {kernel: attr for kernel, attr in _DECORATED.findall(text) if kernel in KERNEL_NAMES}
            if names:
                found[f"transformers.models.{path.parent.name}.{path.stem}"] = names
    return found


def _selected(models: Iterable[str] | None) -> dict[str, dict[str, str]]:
    found = find_models()
    if models is None:
        return found
    if isinstance(models, str):
        models = [models]
    chosen = {}
    for m in models:
        hits = {k: v for k, v in found.items() if k.split(".")[2] == m or k == m}
        if not hits:
            known = sorted({k.split(".")[2] for k in found})
            raise ValueError(f"enable: no transformers model {m!r} binds {KERNEL_NAMES}; models that do: {known}")
        chosen.update(hits)
    return chosen


def _release(keys: list[tuple[str, str]]) -> None:
    """One closed handle's names: each goes back to transformers' original only when no other open
    handle replaced it too."""
    done = []
    for key in keys:
        _counts[key] -= 1
        if _counts[key] == 0:
            done.append(key)
    _restore(done)


_HANDLES = Handles(_release)


def enable(models: Iterable[str] | None = None) -> Handle:
    """Route transformers' linear-attention kernel calls to fla-ascend's ops.

    Args:
        models: model type names (``"qwen3_next"``, ``"qwen3_5"``, ``"kimi_linear"``, ...) or module names, or one
            such name as a string; ``None`` (default): every model :func:`find_models` lists. Their
            modeling modules are imported.

    Returns:
        A handle; ``with enable(): ...`` restores the originals when the block ends, except the
        names an enclosing (still open) ``enable`` also replaced: blocks nest. Calling
        :func:`disable` restores everything at once instead (open handles then close without effect).

    Raises:
        ModuleNotFoundError: transformers is not installed.
        ValueError: a requested model binds none of the kernel names.
    """
    keys = []
    missing = set(unavailable())
    for module_name, names in _selected(models).items():
        module = importlib.import_module(module_name)
        for kernel, attr in names.items():
            if kernel in missing:
                continue
            key = (module_name, attr)
            if key not in _patched:
                _patched[key] = getattr(module, attr)
            setattr(module, attr, ADAPTERS[kernel])
            _counts[key] = _counts.get(key, 0) + 1
            keys.append(key)
    return _HANDLES.open(keys)


def _restore(keys: Iterable[tuple[str, str]]) -> None:
    for key in list(keys):
        _counts.pop(key, None)
        original = _patched.pop(key, None)
        if original is not None:
            setattr(importlib.import_module(key[0]), key[1], original)


def disable() -> None:
    """Put back every function :func:`enable` replaced (a no-op when nothing is enabled), whatever
    handles are open."""
    _HANDLES.end_all()
    _restore(list(_patched))


def enabled_models() -> list[str]:
    """Model type names whose kernel calls are routed to fla-ascend now."""
    return sorted({module.split(".")[2] for module, _ in _patched})
