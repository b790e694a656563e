"""Diagnose one profiler run (one rank) or a folder of ranks: the step split and communication
(:mod:`.step`), where the compute time goes (shares of compute kernel time, never of all
device tasks), which pipe bounds each kernel, the roofline (:mod:`.roofline`), what is left on
the table (block dim vs cores, AI_CPU tasks, per-block imbalance).

PipeUtilization rules: the thresholds of msprof-analyze 26.2.0's advisor (Apache-2.0,
``advisor/rules/en/aicore_performance.yaml``; re-implemented here, not copied):

* cube kernels (``AI_CORE``): mac >= 0.8 (``aic_mac_ratio``), aic MTE2 >= 0.95; both is
  "mac+MTE2 bound"; room = ``max(0.8 - mac, 0.95 - mte2)``. (msprof-analyze's checker compares
  mac with the MTE2 threshold; we use the mac threshold: see docs/profiling.md.)
* vector kernels (``AI_VECTOR_CORE``, ``MIX_AIV``): ``vec + MTE2 + MTE3 >= 0.9`` is
  "vec+MTE2+MTE3 bound"; else any of them ``>= 0.7``; room = ``max(0.7 - each)``.
* flash attention (``fa_operators``): ``FlashAttentionScore``: aic MTE2 >= 0.8, aiv vec >=
  0.75; ``FlashAttentionScoreGrad``: aic MTE2 >= 0.8, aic fixpipe >= 0.75; room = the larger gap.
* any other kernel, and any pipe these rules do not look at (scalar, MTE1, fixpipe): busiest
  pipe ``> 0.8`` (``operator_bound_ratio``).

A kernel that reaches a threshold is named after its busiest pipe (so a Conv2D with MTE1 over
0.8 but MTE2 busier is MTE2 bound); ``BoundResult.rule`` says which threshold it reached.
Other metric groups (no msprof-analyze rule; ours): ArithmeticUtilization (cube unit >= 0.8,
vector unit >= 0.7, with the dominant precision), Memory (main-memory bandwidth >= 80% of the
chip's HBM bandwidth), L0B_AND_WIDTH / MemoryL0 / MemoryUB (the busiest buffer, no verdict).
Also: block dim not a multiple of the core count, AI_CPU tasks longer than 20 us, a clock more
than 5% below the rated one, msprof op per-block times spreading more than 10%.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd

from . import plots as _plots
from .readers import KERNEL_COLUMNS, DeviceInfo, MsprofOpRun, Run, load_run, load_runs, op_statistic_from_kernels
from .roofline import roofline_table
from .step import communication_mask, communication_summary, cross_rank, single_step_note, step_split
from .text import KEY_TYPE, key_cols, md_table

__all__ = [
    "Thresholds", "BoundResult", "Report", "classify_bound", "kernel_summary", "bound_table",
    "block_dim_table", "aicpu_table", "block_imbalance", "analyze", "CUBE_CORES", "VECTOR_CORES",
    "ClusterReport", "analyze_ranks", "metric_group", "FA_FORWARD", "FA_BACKWARD",
]

CUBE_CORES = ("AI_CORE",)
VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")
MIX_CORES = ("MIX_AIC",)


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Rule thresholds (fractions 0-1 unless noted). Defaults: msprof-analyze's advisor."""

    cube_mac: float = 0.8
    cube_mte2: float = 0.95
    vector_total: float = 0.9
    vector_single: float = 0.7
    any_pipe: float = 0.8
    fa_mte2: float = 0.8
    fa_vec: float = 0.75
    fa_fixpipe: float = 0.75
    hbm_share: float = 0.8
    aicpu_us: float = 20.0
    freq_drop: float = 0.05
    imbalance: float = 0.10


# (label, split-chip columns, unprefixed columns)
_PIPES = {
    "mac": ("aic_mac_ratio", "mac_ratio"),
    "scalar(cube)": ("aic_scalar_ratio", None),
    "MTE1": ("aic_mte1_ratio", "mte1_ratio"),
    "MTE2(cube)": ("aic_mte2_ratio", None),
    "fixpipe": ("aic_fixpipe_ratio", None),
    "vec": ("aiv_vec_ratio", "vec_ratio"),
    "scalar(vector)": ("aiv_scalar_ratio", None),
    "MTE2(vector)": ("aiv_mte2_ratio", None),
    "MTE3": ("aiv_mte3_ratio", "mte3_ratio"),
    "scalar": (None, "scalar_ratio"),
    "MTE2": (None, "mte2_ratio"),
}


@dataclasses.dataclass(frozen=True)
class BoundResult:
    """``label``: e.g. ``"mac+MTE2 bound"``, ``"vec+MTE2+MTE3 bound"``, ``"scalar(cube) bound"``,
    ``"not bound"``, ``"no PMU data"``; ``bound``: True when a pipe reached its threshold;
    ``room``: fraction 0-1 left before the nearest threshold (0 when bound, NaN without data);
    ``ratios``: pipe -> busy ratio used."""

    label: str
    bound: bool
    room: float
    ratios: dict
    rule: str = ""


def _get(row, col):
    if col is None:
        return math.nan
    v = row.get(col, math.nan) if hasattr(row, "get") else math.nan
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _pipe_ratios(row) -> dict:
    out = {}
    for pipe, (split, plain) in _PIPES.items():
        v = _get(row, split)
        if math.isnan(v):
            v = _get(row, plain)
        if not math.isnan(v):
            out[pipe] = v
    return out


#: msprof-analyze's flash-attention rules (``advisor/rules/en/aicore_performance.yaml``,
#: ``fa_operators``, msprof-analyze 26.2.0): forward ``FlashAttentionScore`` looks at aic MTE2
#: (0.8) and aiv vec (0.75); backward ``FlashAttentionScoreGrad`` at aic MTE2 (0.8) and aic
#: fixpipe (0.75). (The yaml labels the MTE2 threshold "mac"; we name the pipe.)
FA_FORWARD = ("FlashAttentionScore",)
FA_BACKWARD = ("FlashAttentionScoreGrad",)


