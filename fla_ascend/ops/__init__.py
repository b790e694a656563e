"""The ops, with flash-linear-attention's names, arguments and shapes.

``backend`` is imported first: on a machine with no accelerator it switches on the Triton
interpreter before any kernel is defined."""
from fla_ascend import backend  # noqa: F401  (must precede every kernel import)
from fla_ascend.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from fla_ascend.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla_ascend.ops.kda import chunk_kda, fused_recurrent_kda
from fla_ascend.ops.norm import FusedRMSNormGated, l2_norm, l2norm, rms_norm, rms_norm_gated

__all__ = [
    "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "fused_recurrent_kda", "chunk_kda",
    "causal_conv1d", "causal_conv1d_update", "l2norm", "l2_norm", "rms_norm", "rms_norm_gated",
    "FusedRMSNormGated",
]
