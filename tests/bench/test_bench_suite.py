"""The suite end to end on tiny shapes under the interpreter: artifact schema, gate, errors."""
import json
import math

import pytest
import torch

from fla_ascend.bench import cases as C
from fla_ascend.bench import report, suite

TINY = "B=1,T=20,H=1,HV=2,K=16,V=16"
OP = "chunk_gated_delta_rule"

META_KEYS = {
    "device": str, "device_name": str, "triton_flavour": str, "triton_version": str, "torch_version": str,
    "fla_version": (str, type(None)), "timing_method": str, "warmup_ms": (int, float), "rep_ms": (int, float),
    "date": str, "command": list, "copy_bandwidth_gbps": (float, type(None)), "matmul_tflops": (float, type(None)),
}
ROW_KEYS = {
    "op": str, "shape": str, "shape_args": dict, "mode": str, "provider": str, "dtype": str,
    "correct": (bool, type(None)), "rel_rmse": dict, "tolerance": (float, type(None)),
    "ms": (float, type(None)), "peak_mem_mb": (float, type(None)), "tokens_per_s": (float, type(None)),
    "gbps": (float, type(None)), "tflops": (float, type(None)), "error": (str, type(None)),
}


def check_schema(art):
    assert art["schema"] == "fla-ascend-bench/1"
    for k, t in META_KEYS.items():
        assert isinstance(art["meta"][k], t), (k, art["meta"][k])
    for r in art["results"]:
        for k, t in ROW_KEYS.items():
            assert isinstance(r[k], t), (k, r[k])
        assert r["mode"] in ("fwd", "fwdbwd")
        assert r["shape"] == C.shape_key(r["shape_args"])
        if r["ms"] is not None:  # timed only after a passing gate
            assert r["correct"] is True and r["ms"] > 0
            assert r["gbps"] > 0 and r["tflops"] > 0 and r["tokens_per_s"] > 0
    keys = [(r["op"], r["shape"], r["mode"], r["provider"]) for r in art["results"]]
    assert len(keys) == len(set(keys))


@pytest.fixture(scope="module")
def artifact():
    return suite.run_suite(
        ops=[OP, "fused_recurrent_gated_delta_rule"], shapes=TINY, modes=["fwd"],
        providers=["fla_ascend", "torch_ref"], dtype="float32", quick=True, progress=False,
    )


def test_end_to_end_schema_and_gate(artifact, tmp_path):
    check_schema(artifact)
    rows = artifact["results"]
    assert {(r["op"], r["provider"]) for r in rows} == {
        (OP, "fla_ascend"), (OP, "torch_ref"),
        ("fused_recurrent_gated_delta_rule", "fla_ascend"), ("fused_recurrent_gated_delta_rule", "torch_ref"),
    }
    for r in rows:
        assert r["correct"] is True, r
        assert set(r["rel_rmse"]) == {"o", "final_state"}
        assert max(r["rel_rmse"].values()) < 1e-4
        assert r["shape"] == "B1-T20-H1-HV2-K16-V16" and r["dtype"] == "float32"
        other = "torch_ref" if r["provider"] == "fla_ascend" else "fla_ascend"
        assert math.isclose(r["speedup"][other], next(
            o["ms"] for o in rows if o["op"] == r["op"] and o["provider"] == other) / r["ms"])
    # JSON round trip, Markdown and PNG
    path = suite.write_json(artifact, tmp_path / "a" / "bench.json")
    back = suite.read_json(path)
    check_schema(back)
    assert back["results"] == json.loads(json.dumps(artifact["results"]))
    md = report.to_markdown(artifact)
    assert md.count("\n| chunk_gated_delta_rule | B1-T20-H1-HV2-K16-V16 | fwd |") == 2
    png = report.write_plot(artifact, tmp_path / "plot.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_read_json_rejects_other_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "something-else"}))
    with pytest.raises(ValueError, match="not a fla-ascend-bench/1 artifact"):
        suite.read_json(p)


def test_wrong_provider_fails_gate_and_is_not_timed(monkeypatch):
    calls = []

    def wrong(**kw):  # right shapes, wrong numbers
        calls.append(1)
        o, ht = C.OPS["chunk_gated_delta_rule"].reference(**kw).values()
        return {"o": o * 1.05, "final_state": ht}

    monkeypatch.setitem(C.OPS[OP].providers, "wrong", wrong)
    art = suite.run_suite(ops=[OP], shapes=TINY, providers=["wrong", "torch_ref"], dtype="float32",
                          quick=True, progress=False)
    check_schema(art)
    bad = next(r for r in art["results"] if r["provider"] == "wrong")
    good = next(r for r in art["results"] if r["provider"] == "torch_ref")
    assert bad["correct"] is False and bad["ms"] is None and bad["gbps"] is None
    assert bad["rel_rmse"]["o"] == pytest.approx(0.05, rel=1e-3) and bad["rel_rmse"]["final_state"] < 1e-6
    assert len(calls) == 1  # gate only
    assert good["correct"] is True and good["ms"] is not None
    assert report.failed(art) == [bad]
    assert "FAIL 5.0e-02" in report.to_markdown(art)


def test_backward_error_is_reported_per_case(monkeypatch):
    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, dy):
            raise NotImplementedError("backward is a separate issue")

    def fwd_only(**kw):
        out = C.OPS["chunk_gated_delta_rule"].reference(**kw)
        return {"o": NoBackward.apply(out["o"]), "final_state": out["final_state"]}

    monkeypatch.setitem(C.OPS[OP].providers, "fwdonly", fwd_only)
    art = suite.run_suite(ops=[OP], shapes=TINY, modes=["fwd", "fwdbwd"], providers=["fwdonly", "torch_ref"],
                          dtype="float32", quick=True, progress=False)
    check_schema(art)
    by = {(r["mode"], r["provider"]): r for r in art["results"]}
    assert by["fwd", "fwdonly"]["correct"] is True and by["fwd", "fwdonly"]["ms"] is not None
    err = by["fwdbwd", "fwdonly"]
    assert err["correct"] is False and err["ms"] is None
    assert err["error"] == "NotImplementedError: backward is a separate issue"
    ok = by["fwdbwd", "torch_ref"]
    assert ok["correct"] is True and ok["ms"] is not None
    assert {"dq", "dk", "dv", "dg", "dbeta", "o", "final_state"} <= set(ok["rel_rmse"])


