"""The target as a value (``fla_ascend.backend.Target``): ``use()`` nests and restores (also through
exceptions, per thread and per asyncio task), targets and launch tables are read-only, a capture
under an A5 target plans for the A5 while the default target stays, and no module patches the
target's old globals."""
from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
import threading
import timeit
from pathlib import Path

import pytest

from fla_ascend import backend
from fla_ascend.tiling import chips, grid, ub

ROOT = Path(__file__).resolve().parents[1]


def _cpu(**changes) -> backend.Target:
    return backend.Target(device_type="cpu", interpret=True, **changes)


def test_use_nests_and_restores():
    default = backend.current()
    assert default is backend.default_target()
    a, b = _cpu(cube_cores=3, vector_cores=5), _cpu(cube_cores=7, vector_cores=9)
    with backend.use(a) as got:
        assert got is a and backend.current() is a and backend.num_cores("cube") == 3
        with backend.use(b):
            assert backend.current() is b and backend.num_cores("vector") == 9
        assert backend.current() is a
    assert backend.current() is default


def test_use_restores_after_an_exception():
    default = backend.current()
    with pytest.raises(RuntimeError, match="inside"):
        with backend.use(_cpu(cube_cores=2)):
            with backend.use(_cpu(cube_cores=3)):
                raise RuntimeError("inside")
    assert backend.current() is default
    with pytest.raises(TypeError, match="Target"):
        with backend.use("npu"):
            pass


def test_use_is_per_thread():
    """Another thread starts from the default target and its use() does not leak into this one."""
    mine = _cpu(cube_cores=11)
    seen = {}
    entered, release = threading.Event(), threading.Event()

    def other():
        seen["start"] = backend.current()
        with backend.use(_cpu(cube_cores=13)):
            seen["inside"] = backend.num_cores("cube")
            entered.set()
            release.wait(10)

    with backend.use(mine):
        t = threading.Thread(target=other)
        t.start()
        assert entered.wait(10)
        assert backend.current() is mine  # the other thread's use() is active there, not here
        release.set()
        t.join(10)
    assert seen == {"start": backend.default_target(), "inside": 13}


def test_use_is_per_asyncio_task():
    """Each asyncio task has its own target; a task's use() ends with it, the caller's stays."""
    async def worker(n: int, gate: asyncio.Event) -> int:
        with backend.use(_cpu(cube_cores=n)):
            await gate.wait()  # the other task enters its own target meanwhile
            return backend.num_cores("cube")

    async def main():
        gate = asyncio.Event()
        tasks = [asyncio.create_task(worker(n, gate)) for n in (2, 3)]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(*tasks), backend.current()

    outer = _cpu(cube_cores=17)
    with backend.use(outer):
        results, inside_main = asyncio.run(main())
        assert backend.current() is outer
    assert results == [2, 3] and inside_main is outer


def test_target_is_frozen_and_checked():
    t = backend.current()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.device_type = "cuda"
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.overrides = {}
    u = t.replace(overrides={"chunk_stages": {"wy_fwd": {"num_warps": 8, "num_stages": 1, "precision": "tf32"}}})
    with pytest.raises(TypeError):
        u.overrides["chunk_stages"] = {}
    with pytest.raises(TypeError):
        u.overrides["chunk_stages"]["wy_fwd"]["num_warps"] = 2
    assert u.replace() == u and u != t and t.replace(on_cores=print) == t  # the recording hook is not compared
    with pytest.raises(ValueError, match="device_type"):
        backend.Target(device_type="tpu")
    with pytest.raises(ValueError, match="unknown launch tables"):
        t.replace(overrides={"chunk_stage": {}})
    with pytest.raises(ValueError, match="cube_cores"):
        t.replace(cube_cores=0)
    assert backend.Target(device_type="npu").tensor_device == "npu"


def test_launch_tables_are_read_only():
    import importlib

    from fla_ascend.ops.common import gva, tiles

    # the modules (their packages re-export functions of the same names)
    conv, fused_recurrent, l2norm, rms_norm_gated = (importlib.import_module(f"fla_ascend.ops.{m}") for m in (
        "causal_conv1d.conv", "gated_delta_rule.fused_recurrent", "norm.l2norm", "norm.rms_norm_gated"))
    for table in (tiles.CUDA_LAUNCH, conv.CUDA_TILES, fused_recurrent.CUDA_TILES, l2norm.CUDA_TILES,
                  rms_norm_gated.CUDA_TILES, gva.TILES, chips.CHIPS):
        key = next(iter(table))
        with pytest.raises(TypeError):
            table[key] = None
        with pytest.raises(TypeError):
            table["new"] = None
    with pytest.raises(TypeError):
        tiles.CUDA_LAUNCH["wy_fwd"]["num_warps"] = 8
    with pytest.raises(TypeError):
        tiles.CUDA_LAUNCH["fwd_h"]["num_stages"][128] = 1