def _verdict(r: dict, busiest_side, bound: bool, compound: str | None, room: float, rule: str) -> BoundResult:
    """A bound kernel is named after its busiest pipe; the advisor's compound label
    (``mac+MTE2 bound``) stays when that pipe is one of the compound's. A kernel not bound
    carries the room before the nearest threshold."""
    if not bound:
        return BoundResult("not bound", False, room, r, rule)
    best = _busiest(r, exclude=(), vector_side=busiest_side)
    if compound and best and any(best[0].startswith(x) for x in compound.split(" ")[0].split("+")):
        return BoundResult(compound, True, 0.0, r, rule)
    if best and f"{best[0]} " not in rule:
        rule += f"; busiest pipe {best[0]} {best[1]:.3g}"
    return BoundResult(f"{best[0]} bound" if best else (compound or "bound"), True, 0.0, r, rule)


def classify_bound(row, core: str | None = None, thresholds: Thresholds = Thresholds(),
                   op_type: str | None = None, chip=None) -> BoundResult:
    """Name the pipe (or unit) that bounds one kernel (or one key's mean metrics).

    Args:
        row: mapping (dict or pandas Series) with the PMU columns of one metric group:
            PipeUtilization ratios (``aic_mac_ratio``, ..., or the unprefixed ``mac_ratio``, ...
            of non-split chips; fractions 0-1), ArithmeticUtilization (``aic_mac_fp16_ratio``,
            ``aiv_vec_fp32_ratio``, ...), Memory (``aic_main_mem_read_bw(GB/s)``, ...), or the
            L0 bandwidths of the L0B_AND_WIDTH group (``aic_l0a_read_bw(GB/s)``, ...).
        core: ``Accelerator Core`` value; default ``row["core"]``.
        thresholds: rule thresholds (module docstring gives the rules and their source).
        op_type: the kernel's op type (default ``row["type"]``): ``FlashAttentionScore`` and
            ``FlashAttentionScoreGrad`` get msprof-analyze's flash-attention thresholds.
        chip: a :class:`fla_ascend.tiling.chips.ChipSpec` for the Memory rule (HBM bandwidth);
            ``None``: the main-memory bandwidth is reported without a verdict.

    Returns:
        :class:`BoundResult`. A bound kernel is named after its busiest pipe; ``rule`` says
        which threshold made it bound. Rows without any metric give ``"no PMU data"``.

    Raises:
        TypeError: ``thresholds`` is not a :class:`Thresholds`.
    """
    if not isinstance(thresholds, Thresholds):
        raise TypeError(f"thresholds: expected Thresholds, got {type(thresholds).__name__}")
    get = row.get if hasattr(row, "get") else (lambda k, d=None: d)
    core = str(core if core is not None else (get("core") or ""))
    op_type = str(op_type if op_type is not None else (get("type") or ""))
    r = _pipe_ratios(row)
    t = thresholds
    if not r or all(v == 0 for v in r.values()) and core not in CUBE_CORES + VECTOR_CORES + MIX_CORES:
        other = _other_group(row, core, t, chip)
        return other if other is not None else BoundResult("no PMU data", False, math.nan, r, "")
    split = any(k in r for k in ("MTE2(cube)", "MTE2(vector)", "scalar(cube)", "scalar(vector)", "fixpipe"))
    if split and op_type in FA_FORWARD + FA_BACKWARD and "MTE2(cube)" in r:
        mte2 = r["MTE2(cube)"]
        second, thr2 = ("fixpipe", t.fa_fixpipe) if op_type in FA_BACKWARD else ("vec", t.fa_vec)
        v2 = r.get(second, 0.0)
        hits = [f"MTE2(cube) {mte2:.3g} >= {t.fa_mte2:g}"] if mte2 >= t.fa_mte2 else []
        hits += [f"{second} {v2:.3g} >= {thr2:g}"] if v2 >= thr2 else []
        compound = f"MTE2+{second} bound" if len(hits) == 2 else None
        rule = "flash-attention rule (msprof-analyze thresholds): " + ("; ".join(hits) or "no threshold reached")
        other = _busiest(r, exclude=(), vector_side=None)
        if not hits and other and other[1] > t.any_pipe:
            hits = [other[0]]
            rule += f"; any pipe: {other[0]} {other[1]:.3g} > {t.any_pipe:g}"
        return _verdict(r, None, bool(hits), compound, max(t.fa_mte2 - mte2, thr2 - v2), rule)
    if split and core in CUBE_CORES and "mac" in r and "MTE2(cube)" in r:
        mac, mte2 = r["mac"], r["MTE2(cube)"]
        hits = [f"mac {mac:.3g} >= {t.cube_mac:g}"] if mac >= t.cube_mac else []
        hits += [f"MTE2 {mte2:.3g} >= {t.cube_mte2:g}"] if mte2 >= t.cube_mte2 else []
        other = _busiest(r, exclude=("mac", "MTE2(cube)"), vector_side=False)
        if other and other[1] > t.any_pipe:
            hits.append(f"{other[0]} {other[1]:.3g} > {t.any_pipe:g}")
        compound = "mac+MTE2 bound" if mac >= t.cube_mac and mte2 >= t.cube_mte2 else None
        return _verdict(r, False, bool(hits), compound, max(t.cube_mac - mac, t.cube_mte2 - mte2),
                        "cube rule: " + ("; ".join(hits) or "no threshold reached"))
    if split and core in VECTOR_CORES and all(k in r for k in ("vec", "MTE2(vector)", "MTE3")):
        vec, mte2, mte3 = r["vec"], r["MTE2(vector)"], r["MTE3"]
        hits = ([f"vec+MTE2+MTE3 {vec + mte2 + mte3:.3g} >= {t.vector_total:g}"]
                if vec + mte2 + mte3 >= t.vector_total else [])
        hits += [f"{n} {v:.3g} >= {t.vector_single:g}" for n, v in (("MTE2", mte2), ("MTE3", mte3), ("vec", vec))
                 if v >= t.vector_single]
        other = _busiest(r, exclude=("vec", "MTE2(vector)", "MTE3"), vector_side=True)
        if other and other[1] > t.any_pipe:
            hits.append(f"{other[0]} {other[1]:.3g} > {t.any_pipe:g}")
        compound = "vec+MTE2+MTE3 bound" if vec + mte2 + mte3 >= t.vector_total else None
        if compound:
            return BoundResult(compound, True, 0.0, r, "vector rule: " + "; ".join(hits))
        return _verdict(r, True, bool(hits), None, max(t.vector_single - v for v in (vec, mte2, mte3)),
                        "vector rule: " + ("; ".join(hits) or "no threshold reached"))
    side = None
    if split and core in CUBE_CORES:
        side = False
    elif split and core in VECTOR_CORES:
        side = True
    best = _busiest(r, exclude=(), vector_side=side)
    if best is None:
        return BoundResult("no PMU data", False, math.nan, r, "")
    if best[1] > t.any_pipe:
        return BoundResult(f"{best[0]} bound", True, 0.0, r, f"busiest pipe {best[0]} {best[1]:.3g} > {t.any_pipe:g}")
    return BoundResult("not bound", False, t.any_pipe - best[1], r, f"busiest pipe {best[0]} {best[1]:.3g}")


