"""Gated delta rule: chunked op (prefill/training) and fused recurrent op (decode)."""
from fla_ascend.ops.gated_delta_rule.chunk import chunk_gated_delta_rule
from fla_ascend.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule

__all__ = ["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"]
