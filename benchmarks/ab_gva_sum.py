"""Is the Triton GVA group sum of dq and dk faster than the torch expression it replaced, with the same result?

An A/B in one process: the stage (``ops/common/gva.py``, shipped) against the torch expression
(``x.view(B, T, H, G, K).sum(3).to(dtype)``). Exit status 1 when any output differs or a gate fails.

1. Stage level: both on a ``[B, T, HV, K]`` float32 buffer (default the T32768 anchor's,
   ``[1, 32768, 32, 128]``), the stage at several tile sizes (``gva.TILES``, overridden through
   the active target); each output is checked bitwise against torch's first.
2. Op level: ``chunk_gated_delta_rule`` forward+backward through the benchmark suite (gate, then
   median time) at the GVA anchors (qwen3next, T32768), once with each implementation, ``--rounds``
   times.

    python3 benchmarks/ab_gva_sum.py [--rounds 2] [--out DIR]
    python3 benchmarks/ab_gva_sum.py --quick     # CPU smoke run: small shapes, times meaningless

Writes ``DIR/ab_gva_sum.json``. Exits 1 when an output differs or a gate fails.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend import backend  # noqa: E402  (before triton: it decides interpreter mode)

# isort: split
import torch  # noqa: E402

from fla_ascend.bench import suite, timing  # noqa: E402
from fla_ascend.ops.common import gva  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_launch_plans import _out_dir, _positive  # noqa: E402  (the same argument checks)

chunk = importlib.import_module("fla_ascend.ops.gated_delta_rule.chunk")


def torch_group_sum(x: torch.Tensor, H: int, dtype: torch.dtype) -> torch.Tensor:
    """What ``chunk_gated_delta_rule_bwd`` did before the stage."""
    B, T, HV, K = x.shape
    return x.view(B, T, H, HV // H, K).sum(3).to(dtype)


IMPLS = {"torch": torch_group_sum, "stage": gva.gva_group_sum}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="A/B of the GVA group sum of dq and dk: the Triton stage against torch, in one process.")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"), help="output folder (default $OUT or /tmp)")
    ap.add_argument("--rounds", type=_positive, default=2, help="times the op-level A/B is run, >= 1 (default 2)")
    ap.add_argument("--quick", action="store_true", help="short timing budgets; small shapes on the CPU")
    args = ap.parse_args(argv)
    out = _out_dir(ap, args.out)
    on_cpu = backend.device_type() == "cpu"
    timer = timing.make_timer(args.quick)
    B, T, H, HV, K = (1, 64, 2, 4, 32) if on_cpu else (1, 32768, 16, 32, 128)
    dtype = torch.float16 if on_cpu else torch.bfloat16
    x = torch.randn(B, T, HV, K, device=backend.device())
    ref = torch_group_sum(x, H, dtype)
    res, failed = {"stage_ms": {}, "op_ms": []}, False
    res["stage_ms"]["torch"] = timer(lambda: torch_group_sum(x, H, dtype))
    for elems in (1024, 2048, 4096, 8192):
        with backend.use(backend.current().replace(overrides={"gva_group_sum": {"tile_elems": elems}})):
            same = torch.equal(gva.gva_group_sum(x, H, dtype), ref)
            failed |= not same
            res["stage_ms"][f"stage {elems}"] = timer(lambda: gva.gva_group_sum(x, H, dtype))
        print(f"[{B}, {T}, {HV}, {K}] stage, tile {elems}: {res['stage_ms'][f'stage {elems}']:.4f} ms"
              f" (torch {res['stage_ms']['torch']:.4f}){'' if same else '  OUTPUT DIFFERS'}", flush=True)
    shapes = "qwen3next;gdn-t32k"
    for rnd in range(args.rounds):
        for name, impl in IMPLS.items():
            chunk.gva_group_sum = impl
            try:
                art = suite.run_suite(ops=["chunk_gated_delta_rule"], shapes=shapes, modes=["fwdbwd"],
                                      providers=["fla_ascend"], quick=args.quick, measure_peaks=False,
                                      progress=False)
            finally:
                chunk.gva_group_sum = gva.gva_group_sum
            for r in art["results"]:
                failed |= r["correct"] is False
                res["op_ms"].append(dict(round=rnd, impl=name, shape=r["shape"], ms=r["ms"], correct=r["correct"]))
                gate = "SKIP" if r["correct"] is None else "PASS" if r["correct"] else "FAIL"
                print(f"round {rnd} {name:5s} {r['shape']:30s} fwd+bwd {r['ms'] or float('nan'):.3f} ms gate {gate}",
                      flush=True)
    (out / "ab_gva_sum.json").write_text(json.dumps(res, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
