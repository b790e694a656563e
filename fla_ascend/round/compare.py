"""Compare two benchmark artifacts (schema ``fla-ascend-bench/1``): the only source of speedups.

Definitions (per case matched on ``(op, shape, mode, provider)``, both timed):

- ``speedup = old_ms / new_ms`` (above 1: the new one is faster);
- ``improvement_pct = (old_ms - new_ms) / old_ms * 100``;
- ``geomean_speedup = exp(mean(log(speedup)))`` over the matched cases;
- ``avg_improvement_pct = mean(improvement_pct)`` over the matched cases.

Metric source: the suite's ``ms`` is the time of the whole op call (``total-op``). When a
result also carries ``kernel_ms`` (kernel time from a profiler), a ``kernel`` view is computed
too. ``metric="kernel"`` uses it where both artifacts have it and falls back to ``total-op``
case by case (recorded as ``mixed`` with a warning); ``metric="total-op"`` uses ``ms`` only.
The result says which one it used in ``effective_metric_source``.
"""
from __future__ import annotations

import math

from fla_ascend.bench.report import INTERPRETER_LABEL

SCHEMA = "fla-ascend-bench/1"
METRICS = ("total-op", "kernel")
# Artifacts that differ in any of these were not measured the same way: refused.
_MUST_MATCH = ("device", "device_name", "timing_method", "triton_flavour")
# Differences reported as warnings.
_SHOULD_MATCH = ("triton_version", "torch_version", "warmup_ms", "rep_ms")


class ComparisonError(ValueError):
    """Two artifacts cannot be compared (schema, device or timing method differ)."""


def case_key(r: dict) -> tuple[str, str, str, str]:
    """``(op, shape, mode, provider)`` of a result row."""
    return (r["op"], r["shape"], r["mode"], r["provider"])


def check_artifact(art: dict, name: str = "artifact") -> None:
    """Raise ComparisonError unless ``art`` looks like a ``fla-ascend-bench/1`` artifact."""
    if not isinstance(art, dict) or art.get("schema") != SCHEMA:
        got = art.get("schema") if isinstance(art, dict) else type(art).__name__
        raise ComparisonError(f"{name}: schema must be {SCHEMA!r}, got {got!r}")
    if not isinstance(art.get("results"), list) or not isinstance(art.get("meta"), dict):
        raise ComparisonError(f"{name}: needs a 'meta' dict and a 'results' list")
    for i, r in enumerate(art["results"]):
        missing = [k for k in ("op", "shape", "mode", "provider", "correct", "ms") if k not in r]
        if missing:
            raise ComparisonError(f"{name}: results[{i}] lacks {missing}")


def _summary(cases: list[dict]) -> dict:
    if not cases:
        return {"n_cases": 0, "geomean_speedup": None, "avg_improvement_pct": None}
    logs = [math.log(c["speedup"]) for c in cases]
    return {
        "n_cases": len(cases),
        "geomean_speedup": math.exp(sum(logs) / len(logs)),
        "avg_improvement_pct": sum(c["improvement_pct"] for c in cases) / len(cases),
        "min_speedup": min(c["speedup"] for c in cases),
        "max_speedup": max(c["speedup"] for c in cases),
    }


def _timed(r: dict, field: str) -> float | None:
    v = r.get(field)
    if r.get("error") or not r.get("correct") or v is None:
        return None
    v = float(v)
    return v if v > 0 and math.isfinite(v) else None


