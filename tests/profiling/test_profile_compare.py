"""Compare two fixture runs with known per-kernel ratios, differing step counts and counts."""
import importlib
import json

import numpy as np
import pytest

from fla_ascend.profiling import readers as R

import profiling_builders as B

C = importlib.import_module("fla_ascend.profiling.compare")  # the package re-exports a function of that name

DUR = {op: float(B.pmu_values(op)["Duration(us)"]) for op in B.REAL_ROWS}
AICPU = 35.2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    base = B.make_steps_run(d / "base", name="b_1_20250101000000000_ascend_pt", steps=3)
    new = B.make_steps_run(d / "new", name="n_1_20250101000000000_ascend_pt", steps=5,
                           scales={"MatMulV3": 0.8, "MatMulV2": 1.25}, counts={"Add": 2},
                           drop=("FlashAttentionScore",), add=[("fused_kernel", "FusedGDN", "MIX_AIV", 100.0)])
    return base, new


def test_ratios_per_step(runs):
    cmp = C.compare(*runs)
    t = cmp.table.set_index("type")
    assert cmp.totals["steps_base"] == 3 and cmp.totals["steps_new"] == 5
    assert t.loc["MatMulV3", "ratio"] == pytest.approx(0.8, abs=1e-5)
    assert t.loc["MatMulV2", "ratio"] == pytest.approx(1.25, abs=1e-5)
    assert t.loc["Add", "ratio"] == pytest.approx(2.0)  # two launches per step instead of one
    assert t.loc["Add", "count_base"] == 1 and t.loc["Add", "count_new"] == 2
    assert t.loc["Add", "mean_new_us"] == pytest.approx(DUR["Add"])
    assert t.loc["GatherV2", "ratio"] == pytest.approx(1.0)
    assert t.loc["FlashAttentionScore", "status"] == "base only" and np.isnan(t.loc["FlashAttentionScore", "ratio"])
    assert t.loc["FusedGDN", "status"] == "new only" and t.loc["FusedGDN", "total_new_us"] == pytest.approx(100.0)


def test_totals(runs):
    cmp = C.compare(*runs)
    base = sum(DUR.values()) + AICPU
    new = DUR["MatMulV2"] * 1.25 + DUR["MatMulV3"] * 0.8 + 2 * DUR["Add"] + 100.0 + AICPU
    assert cmp.totals["base_us"] == pytest.approx(base, abs=1e-3)
    assert cmp.totals["new_us"] == pytest.approx(new, abs=1e-3)
    assert cmp.totals["speedup"] == pytest.approx(base / new, rel=1e-5)
    # the printed total reads in the table's direction (new / base time), stated in words
    assert cmp.totals["ratio"] == pytest.approx(new / base, rel=1e-5)
    expected = f"compute time new/base {new / base:.3f} (new is {'faster' if new < base else 'slower'}"
    assert expected in C.ratio_text(cmp.totals)
    geo = np.exp(np.mean(np.log([1 / 0.8, 1 / 1.25, 1 / 2.0, 1.0])))
    assert cmp.totals["geomean_speedup"] == pytest.approx(geo, rel=1e-5)
    assert (cmp.totals["keys_both"], cmp.totals["keys_base_only"], cmp.totals["keys_new_only"]) == (4, 1, 1)


def test_dataframes_and_name_key(runs):
    kb, kn = (R.read_kernel_details(r) for r in runs)
    cmp = C.compare(kb, kn, by="name")
    assert "name" in cmp.table and cmp.table.set_index("name").loc["aclnnMatMulV3_MatMulV3", "ratio"] == \
        pytest.approx(0.8, abs=1e-5)
    same = C.compare(kb, kb)
    assert same.totals["speedup"] == pytest.approx(1.0) and (same.table["ratio"] == 1.0).all()


def test_outputs(runs, tmp_path):
    files = C.compare(*runs).write(tmp_path)
    assert files["png"].read_bytes()[:4] == b"\x89PNG"
    md = files["markdown"].read_text()
    assert "| MatMulV3 | AI_CORE |" in md and "base only" in md and "new only" in md
    js = json.loads(files["json"].read_text())
    assert js["totals"]["keys_both"] == 4


def test_bad_inputs(runs):
    with pytest.raises(TypeError, match="base"):
        C.compare(1, runs[1])
    with pytest.raises(ValueError, match="by"):
        C.compare(*runs, by="bogus")


def test_summary_without_common_keys(runs):
    """Two runs with no kernel in common (two providers' kernels): the summary says so instead of
    printing a geometric mean of nothing (nan); otherwise it counts the keys it averaged."""
    kb, kn = (R.read_kernel_details(r) for r in runs)
    kn = kn.assign(type="other_" + kn["type"].astype(str))
    cmp = C.compare(kb, kn)
    assert cmp.totals["keys_both"] == 0 and cmp.totals["keys_geomean"] == 0
    text = C.geomean_text(cmp.totals)
    assert "no common kernel key" in text and "nan" not in text
    assert C.geomean_text(C.compare(*runs).totals) == "geometric mean of new/base over 4 common key(s): " + \
        f"{1 / C.compare(*runs).totals['geomean_speedup']:.3f}"


def test_zero_time_and_empty_runs(runs, tmp_path):
    """A run whose kernels all last 0 us: the summary says which run has no device time instead of
    'nanx', the common keys are counted but not averaged, and compare.json stays strict JSON
    (NaN written as null). A run with no kernel rows is refused."""
    kb, kn = (R.read_kernel_details(r) for r in runs)
    zero = kn.assign(duration_us=0.0)
    cmp = C.compare(kb, zero)
    assert C.ratio_text(cmp.totals) == "compute time new/base undefined (new with no compute kernel time)"
    text = C.geomean_text(cmp.totals)
    assert "none with time on both sides" in text and "nan" not in text
    assert "nan" not in cmp.to_markdown().lower()

    def strict(token):
        raise ValueError(f"non-standard JSON token {token}")

    files = cmp.write(tmp_path)  # the plot too (no 'nan' ratio or speedup drawn)
    assert files["png"].exists()
    assert json.loads(files["json"].read_text(), parse_constant=strict)["totals"]["speedup"] is None
    with pytest.raises(ValueError, match="new run .* has no kernel rows"):
        C.compare(kb, kn.iloc[:0])
