"""GPU tier of the benchmark suite (run on a CUDA GPU such as the H200, bf16, full size)."""
import pytest

from fla_ascend.bench import cases as C
from fla_ascend.bench import suite

pytestmark = pytest.mark.gpu


def test_default_shape_full_size_gated_and_timed():
    art = suite.run_suite(ops=["chunk_gated_delta_rule"], shapes="qwen3next", providers=["fla_ascend", "torch_ref"],
                          quick=True, progress=False)
    meta = art["meta"]
    assert meta["device"] in ("cuda", "npu") and meta["dtype"] == "bfloat16"
    assert meta["copy_bandwidth_gbps"] > 100 and meta["matmul_tflops"] > 10
    ours = next(r for r in art["results"] if r["provider"] == "fla_ascend")
    assert ours["shape"] == "B1-T4096-H16-HV32-K128-V128" and ours["scaled_from"] is None
    assert ours["correct"] is True, ours
    assert ours["ms"] > 0 and ours["peak_mem_mb"] > 0 and ours["gbps"] < 1.2 * meta["copy_bandwidth_gbps"]
    ref = next(r for r in art["results"] if r["provider"] == "torch_ref")
    assert ref["skipped"] and ref["ms"] is None


# flash-linear-attention autotunes on first use: 150-175 s per new shape key on the H200, more
# beside other workers: above the tier's --timeout 200 (a worker died under it on 2026-11-29; only the
# fla tests run that long)
@pytest.mark.timeout(900)
@pytest.mark.skipif(not C.fla_available(), reason="flash-linear-attention not importable")
def test_side_by_side_with_fla_fwd_and_fwdbwd():
    art = suite.run_suite(ops=["chunk_gated_delta_rule"], shapes="qwen3next", modes=["fwd", "fwdbwd"],
                          providers=["fla_ascend", "fla"], quick=True, progress=False, measure_peaks=False)
    fla = {r["mode"]: r for r in art["results"] if r["provider"] == "fla"}
    assert fla["fwd"]["correct"] is True, fla["fwd"]
    assert fla["fwdbwd"]["correct"] is True, fla["fwdbwd"]  # guard bypass recorded when on Hopper
    ours = {r["mode"]: r for r in art["results"] if r["provider"] == "fla_ascend"}
    if ours["fwd"]["ms"]:
        assert ours["fwd"]["speedup"]["fla"] == pytest.approx(fla["fwd"]["ms"] / ours["fwd"]["ms"])
