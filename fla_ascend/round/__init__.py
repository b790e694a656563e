"""Optimisation rounds with correctness and performance gates (``fla-ascend round``), and IR
capture (``fla-ascend ir``). The CLI is a thin layer over :class:`Workspace`."""
from fla_ascend.round.compare import ComparisonError, compare_artifacts
from fla_ascend.round.runner import RunnerError, SuiteRequest, run_suite_isolated
from fla_ascend.round.sources import op_source_files
from fla_ascend.round.workspace import RoundError, Workspace, correctness_of

__all__ = [
    "ComparisonError",
    "RoundError",
    "RunnerError",
    "SuiteRequest",
    "Workspace",
    "compare_artifacts",
    "correctness_of",
    "op_source_files",
    "run_suite_isolated",
]
