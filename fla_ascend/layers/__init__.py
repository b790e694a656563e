"""Layers built from the ops."""
from fla_ascend.layers.gated_deltanet import GatedDeltaNet, GatedDeltaNetCache

__all__ = ["GatedDeltaNet", "GatedDeltaNetCache"]
