"""benchmarks/results/results.csv (the recorded measurements) and benchmarks/plot_results.py, which
draws the documentation's figures from it."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("plot_results", ROOT / "benchmarks" / "plot_results.py")
plot_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_results)

COLUMNS = ["date", "run", "device", "software", "timing", "command", "code", "op", "kernel", "shape", "mode",
           "provider", "variant", "dtype", "time_ms", "ratio", "ratio_vs", "correct", "max_rel_rmse", "gbps", "tflops",
           "copy_gbps", "matmul_tflops", "tags", "notes"]


@pytest.fixture(scope="module")
def rows():
    return plot_results.read_table()


def test_table_columns_and_values(rows):
    assert list(rows[0]) == COLUMNS
    for r in rows:
        assert float(r["time_ms"]) > 0 and r["date"][:4] == "2026" and r["run"] and r["command"], r
        assert r["mode"] in ("fwd", "fwdbwd", "stage", "compile"), r
        if r["ratio"]:
            assert r["ratio_vs"] and float(r["ratio"]) > 0, r


def test_ratio_is_fla_time_over_ours(rows):
    """README: ratio = flash-linear-attention's time / ours, within one run."""
    r = plot_results.select(rows, tag="gdn_table", shape="B1-T32768-H16-HV32-K128-V128", mode="fwdbwd")
    ours = next(x for x in r if x["provider"] == "fla_ascend")
    fla = next(x for x in r if x["provider"] == "fla")
    assert float(ours["ratio"]) == pytest.approx(float(fla["time_ms"]) / float(ours["time_ms"]), rel=1e-3)


def test_select():
    rows = [{"run": "a", "tags": "x;y", "device": "NVIDIA H200", "kernel": "", "op": "l2norm"},
            {"run": "b", "tags": "", "device": "Ascend910B2 (estimate)", "kernel": "k", "op": "l2norm"}]
    assert plot_results.select(rows, tag="y") == rows[:1]
    assert plot_results.select(rows, device="ascend") == rows[1:]
    assert plot_results.select(rows, kernel="") == rows[:1]
    assert plot_results.select(rows, run="a,b", op="l2norm") == rows


def test_the_documented_figures_are_drawn(rows, tmp_path):
    """The README's H200 figure and docs/estimate.md's stacked bars, from the table."""
    assert len(plot_results.select(rows, tag="gdn_table")) == 40
    assert plot_results.main(["--tag", "gdn_table", "--out", str(tmp_path / "gdn.png")]) == 0
    assert plot_results.main(["--kind", "estimate", "--run", "2026-12-01 NPU estimate", "--op",
                              "chunk_gated_delta_rule", "--out", str(tmp_path / "est.png")]) == 0
    assert (tmp_path / "gdn.png").stat().st_size > 10_000 and (tmp_path / "est.png").stat().st_size > 10_000


def test_no_rows_is_an_error(capsys):
    assert plot_results.main(["--run", "no such run", "--out", "x.png"]) == 2
    assert "no rows match" in capsys.readouterr().err
