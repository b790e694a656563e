"""fla-ascend: linear-attention (GatedDeltaNet) Triton kernels for Huawei Ascend NPUs.

Importing the package imports nothing heavy: ``fla_ascend.profiling`` (pandas, NumPy, matplotlib)
and ``fla_ascend.tiling.chips`` work without torch or triton. The ops are imported on first use
(``from fla_ascend import chunk_gated_delta_rule`` or ``fla_ascend.backend``); ``fla_ascend.ops``
imports ``backend`` before any kernel is defined, so on a machine with no accelerator the Triton
interpreter is switched on before ``@triton.jit`` runs.
"""
from __future__ import annotations

import importlib

__version__ = "0.2.0"

_LAZY = {
    "backend": "fla_ascend.backend",
    "chunk_gated_delta_rule": "fla_ascend.ops",
    "fused_recurrent_gated_delta_rule": "fla_ascend.ops",
}

__all__ = ["backend", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "__version__"]


def __getattr__(name: str):
    """Import ``backend`` and the ops on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fla_ascend' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if name == "backend" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
