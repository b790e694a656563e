"""Context parallelism: one packed batch split along T across the ranks of a ``torch.distributed``
group, with flash-linear-attention's ``cp_context`` API (docs/cp.md). Build a context with
:func:`build_cp_context` and pass it as ``cp_context=`` to ``chunk_gated_delta_rule`` and
``causal_conv1d``.

This package holds the primitives, below the ops: :mod:`.context` (the split), :mod:`.comm` (the
collectives), :mod:`.chain` (the affine state chain, on the shared chunk stages of
:mod:`fla_ascend.ops.common`). Each op owns its context-parallel path: the gated delta rule's autograd
function is in :mod:`fla_ascend.ops.gated_delta_rule.chunk`, the convolution's halo exchange in
:mod:`fla_ascend.ops.causal_conv1d.cp`. Nothing here imports an op."""
from fla_ascend.ops.cp.context import CPPart, FLACPContext, build_cp_context

__all__ = ["CPPart", "FLACPContext", "build_cp_context"]
