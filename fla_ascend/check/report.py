"""Print the check's results (rich tables) and write them as JSON."""
from __future__ import annotations

import json

__all__ = ["print_report", "write_json", "write_markdown", "kernel_summary", "COLUMNS"]

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
    from rich.markup import escape
    from rich.table import Table

    from fla_ascend.console import make_console

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
            t.add_row(f"{f['file']}:{f['line']}", f["function"],
                      f["code"] + (" (accepted)" if f.get("accepted") else ""), escape(f["message"]))
        console.print(t)
    for k in data["missing"]:
        console.print(f"[red]kernel without registry entry[/red]: {k}")
    for m, e in data["import_errors"]:
        console.print(f"[red]import failed[/red]: {escape(f'{m}: {e}')}")
    if data.get("selection"):
        console.print(f"[yellow]{escape(selection_text(data['selection']))}[/yellow]")
    if data["failures"]:
        console.print(f"[bold red]FAIL[/bold red]: {len(data['failures'])} problem(s)")
        for line in data["failures"]:
            console.print(f"  - {line}", markup=False)
    else:
        console.print(f"[bold green]PASS[/bold green]: {data['n_cases']} kernel launches on "
                      f"{', '.join(data['results'])} in {data['seconds']:.1f} s")


def selection_text(selection: dict) -> str:
    """One line naming what a run of ``--kernels`` / ``--ops`` checked: ``only 2 of 21 kernels
    (--ops l2norm): l2norm_bwd_kernel, l2norm_fwd_kernel; unregistered kernels not looked for``."""
    given = " ".join(f"--{k} {','.join(selection[k])}" for k in ("kernels", "ops") if selection.get(k))
    names = ", ".join(k.rsplit(".", 1)[-1] for k in selection["selected"])
    return (f"only {len(selection['selected'])} of {selection['of']} kernels ({given}): {names}; "
            "unregistered kernels not looked for")


def write_json(data: dict, path: str) -> None:
    """Write ``data`` to ``path`` as indented JSON."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)


def kernel_summary(data: dict) -> dict:
    """Per chip and kernel, the compiled facts over its launches: ``{chip: [row, ...]}`` with
    ``kernel``, ``launches``, ``compiled``, ``core`` (core types seen), ``ub``/``l1``/``l0c`` (largest
    planned bytes), ``ub_share`` (largest share of the chip's UB), ``syncs`` (largest intra-core and
    cross-core counts), ``compile_cpu_s`` / ``compile_wall_s`` (largest compile CPU and wall seconds),
    ``model_vs_plan`` (min, max) and ``errors`` (the distinct compiler error classes)."""
    out = {}
    for chip, rows in data["results"].items():
        by: dict = {}
        for r in rows:
            by.setdefault(r["kernel"].rsplit(".", 1)[-1], []).append(r)
        table = []
        for name, rs in by.items():
            ok = [r for r in rs if r.get("compiled")]
            ratios = [r["model_vs_plan"] for r in ok if r.get("model_vs_plan") is not None]
            table.append(dict(
                kernel=name, launches=len(rs), compiled=len(ok),
                core="/".join(sorted({r["core_type"] for r in ok if r.get("core_type")})) or "-",
                ub=max((r["planned"].get("ub", 0) for r in ok), default=0),
                ub_share=max((r["share"].get("ub", 0) for r in ok), default=0.0),
                l1=max((r["planned"].get("l1", 0) for r in ok), default=0),
                l0c=max((r["planned"].get("l0c", 0) for r in ok), default=0),
                syncs=(max((r.get("intra_core_syncs", 0) for r in ok), default=0),
                       max((r.get("cross_core_syncs", 0) for r in ok), default=0)),
                compile_cpu_s=max((r.get("compile_cpu_seconds") or 0.0 for r in ok), default=0.0),
                compile_wall_s=max((r.get("compile_seconds") or 0.0 for r in ok), default=0.0),
                model_vs_plan=(min(ratios), max(ratios)) if ratios else None,
                errors=sorted({r["compile_error_class"] for r in rs if r.get("compile_error_class")}),
            ))
        out[chip] = table
    return out


def write_markdown(data: dict, path: str) -> None:
    """Write :func:`kernel_summary` as one Markdown table per chip to ``path`` (the per-kernel
    tables of cases.md and docs/check.md come from it)."""
    lines = [selection_text(data["selection"]), ""] if data.get("selection") else []
    for chip, table in kernel_summary(data).items():
        ub = data["chips"][chip]["ub_bytes"]
        lines += [f"{chip} (UB {ub} B):", "",
                  "| kernel | launches compiled | core | planned UB B (max, % of UB) | L1 B | L0C B "
                  "| syncs intra/cross (max) "
                  "| compile s, CPU (wall), max | UB model / plan | compiler errors |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for t in table:
            mvp = f"{t['model_vs_plan'][0]:.2f}-{t['model_vs_plan'][1]:.2f}" if t["model_vs_plan"] else "-"
            lines.append(f"| {t['kernel']} | {t['compiled']} of {t['launches']} | {t['core']} | "
                         f"{t['ub']} ({t['ub_share']:.0%}) | {t['l1']} | {t['l0c']} | "
                         f"{t['syncs'][0]}/{t['syncs'][1]} | "
                         f"{t['compile_cpu_s']:.1f} ({t['compile_wall_s']:.1f}) | {mvp} | "
                         f"{', '.join(t['errors']) or '-'} |")
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
