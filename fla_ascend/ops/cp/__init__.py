"""Context parallelism: one packed batch split along T across the ranks of a ``torch.distributed``
group, with flash-linear-attention's ``cp_context`` API (docs/cp.md). Build a context with
:func:`build_cp_context` and pass it as ``cp_context=`` to ``chunk_gated_delta_rule`` and
``causal_conv1d``."""
from fla_ascend.ops.cp.context import CPPart, FLACPContext, build_cp_context

__all__ = ["CPPart", "FLACPContext", "build_cp_context"]
