"""Roofline per kernel key, where the profiler recorded shapes and dtypes: achieved FLOP/s and
bytes/s, and their share of the chip's peak (``fla_ascend.tiling.chips``: cube bf16/fp16
peak and HBM bandwidth, each with its source there).

What is counted (per launch):

* bytes: every input and output tensor once (``prod(shape) x dtype size``): the least HBM
  traffic the kernel can do; a kernel that re-reads data moves more, so the bytes/s here is a
  lower bound of the real traffic.
* FLOPs: matrix multiplies only (``MatMul``, ``MatMulV2``/``V3``, ``BatchMatMul*``):
  ``2 x prod(output shape) x K``, with K the dimension of the first input that the output does not
  keep. Other ops get bytes only (their FLOPs need attributes the profiler does not record).

The share of the compute peak is given for 16-bit inputs only (the chip table holds the
bf16/fp16 cube peak).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .readers import parse_shapes

__all__ = ["DTYPE_BYTES", "MATMUL_TYPES", "dtype_bytes", "kernel_flops", "kernel_bytes", "roofline_table"]

#: Bytes per element of the dtype names profilers write (``DT_BF16``, ``FLOAT16``, ``FLOAT``...).
DTYPE_BYTES = {"BF16": 2, "FLOAT16": 2, "FP16": 2, "HALF": 2, "FLOAT": 4, "FLOAT32": 4, "FP32": 4, "DOUBLE": 8,
               "FLOAT64": 8, "INT8": 1, "UINT8": 1, "BOOL": 1, "INT16": 2, "UINT16": 2, "INT32": 4, "UINT32": 4,
               "INT64": 8, "UINT64": 8, "COMPLEX64": 8, "HIFLOAT8": 1, "FLOAT8_E4M3FN": 1, "FLOAT8_E5M2": 1}
MATMUL_TYPES = ("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
_SIXTEEN_BIT = {"BF16", "FLOAT16", "FP16", "HALF"}


def dtype_bytes(name) -> int | None:
    """Element size of a profiler dtype name (``DT_BF16`` -> 2), ``None`` when unknown."""
    if name is None or name is pd.NA:
        return None
    s = str(name).strip().upper()
    s = s[3:] if s.startswith("DT_") else s
    return DTYPE_BYTES.get(s)


def _split(cell) -> list[str]:
    if cell is None or cell is pd.NA or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [x.strip() for x in str(cell).split(";")]


def kernel_bytes(in_shapes, in_dtypes, out_shapes, out_dtypes) -> float:
    """Bytes of all input and output tensors (NaN when no tensor has both a shape and a known
    dtype). Shape cells as the profiler writes them (``"8192,512;512"``), dtypes ``;``-separated."""
    total, seen = 0.0, False
    for shapes, dtypes in ((in_shapes, in_dtypes), (out_shapes, out_dtypes)):
        try:
            sh = parse_shapes(shapes)
        except ValueError:
            return math.nan
        for s, d in zip(sh, _split(dtypes)):
            b = dtype_bytes(d)
            if b is None or not s:
                continue
            total += float(np.prod(s, dtype=np.float64)) * b
            seen = True
    return total if seen else math.nan


def kernel_flops(op_type, in_shapes, out_shapes) -> float:
    """FLOPs of one matrix-multiply launch (see the module docstring); NaN for other ops or
    shapes that do not fit."""
    if str(op_type) not in MATMUL_TYPES:
        return math.nan
    try:
        ins, outs = parse_shapes(in_shapes), parse_shapes(out_shapes)
    except ValueError:
        return math.nan
    if len(ins) < 2 or not outs or len(ins[0]) < 2 or len(ins[1]) < 2 or len(outs[0]) < 2:
        return math.nan
    a, b, o = ins[0], ins[1], outs[0]
    m, n = o[-2], o[-1]
    a0, a1 = a[-2], a[-1]
    if a0 == m and a1 != m:
        k = a1
    elif a1 == m and a0 != m:
        k = a0
    else:  # square A: take K from B
        b0, b1 = b[-2], b[-1]
        k = b0 if b1 == n else b1
    return 2.0 * float(np.prod(o, dtype=np.float64)) * k


def roofline_table(kernels: pd.DataFrame, chip) -> pd.DataFrame:
    """Per kernel key (``type``, ``core``, ``input_shapes``) with recorded shapes: ``count``,
    ``mean_us``, ``flops`` and ``bytes`` per launch, ``tflops`` (achieved TFLOP/s), ``gbs``
    (achieved GB/s, lower bound), ``intensity`` (FLOP/byte), ``peak_share`` (of the chip's
    bf16/fp16 cube peak; 16-bit inputs only), ``hbm_share`` (of the chip's HBM bandwidth), and
    ``roof`` (``compute`` or ``memory``: which roof the kernel's intensity puts it under).

    Args:
        kernels: normalised kernel table.
        chip: :class:`fla_ascend.tiling.chips.ChipSpec`; its ``None`` peaks give NaN shares.

    Returns:
        DataFrame sorted by total time; empty when no kernel has shapes with known dtypes.
    """
    cols = ["type", "core", "input_shapes", "input_dtypes", "count", "mean_us", "flops", "bytes", "tflops", "gbs",
            "intensity", "peak_share", "hbm_share", "roof"]
    if kernels is None or kernels.empty or kernels["input_shapes"].isna().all():
        return pd.DataFrame(columns=cols)
    k = kernels[kernels["input_shapes"].notna() & kernels["duration_us"].notna()]
    key = ["type", "core", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes"]
    g = k.assign(**{c: k[c].astype("string").fillna("") for c in key}).groupby(key, sort=False)["duration_us"]
    agg = g.agg(count="size", total_us="sum", mean_us="mean").reset_index()
    peak = getattr(chip, "peak_bf16_flops", None)
    bw = getattr(chip, "hbm_bw", None)
    rows = []
    for _, r in agg.iterrows():
        by = kernel_bytes(r["input_shapes"], r["input_dtypes"], r["output_shapes"], r["output_dtypes"])
        fl = kernel_flops(r["type"], r["input_shapes"], r["output_shapes"])
        if math.isnan(by) and math.isnan(fl):
            continue
        sec = r["mean_us"] * 1e-6 if r["mean_us"] > 0 else math.nan
        sixteen = all((str(d).upper()[3:] if str(d).upper().startswith("DT_") else str(d).upper()) in _SIXTEEN_BIT
                      for d in _split(r["input_dtypes"])[:2]) if _split(r["input_dtypes"]) else False
        flops_s = fl / sec if sec and not math.isnan(fl) else math.nan
        bytes_s = by / sec if sec and not math.isnan(by) else math.nan
        intensity = fl / by if not math.isnan(fl) and by and not math.isnan(by) else math.nan
        roof = ""
        if not math.isnan(intensity) and peak and bw:
            roof = "compute" if intensity >= peak / bw else "memory"
        rows.append({"type": r["type"], "core": r["core"], "input_shapes": r["input_shapes"],
                     "input_dtypes": r["input_dtypes"], "count": int(r["count"]), "total_us": r["total_us"],
                     "mean_us": r["mean_us"], "flops": fl, "bytes": by,
                     "tflops": flops_s / 1e12, "gbs": bytes_s / 1e9, "intensity": intensity,
                     "peak_share": flops_s / peak if peak and sixteen and not math.isnan(flops_s) else math.nan,
                     "hbm_share": bytes_s / bw if bw and not math.isnan(bytes_s) else math.nan, "roof": roof})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows).sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return df[cols]
