"""A/Bs of the chunk stages' CUDA launch table (``benchmarks/tune_chunk_stages.py``): time one
variant of a stage and nothing else.

The chunk stages pick their launch through :func:`fla_ascend.ops.common.tiles.launch_first_fitting`,
which steps down to the next candidate (fewer pipeline stages, a narrower tile) when a kernel does
not fit the GPU's shared memory. Under an A/B that would time another variant under the name of
the one asked for; :func:`strict_stage` switches the fallback off for the stage being timed."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from fla_ascend.ops.common import tiles

__all__ = ["strict_stage"]

_ORIGINAL = tiles.launch_first_fitting
_STRICT: set[str] = set()
_PATCHED: list = []


def _first_only(stage, key, candidates, launch, what=""):
    """:func:`~fla_ascend.ops.common.tiles.launch_first_fitting` with only the first candidate for
    the stages in :data:`_STRICT`: one that does not fit raises its ``RuntimeError`` (``tried [c]``)."""
    if stage in _STRICT:
        candidates = list(candidates)[:1]
    return _ORIGINAL(stage, key, candidates, launch, what)


@contextlib.contextmanager
def strict_stage(stage: str) -> Iterator[None]:
    """While active, launches of ``stage`` (``"fwd_h"``, ...) try only their first candidate, so a
    variant that does not fit is reported as such instead of being timed as another one; other
    stages keep their fallbacks, and the stage's remembered fallback index is not used.

    The kernel modules call ``launch_first_fitting`` by the name they imported: the context sets
    that name, in every loaded module of :mod:`fla_ascend.ops` that holds it, to a function that
    passes the first candidate only for the strict stages, and puts the original back on exit.
    Contexts nest (several stages at once)."""
    if not _STRICT:
        for mod in list(sys.modules.values()):
            if (getattr(mod, "__name__", "").startswith("fla_ascend.ops.")
                    and getattr(mod, "launch_first_fitting", None) is _ORIGINAL):
                mod.launch_first_fitting = _first_only
                _PATCHED.append(mod)
    added = stage not in _STRICT
    _STRICT.add(stage)
    try:
        yield
    finally:
        if added:
            _STRICT.discard(stage)
        if not _STRICT:
            while _PATCHED:
                _PATCHED.pop().launch_first_fitting = _ORIGINAL
