"""Profiling toolkit: collect with torch_npu.profiler (or torch.profiler on CUDA), read the
Ascend profiler output into pandas DataFrames, diagnose it and compare two runs.

Reading, analysis and comparison need only pandas, NumPy and matplotlib: no NPU, no CANN,
no torch_npu, no torch. ``collect`` imports torch lazily, and torch_npu only when collecting on
an NPU. This subpackage imports nothing else from fla_ascend.
"""
from .analyze import Report, Thresholds, analyze, classify_bound, kernel_summary
from .compare import Comparison, compare
from .readers import (
    DeviceInfo,
    MsprofOpRun,
    ProfilingFormatError,
    Run,
    find_runs,
    load_run,
    parse_shapes,
    read_device_info,
    read_kernel_details,
    read_msprof_op,
    read_op_statistic,
    read_operator_details,
    read_step_trace,
)


def profile(*args, **kwargs):
    """See :func:`fla_ascend.profiling.collect.profile` (imported lazily)."""
    from .collect import profile as _p

    return _p(*args, **kwargs)


def profile_op(*args, **kwargs):
    """See :func:`fla_ascend.profiling.collect.profile_op` (imported lazily)."""
    from .collect import profile_op as _p

    return _p(*args, **kwargs)


__all__ = [
    "Comparison", "DeviceInfo", "MsprofOpRun", "ProfilingFormatError", "Report", "Run", "Thresholds",
    "analyze", "classify_bound", "compare", "find_runs", "kernel_summary", "load_run", "parse_shapes",
    "profile", "profile_op", "read_device_info", "read_kernel_details", "read_msprof_op",
    "read_op_statistic", "read_operator_details", "read_step_trace",
]