# ArithmeticUtilization: per-precision busy fractions of the cube (mac) and vector units
_ARITH = {"cube": ("aic_mac_fp16_ratio", "aic_mac_int8_ratio"),
          "vector": ("aiv_vec_fp32_ratio", "aiv_vec_fp16_ratio", "aiv_vec_int32_ratio", "aiv_vec_misc_ratio")}
# Memory group: (label, read column, write column) of main memory (HBM) traffic
_MAIN_MEM = (("aic_main_mem_read_bw(GB/s)", "aic_main_mem_write_bw(GB/s)"),
             ("aiv_main_mem_read_bw(GB/s)", "aiv_main_mem_write_bw(GB/s)"))


def metric_group(columns) -> str | None:
    """The PMU metric group a kernel table holds, from its column names: ``PipeUtilization``,
    ``ArithmeticUtilization``, ``Memory``, ``MemoryUB``, ``L0B_AND_WIDTH`` (the L0A/L0B/L0C
    bandwidths of older CANN), ``MemoryL0``, ``ResourceConflictRatio``, ``L2Cache``, or ``None``."""
    c = set(columns)
    if "aic_mac_ratio" in c or "aiv_vec_ratio" in c or "mac_ratio" in c or "vec_ratio" in c:
        return "PipeUtilization"
    if "aic_mac_fp16_ratio" in c or "aiv_vec_fp32_ratio" in c:
        return "ArithmeticUtilization"
    if "aic_main_mem_read_bw(GB/s)" in c or "aiv_main_mem_read_bw(GB/s)" in c:
        return "Memory"
    if "aiv_ub_read_bw_vector(GB/s)" in c:
        return "MemoryUB"
    if "aic_l0a_read_bw(GB/s)" in c:
        return "L0B_AND_WIDTH"
    if any("bankgroup" in x or "bank_conflict" in x for x in c):
        return "ResourceConflictRatio"
    if any(x.startswith(("aic_l0", "aiv_l0")) for x in c):
        return "MemoryL0"
    if any("l2_cache" in x or "hit_rate" in x for x in c):
        return "L2Cache"
    return None


def _other_group(row, core, t: Thresholds, chip) -> BoundResult | None:
    """Rules for the metric groups other than PipeUtilization (ours: msprof-analyze has none)."""
    keys = list(row.keys()) if hasattr(row, "keys") else []
    group = metric_group(keys)
    if group == "ArithmeticUtilization":
        units = {}
        for unit, cols in _ARITH.items():
            vals = {c: _get(row, c) for c in cols if not math.isnan(_get(row, c))}
            if vals:
                units[unit] = (sum(vals.values()), max(vals, key=vals.get))
        if not units or all(v[0] == 0 for v in units.values()):
            return BoundResult("no PMU data", False, math.nan, {}, "ArithmeticUtilization: all ratios 0")
        unit = max(units, key=lambda u: units[u][0])
        total, top = units[unit]
        thr = t.cube_mac if unit == "cube" else t.vector_single
        prec = top.split("_")[2]
        ratios = {f"{u} ({units[u][1].split('_')[2]})": units[u][0] for u in units}
        rule = f"ArithmeticUtilization: {unit} busy {total:.3g} (mostly {prec}), threshold {thr:g}"
        if total >= thr:
            return BoundResult(f"{unit} {prec} bound", True, 0.0, ratios, rule)
        return BoundResult("not bound", False, thr - total, ratios, rule)
    if group == "Memory":
        bw = {}
        for side, (rd, wr) in zip(("aic", "aiv"), _MAIN_MEM):
            v = _get(row, rd), _get(row, wr)
            if not all(math.isnan(x) for x in v):
                bw[side] = sum(x for x in v if not math.isnan(x))
        if not bw:
            return None
        tot = sum(bw.values())
        peak = getattr(chip, "hbm_bw", None)
        ratios = {f"main memory ({k}) GB/s": v for k, v in bw.items()}
        if not peak:
            return BoundResult("main memory bandwidth only", False, math.nan, ratios,
                               f"Memory: {tot:.4g} GB/s to main memory; no chip HBM bandwidth to compare with")
        frac = tot * 1e9 / peak
        ratios["HBM share"] = frac
        rule = f"Memory: {tot:.4g} GB/s = {frac:.1%} of {getattr(chip, 'name', '')} HBM {peak / 1e9:.0f} GB/s"
        if frac >= t.hbm_share:
            return BoundResult("HBM bound", True, 0.0, ratios, rule)
        return BoundResult("not bound", False, t.hbm_share - frac, ratios, rule)
    if group in ("L0B_AND_WIDTH", "MemoryL0", "MemoryUB"):
        vals = {k: _get(row, k) for k in keys if isinstance(k, str) and k.endswith("(GB/s)")
                and not math.isnan(_get(row, k))}
        if not vals or all(v == 0 for v in vals.values()):
            return BoundResult("no PMU data", False, math.nan, {}, f"{group}: all bandwidths 0")
        top = max(vals, key=vals.get)
        return BoundResult(f"{group}: busiest {top.replace('(GB/s)', '')}", False, math.nan, {top: vals[top]},
                           f"{group}: {top} {vals[top]:.4g} GB/s; no public peak for these buffers, so no verdict")
    return None


_VECTOR_PIPES = {"vec", "scalar(vector)", "MTE2(vector)", "MTE3"}


def _busiest(r: dict, exclude, vector_side):
    cand = {k: v for k, v in r.items() if k not in exclude and not math.isnan(v)}
    if vector_side is True:
        cand = {k: v for k, v in cand.items() if k in _VECTOR_PIPES}
    elif vector_side is False:
        cand = {k: v for k, v in cand.items() if k not in _VECTOR_PIPES}
    if not cand:
        return None
    k = max(cand, key=cand.get)
    return k, cand[k]


