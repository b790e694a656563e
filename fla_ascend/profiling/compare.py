"""Compare two profiler runs kernel key by kernel key.

Keys default to (``type``, ``core``, ``input_shapes``), as msprof-analyze's compare does. Runs
may have different step counts, and an op may launch several kernels per step: all totals are
therefore also given per step (total / number of distinct ``step`` values, 1 when the run has no
step column), and ratios are taken on the per-step totals. ``ratio`` = new / base (below 1: the
new run is faster); the printed totals use the same direction (new / base time), and the JSON
also keeps ``speedup`` = base / new.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .plots import plot_compare
from .readers import Run, load_run
from .step import communication_mask
from .text import fmt_cell, geomean_text, key_cols, ratio_text

__all__ = ["Comparison", "compare", "steps_in", "ratio_text", "geomean_text"]


def steps_in(kernels: pd.DataFrame) -> int:
    """Number of distinct non-NA ``step`` values in a kernel table; 1 when there is none."""
    if "step" not in kernels:
        return 1
    n = kernels["step"].dropna().nunique()
    return int(n) if n else 1


def _as_kernels(x, name):
    if isinstance(x, (str, Path)):
        x = load_run(x)
    if isinstance(x, Run):
        return x.kernels, str(x.path)
    if isinstance(x, pd.DataFrame):
        return x, x.attrs.get("source", f"<{name} DataFrame>")
    raise TypeError(f"{name}: expected a run directory or file, readers.Run or kernel DataFrame, "
                    f"got {type(x).__name__}")


@dataclasses.dataclass
class Comparison:
    """Result of :func:`compare`.

    ``table``: one row per key with ``count_base``, ``count_new`` (launches per step, float),
    ``total_base_us``, ``total_new_us`` (per step, us), ``mean_base_us``, ``mean_new_us`` (per
    launch, us), ``ratio`` (total_new / total_base; NaN when the key is on one side only),
    ``status`` (``both``, ``base only``, ``new only``), sorted by the larger per-step total.
    ``totals``: ``base_us`` / ``new_us`` (per-step time of the compute kernels: communication
    tasks are left out of the table and the totals, as their time is mostly waiting on other
    ranks), ``communication_base_us`` / ``communication_new_us`` (per step), ``ratio``
    (new_us / base_us, the direction printed), ``geomean_ratio`` (geometric mean of new/base over
    keys on both sides with nonzero times; NaN when there is none), ``speedup`` and
    ``geomean_speedup`` (their inverses, base / new), ``keys_geomean`` (how many keys it averages),
    ``steps_base``, ``steps_new``, ``keys_both``, ``keys_base_only``, ``keys_new_only``.
    """

    base: str
    new: str
    key: list
    table: pd.DataFrame
    totals: dict

    def to_markdown(self, top: int | None = None) -> str:
        """Markdown: totals line and the per-key table (``top`` rows when given)."""
        t = self.totals
        lines = [f"# Compare: base `{self.base}` vs new `{self.new}`", "",
                 f"- per-step compute kernel time: base {t['base_us']:.3f} us ({t['steps_base']} step(s)), "
                 f"new {t['new_us']:.3f} us ({t['steps_new']} step(s)); communication tasks (not compared, "
                 f"their time is mostly waiting on other ranks): base {t['communication_base_us']:.3f} us, "
                 f"new {t['communication_new_us']:.3f} us",
                 f"- total (new / base time, below 1: new is faster): {ratio_text(t)}; {geomean_text(t)}",
                 f"- keys only in base: {t['keys_base_only']}; only in new: {t['keys_new_only']}", ""]
        cols = self.key + ["count_base", "count_new", "total_base_us", "total_new_us", "ratio", "status"]
        df = self.table if top is None else self.table.head(top)
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for _, r in df.iterrows():
            lines.append("| " + " | ".join(fmt_cell(r[c]) for c in cols) + " |")
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """Totals and table as JSON (NaN as null)."""
        totals = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in self.totals.items()}
        return json.dumps({"base": self.base, "new": self.new, "key": self.key, "totals": totals,
                           "table": json.loads(self.table.to_json(orient="records"))}, indent=2, default=str)

    def write(self, out_dir, plots: bool = True, top: int = 15) -> dict:
        """Write ``compare.md``, ``compare.json`` and (``plots``) ``compare.png`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {"markdown": out / "compare.md", "json": out / "compare.json"}
        files["markdown"].write_text(self.to_markdown())
        files["json"].write_text(self.to_json())
        if plots and not self.table.empty:
            files["png"] = plot_compare(self, out / "compare.png", top=top)
        return files


def compare(base, new, by="type") -> Comparison:
    """Compare two runs per kernel key.

    Args:
        base, new: run directories (or parents holding one run), :class:`readers.Run`, or
            normalised kernel DataFrames.
        by: ``"type"`` (``type``, ``core``, ``input_shapes``), ``"name"`` or a column list.

    Returns:
        :class:`Comparison` (per-step totals; see its docstring).

    Raises:
        TypeError (inputs of another type), ValueError (bad ``by``, missing columns, a run with
        no kernel rows), and the readers' errors for paths.
    """
    kb, sb = _as_kernels(base, "base")
    kn, sn = _as_kernels(new, "new")
    for name, k, src in (("base", kb, sb), ("new", kn, sn)):
        if k.empty:
            raise ValueError(f"{name} run {src} has no kernel rows: nothing to compare")
    cols = key_cols(by)
    for name, k in (("base", kb), ("new", kn)):
        missing = [c for c in cols + ["duration_us"] if c not in k.columns]
        if missing:
            raise ValueError(f"{name}: missing columns {missing}; expected the normalised kernel table")
    nb, nn = steps_in(kb), steps_in(kn)
    comm = {}
    for name, k in (("base", kb), ("new", kn)):
        m = communication_mask(k)
        comm[name] = float(k.loc[m, "duration_us"].sum()) / (nb if name == "base" else nn)
    kb, kn = kb[~communication_mask(kb)], kn[~communication_mask(kn)]

    def agg(k, n, suffix):
        k = k.copy()
        for c in cols:
            k[c] = k[c].astype("string").fillna("")
        g = k.groupby(cols, sort=False, dropna=False)["duration_us"]
        df = g.agg(count="size", total="sum").reset_index()
        df[f"count_{suffix}"] = df["count"] / n
        df[f"total_{suffix}_us"] = df["total"] / n
        df[f"mean_{suffix}_us"] = df["total"] / df["count"]
        return df[cols + [f"count_{suffix}", f"total_{suffix}_us", f"mean_{suffix}_us"]]

    a, b = agg(kb, nb, "base"), agg(kn, nn, "new")
    t = a.merge(b, on=cols, how="outer", indicator=True)
    t["status"] = t["_merge"].map({"both": "both", "left_only": "base only", "right_only": "new only"}).astype(str)
    t = t.drop(columns="_merge")
    for c in ("count_base", "count_new", "total_base_us", "total_new_us"):
        t[c] = t[c].fillna(0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t["ratio"] = np.where((t["status"] == "both") & (t["total_base_us"] > 0),
                              t["total_new_us"] / t["total_base_us"].where(t["total_base_us"] > 0), np.nan)
    t["_order"] = t[["total_base_us", "total_new_us"]].max(axis=1)
    t = t.sort_values("_order", ascending=False, kind="stable").drop(columns="_order").reset_index(drop=True)
    both = t[(t["status"] == "both") & (t["total_base_us"] > 0) & (t["total_new_us"] > 0)]
    geo = float(np.exp(np.mean(np.log(both["total_base_us"] / both["total_new_us"])))) if len(both) else math.nan
    base_us, new_us = float(t["total_base_us"].sum()), float(t["total_new_us"].sum())
    totals = {"base_us": base_us, "new_us": new_us,
              "ratio": new_us / base_us if base_us > 0 and new_us > 0 else math.nan,
              "geomean_ratio": 1.0 / geo if geo > 0 else math.nan,
              "speedup": base_us / new_us if new_us > 0 else math.nan,
              "geomean_speedup": geo, "steps_base": nb, "steps_new": nn,
              "keys_both": int((t["status"] == "both").sum()), "keys_geomean": len(both),
              "keys_base_only": int((t["status"] == "base only").sum()),
              "keys_new_only": int((t["status"] == "new only").sum()),
              "communication_base_us": comm["base"], "communication_new_us": comm["new"]}
    return Comparison(base=sb, new=sn, key=cols, table=t, totals=totals)
