"""The ``fla-ascend`` command: linear-attention kernels for Ascend NPUs and their tools.

Each subcommand lives in the module that owns it and exposes ``register(subparsers)``; this
file only assembles them. The command is part of the workbench: without the ``lab`` extra's
packages it prints which one is missing and the pip command, and exits with status 1."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from fla_ascend._extras import MissingExtraError
from fla_ascend.cli_common import UsageError

# (module, what it adds); each module defines register(subparsers) -> None
_SUBCOMMANDS = [
    "fla_ascend.info_cli",
    "fla_ascend.bench.cli",
    "fla_ascend.round.cli",
    "fla_ascend.ir.cli",
    "fla_ascend.check.cli",
    "fla_ascend.estimate.cli",
    "fla_ascend.profiling.cli",
]


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose sub-command parsers (of this class too, argparse's default)
    refuse unknown arguments themselves: ``fla-ascend bench --bogus`` prints ``bench``'s usage,
    not the top-level one (argparse leaves a sub-parser's unknown arguments to the top)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _version() -> str:
    from fla_ascend import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fla-ascend", description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _SUBCOMMANDS:
        importlib.import_module(name).register(sub)
    _name_commands(parser)
    return parser


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Record in each (sub-)sub-command's defaults its name (``fla-ascend profile analyze``), for
    the one-line message of a :class:`UsageError`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for p in action.choices.values():
                p.set_defaults(command_name=p.prog)
                _name_commands(p)


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
    except MissingExtraError as e:  # the workbench's packages are not installed (the lab extra)
        print(f"fla-ascend: {e}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return status
    except UsageError as e:  # a command line that cannot work, found before any work: one line, status 2
        print(f"{getattr(args, 'command_name', 'fla-ascend')}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader of our output went away (`fla-ascend ... | head`): stop quietly, like a
        # Unix tool; stdout goes to devnull so the interpreter's final flush cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, the shell's status for a writer killed by a closed pipe


if __name__ == "__main__":
    sys.exit(main())
