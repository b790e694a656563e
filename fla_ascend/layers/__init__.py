"""Layers built from the ops."""
from fla_ascend.layers.gated_deltanet import GatedDeltaNet, GatedDeltaNetCache, bench_layer

__all__ = ["GatedDeltaNet", "GatedDeltaNetCache", "bench_layer"]
