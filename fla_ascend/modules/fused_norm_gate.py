"""flash-linear-attention 0.6.0's ``fla.modules.fused_norm_gate`` path (an alias of its
``fla.modules.norm.fused_norm_gate``): the gated RMSNorm names fla-ascend implements, re-exported
(the LayerNorm and fused-linear variants are not implemented)."""
from fla_ascend.ops.norm import FusedRMSNormGated, rms_norm_gated

__all__ = ["FusedRMSNormGated", "rms_norm_gated"]
