"""Render a benchmark artifact: terminal table (rich), Markdown table, PNG plots (matplotlib Agg).

All functions take the artifact dict of :func:`fla_ascend.bench.suite.run_suite` (or one read
back with :func:`fla_ascend.bench.suite.read_json`) and never run anything.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["table_rows", "print_table", "to_markdown", "write_markdown", "write_plot", "failed"]


INTERPRETER_LABEL = ("measured under the Triton interpreter: times and ratios are Python execution "
                     "speed, not the speed of any GPU or NPU")
"""The words every table, plot and comparison of interpreter timings carries."""


def failed(artifact: dict) -> list[dict]:
    """Rows whose gate failed or that raised (``correct is False``)."""
    return [r for r in artifact["results"] if r.get("correct") is False]


def _others(artifact: dict) -> list[str]:
    seen: list[str] = []
    for r in artifact["results"]:
        if r["provider"] not in seen:
            seen.append(r["provider"])
    return seen


def _num(x, fmt):
    return "-" if x is None else format(x, fmt)


def _status(r: dict) -> str:
    if r.get("skipped"):
        return "skip"
    if r.get("error"):
        return "ERROR"
    return "PASS" if r.get("correct") else "FAIL"


def table_rows(artifact: dict) -> tuple[list[str], list[list[str]]]:
    """Header and string cells of the result table, one row per case.

    Columns: op (the name ``--ops`` takes), shape, mode, dtype, provider, gate (status and worst relative RMSE), ms,
    peak MiB (device memory allocated by one call above what was allocated before it; ``-`` on
    CPU), tokens/s, GB/s, TFLOP/s, the fraction of the measured copy bandwidth and matmul peak when
    they were measured, and ``x <other>`` (other provider's time / this time: > 1 is faster)
    for every other provider of the run. Skipped and failed rows show the reason in ``note``.
    """
    meta = artifact["meta"]
    bw, peak = meta.get("copy_bandwidth_gbps"), meta.get("matmul_tflops")
    provs = _others(artifact)
    head = ["op", "shape", "mode", "dtype", "provider", "gate", "ms", "peak MiB", "tokens/s", "GB/s", "TFLOP/s"]
    if bw:
        head.append("%BW")
    if peak:
        head.append("%MM")
    head += [f"x {p}" for p in provs] + ["note"]
    rows = []
    for r in artifact["results"]:
        ratio = max(r["rel_rmse"].values()) if r.get("rel_rmse") else None
        gate = _status(r) + ("" if ratio is None else f" {ratio:.1e}")
        cells = [
            r["op"], r["shape"], r["mode"], r["dtype"].replace("bfloat16", "bf16").replace("float", "fp"),
            r["provider"], gate, _num(r["ms"], ".3f"), _num(r.get("peak_mem_mb"), ".0f"),
            _num(r["tokens_per_s"], ".3g"), _num(r["gbps"], ".4g"), _num(r["tflops"], ".4g"),
        ]
        if bw:
            cells.append("-" if r["gbps"] is None else f"{100 * r['gbps'] / bw:.0f}%")
        if peak:
            cells.append("-" if r["tflops"] is None else f"{100 * r['tflops'] / peak:.0f}%")
        for p in provs:
            s = (r.get("speedup") or {}).get(p)
            cells.append("-" if s is None else f"{s:.2f}x" if s >= 0.01 else f"{s:.1e}x")
        cells.append(r.get("skipped") or r.get("error") or "")
        rows.append(cells)
    return head, rows


def _meta_line(artifact: dict) -> str:
    m = artifact["meta"]
    parts = [f"device {m['device']} ({m['device_name']})", f"{m['triton_flavour']} {m['triton_version']}",
             f"torch {m['torch_version']}", f"fla {m['fla_version'] or 'n/a'}", m["timing_method"]]
    if m.get("copy_bandwidth_gbps"):
        parts.append(f"copy {m['copy_bandwidth_gbps']:.0f} GB/s")
    if m.get("matmul_tflops"):
        parts.append(f"bf16 matmul {m['matmul_tflops']:.0f} TFLOP/s")
    if m.get("cpu_scaled"):
        parts.append("shapes scaled down for the CPU interpreter")
    if m.get("interpreter"):
        parts.append(INTERPRETER_LABEL)
    return "; ".join(parts)


def print_table(artifact: dict, console=None, compact: bool = False) -> None:
    """Print the result table (and notes) with rich. ``compact`` drops dtype and tokens/s and
    shortens notes."""
    from rich.table import Table

    from fla_ascend.console import make_console

    if console is None:
        console = make_console()  # logs and pipes get a wide console (fla_ascend.console)
    head, rows = table_rows(artifact)
    drop = {"dtype", "tokens/s"} if compact else set()
    keep = [i for i, h in enumerate(head) if h not in drop]
    table = Table(title="fla-ascend bench", caption=_meta_line(artifact), show_lines=False)
    for i in keep:
        table.add_column(head[i], justify="right" if i >= 6 else "left", overflow="fold")
    for cells in rows:
        if compact and len(cells[-1]) > 60:
            cells[-1] = cells[-1][:57] + "..."
        style = {"FAIL": "red", "ERROR": "red", "skip": "dim"}.get(cells[5].split()[0], "")
        table.add_row(*[cells[i] for i in keep], style=style)
    console.print(table)
    for note in artifact.get("notes", []):
        console.print(f"[dim]note: {note}[/dim]")


def to_markdown(artifact: dict) -> str:
    """The result table as GitHub Markdown, preceded by one line of run facts."""
    head, rows = table_rows(artifact)
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = [_meta_line(artifact) + ".", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(esc(c) for c in cells) + " |" for cells in rows]
    for note in artifact.get("notes", []):
        lines.append(f"\nNote: {note}")
    return "\n".join(lines) + "\n"


def write_markdown(artifact: dict, path: str | Path) -> Path:
    """Write :func:`to_markdown` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_markdown(artifact))
    return path


