"""Diagnose one profiler run: where the device time goes, which pipe bounds each kernel, what
is left on the table (block dim vs cores, AI_CPU tasks, per-block imbalance, wait time).

Rules (thresholds as in msprof-analyze's advisor, Apache-2.0, rules/*/aicore_performance.yaml
and config.ini; re-implemented here, not copied):

* cube kernels (``AI_CORE``): mac-and-MTE2 bound when ``aic_mac_ratio >= 0.8`` and
  ``aic_mte2_ratio >= 0.95``; mac bound / MTE2 bound when one of them reaches its threshold;
  otherwise room = ``max(0.8 - mac, 0.95 - mte2)``.
* vector kernels (``AI_VECTOR_CORE``, ``MIX_AIV``): vec+MTE2+MTE3 bound when
  ``aiv_vec + aiv_mte2 + aiv_mte3 >= 0.9``; else MTE2, MTE3, vec bound (in that order) when the
  ratio is ``>= 0.7``; otherwise room = ``max(0.7 - each)``.
* any other kernel with PMU data (``MIX_AIC``, non-split chips' unprefixed ratios), and any pipe
  the two rules above do not look at (scalar, MTE1, fixpipe): bound by the busiest pipe when its
  ratio is ``> 0.8`` (``operator_bound_ratio``); "not bound" otherwise, room = ``0.8 - max``.
  (msprof-analyze's own FlashAttention rule labels aic MTE2 >= 0.8 as "mac"; we name the pipe.)
* block dim not a multiple of the core count (cube: ``ai_core_num``; vector: ``aiv_num``) leaves
  cores idle in the last round; AI_CPU tasks longer than 20 us are flagged; a current clock more
  than 5% below the rated one is flagged; msprof op per-block times spreading more than 10%
  (``(max - min) / max``) are flagged as load imbalance.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .readers import DeviceInfo, MsprofOpRun, Run, load_run, op_statistic_from_kernels

__all__ = [
    "Thresholds", "BoundResult", "Report", "classify_bound", "kernel_summary", "bound_table",
    "block_dim_table", "aicpu_table", "block_imbalance", "analyze", "CUBE_CORES", "VECTOR_CORES",
]

CUBE_CORES = ("AI_CORE",)
VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")
MIX_CORES = ("MIX_AIC",)
KEY_TYPE = ("type", "core", "input_shapes")
KEY_NAME = ("name", "core", "input_shapes")


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
        other = _busiest(r, exclude=(), vector_side=None)
        if not hits and other and other[1] > t.any_pipe:
            hits = [f"{other[0]} {other[1]:.3g} > {t.any_pipe:g}"]
        compound = f"MTE2+{second} bound" if len(hits) == 2 else None
        return _verdict(r, None, bool(hits), compound, max(t.fa_mte2 - mte2, thr2 - v2),
                        "msprof-analyze FA rule: " + ("; ".join(hits) or "no threshold reached"))
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
        hits = [f"vec+MTE2+MTE3 {vec + mte2 + mte3:.3g} >= {t.vector_total:g}"] if vec + mte2 + mte3 >= t.vector_total else []
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


def _num(row, col) -> float:
    return _get(row, col)


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
            vals = {c: _num(row, c) for c in cols if not math.isnan(_num(row, c))}
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
            v = _num(row, rd), _num(row, wr)
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
        vals = {k: _num(row, k) for k in keys if isinstance(k, str) and k.endswith("(GB/s)")
                and not math.isnan(_num(row, k))}
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


def _key_cols(by) -> list[str]:
    if by in ("type", None):
        return list(KEY_TYPE)
    if by == "name":
        return list(KEY_NAME)
    if isinstance(by, (list, tuple)) and by and all(isinstance(c, str) for c in by):
        return list(by)
    raise ValueError(f"by: expected 'type', 'name' or a list of column names, got {by!r}")


def _prep(kernels: pd.DataFrame, cols) -> pd.DataFrame:
    if not isinstance(kernels, pd.DataFrame):
        raise TypeError(f"kernels: expected a pandas DataFrame (readers.read_kernel_details), got {type(kernels).__name__}")
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
        the summed durations of all kernels), sorted by ``total_us`` descending. Rows with a N/A
        duration are counted in ``count`` but not in the times.

    Raises:
        TypeError (not a DataFrame), ValueError (unknown ``by``, missing columns).
    """
    cols = _key_cols(by)
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


