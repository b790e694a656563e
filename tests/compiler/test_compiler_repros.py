"""Each module of tests/compiler/compiler_repros reproduces one bishengir-compile failure: its
``kernel`` fails on ``CHIP`` with ``MESSAGE`` in the compiler's output, and its ``fixed_kernel`` (the
restructuring the package's kernels use) compiles there and on Ascend910B2.

Lowering needs compiled (not interpreted) kernels, so each case runs in a child process without
``TRITON_INTERPRET`` (as the check's worker). Needs triton-ascend's front end and PyPI's
ascendnpu-ir; skipped elsewhere."""
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "compiler_repros"
REPROS = sorted(p.stem for p in HERE.glob("*.py"))

_CHILD = r"""
import importlib.util, json, sys
from fla_ascend.compiler.bishengir import compile_module
from fla_ascend.compiler.lower import lower
from fla_ascend.tiling.chips import get_chip
spec = importlib.util.spec_from_file_location("repro", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = {}
for name, chip in (("kernel", mod.CHIP), ("fixed_kernel", mod.CHIP), ("fixed_kernel", "Ascend910B2")):
    low = lower(getattr(mod, name), mod.launch_kwargs(), get_chip(chip))
    assert low.ok, low.error
    res = compile_module(low.ttadapter, chip, timeout_s=120, use_cache=False)
    out[name + "@" + chip] = {"ok": res.ok, "error_class": res.error_class, "message": res.message,
                              "log": getattr(res, "log", "") or ""}
print(json.dumps(out))
"""


def _available() -> bool:
    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        return False
    from fla_ascend.compiler.bishengir import compiler_available

    return compiler_available("Ascend910B2") and compiler_available("Ascend910_9599")


@pytest.mark.skipif(not _available(), reason="needs triton-ascend's front end and PyPI's ascendnpu-ir")
@pytest.mark.parametrize("repro", REPROS)
def test_repro_fails_and_fix_compiles(repro):
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(FLA_ASCEND_DEVICE="npu", PYTHONPATH=os.pathsep.join([str(root), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(HERE / f"{repro}.py")], env=env, cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    spec = importlib.util.spec_from_file_location(repro, HERE / f"{repro}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    broken = res[f"kernel@{mod.CHIP}"]
    assert not broken["ok"] and mod.MESSAGE in broken["message"] + broken["log"], broken
    assert res[f"fixed_kernel@{mod.CHIP}"]["ok"], res
    assert res["fixed_kernel@Ascend910B2"]["ok"], res
