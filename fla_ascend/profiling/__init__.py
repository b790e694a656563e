"""Profiling toolkit: collect with torch_npu.profiler (or torch.profiler on CUDA), read the
Ascend profiler output into pandas DataFrames (one run, a folder of ranks, msprof app-mode
output, single files), diagnose it (step split, communication, bound pipes, roofline, ranks)
and compare two runs.

Reading, analysis and comparison need only pandas, NumPy and matplotlib: no NPU, no CANN,
no torch_npu, no torch, no triton. ``collect`` imports torch lazily, and torch_npu only when
collecting on an NPU. Of the rest of fla_ascend this subpackage imports only the chip table
(``fla_ascend.tiling.chips``, itself free of torch and triton), the console and the CLI's shared
helpers, the check for its optional packages (``fla_ascend._extras``) and, for ``profile op``, the
benchmark suite.

pandas, NumPy and matplotlib come with the ``lab`` extra (``pip install "fla-ascend[lab]"``);
without one of them importing this package raises an ``ImportError`` that says so.
"""
from fla_ascend._extras import require as _require

# the check first, so that a missing package is named with its extra
_require(__name__, "numpy", "pandas", "matplotlib")

from .analyze import ClusterReport, Report, Thresholds, analyze, analyze_ranks, classify_bound, kernel_summary  # noqa: E402
from .compare import Comparison, compare  # noqa: E402
from .readers import (  # noqa: E402
    DeviceInfo,
    MsprofOpRun,
    ProfilingFormatError,
    RowIssue,
    Run,
    find_runs,
    load_run,
    load_runs,
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
    "ClusterReport", "Comparison", "DeviceInfo", "MsprofOpRun", "ProfilingFormatError", "Report", "RowIssue", "Run",
    "Thresholds", "analyze", "analyze_ranks", "classify_bound", "compare", "find_runs", "kernel_summary", "load_run",
    "load_runs", "parse_shapes",
    "profile", "profile_op", "read_device_info", "read_kernel_details", "read_msprof_op",
    "read_op_statistic", "read_operator_details", "read_step_trace",
]