def compare_artifacts(old: dict, new: dict, metric: str = "total-op") -> dict:
    """Per-case and summary comparison of ``new`` against ``old``.

    Args:
        old, new: artifacts (dicts of schema ``fla-ascend-bench/1``).
        metric: ``"total-op"`` (the suite's ``ms``) or ``"kernel"`` (``kernel_ms`` where both
            have it, else ``ms`` for that case).

    Returns:
        ``{"metric": requested, "interpreter": True when either artifact was timed under the
        Triton interpreter (its ratios say nothing about a device),
        "effective_metric_source": "total-op"|"kernel"|"mixed",
        "cases": [{op, shape, mode, provider, old_ms, new_ms, speedup, improvement_pct,
        source}], "summary": {n_cases, geomean_speedup, avg_improvement_pct, min_speedup,
        max_speedup}, "views": {"total-op": summary, "kernel": summary or None},
        "skipped": [{key, reason}], "warnings": [str], "old_meta": ..., "new_meta": ...}``.
        Times are milliseconds.

    Raises:
        ValueError: ``metric`` unknown.
        ComparisonError: not artifacts, or measured on a different device / timing method.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    check_artifact(old, "old artifact")
    check_artifact(new, "new artifact")
    om, nm = old["meta"], new["meta"]
    for k in _MUST_MATCH:
        if om.get(k) != nm.get(k):
            raise ComparisonError(
                f"artifacts are not comparable: meta.{k} differs ({om.get(k)!r} vs {nm.get(k)!r})"
            )
    warnings = [f"meta.{k} differs: {om.get(k)!r} vs {nm.get(k)!r}" for k in _SHOULD_MATCH if om.get(k) != nm.get(k)]
    old_by = {case_key(r): r for r in old["results"]}
    new_by = {case_key(r): r for r in new["results"]}
    skipped = []
    cases, total_cases, kernel_cases = [], [], []
    for key in sorted(set(old_by) | set(new_by)):
        o, n = old_by.get(key), new_by.get(key)
        label = "/".join(key)
        if o is None or n is None:
            skipped.append({"key": label, "reason": f"only in the {'new' if o is None else 'old'} artifact"})
            continue
        if o.get("dtype") != n.get("dtype"):
            skipped.append({"key": label, "reason": f"dtype differs ({o.get('dtype')} vs {n.get('dtype')})"})
            continue
        o_ms, n_ms = _timed(o, "ms"), _timed(n, "ms")
        if o_ms is None or n_ms is None:
            which = "old" if o_ms is None else "new"
            r = o if o_ms is None else n
            why = r.get("error") or ("correctness gate failed" if not r.get("correct") else "not timed")
            skipped.append({"key": label, "reason": f"{which}: {why}"})
            continue
        base = dict(zip(("op", "shape", "mode", "provider"), key))
        total = base | {"old_ms": o_ms, "new_ms": n_ms, "speedup": o_ms / n_ms,
                        "improvement_pct": (o_ms - n_ms) / o_ms * 100.0, "source": "total-op"}
        total_cases.append(total)
        ok, nk = _timed(o, "kernel_ms"), _timed(n, "kernel_ms")
        kern = None
        if ok is not None and nk is not None:
            kern = base | {"old_ms": ok, "new_ms": nk, "speedup": ok / nk,
                           "improvement_pct": (ok - nk) / ok * 100.0, "source": "kernel"}
            kernel_cases.append(kern)
        cases.append(kern if metric == "kernel" and kern is not None else total)
    sources = {c["source"] for c in cases}
    effective = "mixed" if len(sources) > 1 else (sources.pop() if sources else metric)
    if metric == "kernel" and effective != "kernel":
        n_fb = sum(c["source"] == "total-op" for c in cases)
        warnings.append(f"kernel metric requested; {n_fb} of {len(cases)} cases fell back to total-op (no kernel_ms)")
    if not cases:
        warnings.append("no case was timed in both artifacts: nothing to compare")
    return {
        "metric": metric,
        "interpreter": bool(om.get("interpreter") or nm.get("interpreter")),
        "effective_metric_source": effective,
        "cases": cases,
        "summary": _summary(cases),
        "views": {"total-op": _summary(total_cases), "kernel": _summary(kernel_cases) if kernel_cases else None},
        "skipped": skipped,
        "warnings": warnings,
        "old_meta": {k: om.get(k) for k in (*_MUST_MATCH, *_SHOULD_MATCH, "date")},
        "new_meta": {k: nm.get(k) for k in (*_MUST_MATCH, *_SHOULD_MATCH, "date")},
    }


def fmt_speedup(x: float | None) -> str:
    """``1.234x`` or ``n/a``."""
    return "n/a" if x is None else f"{x:.3f}x"


def fmt_pct(x: float | None) -> str:
    """``+12.3 %`` or ``n/a``."""
    return "n/a" if x is None else f"{x:+.1f} %"


def comparison_markdown(cmp: dict, title: str) -> str:
    """A Markdown section: summary line, per-case table, skipped cases and warnings."""
    s = cmp["summary"]
    lines = [
        f"### {title}",
        "",
        *([f"**{INTERPRETER_LABEL}.**", ""] if cmp.get("interpreter") else []),
        f"Metric source: **{cmp['effective_metric_source']}** (requested {cmp['metric']}). "
        f"Geomean speedup **{fmt_speedup(s['geomean_speedup'])}**, average improvement "
        f"**{fmt_pct(s['avg_improvement_pct'])}** over {s['n_cases']} cases.",
        "",
        "| op | shape | mode | provider | old ms | new ms | speedup | improvement | source |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for c in cmp["cases"]:
        lines.append(
            f"| {c['op']} | {c['shape']} | {c['mode']} | {c['provider']} | {c['old_ms']:.4g} | "
            f"{c['new_ms']:.4g} | {fmt_speedup(c['speedup'])} | {fmt_pct(c['improvement_pct'])} | {c['source']} |"
        )
    if cmp["views"].get("kernel") and cmp["effective_metric_source"] != "kernel":
        k = cmp["views"]["kernel"]
        lines += ["", f"Kernel view: geomean {fmt_speedup(k['geomean_speedup'])} over {k['n_cases']} cases."]
    for sk in cmp["skipped"]:
        lines.append(f"\n- skipped {sk['key']}: {sk['reason']}")
    for w in cmp["warnings"]:
        lines.append(f"\n- warning: {w}")
    return "\n".join(lines) + "\n"