def _prep(kernels: pd.DataFrame, cols) -> pd.DataFrame:
    if not isinstance(kernels, pd.DataFrame):
        raise TypeError("kernels: expected a pandas DataFrame (readers.read_kernel_details), "
                        f"got {type(kernels).__name__}")
    missing = [c for c in list(cols) + ["duration_us"] if c not in kernels.columns]
    if missing:
        raise ValueError(f"kernels: missing columns {missing}; expected the normalised kernel table")
    k = kernels.copy()
    for c in cols:
        if k[c].dtype == object or str(k[c].dtype).startswith("string"):
            k[c] = k[c].astype("string").fillna("")
        else:
            k[c] = k[c].astype("string").fillna("")
    return k


def kernel_summary(kernels: pd.DataFrame, by="type") -> pd.DataFrame:
    """Per kernel key: launch count, total / mean / min / max duration (us), share of device time.

    Args:
        kernels: normalised kernel table (``readers.read_kernel_details``).
        by: ``"type"`` -> key (``type``, ``core``, ``input_shapes``); ``"name"`` -> (``name``,
            ``core``, ``input_shapes``); or a list of columns.

    Returns:
        DataFrame with the key columns, ``count``, ``total_us``, ``mean_us``, ``min_us``,
        ``max_us``, ``wait_us`` (total wait before these launches), ``share`` (fraction 0-1 of
        the summed durations of the kernels given; :func:`analyze` gives the compute kernels
        only, so its shares are shares of compute time), sorted by ``total_us`` descending. Rows with a N/A
        duration are counted in ``count`` but not in the times.

    Raises:
        TypeError (not a DataFrame), ValueError (unknown ``by``, missing columns).
    """
    cols = key_cols(by)
    k = _prep(kernels, cols)
    if k.empty:
        return pd.DataFrame(columns=cols + ["count", "total_us", "mean_us", "min_us", "max_us", "wait_us", "share"])
    g = k.groupby(cols, sort=False, dropna=False)
    df = g.agg(count=("duration_us", "size"), total_us=("duration_us", "sum"), mean_us=("duration_us", "mean"),
               min_us=("duration_us", "min"), max_us=("duration_us", "max"),
               wait_us=("wait_us", "sum")).reset_index()
    total = k["duration_us"].sum()
    df["share"] = df["total_us"] / total if total > 0 else 0.0
    return df.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def bound_table(kernels: pd.DataFrame, by="type", thresholds: Thresholds = Thresholds(), chip=None) -> pd.DataFrame:
    """Bound pipe per kernel key, from the key's mean PMU ratios (as msprof-analyze averages
    rows of one shape).

    Returns:
        DataFrame: key columns, ``count``, ``total_us``, ``share``, ``bound`` (label), ``is_bound``,
        ``room`` (fraction 0-1), and the mean ratio of each pipe seen (``mac``, ``vec``, ``MTE2(cube)``,
        ...). Keys without PMU data (AI_CPU, Level0) say ``"no PMU data"``.
    """
    cols = key_cols(by)
    summ = kernel_summary(kernels, by)
    k = _prep(kernels, cols)
    ratio_cols = [c for c in k.columns if c not in KERNEL_COLUMNS and c not in cols and c != "aic_icache_miss_rate"
                  and (c.endswith("_ratio") or c.endswith("(GB/s)")) and pd.api.types.is_numeric_dtype(k[c])]
    means = k.groupby(cols, sort=False, dropna=False)[ratio_cols].mean(numeric_only=True).reset_index() \
        if ratio_cols and not k.empty else k[cols].drop_duplicates()
    types = k.groupby(cols, sort=False, dropna=False)["type"].first().astype("string") if "type" not in cols \
        and "type" in k else None
    rows = []
    for _, m in means.iterrows():
        try:
            op_type = m["type"] if "type" in m else (types.loc[tuple(m[c] for c in cols)] if types is not None else "")
        except KeyError:
            op_type = ""
        res = classify_bound(m, core=m["core"] if "core" in m else None, thresholds=thresholds,
                             op_type=str(op_type), chip=chip)
        d = {c: m[c] for c in cols}
        d.update({"bound": res.label, "is_bound": res.bound, "room": res.room, "rule": res.rule})
        d.update(res.ratios)
        rows.append(d)
    b = pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols + ["bound", "is_bound", "room", "rule"])
    out = summ[cols + ["count", "total_us", "share"]].merge(b, on=cols, how="left")
    return out


