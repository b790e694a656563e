"""The calibration against public hardware timings and the pieces under it that need no compiler: the
plan walk reading sequence bounds from a varlen launch's integer tensors, the framework-op counter,
the refit of the fitted constants, the calibration table, the data of every point, and (when
vllm-ascend's wheel and the compiler are there) one vllm-ascend stage captured and estimated."""
import importlib.metadata
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fla_ascend.compiler import planeval
from fla_ascend.estimate import calibration as C
from fla_ascend.estimate import model as M

VARLEN = (Path(__file__).parent / "varlen_module.mlir").read_text()
"""A compiled module whose loop runs from ``cu_seqlens[b]`` to ``cu_seqlens[b + 1]`` (block ``b``)."""


def test_varlen_bounds_resolve_from_the_launch_tensors():
    """A loop from ``cu_seqlens[b]`` to ``cu_seqlens[b + 1]`` is counted once and named unresolved
    without the tensor's contents, and runs its real trip count per block with them."""
    mod = planeval.parse(VARLEN)
    fn = mod.device_functions()[0]
    blind = planeval.evaluate(mod, fn, [None, None], (2,), 1)
    assert blind.vector_instrs == 1 and blind.unresolved
    cu = [0, 5, 12]
    for block, n in ((0, 5), (1, 7)):
        c = planeval.evaluate(mod, fn, [None, None], (2,), block, memory={0: cu})
        assert c.vector_instrs == n and not c.unresolved
        assert c.scalar_gm == 2 and c.mte2_bytes == 16


def test_host_work_counts_ops_bytes_syncs_not_views():
    torch = pytest.importorskip("torch")
    w = M.HostWork()
    x = torch.zeros(4, 8)
    with M.record_host(w):
        y = x.transpose(0, 1).contiguous()  # a view, then one copy
        _ = y[1:]  # a view
        _ = torch.empty(16)  # an allocation
        _ = (x.sum(0) > 0).tolist()  # two ops and a host read
    assert w.ops == 3 and w.syncs == 1 and w.allocs >= 1
    assert w.bytes >= 2 * 4 * 8 * 4
    assert w.by_op.get("tolist") == 1 and "transpose" not in w.by_op


def test_host_time_adds_named_costs():
    from fla_ascend.tiling.chips import get_chip

    chip = get_chip("Ascend910B2")
    a = M.ASSUMPTIONS
    t = M.host_us({"ops": 2, "bytes": 0.0, "syncs": 1}, 3, chip)
    assert t == pytest.approx(1e6 * (2 * a["TORCH_OP_S"][0] + a["HOST_SYNC_S"][0] + 3 * a["LAUNCH_HOST_S"][0]))
    assert M.host_us({}, 0, chip) == 0.0


def test_every_point_is_sourced_and_fits_known_constants():
    assert len(C.CALIBRATION) >= 15
    names = [m.name for m in C.CALIBRATION]
    assert len(set(names)) == len(names)
    for m in C.CALIBRATION:
        assert m.source.startswith("https://github.com/"), m.name
        assert m.chip.startswith("Ascend910") and m.scope in ("kernel", "op") and m.dtype and m.us > 0
        assert m.side in ("fla", "vllm-ascend") and m.date
        assert all(k in M.ASSUMPTIONS for k in m.fits), m.fits
    assert sum(not m.fits for m in C.CALIBRATION) >= 5  # held-out checks
    for k in C.DEVICE_CONSTANTS + C.HOST_CONSTANTS + ("HBM_EFFICIENCY", "VECTOR_EFFICIENCY"):
        assert any(k in m.fits for m in C.CALIBRATION), k


def _row(measured, syncs, rounds, resource, scope="kernel", host=None, fits=C.DEVICE_CONSTANTS, n=1):
    launches = [{"kernel": "k", "direction": "fwd", "core_type": "MIX", "time_us": 0.0, "bound": "sync",
                 "terms_us": {"hbm": resource, "dma": 0.0, "cube": 0.0, "vector": 0.0, "scalar": 0.0},
                 "syncs": syncs, "rounds": rounds} for _ in range(n)]
    return {"name": "x", "scope": scope, "fits": list(fits), "measured_us": measured, "estimated_us": 1.0,
            "launches": launches, "host": host or {}, "vector_busy": None}


