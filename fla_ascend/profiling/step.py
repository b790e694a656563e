"""The whole step: how a step splits into compute, communication and idle time, per rank, and
where the slowest rank spent its extra time.

Sources, in this order: ``step_trace_time.csv`` (torch_npu / MindSpore write it per rank), the
``Overlap Analysis`` rows of ``trace_view.json`` when the step trace is absent. Their columns
(microseconds): ``Computing`` (union of compute kernel time), ``Communication(Not Overlapped)``
(communication with no compute running beside it), ``Overlapped`` (communication hidden under
compute), ``Free`` (neither), ``Stage`` (the step's wall time); ``Computing +
Communication(Not Overlapped) + Free = Stage``. msprof-analyze's cluster analysis reads the same
file; its "uncovered communication" share is ``Communication(Not Overlapped) / Stage``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .readers import Run

__all__ = ["SPLIT_COLUMNS", "step_split", "communication_summary", "cross_rank", "communication_mask",
           "single_step_note"]

#: The parts of a step, in the order they are stacked (they sum to ``stage``).
SPLIT_COLUMNS = ["computing", "communication_not_overlapped", "free"]
_LABELS = {"computing": "compute", "communication_not_overlapped": "communication not overlapped",
           "free": "free (idle)", "overlapped": "communication overlapped", "bubble": "pipeline bubble"}


def communication_mask(kernels: pd.DataFrame) -> pd.Series:
    """True for communication tasks: ``Accelerator Core`` ``COMMUNICATION`` / ``HCCL``, or an
    HCCL op name / type (``hcom_...``), as Level0 runs have no core column."""
    core = kernels["core"].astype("string").fillna("")
    typ = kernels["type"].astype("string").fillna("")
    name = kernels["name"].astype("string").fillna("")
    return (core.isin(["COMMUNICATION", "HCCL"]) | typ.str.startswith("hcom_") | name.str.startswith("hcom_")).fillna(
        False).astype(bool)


def step_split(run: Run) -> pd.DataFrame:
    """Per step: ``step``, ``computing``, ``communication_not_overlapped``, ``overlapped``,
    ``communication``, ``free``, ``bubble``, ``stage`` (us), and each part's share of the
    stage (``computing_share``, ``communication_not_overlapped_share``, ``overlapped_share``,
    ``free_share``, fractions 0-1), ``source`` (``step_trace_time.csv`` or ``trace_view.json``).
    Cluster step traces keep their ``type`` / ``index`` columns (one row per rank or stage).
    Empty when the run has neither source."""
    cols = ["step", "computing", "communication_not_overlapped", "overlapped", "communication", "free", "bubble",
            "stage"]
    st = run.step_trace
    if st is not None and not st.empty:
        df = st.copy()
        for c in cols:
            if c not in df:
                df[c] = np.nan
        keep = [c for c in ("type", "index", "device_id") if c in df]
        df = df[keep + cols].copy()
        if df["overlapped"].isna().all():
            df["overlapped"] = df["communication"] - df["communication_not_overlapped"]
        df["source"] = "step_trace_time.csv"
    elif run.overlap is not None:
        o = run.overlap
        comm = o.get("communication", 0.0)
        df = pd.DataFrame([{"step": np.nan, "computing": o["computing"],
                            "communication_not_overlapped": o["communication_not_overlapped"],
                            "overlapped": max(comm - o["communication_not_overlapped"], 0.0) if comm else 0.0,
                            "communication": comm, "free": o["free"], "bubble": np.nan,
                            "stage": o["computing"] + o["communication_not_overlapped"] + o["free"]}])
        df["source"] = "trace_view.json"
    else:
        return pd.DataFrame(columns=cols + ["source"])
    for c in ("computing", "communication_not_overlapped", "overlapped", "free"):
        df[f"{c}_share"] = df[c] / df["stage"].where(df["stage"] > 0)
    return df.reset_index(drop=True)


def communication_summary(run: Run) -> pd.DataFrame:
    """Communication per collective type (``allReduce``, ``allGather``, ``send``...).

    From ``communication.json`` when present: ``op_type``, ``count`` (operations), ``time_us``
    (summed elapse time, us), ``transit_us`` (time moving data), ``wait_us`` (waiting for the
    peers), ``size_mb`` (summed transit size, MB; 0 where the file records none),
    ``bandwidth_gbs`` (size / link transit time, GB/s; NaN without data), ``source``.
    Otherwise from the communication tasks of the kernel table (``count``, ``time_us`` only).
    Empty when the run has no communication."""
    cols = ["op_type", "count", "time_us", "transit_us", "wait_us", "size_mb", "bandwidth_gbs", "source"]
    c = run.communication
    if c is not None and not c.empty:
        c = c.copy()
        c["link_ms"] = np.where(c["bandwidth_gbs"] > 0, c["size_mb"] / c["bandwidth_gbs"], 0.0)
        g = c.groupby("op_type", sort=False).agg(count=("op", "size"), time_ms=("elapse_ms", "sum"),
                                                 transit_ms=("transit_ms", "sum"), wait_ms=("wait_ms", "sum"),
                                                 size_mb=("size_mb", "sum"), link_ms=("link_ms", "sum")).reset_index()
        g["time_us"] = g["time_ms"] * 1e3
        g["transit_us"] = g["transit_ms"] * 1e3
        g["wait_us"] = g["wait_ms"] * 1e3
        g["bandwidth_gbs"] = np.where(g["link_ms"] > 0, g["size_mb"] / g["link_ms"].where(g["link_ms"] > 0), np.nan)
        g["source"] = "communication.json"
        return g[cols].sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)
    k = run.kernels
    if k is None or k.empty:
        return pd.DataFrame(columns=cols)
    m = communication_mask(k)
    if not m.any():
        return pd.DataFrame(columns=cols)
    kk = k[m].copy()
    kk["op_type"] = kk["type"].astype("string").fillna(kk["name"]).str.replace(r"^hcom_([A-Za-z]+).*$", r"\1",
                                                                               regex=True)
    g = kk.groupby("op_type", sort=False).agg(count=("duration_us", "size"),
                                              time_us=("duration_us", "sum")).reset_index()
    for col in ("transit_us", "wait_us", "size_mb", "bandwidth_gbs"):
        g[col] = np.nan
    g["source"] = "kernel table"
    return g[cols].sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)


def cross_rank(runs: list[Run]) -> tuple[pd.DataFrame, str | None]:
    """One row per rank (mean over its steps): ``rank``, ``path``, ``kernels``, ``compute_us``
    (summed compute kernel time), ``computing``, ``communication_not_overlapped``,
    ``overlapped``, ``free``, ``stage`` (us), and ``*_vs_fastest`` (difference from the rank with
    the shortest stage, us).

    Returns:
        ``(table, verdict)``: the verdict names the slowest rank, by how much its step is longer
        than the fastest one's, and the part it spent the difference on; ``None`` with fewer
        than two ranks with a step split.
    """
    rows = []
    for i, r in enumerate(runs):
        s = step_split(r)
        if "type" in s:  # cluster file: already one row per rank
            s = s[s["type"].astype(str) == "rank"]
            for _, x in s.iterrows():
                rows.append({"rank": int(float(x["index"])), "path": str(r.path), "kernels": np.nan,
                             "compute_us": np.nan, **{c: x[c] for c in SPLIT_COLUMNS + ["overlapped", "stage"]}})
            continue
        kern = r.kernels
        comp = float(kern.loc[~communication_mask(kern), "duration_us"].sum()) if len(kern) else np.nan
        d = {"rank": r.rank if r.rank is not None else i, "path": str(r.path), "kernels": len(kern),
             "compute_us": comp if len(kern) else np.nan}
        for c in SPLIT_COLUMNS + ["overlapped", "stage"]:
            d[c] = float(s[c].mean()) if len(s) else np.nan
        rows.append(d)
    t = pd.DataFrame(rows)
    if t.empty or t["stage"].notna().sum() < 2:
        return t, None
    fast = t.loc[t["stage"].idxmin()]
    for c in SPLIT_COLUMNS + ["overlapped", "stage"]:
        t[f"{c}_vs_fastest"] = t[c] - fast[c]
    slow = t.loc[t["stage"].idxmax()]
    diff = slow["stage"] - fast["stage"]
    parts = {c: slow[f"{c}_vs_fastest"] for c in SPLIT_COLUMNS}
    top = max(parts, key=lambda c: parts[c])
    verdict = (f"slowest rank {int(slow['rank'])}: step {slow['stage']:.1f} us, {diff:.1f} us "
               f"({diff / fast['stage']:.1%}) longer than rank {int(fast['rank'])}; "
               + ", ".join(f"{_LABELS[c]} {parts[c]:+.1f} us" for c in SPLIT_COLUMNS)
               + f": the difference is {_LABELS[top]}")
    if diff < 0.01 * fast["stage"]:
        verdict += " (the steps are practically equal: the ranks synchronise every step)"
    # a rank whose compute is longer by more than 1% of the step sets the pace of the others' waiting
    if t["computing"].notna().all() and t["computing"].max() - t["computing"].min() > 0.01 * slow["stage"]:
        busiest, least = t.loc[t["computing"].idxmax()], t.loc[t["computing"].idxmin()]
        verdict += (f"; rank {int(busiest['rank'])} computes longest ({busiest['computing']:.1f} us, "
                    f"{busiest['computing'] - least['computing']:+.1f} us over rank {int(least['rank'])}): "
                    "the ranks with less compute spend the difference waiting in communication")
    return t, verdict


def single_step_note(run: Run, split: pd.DataFrame) -> str | None:
    """A warning when the run profiled one active step: the profiler schedule's ``active`` is 1,
    or the kernels / step trace hold a single step."""
    sched = ((run.profiler_info or {}).get("config", {}) or {}).get("common_config", {}).get("schedule", {}) or {}
    active = sched.get("active")
    k = run.kernels
    kernel_steps = k["step"].dropna().nunique() if k is not None and "step" in k and len(k) else 0
    trace_steps = int(split["step"].nunique()) if len(split) and "step" in split and "type" not in split else 0
    repeat = sched.get("repeat") or 1
    single = (active == 1 and repeat in (0, 1)) or kernel_steps == 1 or (not kernel_steps and trace_steps == 1)
    if not single:
        return None
    how = f"profiler schedule active={active}" if active is not None else "one step in the data"
    return (f"one active step profiled ({how}): step-to-step variation and first-step effects are not "
            "averaged out; profile several active steps (schedule active >= 3) before acting on small differences")

