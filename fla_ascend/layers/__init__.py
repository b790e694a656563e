"""Layers built from the ops."""
from fla_ascend.layers.gated_deltanet import GatedDeltaNet, GatedDeltaNetCache
from fla_ascend.layers.kda import KimiDeltaAttention, KimiDeltaAttentionCache

__all__ = ["GatedDeltaNet", "GatedDeltaNetCache", "KimiDeltaAttention", "KimiDeltaAttentionCache"]
