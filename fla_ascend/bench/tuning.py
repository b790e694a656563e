"""A/Bs of the chunk stages' CUDA launch table (``benchmarks/tune_chunk_stages.py``): time one
variant of a stage and nothing else.

The chunk stages pick their launch through :func:`fla_ascend.ops.common.tiles.launch_first_fitting`,
which steps down to the next candidate (fewer pipeline stages, a narrower tile) when a kernel does
not fit the GPU's shared memory. Under an A/B that would time another variant under the name of
the one asked for; :func:`strict_stage` switches the fallback off for the stage being timed, and
:func:`stage_variant` runs a block with one stage's table entry replaced."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from fla_ascend import backend

__all__ = ["strict_stage", "stage_variant"]


@contextlib.contextmanager
def strict_stage(stage: str) -> Iterator[None]:
    """While active, launches of ``stage`` (``"fwd_h"``, ...) try only their first candidate, so a
    variant that does not fit is reported as such instead of being timed as another one; other
    stages keep their fallbacks, and the stage's remembered fallback index is neither used nor
    updated.

    The active target with ``stage`` added to its ``strict_stages``
    (:attr:`fla_ascend.backend.Target.strict_stages`) is active while the block runs; contexts nest
    (several stages at once) and the previous target is back on exit, also after an exception."""
    t = backend.current()
    with backend.use(t.replace(strict_stages=t.strict_stages | {stage})):
        yield


@contextlib.contextmanager
def stage_variant(stage: str, entry: Mapping) -> Iterator[None]:
    """Run the block with the chunk stage table's (:data:`fla_ascend.ops.common.tiles.CUDA_LAUNCH`)
    entry of ``stage`` replaced by ``entry`` (``num_warps``, ``num_stages``, ``precision``, ``bv``):
    the active target with that override (``overrides["chunk_stages"]``), the other overrides kept.

    Raises:
        KeyError: (on the first launch of the stage) ``stage`` is not a table entry.
    """
    t = backend.current()
    over = {name: dict(entries) for name, entries in t.overrides.items()}
    over.setdefault("chunk_stages", {})[stage] = dict(entry)
    with backend.use(t.replace(overrides=over)):
        yield
