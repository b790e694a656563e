"""Norms used by GatedDeltaNet: L2 norm of q/k and the gated RMSNorm on the output."""
from fla_ascend.ops.norm.l2norm import l2norm

__all__ = ["l2norm"]
