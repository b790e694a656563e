"""Text shared by the profiling reports (:mod:`.analyze`, :mod:`.compare`, :mod:`.plots` and the
CLI): the kernel keys, table cells, Markdown tables and the summary phrases of a comparison. It
imports no other module of this package, so every report can use it."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["KEY_TYPE", "KEY_NAME", "key_cols", "fmt_cell", "md_table", "ratio_text", "geomean_text"]

KEY_TYPE = ("type", "core", "input_shapes")
KEY_NAME = ("name", "core", "input_shapes")


def key_cols(by) -> list[str]:
    """The key columns of ``by``: ``"type"`` (or ``None``) :data:`KEY_TYPE`, ``"name"`` :data:`KEY_NAME`,
    or a list of column names as given.

    Raises:
        ValueError: anything else.
    """
    if by in ("type", None):
        return list(KEY_TYPE)
    if by == "name":
        return list(KEY_NAME)
    if isinstance(by, (list, tuple)) and by and all(isinstance(c, str) for c in by):
        return list(by)
    raise ValueError(f"by: expected 'type', 'name' or a list of column names, got {by!r}")


def fmt_cell(v) -> str:
    """One table cell: blank for a missing value, yes/no for a bool, 4 significant digits for a
    float (one decimal from 1e5 on), ``|`` escaped for Markdown."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.1f}"
    s = str(v)
    return s.replace("|", "\\|")


def md_table(df: pd.DataFrame, cols) -> str:
    """A Markdown table of ``df``'s columns ``cols`` (those it has), ``(none)`` when it is empty."""
    cols = [c for c in cols if c in df.columns]
    if df.empty:
        return "(none)"
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(fmt_cell(r[c]) for c in cols) + " |")
    return "\n".join(out)


def _direction(r: float) -> str:
    return "new is faster" if r < 1 else "new is slower" if r > 1 else "same time"


def ratio_text(totals: dict) -> str:
    """The total part of a comparison's summary line, in the table's direction (new / base time):
    ``compute time new/base 0.798 (new is faster; ...)``, or which run has no device time (a run
    whose kernels all last 0 us)."""
    empty = [n for n in ("base", "new") if not totals[f"{n}_us"] > 0]
    if empty:
        return f"compute time new/base undefined ({' and '.join(empty)} with no compute kernel time)"
    r = totals["ratio"]
    return f"compute time new/base {r:.3f} ({_direction(r)}; compute kernels only, communication excluded)"


def geomean_text(totals: dict) -> str:
    """The geometric-mean part of a comparison's summary line (new / base time, as the table):
    over the kernel keys both runs share with time on both sides, or why there is none (two
    providers' kernels have different names; or the shared ones last 0 us on one side)."""
    if totals["keys_geomean"]:
        return (f"geometric mean of new/base over {totals['keys_geomean']} common key(s): "
                f"{totals['geomean_ratio']:.3f}")
    if totals["keys_both"]:
        return f"no geometric mean ({totals['keys_both']} common key(s), none with time on both sides)"
    return "no common kernel key (different kernels: only the totals compare)"
