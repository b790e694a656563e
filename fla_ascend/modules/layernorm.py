"""flash-linear-attention 0.6.0's ``fla.modules.layernorm`` path (an alias of its
``fla.modules.norm.layernorm``): the RMSNorm names fla-ascend implements, re-exported (LayerNorm,
GroupNorm and the fused-linear variants are not implemented)."""
from fla_ascend.modules.norm import RMSNorm
from fla_ascend.ops.norm import rms_norm

__all__ = ["RMSNorm", "rms_norm"]