def test_torch_ref_skipped_above_limit_with_reason(monkeypatch):
    monkeypatch.setattr(C.OPS[OP], "torch_ref_limit", C._torch_ref_limit(10))
    art = suite.run_suite(ops=[OP], shapes=TINY, providers=["torch_ref"], dtype="float32",
                          quick=True, progress=False)
    [r] = art["results"]
    assert r["skipped"] and "B*T = 10" in r["skipped"] and "here 20" in r["skipped"]
    assert r["correct"] is None and r["ms"] is None and report.failed(art) == []


def test_selection_errors():
    with pytest.raises(ValueError, match="ops: unknown 'nope'"):
        suite.run_suite(ops=["nope"], progress=False)
    with pytest.raises(ValueError, match="modes: unknown 'bwd'"):
        suite.run_suite(ops=[OP], modes=["bwd"], progress=False)
    with pytest.raises(ValueError, match="providers: unknown 'triton'"):
        suite.run_suite(ops=[OP], providers=["triton"], progress=False)
    with pytest.raises(ValueError, match="dtype must be one of"):
        suite.run_suite(ops=[OP], dtype="int8", progress=False)


def test_plan_skips_inapplicable_shapes_and_modes():
    plan, notes = suite.plan_cases(["chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"],
                                   "conv-b4-t4096;" + TINY, ["fwd", "fwdbwd"])
    assert [(p[0], p[4]) for p in plan] == [
        ("chunk_gated_delta_rule", "fwd"), ("chunk_gated_delta_rule", "fwdbwd"),
        ("fused_recurrent_gated_delta_rule", "fwd"),
    ]
    assert any("lacks H" in n for n in notes)
    assert any("fused_recurrent_gated_delta_rule has no fwdbwd mode" in n for n in notes)


def test_op_call_runs_the_suites_call():
    """op_call (behind fla-ascend profile op): a free-form shape overlays the op's default shape;
    fwdbwd fills every gradient; a named shape of another op is refused with the reason."""
    call, shape = suite.op_call("chunk_gated_delta_rule", "T=20,H=1,HV=2,K=16,V=16", "fwdbwd", dtype="float32")
    assert shape == {"B": 1, "T": 20, "H": 1, "HV": 2, "K": 16, "V": 16}
    out, grads = call()
    assert set(grads) == {"dq", "dk", "dv", "dg", "dbeta"}
    assert all(g is not None and g.isfinite().all() for g in grads.values())
    call, shape = suite.op_call("l2norm", "B=1,T=8,H=1,K=16")
    assert call()["y"].shape == (1, 8, 1, 16)
    with pytest.raises(ValueError, match="lacks D, W"):
        suite.resolve_case("causal_conv1d", "qwen3next")
    with pytest.raises(ValueError, match="expected one shape"):
        suite.resolve_case("chunk_gated_delta_rule", "gdn-anchors")
    with pytest.raises(ValueError, match="mode"):
        suite.resolve_case("fused_recurrent_gated_delta_rule", None, "fwdbwd")