def test_refit_recovers_the_constants_that_made_the_times():
    s, r, ln, hs, lh = 1.1, 4.0, 12.0, 400.0, 60.0
    rows = [_row(res + k * s + (rd - 1) * r + ln, k, rd, res)
            for res, k, rd in ((100, 500, 1), (300, 2000, 10), (50, 60, 22), (10, 0, 1), (2000, 9000, 43))]
    ops = M.ASSUMPTIONS["TORCH_OP_S"][0] * 1e6
    for syncs, launches, res in ((1, 1, 20.0), (2, 2, 100.0), (0, 3, 500.0)):
        host = {"ops": 5, "bytes": 0.0, "syncs": syncs}
        kern = launches * (res + ln)
        rows.append(_row(kern + 5 * ops + syncs * hs + launches * lh, 0, 1, res, "op", host, C.HOST_CONSTANTS,
                         launches))
    got = C.fit_assumptions(rows)
    for k, want in (("SYNC_S", s), ("ROUND_S", r), ("LAUNCH_S", ln), ("HOST_SYNC_S", hs), ("LAUNCH_HOST_S", lh)):
        assert got[k] * 1e6 == pytest.approx(want, rel=1e-3), k
    assert got["HBM_EFFICIENCY"] == M.ASSUMPTIONS["HBM_EFFICIENCY"][0]  # no row fits it here


def test_refit_needs_enough_rows():
    with pytest.raises(ValueError, match="cannot fit"):
        C.fit_assumptions([_row(100.0, 10, 1, 10.0)])


def test_calibration_table_lists_every_row_and_the_band():
    from fla_ascend.estimate.cli import calibration_markdown

    rows = [dict(_row(100.0, 1, 1, 1.0), name="a", source="https://github.com/huawei-csl/megagdn-pto/x.json",
                 chip="Ascend910B2", dtype="bf16", bounds={"sync": 90.0}, ratio=0.9, estimated_us=90.0,
                 kernel_us=90.0, host_us=None, skipped="", failed=[]),
            dict(_row(50.0, 1, 1, 1.0, "op", fits=()), name="b", source="https://github.com/fla-org/x/cases.md",
                 chip="Ascend910B2", dtype="fp16", bounds={}, ratio=None, estimated_us=None, kernel_us=None,
                 host_us=None, skipped="vllm-ascend 0.18.0rc1 is not importable", failed=[])]
    text = calibration_markdown(rows, "Ascend910B2")
    assert "| a | [MegaGDN x.json]" in text and "not run: vllm-ascend" in text and "held out" in text
    assert "- kernel: estimate / measured 0.90 to 0.90 (1 points)" in text
    assert C.error_band(rows) == {"kernel": (0.9, 0.9, 1)}


def test_calibrate_reports_a_missing_project_per_row(monkeypatch):
    monkeypatch.setattr(C, "_unavailable", lambda side: f"{side} absent")
    rows = C.calibrate("Ascend910B2", points=C.CALIBRATION[:2] + C.CALIBRATION[-1:])
    assert [r["skipped"] for r in rows] == ["fla absent", "fla absent", "vllm-ascend absent"]
    assert all(r["ratio"] is None for r in rows)


def _has_compiler() -> bool:
    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        return False
    from fla_ascend.compiler.bishengir import compiler_available

    return compiler_available("Ascend910B2")


@pytest.mark.slow
def test_a_vllm_ascend_stage_is_captured_and_resolves(tmp_path):
    """vllm-ascend 0.18.0rc1's chunk_h at a small varlen shape (needs its unpacked wheel on PYTHONPATH,
    triton-ascend and bishengir-compile): one launch, every loop bound resolved from cu_seqlens, and
    its Cube MACs those of the recurrence (4 dots of 64 x 128 x 64 per chunk and value head)."""
    from fla_ascend.estimate import vllm_ascend as va

    if va.available() or not _has_compiler():
        pytest.skip(va.available() or "needs triton-ascend and bishengir-compile")
    from fla_ascend.check.cli import worker_env

    script = tmp_path / "stage.py"
    script.write_text(
        "import json, sys\n"
        "from fla_ascend.estimate import vllm_ascend as va\n"
        "from fla_ascend.estimate.model import HostWork, estimate_launch\n"
        "from fla_ascend.tiling.chips import get_chip\n"
        "chip = get_chip('Ascend910B2')\n"
        "hw = HostWork()\n"
        "ls = va.capture_stage('chunk_h', va.stage_shape(2, 256, 4, 4, 128, 64), chip, hw)\n"
        "print(json.dumps({'host': hw.to_dict(), 'launches': [estimate_launch(la, chip).to_dict() for _, la in ls]},"
        " default=str))\n")
    proc = subprocess.run([sys.executable, str(script)], env=worker_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    (la,) = out["launches"]
    assert la["ok"] and not la["unresolved"], la["unresolved"]
    assert la["total"]["macs"]["bf16"] == 2 * 4 * (256 // 64) * 4 * 64 * 128 * 64
    assert out["host"]["ops"] == 1  # the gate's transpose-and-copy
    assert math.isfinite(la["time_us"]) and la["bound"] == "sync"