def test_table_merges_overrides_and_refuses_unknown_entries():
    import importlib

    conv = importlib.import_module("fla_ascend.ops.causal_conv1d.conv")

    assert backend.table("causal_conv1d", conv.CUDA_TILES) is conv.CUDA_TILES
    with backend.use(backend.current().replace(overrides={"causal_conv1d": {"fwd": (16, 32, 2)}})):
        merged = backend.table("causal_conv1d", conv.CUDA_TILES)
        assert merged["fwd"] == (16, 32, 2) and merged["bwd"] == conv.CUDA_TILES["bwd"]
    with backend.use(backend.current().replace(overrides={"causal_conv1d": {"fwdd": (16, 32, 2)}})):
        with pytest.raises(KeyError, match="fwdd"):
            backend.table("causal_conv1d", conv.CUDA_TILES)


def test_capture_target_plans_for_its_chip():
    """The check's capture target (no triton-ascend needed): the chip's core counts, its UB, CPU
    tensors, and every core kind a plan asks for recorded; the default target is back after it."""
    from fla_ascend.compiler.capture import capture_target

    a5 = chips.get_chip("Ascend910_9599")
    kinds: list[str] = []
    default = backend.current()
    with backend.use(capture_target(a5, on_cores=kinds.append)):
        assert grid.task_plan(1000, "vector").n_programs == 64
        assert grid.task_plan(1000, "cube").n_programs == 32
        assert chips.get_chip(None) is a5 and chips.detect_chip() == "Ascend910_9599"
        assert ub.budget(margin=1.0) == a5.ub_bytes
        assert backend.device().type == "cpu" and backend.device_type() == "npu"
        assert backend.launch_options(num_warps=4, multibuffer=False) == {"multibuffer": False}
    assert kinds == ["vector", "cube"]
    assert backend.current() is default
    assert chips.get_chip(None).name == (chips.environment_chip(default.device_type == "npu") or chips.DEFAULT_CHIP)


_CAPTURE = r"""
import json, os, torch
from fla_ascend import backend
from fla_ascend.compiler.capture import capture
from fla_ascend.ops.norm.l2norm import l2norm
from fla_ascend.tiling import chips
out = {}
for name in ("Ascend910B2", "Ascend910_9599"):
    with capture(chips.get_chip(name)) as launches:
        inside = backend.current().chip.name
        l2norm(torch.randn(4096, 128))
    out[name] = dict(inside=inside, grids=[list(la.grid) for la in launches], kinds=[la.kind for la in launches])
out["after"] = dict(chip=getattr(backend.current().chip, "name", None), arch=os.environ.get("TRITON_ASCEND_ARCH"),
                    is_default=backend.current() is backend.default_target())
print(json.dumps(out))
"""


def test_capture_under_an_a5_target_gives_the_a5_plans():
    """A real capture (triton-ascend's compiled kernels, as in the check's worker) under the A5
    target: 64 vector programs (A2: 48), while the default target and the environment outside stay."""
    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("captures JITFunction launches: needs triton-ascend's front end (the check's worker)")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_ASCEND_ARCH")}
    env.update(FLA_ASCEND_DEVICE="npu", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CAPTURE], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["Ascend910_9599"]["inside"] == "Ascend910_9599" and got["Ascend910B2"]["inside"] == "Ascend910B2"
    assert got["Ascend910_9599"]["grids"] == [[64]] and got["Ascend910B2"]["grids"] == [[48]]
    assert got["Ascend910_9599"]["kinds"] == ["vector"]
    assert got["after"] == {"chip": None, "arch": None, "is_default": True}


_FORBIDDEN = [
    (re.compile(r"\bbackend\.\w+\s*=(?!=)"), "assigns to backend.<name>"),
    (re.compile(r"setattr\(\s*(fla_ascend\.)?backend\b"), "sets a backend attribute"),
    (re.compile(r"CUDA_LAUNCH\[[^\]]*\]\s*=(?!=)"), "writes tiles.CUDA_LAUNCH"),
    (re.compile(r"\bgrid\.CUDA_MAX_GRID_X\s*=(?!=)"), "assigns grid.CUDA_MAX_GRID_X"),
    (re.compile(r"""environ\[\s*["']TRITON_ASCEND_ARCH["']\s*\]\s*=(?!=)"""), "sets TRITON_ASCEND_ARCH"),
    (re.compile(r"""(setdefault|putenv|setenv)\(\s*["']TRITON_ASCEND_ARCH"""), "sets TRITON_ASCEND_ARCH"),
    (re.compile(r"""environ\.update\([^)]*TRITON_ASCEND_ARCH"""), "sets TRITON_ASCEND_ARCH"),
]


def test_no_module_patches_the_target():
    """The target is a value: no module under fla_ascend/ or benchmarks/ rewrites the backend's
    names, the chunk stage table, the CUDA grid limit or the chip variable (the default target's
    detection only reads it)."""
    hits = []
    for path in sorted([*(ROOT / "fla_ascend").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in _FORBIDDEN:
                if pattern.search(code):
                    hits.append(f"{path.relative_to(ROOT)}:{no}: {what}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_accessors_are_cheap():
    """launch_options and num_cores read the active target per call: a ContextVar get, well under
    20 us a call even on a loaded machine (measured about 1 us)."""
    n = 2000
    per_call = min(timeit.repeat(lambda: backend.launch_options(num_warps=4, num_stages=2), number=n, repeat=3)) / n
    assert per_call < 20e-6, per_call
    with backend.use(_cpu(cube_cores=4, vector_cores=4)):
        per_call = min(timeit.repeat(lambda: backend.num_cores("vector"), number=n, repeat=3)) / n
    assert per_call < 20e-6, per_call
