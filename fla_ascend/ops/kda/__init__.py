"""Kimi Delta Attention (KDA): the gated delta rule with a per-channel decay ``g`` ``[B, T, HV, K]``."""
from fla_ascend.ops.kda.chunk import chunk_kda
from fla_ascend.ops.kda.fused_recurrent import fused_recurrent_kda

__all__ = ["chunk_kda", "fused_recurrent_kda"]
