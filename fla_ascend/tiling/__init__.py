"""UB-aware tiling helpers: core grid and int32 limits (``grid``)."""
from fla_ascend.tiling.grid import MAX_GRID, TaskPlan, check_int32_offsets, task_plan

__all__ = ["MAX_GRID", "TaskPlan", "task_plan", "check_int32_offsets"]