def bound_table(kernels: pd.DataFrame, by="type", thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """Bound pipe per kernel key, from the key's mean PMU ratios (as msprof-analyze averages
    rows of one shape).

    Returns:
        DataFrame: key columns, ``count``, ``total_us``, ``share``, ``bound`` (label), ``is_bound``,
        ``room`` (fraction 0-1), and the mean ratio of each pipe seen (``mac``, ``vec``, ``MTE2(cube)``,
        ...). Keys without PMU data (AI_CPU, Level0) say ``"no PMU data"``.
    """
    cols = _key_cols(by)
    summ = kernel_summary(kernels, by)
    k = _prep(kernels, cols)
    ratio_cols = [c for c in k.columns if c.endswith("_ratio") and c != "aic_icache_miss_rate"]
    means = k.groupby(cols, sort=False, dropna=False)[ratio_cols].mean(numeric_only=True).reset_index() \
        if ratio_cols and not k.empty else k[cols].drop_duplicates()
    rows = []
    for _, m in means.iterrows():
        res = classify_bound(m, core=m["core"] if "core" in m else None, thresholds=thresholds)
        d = {c: m[c] for c in cols}
        d.update({"bound": res.label, "is_bound": res.bound, "room": res.room})
        d.update(res.ratios)
        rows.append(d)
    b = pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols + ["bound", "is_bound", "room"])
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
                         "slowest": f"{sel['block_id'].iloc[i]}/{sel['sub_block_id'].iloc[i] if 'sub_block_id' in sel else ''}",
                         "flagged": spread > thresholds.imbalance})
    return pd.DataFrame(rows, columns=["metric_file", "unit", "blocks", "min_us", "mean_us", "max_us", "spread",
                                       "slowest", "flagged"])


@dataclasses.dataclass
class Report:
    """Result of :func:`analyze`. Tables are pandas DataFrames (see the functions that build
    them); ``findings`` are one-line human-readable issues; ``totals`` holds ``device_us`` (sum
    of kernel durations), ``wait_us`` (sum of waits), ``kernels`` (rows), ``steps`` (distinct
    steps, or 1)."""

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

    def top_kernels(self) -> tuple[pd.DataFrame, list[str]]:
        """The top-N rows of :attr:`bounds` with their mean time, and the columns to show."""
        key = list(self.key)
        b = self.bounds.head(self.top).merge(self.summary[key + ["mean_us"]], on=key, how="left")
        return b, key + ["count", "total_us", "mean_us", "share", "bound", "room"]

    def to_markdown(self) -> str:
        """The report as Markdown (top-N tables and findings)."""
        lines = [f"# Profile report: `{self.source}`", ""]
        t = self.totals
        lines.append(f"- kernels: {t['kernels']} launches over {t['steps']} step(s); device time "
                     f"{t['device_us']:.3f} us; wait {t['wait_us']:.3f} us")
        if self.device is not None:
            d = self.device
            lines.append(f"- device: {d.ai_core_num} AI cores, {d.aiv_num} vector cores, {d.aic_frequency_mhz} MHz")
        lines.append("")
        lines.append("## Findings")
        lines.append("")
        lines += [f"- {f}" for f in self.findings] or ["- none"]
        lines.append("")
        lines.append(f"## Top {self.top} kernels by device time")
        lines.append("")
        b, cols = self.top_kernels()
        lines.append(_md_table(b, cols))
        if not self.block_dim.empty:
            lines += ["", "## Block dim vs cores", "", _md_table(self.block_dim.head(self.top),
                      ["type", "core", "block_dim", "cores", "rounds", "core_use", "wasted"])]
        if not self.aicpu.empty:
            lines += ["", "## AI_CPU tasks", "", _md_table(self.aicpu, list(self.aicpu.columns))]
        if not self.imbalance.empty:
            lines += ["", "## Per-block load (msprof op)", "", _md_table(self.imbalance, list(self.imbalance.columns))]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        """JSON-ready dict: totals, findings, device, and the tables as lists of records."""
        def rec(df):
            return json.loads(df.to_json(orient="records")) if df is not None else []
        return {
            "source": self.source, "totals": self.totals, "findings": self.findings,
            "device": None if self.device is None else {k: v for k, v in dataclasses.asdict(self.device).items()
                                                        if k != "raw"},
            "bounds": rec(self.bounds), "summary": rec(self.summary), "op_statistic": rec(self.op_statistic),
            "block_dim": rec(self.block_dim), "aicpu": rec(self.aicpu), "imbalance": rec(self.imbalance),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string (NaN written as null)."""
        return json.dumps(self.to_dict(), indent=2, default=str)

    def write(self, out_dir, plots: bool = True) -> dict:
        """Write ``report.md``, ``report.json`` and (``plots``) ``time_share.png``,
        ``pipe_ratios.png``, ``block_times.png`` (msprof op data only) into ``out_dir``
        (created). Returns name -> Path of what was written."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {"markdown": out / "report.md", "json": out / "report.json"}
        files["markdown"].write_text(self.to_markdown())
        files["json"].write_text(self.to_json())
        if plots:
            from . import plots as _plots
            if not self.summary.empty:
                files["time_share"] = _plots.plot_time_share(self.summary, out / "time_share.png", top=self.top)
                p = _plots.plot_pipe_ratios(self.bounds, out / "pipe_ratios.png", top=self.top)
                if p is not None:
                    files["pipe_ratios"] = p
            if self.msprof_op is not None:
                p = _plots.plot_block_times(self.msprof_op, out / "block_times.png")
                if p is not None:
                    files["block_times"] = p
        return files


def _fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.1f}"
    s = str(v)
    return s.replace("|", "\\|")


