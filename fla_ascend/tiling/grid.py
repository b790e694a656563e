"""Core-grid sizing for task-loop kernels, the 65535 grid limit and int32 offset guards.

Task-loop kernels (docs/ascend-rules.md, R1) take ``n_tasks`` and ``n_programs`` and, when
``TASK_LOOP`` is on, run ``for task in tl.range(pid, n_tasks, n_programs)``.

- NPU: one program per physical core (AI cores for kernels with ``tl.dot``, vector cores
  otherwise), looping over tasks: triton-ascend flattens the grid to one dimension and runs
  extra blocks in further rounds with overhead (docs/ascend-rules.md, R1).
- CUDA: one program per task with the loop compiled out (``TASK_LOOP=False``); measured on the
  H200, a one-iteration ``tl.range`` loop around two dots ran 1.8x slower than a plain grid.
  The 1-D grid may hold up to :data:`CUDA_MAX_GRID_X` programs (CUDA's x-dimension limit; the
  65535 limit applies to y and z only), so the loop is switched on only above that.
- CPU (interpreter): the NPU plan with a few programs, so tests exercise the task loop.
"""
from __future__ import annotations

from dataclasses import dataclass

from fla_ascend import backend

MAX_GRID = 65535
"""Largest total grid on the NPU and under the interpreter: triton-ascend 3.2.0 raises "grid should
be less than 65536" (CUDA's y/z limit is the same number; its 1-D grids go to :data:`CUDA_MAX_GRID_X`)."""

INT32_MAX = 2**31 - 1

CUDA_MAX_GRID_X = 2**31 - 1
"""Largest x dimension of a CUDA grid (CUDA C Programming Guide, compute capability table:
"Maximum x-dimension of a grid of thread blocks" 2^31 - 1): the default of
:attr:`fla_ascend.backend.Target.cuda_max_grid_x`, which plans read (:func:`cuda_max_grid_x`). The
task plans' CUDA grids are 1-D; the conv forward's 3-D grid keeps its y and z dimensions within
:data:`MAX_GRID`, CUDA's y/z limit."""


def cuda_max_grid_x() -> int:
    """The active target's largest 1-D CUDA grid (:attr:`fla_ascend.backend.Target.cuda_max_grid_x`)."""
    return backend.current().cuda_max_grid_x


@dataclass(frozen=True)
class TaskPlan:
    """A launch plan: ``grid`` for the launch, ``n_programs`` and ``task_loop`` for the kernel."""

    n_tasks: int
    n_programs: int
    task_loop: bool

    @property
    def grid(self) -> tuple[int]:
        return (self.n_programs,)


def task_plan(n_tasks: int, kind: str) -> TaskPlan:
    """Launch plan for ``n_tasks`` independent tasks.

    Args:
        n_tasks: number of tasks (>= 0).
        kind: ``"cube"`` for kernels with ``tl.dot``, ``"vector"`` for vector-only kernels.

    Returns:
        A :class:`TaskPlan` whose grid is at least 1 and never exceeds :data:`MAX_GRID`
        (the active target's :func:`cuda_max_grid_x` on a CUDA GPU); core counts are the active
        target's (:func:`fla_ascend.backend.num_cores`).

    Raises:
        ValueError: ``n_tasks`` negative, or ``kind`` unknown.
    """
    if n_tasks < 0:
        raise ValueError(f"n_tasks must be >= 0, got {n_tasks}")
    cores = backend.num_cores(kind)
    if backend.is_cuda_compiled():
        limit = cuda_max_grid_x()
        if n_tasks <= limit:
            return TaskPlan(n_tasks=n_tasks, n_programs=max(n_tasks, 1), task_loop=False)
        return TaskPlan(n_tasks=n_tasks, n_programs=limit, task_loop=True)
    return TaskPlan(n_tasks=n_tasks, n_programs=max(1, min(n_tasks, cores, MAX_GRID)), task_loop=True)


def check_int32_offsets(name: str, numel: int) -> None:
    """Raise when element offsets into a tensor of ``numel`` elements would overflow int32.

    Kernels compute per-tile vector offsets in int32 and scalar bases in int64; a tile offset
    relative to its int64 base must still fit in int32 (docs/ascend-rules.md, R6).

    Raises:
        ValueError: ``numel`` exceeds 2**31 - 1 for a tensor whose in-tile offsets are int32.
    """
    if numel > INT32_MAX:
        raise ValueError(
            f"{name} has {numel} elements; int32 in-tile offsets support at most {INT32_MAX}: "
            "split the input into several calls"
        )
