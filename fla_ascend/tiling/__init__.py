"""UB-aware tiling helpers: core grid and int32 limits (``grid``), Ascend SoC table (``chips``),
UB budget model and tile picker (``ub``), host-side integer helpers for sizes (``sizes``).

``grid`` needs torch (it asks the backend for core counts), so its names are imported on first
use: ``import fla_ascend.tiling.chips`` needs neither torch nor triton."""
from fla_ascend.tiling import chips, sizes, ub

__all__ = ["MAX_GRID", "TaskPlan", "task_plan", "check_int32_offsets", "chips", "sizes", "ub"]

_GRID_NAMES = ("MAX_GRID", "TaskPlan", "task_plan", "check_int32_offsets")


def __getattr__(name: str):
    """``MAX_GRID``, ``TaskPlan``, ``task_plan``, ``check_int32_offsets`` from ``grid`` (PEP 562)."""
    if name in _GRID_NAMES:
        from fla_ascend.tiling import grid

        return getattr(grid, name)
    raise AttributeError(f"module 'fla_ascend.tiling' has no attribute {name!r}")
