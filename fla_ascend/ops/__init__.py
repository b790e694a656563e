"""The ops, with flash-linear-attention's names, arguments and shapes."""
from fla_ascend.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

__all__ = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"]
