"""Norms used by GatedDeltaNet: L2 norm of q/k and the (gated) RMSNorm on the output."""
from fla_ascend.ops.norm.l2norm import l2_norm, l2norm
from fla_ascend.ops.norm.rms_norm_gated import FusedRMSNormGated, rms_norm, rms_norm_gated

__all__ = ["l2norm", "l2_norm", "rms_norm", "rms_norm_gated", "FusedRMSNormGated"]