@pytest.mark.parametrize("op, variant, module, attr", [
    ("causal_conv1d", "16x32w2", "fla_ascend.ops.causal_conv1d.conv", "CUDA_TILES"),
    ("causal_conv1d", "32x32w4/16x32w2", "fla_ascend.ops.causal_conv1d.conv", "CUDA_TILES"),
    ("fused_recurrent_gated_delta_rule", "16w2", "fla_ascend.ops.gated_delta_rule.fused_recurrent", "CUDA_TILES"),
    ("rms_norm_gated", "4w2", "fla_ascend.ops.norm.rms_norm_gated", "CUDA_TILES"),
])
def test_tile_ab_script(tmp_path, op, variant, module, attr):
    """benchmarks/tune_tiles.py: each variant goes through the suite's gate under an overriding
    target; the shipped table and the default target stay; a malformed variant is refused."""
    import importlib
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tune_tiles.py"
    spec = importlib.util.spec_from_file_location("tune_tiles", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    target = importlib.import_module(module)
    before = getattr(target, attr)
    from fla_ascend import backend

    default = backend.current()
    assert mod.main(["--op", op, "--quick", "--variants", variant, "--out", str(tmp_path)]) == 0
    assert getattr(target, attr) is before and backend.current() is default
    art = json.loads((tmp_path / f"{op}_tiles.json").read_text())[variant]
    assert art["results"] and all(r["correct"] for r in art["results"])
    assert mod.main(["--op", op, "--variants", "3x4w4", "--out", str(tmp_path)]) == 2
    assert mod.main(["--op", op, "--quick", "--variants", variant, "--modes", "bwd", "--out", str(tmp_path)]) == 2
    wrong_shape = "qwen3next" if op == "causal_conv1d" else "conv-b4-t4096"  # a shape the op cannot take
    argv = ["--op", op, "--quick", "--variants", variant, "--shapes", wrong_shape, "--out", str(tmp_path)]
    assert mod.main(argv) == 2
    assert mod.main(["--op", op, "--variants", ",", "--out", str(tmp_path)]) == 2


def test_launch_plan_ab_script(tmp_path):
    """benchmarks/ab_launch_plans.py: each plan sets the launch it names and restores the shipped
    one (checked with a faked CUDA build, where the plans differ), and a quick run gates every row."""
    import importlib.util
    from pathlib import Path

    from fla_ascend import backend
    from fla_ascend.tiling import grid

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ab_launch_plans.py"
    spec = importlib.util.spec_from_file_location("ab_launch_plans", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    before = backend.current()
    gpu = before.replace(device_type="cuda", interpret=False, cube_cores=132, vector_cores=132, tensor_device="cpu")
    with backend.use(gpu):
        with mod.plan("capped"):
            assert grid.task_plan(grid.MAX_GRID + 1, "vector").task_loop
            assert mod.conv._grid3d(4, 8, 1) is None
        with mod.plan("grid-x"):
            assert not grid.task_plan(grid.MAX_GRID + 1, "vector").task_loop
            assert mod.conv._grid3d(4, 8, 1) is None
        with mod.plan("grid3d"):
            assert mod.conv._grid3d(4, 8, 1) == (4, 8, 1)
        assert backend.current() is gpu
    assert backend.current() is before and grid.cuda_max_grid_x() == grid.CUDA_MAX_GRID_X
    assert mod.main(["--quick", "--rounds", "1", "--modes", "fwd", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "launch_plans.json").read_text())
    assert {(r["op"], r["plan"]) for r in rows} == {(op, p) for op, _, plans in mod.JOBS for p in plans}
    assert all(r["correct"] for r in rows if r["provider"] == "fla_ascend")


def test_wy_slab_ab_script(capsys, monkeypatch):
    """benchmarks/ab_wy_slabs.py: under the interpreter every slab pair reproduces the default
    launch's w and u (the faults it looks for are Hopper's, not the algorithm's)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ab_wy_slabs.py"
    spec = importlib.util.spec_from_file_location("ab_wy_slabs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "SHAPES", [(70, 1, 1, 64, 32)])
    assert mod.main() == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("T70 H1 HV1 K64 V32:") and "l64x32:ok" in line and "ERR" not in line, line
    assert "s64x32" not in line  # store mode with BV < BK is never launched (it faults on Hopper)
    # a wrong result (here: u negated at BV 32) is WRONG and the exit status 1
    run = mod.run
    monkeypatch.setattr(mod, "run", lambda *a: (lambda w, u: (w, -u if a[7] == 32 else u))(*run(*a)))
    assert mod.main() == 1
    assert "WRONG" in capsys.readouterr().out


def test_gva_sum_ab_script(tmp_path):
    """benchmarks/ab_gva_sum.py: both implementations agree bitwise and pass the op's gate, and
    the op is left with the shipped stage."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ab_gva_sum.py"
    spec = importlib.util.spec_from_file_location("ab_gva_sum", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick", "--rounds", "1", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ab_gva_sum.json").read_text())
    assert {"torch", "stage 4096"} <= set(res["stage_ms"])
    assert {r["impl"] for r in res["op_ms"]} == {"torch", "stage"} and all(r["correct"] for r in res["op_ms"])
    assert mod.chunk.gva_group_sum is mod.gva.gva_group_sum
