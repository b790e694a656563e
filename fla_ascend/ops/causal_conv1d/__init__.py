"""Causal depthwise short convolution (flash-linear-attention compatible): forward, backward, decode."""
from fla_ascend.ops.causal_conv1d.conv import causal_conv1d, causal_conv1d_update

__all__ = ["causal_conv1d", "causal_conv1d_update"]
