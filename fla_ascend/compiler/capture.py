"""Record an op's kernel launches instead of running them, planned for an Ascend chip: the launch
capture the NPU check (:mod:`fla_ascend.check.runner`) and the estimate (:mod:`fla_ascend.estimate.model`)
share.

Inside :func:`capture` the active target (:func:`fla_ascend.backend.use`) is :func:`capture_target`:
the launchers compute the grid, tiles and options they would use on the chip, and every
``kernel[grid](...)`` call is recorded with its arguments (:class:`Launch`); nothing runs.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from fla_ascend.tiling.chips import ChipSpec

__all__ = ["Launch", "capture", "capture_target"]


@dataclass
class Launch:
    """One recorded launch: the ``JITFunction``, the grid, the kernel's arguments by name, the
    launch options, and the core kind its launch plan last asked for (``None``: none)."""

    fn: object
    grid: tuple
    kwargs: dict
    options: dict
    kind: str | None


def capture_target(chip: ChipSpec, on_cores=None):
    """The :class:`fla_ascend.backend.Target` the check captures launches under: an NPU with
    ``chip``'s core counts, its UB model planning for ``chip``, compiled (not interpreted) launch
    plans and options, tensors on the CPU; ``on_cores`` records the core kind each plan asks for."""
    from fla_ascend import backend

    return backend.Target(device_type="npu", interpret=False, chip=chip, cube_cores=chip.cube_cores,
                          vector_cores=chip.vector_cores, tensor_device="cpu", on_cores=on_cores)


@contextlib.contextmanager
def capture(chip: ChipSpec | None, target=None):
    """Record kernel launches instead of running them, planned for ``chip``
    (:func:`capture_target` is the active target while the block runs), or for ``target`` (a
    :class:`fla_ascend.backend.Target`, e.g. a compiled CUDA one, whose tensors must then be on
    ``target.tensor_device``) when it is given.

    Yields the list that launches are appended to (:class:`Launch`); each launch's ``kind`` is the
    core kind its launch plan last asked for (``None`` when it asked none).
    """
    from triton.runtime.jit import JITFunction

    from fla_ascend import backend

    launches: list[Launch] = []
    kinds: list[str] = []
    orig_run = JITFunction.run

    def record_run(self, *args, grid, warmup, **kwargs):
        params = {p.name for p in self.params}
        kw = dict(zip([p.name for p in self.params], args))
        kw.update({k: v for k, v in kwargs.items() if k in params})
        opts = {k: v for k, v in kwargs.items() if k not in params}
        g = grid(kw) if callable(grid) else grid
        launches.append(Launch(self, tuple(g), kw, opts, kinds[-1] if kinds else None))
        kinds.clear()
        return None

    JITFunction.run = record_run  # the recording hook; the target is a value, below
    try:
        active = (capture_target(chip, on_cores=kinds.append) if target is None
                  else target.replace(on_cores=kinds.append))
        with backend.use(active):
            yield launches
    finally:
        JITFunction.run = orig_run
