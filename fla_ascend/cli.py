"""The ``fla-ascend`` command: linear-attention kernels for Ascend NPUs and their tools.

Each subcommand lives in the module that owns it and exposes ``register(subparsers)``; this
file only assembles them."""
from __future__ import annotations

import argparse
import importlib
import sys

# (module, what it adds); each module defines register(subparsers) -> None
_SUBCOMMANDS = [
    "fla_ascend.info_cli",
    "fla_ascend.bench.cli",
    "fla_ascend.round.cli",
    "fla_ascend.check.cli",
    "fla_ascend.profiling.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fla-ascend", description=__doc__.splitlines()[0].split(": ", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _SUBCOMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
