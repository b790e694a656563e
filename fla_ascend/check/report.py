"""Print the check's results (rich tables) and write them as JSON."""
from __future__ import annotations

import json

__all__ = ["print_report", "write_json", "COLUMNS"]

COLUMNS = ("kernel", "config", "compiled", "core", "UB KiB (%)", "L1 KiB (%)", "L0C KiB (%)", "mb bufs",
           "syncs in/x", "compile s (CPU)", "model/plan", "findings")
"""The per-launch table's columns (docs/check.md explains each)."""


def _kib_share(r: dict, sp: str) -> str:
    if not r.get("planned"):
        return "-"
    b = r["planned"].get(sp, 0)
    return f"{b / 1024:.1f} ({r['share'].get(sp, 0):.0%})" if b else "0"


def _compiled(r: dict, mode: str) -> str:
    if not r["lowered"]:
        return f"NO (lowering: {r['stage']})"
    if r.get("compiled") is None:
        return "lowering only" if mode != "compiled" else "-"
    if r["compiled"]:
        return "yes" + (" (cached)" if r.get("compile_cached") else "")
    out = f"NO: {r['compile_error_class']}"
    if r.get("compile_needed_bytes") is not None:
        out += f" {r['compile_needed_bytes']}/{r['compile_available_bytes']} B"
    return out


def _config(r: dict) -> str:
    cfgs = r.get("configs") or [r["config"]]
    return cfgs[0] + (f" (+{len(cfgs) - 1})" if len(cfgs) > 1 else "")


def print_report(data: dict, console=None) -> None:
    """Print ``data`` (the dict :func:`fla_ascend.check.worker.collect` builds) as tables."""
    from fla_ascend.console import make_console
    from rich.markup import escape
    from rich.table import Table

    console = console or make_console(width=220)
    for chip, rows in data["results"].items():
        c = data["chips"][chip]
        mode = c.get("mode", "compiled")
        t = Table(title=f"fla-ascend check: {chip} (UB {c['ub_bytes']} B, {c['cube_cores']} cube / "
                        f"{c['vector_cores']} vector cores; {escape(mode)}; {data.get('matrix', '')} matrix)")
        for col in COLUMNS:
            t.add_column(col, overflow="fold")
        for r in rows:
            mb = ", ".join(f"{k} {v}" for k, v in sorted(r.get("multibuffered", {}).items())) or "-"
            syncs = "-" if r.get("intra_core_syncs") is None else f"{r['intra_core_syncs']}/{r['cross_core_syncs']}"
            secs = "-" if r.get("compile_seconds") is None else f"{r['compile_seconds']:.1f}"
            if r.get("compile_cpu_seconds") is not None:
                secs += f" ({r['compile_cpu_seconds']:.1f})"
            ratio = "-" if r.get("model_vs_plan") is None else f"{r['model_vs_plan']:.2f}"
            fnd = "; ".join(f"{f['code']}{' (accepted)' if f.get('accepted') else ''}"
                            f"{' [' + f['severity'] + ']' if f['severity'] != 'error' else ''}"
                            for f in r["findings"]) or "clean"
            t.add_row(r["kernel"].rsplit(".", 1)[-1], _config(r), escape(_compiled(r, mode)), r.get("core_type") or "-",
                      _kib_share(r, "ub"), _kib_share(r, "l1"), _kib_share(r, "l0c"), mb, syncs, secs, ratio,
                      escape(fnd))  # "[info]" is our tag, not rich markup
        console.print(t)
        if mode != "compiled":
            console.print(f"[yellow]{chip}: {escape(mode)}[/yellow]")
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
