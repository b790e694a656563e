"""Print the check's results (rich tables) and write them as JSON."""
from __future__ import annotations

import json

__all__ = ["print_report", "write_json"]


def _kib(n) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def print_report(data: dict, console=None) -> None:
    """Print ``data`` (the dict :func:`fla_ascend.check.worker.main` builds) as tables."""
    from fla_ascend.console import make_console
    from rich.markup import escape
    from rich.table import Table

    console = console or make_console(width=200)
    for chip, rows in data["results"].items():
        t = Table(title=f"fla-ascend check: {chip} (UB {data['chips'][chip]['ub_bytes']} B, "
                        f"{data['chips'][chip]['cube_cores']} cube / {data['chips'][chip]['vector_cores']} vector cores)")
        for col in ("kernel", "config", "lowered", "kind", "mix", "grid/cores", "IR KiB", "IR x mb KiB",
                    "model KiB", "IR/model", "findings"):
            t.add_column(col, overflow="fold")
        for r in rows:
            ratio = f"{r['ir_bytes'] / r['model_bytes']:.2f}" if r.get("model_bytes") else "-"
            fnd = "; ".join(f"{f['code']}{' (accepted)' if f.get('accepted') else ''}{' [info]' if f['severity'] == 'info' else ''}"
                            for f in r["findings"]) or "clean"
            fnd = escape(fnd)  # "[info]" is our tag, not rich markup
            t.add_row(r["kernel"].rsplit(".", 1)[-1], r["config"], "yes" if r["lowered"] else f"NO ({r['stage']})",
                      r["kind"], r["mix_mode"], f"{r['grid']}/{r['cores']}", _kib(r["ir_bytes"]),
                      _kib(r["ir_bytes_mb"]), _kib(r.get("model_bytes")), ratio, fnd)
        console.print(t)
    if data["lint"]:
        t = Table(title="source lint")
        for col in ("where", "function", "code", "message"):
            t.add_column(col, overflow="fold")
        for f in data["lint"]:
            t.add_row(f"{f['file']}:{f['line']}", f["function"], f["code"] + (" (accepted)" if f.get("accepted") else ""),
                      escape(f["message"]))
        console.print(t)
    for k in data["missing"]:
        console.print(f"[red]kernel without registry entry[/red]: {k}")
    for m, e in data["import_errors"]:
        console.print(f"[red]import failed[/red]: {escape(f'{m}: {e}')}")
    if data["failures"]:
        console.print(f"[bold red]FAIL[/bold red]: {len(data['failures'])} problem(s)")
        for line in data["failures"]:
            console.print(f"  - {line}", markup=False)
    else:
        console.print(f"[bold green]PASS[/bold green]: {data['n_cases']} kernel launches on {', '.join(data['results'])} "
                      f"in {data['seconds']:.1f} s")


def write_json(data: dict, path: str) -> None:
    """Write ``data`` to ``path`` as indented JSON."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