def _md_table(df: pd.DataFrame, cols) -> str:
    cols = [c for c in cols if c in df.columns]
    if df.empty:
        return "(none)"
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    return "\n".join(out)


def analyze(run, *, top: int = 10, by="type", msprof_op: MsprofOpRun | None = None,
            thresholds: Thresholds = Thresholds()) -> Report:
    """Diagnose one run.

    Args:
        run: a run directory (or a parent holding one), a :class:`readers.Run`, or a normalised
            kernel DataFrame.
        top: how many kernel keys the Markdown and plots show (positive int).
        by: kernel key, ``"type"`` or ``"name"`` (see :func:`kernel_summary`).
        msprof_op: optional ``msprof op`` data for the per-block imbalance table and plot.
        thresholds: rule thresholds.

    Returns:
        :class:`Report`.

    Raises:
        ValueError (``top`` < 1, bad ``by``), TypeError (``run`` of another type), and the
        readers' errors.
    """
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError(f"top: expected a positive int, got {top!r}")
    if isinstance(run, (str, Path)):
        run = load_run(run)
    if isinstance(run, Run):
        kernels, device, source, opstat = run.kernels, run.device, str(run.path), run.op_statistic
    elif isinstance(run, pd.DataFrame):
        kernels, device, source, opstat = run, None, run.attrs.get("source", "<DataFrame>"), None
    else:
        raise TypeError(f"run: expected a path, readers.Run or DataFrame, got {type(run).__name__}")
    if opstat is None:
        opstat = op_statistic_from_kernels(kernels)
    summary = kernel_summary(kernels, by)
    bounds = bound_table(kernels, by, thresholds)
    bd = block_dim_table(kernels, device)
    ac = aicpu_table(kernels, thresholds)
    imb = block_imbalance(msprof_op, thresholds) if msprof_op is not None else pd.DataFrame()
    steps = kernels["step"].dropna().nunique() if "step" in kernels else 0
    totals = {"kernels": int(len(kernels)), "steps": int(steps) or 1,
              "device_us": float(kernels["duration_us"].sum()) if len(kernels) else 0.0,
              "wait_us": float(kernels["wait_us"].sum()) if len(kernels) else 0.0}
    findings = []
    key = _key_cols(by)
    for _, r in bounds.head(top).iterrows():
        label = f"{r[key[0]]}" + (f" [{r['core']}]" if "core" in key else "")
        if r["bound"] == "not bound":
            findings.append(f"{label} ({r['share']:.1%} of device time): not bound by any pipe, "
                            f"{r['room']:.2%} room before the nearest threshold (latency, sync or imbalance)")
        elif isinstance(r["bound"], str) and r["bound"].endswith("bound"):
            findings.append(f"{label} ({r['share']:.1%} of device time): {r['bound']}")
    for _, r in bd[bd["wasted"]].iterrows() if not bd.empty else []:
        findings.append(f"{r['type']} [{r['core']}]: block dim {r['block_dim']} is not a multiple of {r['cores']} "
                        f"cores ({r['core_use']:.0%} of core slots busy over {r['rounds']} round(s))")
    for _, r in ac[ac["flagged"]].iterrows() if not ac.empty else []:
        findings.append(f"AI_CPU task {r['type']}: {r['count']} launch(es), up to {r['max_us']:.1f} us "
                        f"(> {thresholds.aicpu_us:g} us); move it to the device")
    if totals["device_us"] > 0 and totals["wait_us"] / (totals["device_us"] + totals["wait_us"]) > 0.1:
        findings.append(f"wait time is {totals['wait_us'] / (totals['device_us'] + totals['wait_us']):.1%} "
                        "of device busy + wait time (launch-bound or host-bound)")
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
                  kernels=kernels, msprof_op=msprof_op, top=top, key=tuple(key))
