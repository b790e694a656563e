"""``fla-ascend estimate`` end to end on the small case of every op: each launch is captured, lowered,
compiled with bishengir-compile (cached) and walked; the counts match what the kernels must move.

Needs triton-ascend's front end and ascendnpu-ir's bishengir-compile: skipped elsewhere. One worker
run for all ops (about 15 s of CPU on a cold compile cache)."""
import importlib.metadata
import json

import pytest

try:
    importlib.metadata.version("triton-ascend")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("the estimate needs triton-ascend's compiler front end (not upstream Triton)", allow_module_level=True)

from fla_ascend.check.cli import run_worker  # noqa: E402
from fla_ascend.compiler.bishengir import compiler_available  # noqa: E402
from fla_ascend.estimate.cli import WORKER_MODULE, side_by_side, stage_of  # noqa: E402
from fla_ascend.estimate.model import anchor_shapes, estimated_ops  # noqa: E402
from fla_ascend.ops import catalog  # noqa: E402

if not compiler_available("Ascend910B2"):
    pytest.skip("bishengir-compile (PyPI ascendnpu-ir) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("estimate")
    out, md, png = d / "r.json", d / "r.md", d / "r.png"
    proc = run_worker(["all", "--shape", "small", "--json", str(out), "--markdown", str(md), "--png", str(png),
                       "--quiet"], module=WORKER_MODULE, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    assert md.read_text().count("| total |") == len(estimated_ops()) and png.stat().st_size > 1000
    return json.loads(out.read_text())


def _case(report, op):
    (case,) = [c for c in report["cases"] if c["op"] == op]
    return case


@pytest.mark.parametrize("op", estimated_ops())
def test_every_launch_compiles_and_has_a_bound(report, op):
    est = _case(report, op)["ours"]
    assert not est["error"] and est["launches"]
    for la in est["launches"]:
        assert la["ok"], f"{la['kernel']}: {la['error']}"
        assert la["time_us"] > 0 and la["bound"] in ("hbm", "dma", "cube", "vector", "scalar", "sync")
        assert not la["unresolved"], la["unresolved"]
    dirs = {la["direction"] for la in est["launches"]}
    assert dirs == ({"fwd", "bwd"} if "fwdbwd" in catalog.get(op).modes else {"fwd"})  # the decode ops: fwd


def test_l2norm_forward_moves_its_input_and_output(report):
    s = dict(anchor_shapes("l2norm", small=True))["small"]
    (fwd,) = [la for la in _case(report, "l2norm")["ours"]["launches"] if la["direction"] == "fwd"]
    rows = s["B"] * s["T"] * s["H"]
    assert fwd["total"]["mte2_bytes"] == rows * s["K"] * 2  # x, bf16
    assert fwd["total"]["mte3_bytes"] == rows * s["K"] * 2 + rows * 4  # y, bf16, and rstd, fp32


def test_recurrent_step_moves_the_state_twice(report):
    s = dict(anchor_shapes("fused_recurrent_gated_delta_rule", small=True))["small"]
    (la,) = _case(report, "fused_recurrent_gated_delta_rule")["ours"]["launches"]
    state = s["B"] * s["HV"] * s["K"] * s["V"] * 4
    assert state <= la["total"]["mte2_bytes"] <= 1.1 * state and state <= la["total"]["mte3_bytes"] <= 1.1 * state
    assert la["bound"] == "hbm" or la["time_us"] < 10


def test_chunk_uses_the_cube(report):
    launches = _case(report, "chunk_gated_delta_rule")["ours"]["launches"]
    mix = [la for la in launches if la["core_type"] == "MIX"]
    assert mix and all(la["total"]["macs"].get("bf16", 0) + la["total"]["macs"].get("f32", 0) > 0 for la in mix)
    assert all(la["per_core_max"]["syncs"] > 0 for la in mix)


def test_side_by_side_rows():
    ours = {"total_us": 30.0, "fwd_us": 10.0, "bwd_us": 20.0,
            "launches": [{"direction": "fwd", "kernel": "chunk_fwd_h_kernel", "ok": True, "time_us": 10.0,
                          "bound": "hbm", "per_core_max": {"syncs": 4}},
                         {"direction": "bwd", "kernel": "chunk_bwd_dh_kernel", "ok": True, "time_us": 20.0,
                          "bound": "cube", "per_core_max": {"syncs": 2}}]}
    theirs = {"total_us": 15.0, "fwd_us": 15.0, "bwd_us": 0.0,
              "launches": [{"direction": "fwd", "kernel": "chunk_gated_delta_rule_h_fwd_kernel", "ok": True,
                            "time_us": 15.0, "bound": "dma", "per_core_max": {"syncs": 1}},
                           {"direction": "bwd", "kernel": "chunk_dqkwg_bwd_kernel_full", "ok": False,
                            "error": "ub overflow"}]}
    rows = {r["stage"]: r for r in side_by_side(ours, theirs)}
    assert rows["fwd: state h"]["ratio"] == pytest.approx(10 / 15)
    assert rows["bwd: dq dk dw dg"]["fla_us"] is None and rows["bwd: dq dk dw dg"]["fla_failed"]
    assert rows["total"]["fla_bound"] == "1 not compiled"
    assert stage_of("merge_16x16_to_64x64_inverse_kernel_npu").startswith("WY fwd")


@pytest.mark.slow
def test_against_flash_linear_attention(tmp_path):
    """flash-linear-attention 0.6.0's NPU l2norm, captured and compiled the same way, moves the same
    bytes as ours at the small shape (needs fla importable: an optional benchmark dependency)."""
    from fla_ascend.estimate.model import fla_available

    if fla_available():
        pytest.skip(fla_available())
    out = tmp_path / "r.json"
    proc = run_worker(["l2norm", "--shape", "small", "--against", "fla", "--json", str(out), "--quiet"],
                      module=WORKER_MODULE, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (case,) = json.loads(out.read_text())["cases"]
    fwd = {side: [la for la in case[side]["launches"] if la["direction"] == "fwd"] for side in ("ours", "fla")}
    assert all(la["ok"] for la in fwd["fla"]) and fwd["fla"]
    assert sum(la["total"]["mte2_bytes"] for la in fwd["fla"]) == fwd["ours"][0]["total"]["mte2_bytes"]
    assert case["rows"][-1]["stage"] == "total" and case["rows"][-1]["ratio"] is not None


def test_usage_errors_exit_2_before_any_work(tmp_path, monkeypatch):
    """A shape the op refuses, a malformed --shape value and an output path in a missing folder
    outside the current directory exit with status 2 and a message, with no table and no traceback."""
    from fla_ascend.cli import main

    monkeypatch.chdir(tmp_path)
    for argv, words in [
        (["l2norm", "--shape", "B=1,T=64,H=2,K=9000", "--quiet"], ["l2norm --shape", "K"]),
        (["l2norm", "--shape", "B=x"], ["--shape B", "'x'"]),
        (["l2norm", "--shape", "small", "--json", str(tmp_path.parent / f"{tmp_path.name}-absent" / "r.json")], []),
    ]:
        proc = run_worker(argv, module=WORKER_MODULE, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 2, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "0.0" not in proc.stdout, proc.stdout
        assert all(w in proc.stderr for w in words), proc.stderr
    assert main(["estimate", "l2norm", "--json", "/nonexistent-dir-for-test/r.json"]) == 2