def block_dim_table(kernels: pd.DataFrame, device: DeviceInfo | None) -> pd.DataFrame:
    """Block dim against the core count, per kernel key with a block dim.

    A cube kernel (``AI_CORE``, ``MIX_AIC``) is compared with ``device.ai_core_num``, a vector
    kernel (``AI_VECTOR_CORE``, ``MIX_AIV``) with ``device.aiv_num``; ``MIX_AIC``'s
    ``mix_block_dim`` with ``aiv_num``. ``rounds = ceil(block_dim / cores)``; ``core_use`` =
    ``block_dim / (rounds x cores)`` (fraction of core slots busy); ``wasted`` is True when
    block_dim is not a multiple of the core count (the last round leaves cores idle).

    Returns:
        DataFrame (``type``, ``core``, ``input_shapes``, ``block_dim``, ``cores``, ``rounds``,
        ``core_use``, ``wasted``, ``total_us``), empty when ``device`` is None or no row has a
        block dim.
    """
    cols = ["type", "core", "input_shapes", "block_dim", "cores", "rounds", "core_use", "wasted", "total_us"]
    if device is None or kernels.empty:
        return pd.DataFrame(columns=cols)
    k = kernels[kernels["block_dim"].notna()].copy()
    rows = []
    for (typ, core, shp, bd), grp in k.groupby(["type", "core", "input_shapes", "block_dim"], dropna=False, sort=False):
        core_s = str(core)
        if core_s in CUBE_CORES + MIX_CORES:
            n = device.ai_core_num
        elif core_s in VECTOR_CORES:
            n = device.aiv_num
        else:
            continue
        if not n or pd.isna(bd) or int(bd) <= 0:
            continue
        bd = int(bd)
        rounds = math.ceil(bd / n)
        rows.append({"type": typ, "core": core, "input_shapes": shp, "block_dim": bd, "cores": n, "rounds": rounds,
                     "core_use": bd / (rounds * n), "wasted": bd % n != 0,
                     "total_us": float(grp["duration_us"].sum())})
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def aicpu_table(kernels: pd.DataFrame, thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """AI_CPU tasks per (``type``, ``input_shapes``): ``count``, ``total_us``, ``max_us``, and
    ``flagged`` (True when any launch exceeds ``thresholds.aicpu_us``, default 20 us, the
    advisor's rule). Empty when there is none."""
    cols = ["type", "input_shapes", "count", "total_us", "max_us", "flagged"]
    a = kernels[kernels["core"].astype("string") == "AI_CPU"]
    if a.empty:
        return pd.DataFrame(columns=cols)
    df = a.groupby(["type", "input_shapes"], dropna=False, sort=False)["duration_us"].agg(
        count="size", total_us="sum", max_us="max").reset_index()
    df["flagged"] = df["max_us"] > thresholds.aicpu_us
    return df[cols].sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def block_imbalance(op: MsprofOpRun, thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """Per-block load imbalance from ``msprof op`` per-block rows.

    For each metric file with ``aic_time(us)`` / ``aiv_time(us)``, the cube sub-blocks
    (``cube*``) are compared on ``aic_time(us)`` and the vector sub-blocks (``vector*``) on
    ``aiv_time(us)``; rows with zero time (the unit idle by design) are ignored.

    Returns:
        DataFrame with ``metric_file``, ``unit`` (``cube`` / ``vector``), ``blocks`` (rows
        compared), ``min_us``, ``mean_us``, ``max_us``, ``spread`` (``(max - min) / max``),
        ``slowest`` (``block_id/sub_block_id`` of the max), ``flagged`` (spread above
        ``thresholds.imbalance``, 10% as msprof op flags it).
    """
    if not isinstance(op, MsprofOpRun):
        raise TypeError(f"op: expected readers.MsprofOpRun, got {type(op).__name__}")
    rows = []
    for name, df in op.metrics.items():
        sub = df["sub_block_id"].astype("string").fillna("") if "sub_block_id" in df else pd.Series([""] * len(df))
        for unit, prefix, col in (("cube", "cube", "aic_time(us)"), ("vector", "vector", "aiv_time(us)")):
            if col not in df:
                continue
            sel = df[sub.str.startswith(prefix) | (sub == "")].copy()
            sel = sel[sel[col] > 0]
            if sel.empty:
                continue
            t = sel[col].astype(float)
            i = int(t.values.argmax())
            mx, mn = float(t.max()), float(t.min())
            spread = (mx - mn) / mx if mx > 0 else 0.0
            rows.append({"metric_file": name, "unit": unit, "blocks": len(sel), "min_us": mn,
                         "mean_us": float(t.mean()), "max_us": mx, "spread": spread,
                         "slowest": f"{sel['block_id'].iloc[i]}/"
                                    f"{sel['sub_block_id'].iloc[i] if 'sub_block_id' in sel else ''}",
                         "flagged": spread > thresholds.imbalance})
    return pd.DataFrame(rows, columns=["metric_file", "unit", "blocks", "min_us", "mean_us", "max_us", "spread",
                                       "slowest", "flagged"])


def _write_text_reports(report, out_dir) -> tuple[Path, dict]:
    """Create ``out_dir`` and write ``report.md`` and ``report.json`` of ``report`` (a
    :class:`Report` or :class:`ClusterReport`); returns the folder and name -> Path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"markdown": out / "report.md", "json": out / "report.json"}
    files["markdown"].write_text(report.to_markdown())
    files["json"].write_text(report.to_json())
    return out, files


@dataclasses.dataclass
class Report:
    """Result of :func:`analyze` for one run (one rank). Tables are pandas DataFrames (see the
    functions that build them); ``findings`` are one-line human-readable issues, ``warnings``
    what limits the data (one step profiled, rows skipped, chip assumed); ``issues`` the
    malformed rows skipped (:class:`readers.RowIssue`). ``totals``: ``kernels`` (rows),
    ``compute_kernels``, ``steps`` (distinct steps, or 1), ``compute_us`` (summed durations of
    compute kernels), ``communication_us`` (of communication tasks), ``wait_us``,
    ``skipped_rows``. ``summary`` / ``bounds`` shares are shares of compute time."""

    source: str
    totals: dict
    summary: pd.DataFrame
    bounds: pd.DataFrame
    op_statistic: pd.DataFrame
    block_dim: pd.DataFrame
    aicpu: pd.DataFrame
    imbalance: pd.DataFrame
    device: DeviceInfo | None
    findings: list
    kernels: pd.DataFrame = dataclasses.field(repr=False, default=None)
    msprof_op: MsprofOpRun | None = dataclasses.field(repr=False, default=None)
    top: int = 10
    key: tuple = KEY_TYPE
    step: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    communication: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    roofline: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    warnings: list = dataclasses.field(default_factory=list)
    issues: list = dataclasses.field(default_factory=list)
    metric_group: str | None = None
    chip: str | None = None
    rank: int | None = None
    layout: str = "framework"

    def top_kernels(self) -> tuple[pd.DataFrame, list[str]]:
        """The top-N rows of :attr:`bounds` with their mean time, and the columns to show."""
        key = list(self.key)
        b = self.bounds.head(self.top).merge(self.summary[key + ["mean_us"]], on=key, how="left")
        return b, key + ["count", "total_us", "mean_us", "share", "bound", "room"]

    def headline(self) -> str:
        """One line: kernels, steps, compute and communication time."""
        t = self.totals
        return (f"{t['kernels']} device tasks over {t['steps']} step(s): compute kernels {t['compute_us']:.1f} us, "
                f"communication tasks {t['communication_us']:.1f} us"
                + (f", {t['skipped_rows']} malformed row(s) skipped" if t["skipped_rows"] else ""))

    def step_markdown(self) -> list[str]:
        """The step split as Markdown lines (empty without a step trace or trace view)."""
        if self.step is None or self.step.empty:
            return []
        cols = [c for c in ("type", "index", "step") if c in self.step] + [
            "computing", "communication_not_overlapped", "overlapped", "free", "stage",
            "computing_share", "communication_not_overlapped_share", "free_share"]
        return ["## Step split (us; shares of the step's wall time)", "",
                f"Source: {self.step['source'].iloc[0]}. computing + communication not overlapped + free = stage.",
                "", md_table(self.step, cols), ""]

    def to_markdown(self, level: int = 1) -> str:
        """The report as Markdown (``level``: heading level of its title)."""
        h = "#" * level
        title = f"{h} Profile report: `{self.source}`" + (f" (rank {self.rank})" if self.rank is not None else "")
        lines = [title, "", f"- {self.headline()}"]
        if self.metric_group:
            lines.append(f"- PMU metric group: {self.metric_group}")
        if self.device is not None:
            d = self.device
            lines.append(f"- device: {d.ai_core_num} AI cores, {d.aiv_num} vector cores, {d.aic_frequency_mhz} MHz")
        lines.append("")
        sub = "#" * (level + 1)
        if self.warnings:
            lines += [f"{sub} Warnings", ""] + [f"- {w}" for w in self.warnings] + [""]
        lines += [f"{sub} Findings", ""] + ([f"- {f}" for f in self.findings] or ["- none"]) + [""]
        lines += [x.replace("## ", sub + " ", 1) if x.startswith("## ") else x for x in self.step_markdown()]
        if self.communication is not None and not self.communication.empty:
            lines += [f"{sub} Communication (per collective)", "", md_table(self.communication, list(
                self.communication.columns)), ""]
        if not self.bounds.empty:
            lines += [f"{sub} Top {self.top} compute kernels (share = of compute kernel time)", ""]
            b, cols = self.top_kernels()
            lines += [md_table(b, cols + ["rule"]), ""]
        if self.roofline is not None and not self.roofline.empty:
            lines += [f"{sub} Roofline ({self.chip}; bytes = inputs + outputs once, a lower bound)", "",
                      md_table(self.roofline.head(self.top), ["type", "core", "input_shapes", "input_dtypes", "count",
                                                              "mean_us", "tflops", "gbs", "peak_share", "hbm_share",
                                                              "roof"]), ""]
        if not self.block_dim.empty:
            lines += [f"{sub} Block dim vs cores", "", md_table(self.block_dim.head(self.top),
                      ["type", "core", "block_dim", "cores", "rounds", "core_use", "wasted"]), ""]
        if not self.aicpu.empty:
            lines += [f"{sub} AI_CPU tasks", "", md_table(self.aicpu, list(self.aicpu.columns)), ""]
        if not self.imbalance.empty:
            lines += [f"{sub} Per-block load (msprof op)", "",
                      md_table(self.imbalance, list(self.imbalance.columns)), ""]
        if self.issues:
            lines += [f"{sub} Malformed rows skipped ({len(self.issues)})", ""] + [f"- {i}" for i in self.issues] + [""]
        return "\n".join(lines).rstrip("\n") + "\n"

    def to_dict(self) -> dict:
        """JSON-ready dict: totals, findings, warnings, issues, device, and the tables as lists of
        records."""
        def rec(df):
            return json.loads(df.to_json(orient="records")) if df is not None else []
        return {
            "source": self.source, "rank": self.rank, "layout": self.layout, "totals": self.totals,
            "findings": self.findings, "warnings": self.warnings, "issues": [str(i) for i in self.issues],
            "metric_group": self.metric_group, "chip": self.chip,
            "device": None if self.device is None else {k: v for k, v in dataclasses.asdict(self.device).items()
                                                        if k != "raw"},
            "step": rec(self.step), "communication": rec(self.communication), "roofline": rec(self.roofline),
            "bounds": rec(self.bounds), "summary": rec(self.summary), "op_statistic": rec(self.op_statistic),
            "block_dim": rec(self.block_dim), "aicpu": rec(self.aicpu), "imbalance": rec(self.imbalance),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string (NaN written as null)."""
        return json.dumps(self.to_dict(), indent=2, default=str)

    def write(self, out_dir, plots: bool = True) -> dict:
        """Write ``report.md``, ``report.json`` and (``plots``) ``time_share.png``,
        ``pipe_ratios.png`` (a heatmap), ``step_split.png``, ``block_times.png`` (msprof op data
        only) into ``out_dir`` (created). Returns name -> Path of what was written."""
        out, files = _write_text_reports(self, out_dir)
        if plots:
            files.update(self.plots(out))
        return files

    def plots(self, out: Path, prefix: str = "", step_plot: bool = True) -> dict:
        """Draw this report's PNGs into ``out`` (file names start with ``prefix``; ``step_plot``:
        also the one-bar step split, left out where a cross-rank plot shows every rank)."""
        files = {}
        if not self.summary.empty:
            files["time_share"] = _plots.plot_time_share(self.summary, out / f"{prefix}time_share.png", top=self.top)
            p = _plots.plot_pipe_ratios(self.bounds, out / f"{prefix}pipe_ratios.png", top=self.top)
            if p is not None:
                files["pipe_ratios"] = p
        if step_plot and self.step is not None and not self.step.empty and "type" not in self.step:
            files["step_split"] = _plots.plot_step_split(
                pd.DataFrame([{"rank": self.rank if self.rank is not None else 0,
                               **self.step[["computing", "communication_not_overlapped", "free", "stage"]].mean()}]),
                out / f"{prefix}step_split.png")
        if self.msprof_op is not None:
            p = _plots.plot_block_times(self.msprof_op, out / f"{prefix}block_times.png")
            if p is not None:
                files["block_times"] = p
        return files


def _chip_for(chip, device: DeviceInfo | None):
    """(ChipSpec, note): the chip named, else the table's default (the note says it is assumed)."""
    from fla_ascend.tiling.chips import DEFAULT_CHIP, get_chip

    if chip is not None:
        return get_chip(chip), None
    spec = get_chip(DEFAULT_CHIP)
    return spec, (f"chip not recorded in the data: roofline and Memory shares assume {spec.name} "
                  f"(pass --chip to name it)")


def analyze(run, *, top: int = 10, by="type", msprof_op: MsprofOpRun | None = None,
            thresholds: Thresholds = Thresholds(), chip=None, strict: bool = False) -> Report:
    """Diagnose one run (one rank).

    Args:
        run: a run directory (or a parent holding one), one profiler file, a
            :class:`readers.Run`, or a normalised kernel DataFrame.
        top: how many kernel keys the Markdown and plots show (positive int).
        by: kernel key, ``"type"`` or ``"name"`` (see :func:`kernel_summary`).
        msprof_op: optional ``msprof op`` data for the per-block imbalance table and plot.
        thresholds: rule thresholds.
        chip: a chip name or :class:`fla_ascend.tiling.chips.ChipSpec` for the roofline and the
            Memory rule; ``None``: the chip table's default, with a warning.
        strict: for paths: raise on the first malformed row instead of skipping it.

    Returns:
        :class:`Report`.

    Raises:
        ValueError (``top`` < 1, bad ``by``, unknown chip), TypeError (``run`` of another type),
        and the readers' errors.
    """
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError(f"top: expected a positive int, got {top!r}")
    if isinstance(run, (str, Path)):
        run = load_run(run, strict=strict)
    if isinstance(run, pd.DataFrame):
        run = Run(path=Path(run.attrs.get("source", "<DataFrame>")), kernels=run, op_statistic=None,
                  operator_details=None, step_trace=None, device=None, profiler_info={}, layout="file")
    if not isinstance(run, Run):
        raise TypeError(f"run: expected a path, readers.Run or DataFrame, got {type(run).__name__}")
    kernels, device, source = run.kernels, run.device, str(run.path)
    opstat = run.op_statistic if run.op_statistic is not None else op_statistic_from_kernels(kernels)
    spec, chip_note = _chip_for(chip, device)
    comm_mask = communication_mask(kernels) if len(kernels) else pd.Series([], dtype=bool)
    compute = kernels[~comm_mask]
    summary = kernel_summary(compute, by)
    bounds = bound_table(compute, by, thresholds, chip=spec)
    group = metric_group(kernels.columns)
    bd = block_dim_table(compute, device)
    ac = aicpu_table(compute, thresholds)
    imb = block_imbalance(msprof_op, thresholds) if msprof_op is not None else pd.DataFrame()
    split = step_split(run)
    comm = communication_summary(run)
    roof = roofline_table(compute, spec)
    steps = kernels["step"].dropna().nunique() if "step" in kernels else 0
    totals = {"kernels": int(len(kernels)), "compute_kernels": int(len(compute)), "steps": int(steps) or 1,
              "compute_us": float(compute["duration_us"].sum()) if len(compute) else 0.0,
              "communication_us": float(kernels.loc[comm_mask, "duration_us"].sum()) if len(kernels) else 0.0,
              "wait_us": float(kernels["wait_us"].sum()) if len(kernels) else 0.0,
              "skipped_rows": len(run.issues)}
    totals["device_us"] = totals["compute_us"] + totals["communication_us"]
    warnings = []
    note = single_step_note(run, split)
    if note:
        warnings.append(note)
    if run.issues:
        warnings.append(f"{len(run.issues)} malformed row(s) skipped (listed at the end); "
                        "pass --strict to stop on them")
    if chip_note and (not roof.empty or group == "Memory"):
        warnings.append(chip_note)
    if not len(kernels) and not split.empty:
        warnings.append("no kernel table in this run (its export kept the step trace and communication only): "
                        "step split and communication, no per-kernel analysis")
    if kernels.attrs.get("type_from_name"):
        warnings.append("no Type column (Level0 or task_time): kernels grouped by their normalised name "
                        "(trans_TransData_0 -> TransData); no PMU data at this level")
    findings = []
    if not split.empty and "type" not in split:
        m = split[["computing", "communication_not_overlapped", "overlapped", "free", "stage"]].mean()
        if m["stage"] > 0:
            parts = {"compute": m["computing"],
                     "communication not overlapped with compute": m["communication_not_overlapped"],
                     "free (device idle)": m["free"]}
            big = max(parts, key=parts.get)
            findings.append(
                f"step {m['stage']:.1f} us: compute {m['computing'] / m['stage']:.1%}, communication not overlapped "
                f"{m['communication_not_overlapped'] / m['stage']:.1%}, free {m['free'] / m['stage']:.1%} "
                f"(overlapped communication {m['overlapped']:.1f} us); the largest part is {big}")
    key = key_cols(by)
    for _, r in bounds.head(top).iterrows():
        label = f"{r[key[0]]}" + (f" [{r['core']}]" if "core" in key else "")
        if r["bound"] == "not bound":
            findings.append(f"{label} ({r['share']:.1%} of compute time): not bound by any pipe, "
                            f"{r['room']:.2%} room before the nearest threshold (latency, sync or imbalance)")
        elif isinstance(r["bound"], str) and r["bound"].endswith("bound"):
            findings.append(f"{label} ({r['share']:.1%} of compute time): {r['bound']} ({r['rule']})")
    for _, r in bd[bd["wasted"]].iterrows() if not bd.empty else []:
        findings.append(f"{r['type']} [{r['core']}]: block dim {r['block_dim']} is not a multiple of {r['cores']} "
                        f"cores ({r['core_use']:.0%} of core slots busy over {r['rounds']} round(s))")
    for _, r in ac[ac["flagged"]].iterrows() if not ac.empty else []:
        findings.append(f"AI_CPU task {r['type']}: {r['count']} launch(es), up to {r['max_us']:.1f} us "
                        f"(> {thresholds.aicpu_us:g} us); move it to the device")
    if split.empty and totals["compute_us"] > 0 and totals["wait_us"] / (totals["device_us"] + totals["wait_us"]) > 0.1:
        findings.append(f"wait time is {totals['wait_us'] / (totals['device_us'] + totals['wait_us']):.1%} "
                        "of device busy + wait time (no step trace to tell communication, host or launch apart)")
    if msprof_op is not None:
        cur, rated = msprof_op.basic.get("current_freq"), msprof_op.basic.get("rated_freq")
        try:
            if cur is not None and rated and float(cur) < float(rated) * (1 - thresholds.freq_drop):
                findings.append(f"clock {float(cur):g} MHz is more than {thresholds.freq_drop:.0%} below rated "
                                f"{float(rated):g} MHz")
        except (TypeError, ValueError):
            pass
        for _, r in imb[imb["flagged"]].iterrows():
            findings.append(f"{r['unit']} blocks ({r['metric_file']}): spread {r['spread']:.1%} between fastest and "
                            f"slowest block (slowest {r['slowest']}, {r['max_us']:.2f} us)")
    return Report(source=source, totals=totals, summary=summary, bounds=bounds, op_statistic=opstat,
                  block_dim=bd, aicpu=ac, imbalance=imb, device=device, findings=findings,
                  kernels=kernels, msprof_op=msprof_op, top=top, key=tuple(key), step=split,
                  communication=comm, roofline=roof, warnings=warnings, issues=list(run.issues),
                  metric_group=group, chip=spec.name, rank=run.rank, layout=run.layout)


@dataclasses.dataclass
class ClusterReport:
    """Result of :func:`analyze_ranks`: one :class:`Report` per rank, the cross-rank table
    (:func:`step.cross_rank`) and its verdict (the slowest rank and what it spent the
    difference on; ``None`` with fewer than two ranks with a step split)."""

    source: str
    ranks: list
    cross: pd.DataFrame
    verdict: str | None

    def to_markdown(self) -> str:
        """Cross-rank section first, then one section per rank."""
        lines = [f"# Profile report: `{self.source}` ({len(self.ranks)} ranks)", "", "## Across ranks", ""]
        if self.verdict:
            lines += [f"- {self.verdict}", ""]
        cols = ["rank", "kernels", "compute_us", "computing", "communication_not_overlapped", "overlapped", "free",
                "stage", "stage_vs_fastest", "computing_vs_fastest", "communication_not_overlapped_vs_fastest",
                "free_vs_fastest"]
        lines += ["Per rank, us (mean over its steps); *_vs_fastest = difference from the rank with the shortest step.",
                  "", md_table(self.cross, cols), ""]
        for r in self.ranks:
            lines.append(r.to_markdown(level=2))
        return "\n".join(lines).rstrip("\n") + "\n"

    def to_dict(self) -> dict:
        """JSON-ready dict: cross-rank table, verdict and every rank's report."""
        return {"source": self.source, "verdict": self.verdict,
                "cross": json.loads(self.cross.to_json(orient="records")),
                "ranks": [r.to_dict() for r in self.ranks]}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (NaN as null)."""
        return json.dumps(self.to_dict(), indent=2, default=str)

    def write(self, out_dir, plots: bool = True) -> dict:
        """Write ``report.md``, ``report.json`` and (``plots``) ``step_split.png`` (stacked bars per
        rank), ``cross_rank.png`` (difference from the fastest rank) and each rank's PNGs
        (``rank<N>_*.png``) into ``out_dir``."""
        out, files = _write_text_reports(self, out_dir)
        if plots:
            if self.cross["stage"].notna().any():
                files["step_split"] = _plots.plot_step_split(self.cross, out / "step_split.png")
            if self.verdict:
                files["cross_rank"] = _plots.plot_cross_rank(self.cross, out / "cross_rank.png")
            for r in self.ranks:
                pre = f"rank{r.rank}_" if r.rank is not None else f"{Path(r.source).name}_"
                for k, v in r.plots(out, prefix=pre, step_plot=False).items():
                    files[f"{pre}{k}"] = v
        return files


def _check_one_job(path, runs: list[Run]) -> None:
    """Raise ValueError unless ``runs`` (more than one) look like the ranks of one job: one
    parent folder and distinct, known rank ids."""
    if len(runs) < 2:
        return
    parents = {Path(r.path).parent for r in runs}
    ranks = [r.rank for r in runs]
    dup = sorted({k for k in ranks if k is not None and ranks.count(k) > 1})
    unknown = [r for r in runs if r.rank is None]
    if len(parents) == 1 and not dup and not unknown:
        return
    why = []
    if len(parents) > 1:
        why.append(f"they lie in {len(parents)} different folders")
    if dup:
        why.append(("rank " if len(dup) == 1 else "ranks ") + ", ".join(map(str, dup))
                   + (" occurs" if len(dup) == 1 else " occur") + " more than once")
    if unknown:
        why.append(f"{len(unknown)} have no rank id")
    lines = []
    for parent in sorted(parents, key=str):
        members = [r for r in runs if Path(r.path).parent == parent]
        lines.append(f"  {parent}: " + ", ".join(
            f"{Path(r.path).name} (rank {'?' if r.rank is None else r.rank})" for r in members))
    hint = []
    groups = [metric_group(r.kernels.columns) for r in runs]
    if len(parents) == 1 and dup and all(groups) and len(set(groups)) == len(groups):
        hint.append("each holds the PMU counters of another metric group (" + ", ".join(
            f"{Path(r.path).name}: {g}" for r, g in zip(runs, groups)) + "): one application profiled once "
            "per msprof --aic-metrics group, not the ranks of a job")
    # a folder holding one job's ranks (two or more, distinct rank ids), never PATH itself
    jobs = [p for p in sorted(parents, key=str) if Path(p).resolve() != Path(path).resolve()
            and _distinct_ranks([r for r in runs if Path(r.path).parent == p])]
    first = min(runs, key=lambda r: str(r.path)).path
    hint.append((f"pass one job's folder of ranks (e.g. {jobs[0]}) or one run's folder" if jobs
                 else "pass one run's folder") + f", e.g. fla-ascend profile analyze {first}; analyse each "
                "separately")
    raise ValueError(
        f"path: {path} holds {len(runs)} profiler runs that are not the ranks of one job ("
        + "; ".join(why) + "):\n" + "\n".join(lines) + "\n" + "\n".join(hint))


def _distinct_ranks(runs: list[Run]) -> bool:
    """Whether ``runs`` are two or more with a rank id each and no rank twice."""
    ranks = [r.rank for r in runs]
    return len(ranks) > 1 and None not in ranks and len(set(ranks)) == len(ranks)


def analyze_ranks(path, *, top: int = 10, by="type", thresholds: Thresholds = Thresholds(), chip=None,
                  strict: bool = False) -> ClusterReport:
    """Diagnose every run under ``path`` (a parent folder of ranks): one report per rank and the
    cross-rank table. A path holding one run gives a one-rank report.

    The runs must be the ranks of one job: siblings in one folder, each with its own rank id
    (``profiler_info*.json`` ``rank_id`` or ``rank<N>`` in the folder name). A folder holding
    unrelated runs (several jobs, rank 0 twice, runs without a rank id) is refused rather than
    compared as if its runs were ranks.

    Raises:
        ValueError: ``path`` holds runs that are not the ranks of one job; the message lists
            them, grouped by folder, and says what to pass instead.
        The readers' errors and :func:`analyze`'s.
    """
    runs = load_runs(path, strict=strict)
    _check_one_job(path, runs)
    reports = [analyze(r, top=top, by=by, thresholds=thresholds, chip=chip) for r in runs]
    cross, verdict = cross_rank(runs)
    return ClusterReport(source=str(path), ranks=reports, cross=cross, verdict=verdict)