def write_plot(artifact: dict, path: str | Path) -> Path:
    """One PNG: per (op, mode), the median time of each provider per shape; below it, only when
    the run measured the copy bandwidth and matmul peak (GPU/NPU), the achieved fraction of each.
    Up to three (op, mode) groups per row. One y scale, shared, for all time panels of the figure
    (log when the times of the whole figure span more than 10x, else linear from zero); the figure
    title names what the numbers are and, on the CPU, that they are interpreter timings. Untimed
    cases are absent. Returns the path.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np

    meta = artifact["meta"]
    bw, peak = meta.get("copy_bandwidth_gbps"), meta.get("matmul_tflops")
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in artifact["results"]:
        groups.setdefault((r["op"], r["mode"]), []).append(r)
    n = max(1, len(groups))
    all_ms = [r["ms"] for r in artifact["results"] if r.get("ms")]
    log_scale = bool(all_ms) and max(all_ms) > 10 * min(all_ms)
    per_group = 2 if (bw or peak) else 1
    ncols = min(n, 3)
    nrows = -(-n // ncols) * per_group
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.0, 5.5 * ncols), 4 * nrows + 0.6), squeeze=False)
    time_axes = [axes[(i // ncols) * per_group][i % ncols] for i in range(n)]
    for ax in time_axes[1:]:
        ax.sharey(time_axes[0])  # one y scale for every time panel
    for i in range(n, -(-n // ncols) * ncols):  # no empty panels: the grid's unused cells are switched off
        for k in range(per_group):
            axes[(i // ncols) * per_group + k][i % ncols].set_axis_off()
    for col, ((op, mode), rows) in enumerate(groups.items()):
        shapes = list(dict.fromkeys(r["shape"] for r in rows))
        provs = list(dict.fromkeys(r["provider"] for r in rows))
        x = np.arange(len(shapes))
        width = 0.8 / max(1, len(provs))
        ax = time_axes[col]
        for i, p in enumerate(provs):
            ms = [next((r["ms"] for r in rows if r["shape"] == s and r["provider"] == p and r["ms"]), np.nan)
                  for s in shapes]
            ax.bar(x + i * width, ms, width, label=p)
        if log_scale:
            ax.set_yscale("log")
        ax.set_title(f"{op} {mode}", fontsize=9)
        ax.set_ylabel("ms, median (lower is better)" + (", log scale" if log_scale else ""))
        ax.set_xticks(x + 0.4 - width / 2, shapes, rotation=20, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        if per_group == 2:
            axf = axes[(col // ncols) * 2 + 1][col % ncols]
            for i, p in enumerate(provs):
                sel = [next((r for r in rows if r["shape"] == s and r["provider"] == p and r["ms"]), None)
                       for s in shapes]
                fb = [r["gbps"] / bw if (r and bw) else np.nan for r in sel]
                fm = [r["tflops"] / peak if (r and peak) else np.nan for r in sel]
                axf.bar(x + i * width, fb, width, label=f"{p}: GB/s / copy bandwidth")
                axf.plot(x + i * width, fm, "k^" if i == 0 else "kv", label=f"{p}: TFLOP/s / matmul peak")
            axf.set_ylabel("fraction of the peak measured in this run")
            axf.set_ylim(0, 1.05)
            axf.legend(fontsize=6)
            axf.set_xticks(x + 0.4 - width / 2, shapes, rotation=20, ha="right", fontsize=7)
    title = "Median time per call of each provider (bars), by op and mode"
    if per_group == 2:
        title += "; below: achieved GB/s and TFLOP/s as fractions of the copy bandwidth and bf16 matmul peak"
    # wrapped to the figure's width (about 0.6 em per character at 7 pt), so no line is clipped at the edges
    width = max(40, int(fig.get_figwidth() * 72 / (7 * 0.6)) - 4)
    fig.suptitle("\n".join(textwrap.wrap(title, width) + textwrap.wrap(_meta_line(artifact), width)), fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
