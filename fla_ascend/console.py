"""The rich console every ``fla-ascend`` command prints through."""
from __future__ import annotations

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's default exits with status 1; raise instead, so that fla_ascend.cli.main ends
        # every command whose reader went away (`| head`) the same way (quietly, status 141)
        raise BrokenPipeError


def make_console(**kwargs) -> Console:
    """A ``rich.console.Console`` (same arguments) whose closed-pipe handling is the CLI's."""
    return _Console(**kwargs)
