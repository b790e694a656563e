"""PNG plots of reports and comparisons, drawn with matplotlib's Agg canvas (no display, and the
global matplotlib backend is left alone)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["plot_time_share", "plot_pipe_ratios", "plot_block_times", "plot_compare"]

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
    """Horizontal bars: share of device time (percent) of the ``top`` kernel keys of
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
    ax.set_xlabel("share of device time (%)")
    ax.set_xlim(0, max(vals + [1]) * 1.18)
    ax.set_title("Device time by kernel")
    return _save(fig, path)


def plot_pipe_ratios(bounds: pd.DataFrame, path, top: int = 10) -> Path | None:
    """Stacked horizontal bars of the mean pipe busy ratios (``analyze.bound_table`` output) of
    the ``top`` keys, annotated with the bound label. Ratios overlap (they do not sum to 1), so
    the stack shows how busy each pipe is, not a split of time. Returns the path, or ``None``
    when no key has PMU ratios."""
    pipes = [p for p in _PIPE_ORDER if p in bounds.columns]
    b = bounds.head(top)
    if not pipes or b[pipes].fillna(0).to_numpy().sum() == 0:
        return None
    fig = _figure(10, 0.5 * len(b) + 1.8)
    ax = fig.add_subplot(111)
    y = list(range(len(b)))[::-1]
    left = [0.0] * len(b)
    cmap = __import__("matplotlib").colormaps["tab20"]
    for i, p in enumerate(pipes):
        vals = b[p].fillna(0).astype(float).tolist()
        ax.barh(y, vals, left=left, label=p, color=cmap(i))
        left = [l + v for l, v in zip(left, vals)]
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r, 40) for _, r in b.iterrows()], fontsize=8)
    for yi, l, lab in zip(y, left, b["bound"].fillna("")):
        ax.text(l, yi, f" {lab}", va="center", fontsize=7)
    ax.set_xlabel("pipe busy ratio (stacked; each 0-1)")
    ax.set_xlim(0, max(left + [1]) * 1.35)
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    ax.set_title("Pipe utilisation of the top kernels")
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
    from .compare import speedup_text

    ax.set_title(f"new vs base: total {speedup_text(cmp.totals)} (ratio = new / base)")
    ax.legend(fontsize=8)
    return _save(fig, path)
