"""fla-ascend: linear-attention (GatedDeltaNet) Triton kernels for Huawei Ascend NPUs.

``backend`` is imported first: on a machine with no accelerator it switches on the Triton
interpreter before any kernel is defined.
"""
from fla_ascend import backend  # noqa: F401  (must precede every kernel import)
from fla_ascend.ops import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

__version__ = "0.1.0"

__all__ = ["backend", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "__version__"]
