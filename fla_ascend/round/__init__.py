"""Optimisation rounds with correctness and performance gates (``fla-ascend round``). The CLI is a
thin layer over :class:`Workspace`. Built on
:mod:`fla_ascend.bench`: it needs the ``lab`` extra too."""
from fla_ascend._extras import require as _require

# the check first, so that a missing package is named with its extra
_require(__name__, "numpy", "matplotlib", "rich")

from fla_ascend.round.compare import ComparisonError, compare_artifacts  # noqa: E402
from fla_ascend.round.runner import RunnerError, SuiteRequest, run_suite_isolated  # noqa: E402
from fla_ascend.round.sources import op_source_files  # noqa: E402
from fla_ascend.round.workspace import RoundError, Workspace, correctness_of  # noqa: E402

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
