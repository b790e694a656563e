"""The rich console every ``fla-ascend`` command prints through (rich: the ``lab`` extra)."""
from __future__ import annotations

import os
import sys

from fla_ascend._extras import require

# the check first, so that a missing rich is named with its extra
require(__name__, "rich")

from rich.console import Console  # noqa: E402

LOG_WIDTH = 200
"""Columns of the console when the output is not a terminal and ``COLUMNS`` is unset or not a
number (a log file, a pipe, a CI job): rich's default of 80 folds every table column of kernel
names and shapes into many lines there."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's default exits with status 1; raise instead, so that fla_ascend.cli.main ends
        # every command whose reader went away (`| head`) the same way (quietly, status 141)
        raise BrokenPipeError


def make_console(**kwargs) -> Console:
    """A ``rich.console.Console`` (same arguments) whose closed-pipe handling is the CLI's, and
    :data:`LOG_WIDTH` columns wide when writing to something other than a terminal without a
    numeric ``COLUMNS`` (unless ``width`` is given)."""
    stream = kwargs.get("file") or (sys.stderr if kwargs.get("stderr") else sys.stdout)
    columns = os.environ.get("COLUMNS", "").strip()
    if "width" not in kwargs and not columns.isdigit() and not (hasattr(stream, "isatty") and stream.isatty()):
        kwargs["width"] = LOG_WIDTH
    return _Console(**kwargs)
