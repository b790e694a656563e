"""The published timings of the fastest Ascend code (data) and how the estimate shows them: beside our
estimate of the same part, labelled as published measurements, never summed into the estimates."""
import pytest

from fla_ascend.estimate import published as P
from fla_ascend.estimate.cli import markdown, published_rows


def test_every_entry_is_sourced():
    assert P.PUBLISHED
    for e in P.PUBLISHED:
        assert e.source.startswith("https://github.com/") and e.unit == "us" and e.value > 0
        assert e.scope in ("kernel", "op") and e.chip and e.dtype and e.date and e.role in ("fastest known", "baseline")
        assert set(e.shape) == {"B", "T", "H", "HV", "K", "V"}
    codes = {e.code for e in P.PUBLISHED}
    assert "torch_npu npu_chunk_gated_delta_rule" in codes and "MegaGDN PTO-ISA megakernel" in codes


def test_shapes_for_names_each_measured_shape_once():
    shapes = P.shapes_for("chunk_gated_delta_rule")
    names = [n for n, _ in shapes]
    assert names[0] == "pr12647-t11274" and "megagdn-n16-l8192-hv64" in names and len(set(names)) == len(names)
    assert dict(shapes)["pr12647-t11274"] == dict(B=1, T=11274, H=16, HV=32, K=128, V=128)
    assert P.shapes_for("l2norm") == []


def _rows():
    base = {"ours_bound": "sync", "fla_us": None, "fla_bound": "", "ratio": None}
    return [dict(base, **r) for r in _stage_rows()]


def _stage_rows():
    return [{"stage": "fwd: gate cumsum", "ours_us": 30.0},
            {"stage": "fwd: WY fwd (kkt, inverse, w u)", "ours_us": 300.0},
            {"stage": "fwd: state h", "ours_us": 200.0}, {"stage": "fwd: output o", "ours_us": 100.0},
            {"stage": "total fwd", "ours_us": 630.0}, {"stage": "total", "ours_us": 630.0}]


def test_parts_of_one_of_our_stages_are_compared_as_their_sum():
    sizes = dict(B=16, T=8192, H=16, HV=16, K=128, V=128)
    rows = published_rows("chunk_gated_delta_rule", sizes, _rows())
    by = {r["part"]: r for r in rows}
    assert by["kkt"]["ours_us"] is None and by["kkt"]["ours_stage"].startswith("fwd: WY")
    total = by["kkt + solve_tril + wy_fast"]
    assert total["published_us"] == pytest.approx(by["kkt"]["published_us"] + by["solve_tril"]["published_us"]
                                                  + by["wy_fast"]["published_us"])
    assert total["ours_over_published"] == pytest.approx(300.0 / total["published_us"])
    assert by["chunk_h"]["ours_us"] == 200.0 and by["forward"]["ours_stage"] == "total fwd"
    assert by["forward"]["ours_us"] == 630.0 and by["forward"]["code"] == "MegaGDN PTO-ISA megakernel"


def test_the_report_labels_them_apart_from_the_estimates():
    sizes = dict(B=1, T=11274, H=16, HV=32, K=128, V=128)
    rows = _rows()
    case = {"op": "chunk_gated_delta_rule", "shape": "pr12647-t11274", "command": "c", "rows": rows,
            "ours": {"launches": []}, "fla": None, "published": published_rows("chunk_gated_delta_rule", sizes, rows)}
    text = markdown({"chip": "Ascend910B2", "date": "2026-12-03", "cases": [case]})
    assert "Published measurements at this shape (hardware timings by others, not estimates" in text
    assert "| torch_npu npu_chunk_gated_delta_rule | forward | 4964 | op |" in text
    assert "vllm-ascend Triton chunk_gated_delta_rule (baseline)" in text
    assert "https://github.com/vllm-project/vllm-ascend/pull/12647" in text
    # nothing published at an anchor shape: no section, the report as before
    case2 = dict(case, published=published_rows("chunk_gated_delta_rule", dict(sizes, T=4096), rows))
    assert case2["published"] == []
    assert "Published measurements" not in markdown({"chip": "Ascend910B2", "date": "d", "cases": [case2]})


def test_shape_published_runs_the_measured_shapes():
    pytest.importorskip("torch")
    from fla_ascend.estimate.cli import _parse_shape

    got = _parse_shape("chunk_gated_delta_rule", "published")
    assert [n for n, _ in got] == [n for n, _ in P.shapes_for("chunk_gated_delta_rule")]
    assert got[0][1]["T"] == 11274 and got[0][1]["HV"] == 32


def test_shape_published_without_timings_is_a_usage_error():
    import importlib.metadata

    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the estimate's worker needs triton-ascend")
    from fla_ascend.check.cli import run_worker
    from fla_ascend.estimate.cli import WORKER_MODULE

    proc = run_worker(["l2norm", "--shape", "published", "--quiet"], module=WORKER_MODULE, capture_output=True,
                      text=True, timeout=600)
    assert proc.returncode == 2 and "no published timings for l2norm" in proc.stderr, proc.stderr[-2000:]
