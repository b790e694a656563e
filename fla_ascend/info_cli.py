"""``fla-ascend info``: what the backend layer decided on this machine."""
from __future__ import annotations

import dataclasses
import json


def register(sub) -> None:
    p = sub.add_parser("info", help="device, Triton flavour, interpreter mode and core counts")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args) -> int:
    from rich.table import Table

    from fla_ascend import backend
    from fla_ascend.console import make_console

    data = dataclasses.asdict(backend.info())
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    table = Table(title="fla-ascend backend")
    table.add_column("setting")
    table.add_column("value")
    for k, v in data.items():
        table.add_row(k, str(v))
    make_console().print(table)
    return 0
