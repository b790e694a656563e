"""flash-linear-attention's ``fla.modules`` names over our ops: ``ShortConvolution``,
``FusedRMSNormGated``, ``RMSNorm``, ``L2Norm`` (same constructors and forward signatures)."""
from fla_ascend.modules.convolution import ShortConvolution
from fla_ascend.modules.norm import FusedRMSNormGated, L2Norm, RMSNorm

__all__ = ["ShortConvolution", "FusedRMSNormGated", "RMSNorm", "L2Norm"]
