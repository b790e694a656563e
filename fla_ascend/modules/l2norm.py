"""flash-linear-attention 0.6.0's ``fla.modules.l2norm`` path (an alias of its ``fla.modules.norm.l2norm``):
the L2 norm names fla-ascend implements, re-exported."""
from fla_ascend.modules.norm import L2Norm
from fla_ascend.ops.norm import l2_norm, l2norm

__all__ = ["L2Norm", "l2norm", "l2_norm"]
