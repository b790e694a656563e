"""flash-linear-attention's ``fla.modules`` names over our ops: ``ShortConvolution``,
``FusedRMSNormGated``, ``RMSNorm``, ``L2Norm`` (same constructors and forward signatures).

The submodules ``l2norm``, ``fused_norm_gate``, ``layernorm`` and ``convolution`` stand for the
``fla.modules`` paths of those names that flash-linear-attention 0.6.0 code imports, with the
names of each that are implemented here."""
from fla_ascend.modules.convolution import ShortConvolution
from fla_ascend.modules.norm import FusedRMSNormGated, L2Norm, RMSNorm

__all__ = ["ShortConvolution", "FusedRMSNormGated", "RMSNorm", "L2Norm"]
