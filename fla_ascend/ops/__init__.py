"""The ops, with flash-linear-attention's names, arguments and shapes."""
from fla_ascend.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla_ascend.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from fla_ascend.ops.norm import FusedRMSNormGated, l2_norm, l2norm, rms_norm, rms_norm_gated

__all__ = [
    "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule",
    "causal_conv1d", "causal_conv1d_update", "l2norm", "l2_norm", "rms_norm", "rms_norm_gated",
    "FusedRMSNormGated",
]
