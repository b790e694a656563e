"""PNG plots of reports and comparisons, drawn with matplotlib's Agg canvas (no display, and the
global matplotlib backend is left alone)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .text import ratio_text

__all__ = ["plot_time_share", "plot_pipe_ratios", "plot_step_split", "plot_cross_rank", "plot_block_times",
           "plot_compare"]

_PIPE_ORDER = ["mac", "MTE1", "MTE2(cube)", "fixpipe", "scalar(cube)", "vec", "MTE2(vector)", "MTE3",
               "scalar(vector)", "MTE2", "scalar"]


def _figure(w, h):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _label(r, width=48) -> str:
    s = f"{r['type'] if 'type' in r else r['name']}" + (f" [{r['core']}]" if "core" in r else "")
    shp = r.get("input_shapes", "")
    if isinstance(shp, str) and shp:
        s += f" {shp}"
    return s if len(s) <= width else s[: width - 3] + "..."


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def plot_time_share(summary: pd.DataFrame, path, top: int = 10) -> Path:
    """Horizontal bars: share of compute kernel time (percent) of the ``top`` kernel keys of
    ``analyze.kernel_summary`` output, the rest lumped as "other". Returns the PNG path.

    Raises:
        ValueError: ``summary`` lacks ``share`` or a key column (``type`` or ``name``), or
            ``top`` < 1.
    """
    if top < 1:
        raise ValueError(f"top: expected >= 1, got {top}")
    for c in ("share", "type" if "name" not in summary else "name"):
        if c not in summary:
            raise ValueError(f"summary: missing column {c!r}; pass analyze.kernel_summary output")
    s = summary.head(top)
    labels = [_label(r) for _, r in s.iterrows()]
    vals = list(s["share"] * 100)
    rest = float(summary["share"].iloc[top:].sum()) * 100 if len(summary) > top else 0.0
    if rest > 0:
        labels.append("other")
        vals.append(rest)
    fig = _figure(9, 0.45 * len(vals) + 1.5)
    ax = fig.add_subplot(111)
    y = list(range(len(vals)))[::-1]
    ax.barh(y, vals, color="#4C72B0")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    for yi, v in zip(y, vals):
        ax.text(v, yi, f" {v:.1f}%", va="center", fontsize=8)
    ax.set_xlabel("share of compute kernel time (%)")
    ax.set_xlim(0, max(vals + [1]) * 1.18)
    ax.set_title("Compute time by kernel (communication excluded)")
    return _save(fig, path)


def plot_pipe_ratios(bounds: pd.DataFrame, path, top: int = 10) -> Path | None:
    """Heatmap of the mean pipe busy ratios (``analyze.bound_table`` output) of the ``top``
    keys: one row per kernel key, one column per pipe, each cell a ratio 0-1 written in it, the
    bound label at the row's end. Ratios are independent busy fractions (they overlap and do not
    sum to 1), so they are never stacked. Returns the path, or ``None`` when no key has ratios."""
    pipes = [p for p in _PIPE_ORDER if p in bounds.columns]
    b = bounds.head(top)
    if not pipes or b[pipes].fillna(0).to_numpy().sum() == 0:
        return None
    pipes = [p for p in pipes if b[p].notna().any()]
    vals = b[pipes].astype(float).to_numpy()
    fig = _figure(1.0 * len(pipes) + 6.5, 0.45 * len(b) + 2.0)
    ax = fig.add_subplot(111)
    im = ax.imshow(vals, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(pipes)))
    ax.set_xticklabels(pipes, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(b)))
    ax.set_yticklabels([f"{_label(r, 40)}: {r['bound']}" for _, r in b.iterrows()], fontsize=8)
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            v = vals[i, j]
            if v == v:  # not NaN
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    fig.colorbar(im, ax=ax, fraction=0.03, label="busy ratio (0-1, per pipe)")
    ax.set_title("Pipe busy ratios of the top compute kernels (each pipe separately)")
    return _save(fig, path)


_SPLIT = [("computing", "compute", "#4C72B0"),
          ("communication_not_overlapped", "communication not overlapped", "#C44E52"),
          ("free", "free (idle)", "#BBBBBB")]


def plot_step_split(table: pd.DataFrame, path) -> Path:
    """Stacked horizontal bars, one per rank: the step's compute, communication not overlapped
    and free time (us, or ms for steps over 10 ms; they add up to the step's wall time), each part's
    share written in it.
    ``table``: ``step.cross_rank`` output (or any frame with ``rank``, ``computing``,
    ``communication_not_overlapped``, ``free``, ``stage``)."""
    t = table[table["stage"].notna()].reset_index(drop=True)
    scale, unit = (1e-3, "ms") if t["stage"].max() > 1e4 else (1.0, "us")
    fig = _figure(10, 0.55 * len(t) + 2.2)
    ax = fig.add_subplot(111)
    y = list(range(len(t)))[::-1]
    left = [0.0] * len(t)
    for col, label, color in _SPLIT:
        v = (t[col].fillna(0).astype(float) * scale).tolist()
        ax.barh(y, v, left=left, color=color, label=label)
        for yi, x0, x, st in zip(y, left, v, t["stage"] * scale):
            if st > 0 and x / st > 0.06:
                ax.text(x0 + x / 2, yi, f"{x / st:.0%}", ha="center", va="center", fontsize=8, color="white")
        left = [a + b for a, b in zip(left, v)]
    ax.set_yticks(y)
    ax.set_yticklabels([f"rank {int(r)}" for r in t["rank"]], fontsize=9)
    ax.set_xlabel(f"time per step ({unit})")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
    ax.set_title("Step split per rank (step_trace_time.csv)")
    return _save(fig, path)


def plot_cross_rank(table: pd.DataFrame, path) -> Path:
    """Grouped bars per rank: how much longer than the fastest rank each part of its step is
    (us; ``*_vs_fastest`` columns of ``step.cross_rank``), so the slowest rank's extra time is
    attributed at a glance."""
    t = table[table["stage"].notna()].reset_index(drop=True)
    fig = _figure(9, 4.2)
    ax = fig.add_subplot(111)
    n = len(_SPLIT) + 1
    w = 0.8 / n
    x = list(range(len(t)))
    series = _SPLIT + [("stage", "whole step", "#333333")]
    for i, (col, label, color) in enumerate(series):
        ax.bar([xi - 0.4 + w * (i + 0.5) for xi in x], t[f"{col}_vs_fastest"].astype(float), width=w, color=color,
               label=label)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([f"rank {int(r)}" for r in t["rank"]])
    ax.set_ylabel("difference from the fastest rank (us)")
    ax.legend(fontsize=8)
    ax.set_title("Where each rank's step differs from the fastest rank's")
    return _save(fig, path)


def plot_block_times(op, path) -> Path | None:
    """Per-block times from ``msprof op`` data (``readers.MsprofOpRun``): one bar per
    ``(block_id, sub_block_id)``, cube blocks on ``aic_time(us)``, vector blocks on
    ``aiv_time(us)``, from the first metric file that has them. Returns the path or ``None``."""
    for name, df in op.metrics.items():
        if "aic_time(us)" not in df and "aiv_time(us)" not in df:
            continue
        sub = df["sub_block_id"].astype(str)
        t = [float(r["aic_time(us)"]) if s.startswith("cube") else float(r.get("aiv_time(us)", 0.0))
             for s, (_, r) in zip(sub, df.iterrows())]
        fig = _figure(max(6, 0.12 * len(t) + 2), 3.5)
        ax = fig.add_subplot(111)
        colors = ["#C44E52" if s.startswith("cube") else "#4C72B0" for s in sub]
        ax.bar(range(len(t)), t, color=colors, width=0.9)
        ax.set_xlabel("block (cube red, vector blue), in block_id order")
        ax.set_ylabel("time (us)")
        ax.set_title(f"Per-block time, {op.basic.get('op_name', '')} ({name})")
        return _save(fig, path)
    return None


def plot_compare(cmp, path, top: int = 15) -> Path:
    """Paired horizontal bars: per-step total time (us) of the ``top`` keys of a
    ``compare.Comparison`` in base and new, with the new / base ratio written beside each."""
    t = cmp.table.head(top)
    fig = _figure(10, 0.5 * len(t) + 1.8)
    ax = fig.add_subplot(111)
    y = [2 * i for i in range(len(t))][::-1]
    ax.barh([v + 0.4 for v in y], t["total_base_us"], height=0.8, label="base", color="#8C8C8C")
    ax.barh([v - 0.4 for v in y], t["total_new_us"], height=0.8, label="new", color="#4C72B0")
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r, 40) for _, r in t.iterrows()], fontsize=8)
    mx = float(max(t["total_base_us"].max(), t["total_new_us"].max(), 1.0))
    for yi, (_, r) in zip(y, t.iterrows()):
        txt = f"x{r['ratio']:.2f}" if r["status"] == "both" and pd.notna(r["ratio"]) else r["status"]
        ax.text(max(r["total_base_us"], r["total_new_us"]), yi, f"  {txt}", va="center", fontsize=8)
    ax.set_xlim(0, mx * 1.25)
    ax.set_xlabel("time per step (us)")
    ax.set_title(f"new vs base: {ratio_text(cmp.totals)}\n(bars: time per step; x = new / base time, below 1: "
                 "new is faster)", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)
