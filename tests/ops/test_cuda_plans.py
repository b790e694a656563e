"""The CUDA launch plans, computed on this CPU machine: every scenario of the NPU check (every op and
kernel of the catalogue, each head dim, chunk size and flag) is captured under a compiled CUDA target
(an H200's 132 SMs), in a subprocess where the kernels are compiled functions, so each launcher's
CUDA branch (launch tables, shared-memory fallbacks, 3-D grids) runs; nothing is launched. The CPU
tiers run the interpreter's plans only, and a CUDA-only planning error would otherwise first show on
a GPU."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import collections, json
from fla_ascend import backend
from fla_ascend.compiler.capture import capture
from fla_ascend.ops import catalog

target = backend.Target(device_type="cuda", interpret=False, cube_cores=132, vector_cores=132, tensor_device="cpu")
counts, errors = collections.Counter(), []
seen = set()
for spec, k in catalog.listings():
    for cfg, run in spec.scenarios[k.scenarios][0].items():
        if (spec.name, k.scenarios, cfg) in seen:
            continue
        seen.add((spec.name, k.scenarios, cfg))
        try:
            with capture(None, target=target) as launches:
                run()
        except Exception as e:
            errors.append(f"{spec.name} {cfg}: {type(e).__name__}: {e}")
            continue
        for la in launches:
            counts[la.fn.fn.__name__] += 1
print(json.dumps({"counts": counts, "errors": errors}))
"""


def test_every_scenario_plans_for_cuda():
    env = dict(os.environ, FLA_ASCEND_DEVICE="cuda", TRITON_INTERPRET="0", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["errors"], "\n".join(out["errors"][:20])
    from fla_ascend.ops import catalog

    assert set(out["counts"]) == {k.short_name for _, k in catalog.kernels().values() if not k.npu_only}
