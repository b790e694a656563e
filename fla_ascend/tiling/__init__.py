"""UB-aware tiling helpers: core grid and int32 limits (``grid``), Ascend SoC table (``chips``),
UB budget model and tile picker (``ub``), host-side integer helpers for sizes (``sizes``)."""
from fla_ascend.tiling import chips, sizes, ub
from fla_ascend.tiling.grid import MAX_GRID, TaskPlan, check_int32_offsets, task_plan

__all__ = ["MAX_GRID", "TaskPlan", "task_plan", "check_int32_offsets", "chips", "sizes", "ub"]
