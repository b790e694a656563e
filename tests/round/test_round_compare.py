import math

import pytest

from fla_ascend.round.compare import ComparisonError, compare_artifacts


def _art(times, device="cpu", kernel=None, correct=None, timing="wall-clock median"):
    rows = []
    for shape, ms in times.items():
        r = {"op": "l2norm", "shape": shape, "mode": "fwd", "provider": "fla_ascend", "dtype": "float32",
             "correct": True if correct is None else correct.get(shape, True), "ms": ms, "error": None}
        if kernel and shape in kernel:
            r["kernel_ms"] = kernel[shape]
        rows.append(r)
    return {"schema": "fla-ascend-bench/1", "results": rows,
            "meta": {"device": device, "device_name": "x", "timing_method": timing, "triton_flavour": "triton",
                     "triton_version": "3.9.0"}}


def test_per_case_geomean_and_average():
    old = _art({"a": 2.0, "b": 9.0, "c": 1.0})
    new = _art({"a": 1.0, "b": 10.0, "c": 0.5})
    cmp = compare_artifacts(old, new)
    by = {c["shape"]: c for c in cmp["cases"]}
    assert by["a"]["speedup"] == pytest.approx(2.0)
    assert by["b"]["speedup"] == pytest.approx(0.9)
    assert by["b"]["improvement_pct"] == pytest.approx(-100 / 9)
    s = cmp["summary"]
    assert s["geomean_speedup"] == pytest.approx((2.0 * 0.9 * 2.0) ** (1 / 3))
    assert s["avg_improvement_pct"] == pytest.approx((50 - 100 / 9 + 50) / 3)
    assert cmp["effective_metric_source"] == "total-op"


def test_untimed_missing_and_failed_cases_are_skipped_with_reasons():
    old = _art({"a": 2.0, "b": 3.0, "c": 1.0})
    new = _art({"a": 1.0, "b": None, "d": 1.0}, correct={"b": False})
    cmp = compare_artifacts(old, new)
    assert [c["shape"] for c in cmp["cases"]] == ["a"]
    reasons = {s["key"].split("/")[1]: s["reason"] for s in cmp["skipped"]}
    assert "correctness gate failed" in reasons["b"]
    assert "only in the old" in reasons["c"] and "only in the new" in reasons["d"]


def test_kernel_metric_falls_back_case_by_case_and_says_mixed():
    old = _art({"a": 2.0, "b": 4.0}, kernel={"a": 1.0})
    new = _art({"a": 1.0, "b": 2.0}, kernel={"a": 0.25})
    cmp = compare_artifacts(old, new, metric="kernel")
    assert cmp["effective_metric_source"] == "mixed"
    assert {c["shape"]: c["source"] for c in cmp["cases"]} == {"a": "kernel", "b": "total-op"}
    assert cmp["summary"]["geomean_speedup"] == pytest.approx(math.sqrt(4.0 * 2.0))
    assert cmp["views"]["kernel"]["n_cases"] == 1
    assert any("fell back" in w for w in cmp["warnings"])


def test_refuses_different_device_or_timing_and_bad_metric():
    with pytest.raises(ComparisonError, match="device"):
        compare_artifacts(_art({"a": 1.0}), _art({"a": 1.0}, device="cuda"))
    with pytest.raises(ComparisonError, match="timing_method"):
        compare_artifacts(_art({"a": 1.0}), _art({"a": 1.0}, timing="do_bench"))
    with pytest.raises(ComparisonError, match="schema"):
        compare_artifacts({"schema": "x"}, _art({"a": 1.0}))
    with pytest.raises(ValueError, match="metric"):
        compare_artifacts(_art({"a": 1.0}), _art({"a": 1.0}), metric="wall")
