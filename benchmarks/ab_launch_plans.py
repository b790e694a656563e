"""Which CUDA launch plan is fastest for the memory-bound kernels: the capped 1-D task plan, the
uncapped one, or a 3-D grid?

An A/B of the launch plans of the shipped conv forward and l2norm, in one process; exit status 1
when any case fails its correctness gate.

Each plan runs the benchmark suite (``fla-ascend bench``'s protocol: the correctness gate against
the fp32 reference, then the median time) on the op's anchors; only the launch differs: each plan
runs under the active target with its CUDA grid limit and the conv table's ``grid3d`` replaced
(``fla_ascend.backend.Target``):

- ``capped``: the 1-D task plan as it was before 2026-11-30: at most 65535 programs, the task
  loop switched on above that (``Target.cuda_max_grid_x`` set to ``grid.MAX_GRID``);
- ``grid-x``: the 1-D task plan up to CUDA's x limit, 2^31 - 1 programs (what ships);
- ``grid3d`` (conv forward only): the 3-D grid of channel blocks x chunks x batch rows, the tile
  from the program ids with no task decode (what ships for the conv forward on CUDA).

The conv anchors at ``[32, 128]`` tiles make 16384 and 65536 tasks, l2norm at B8 T2048 H32 with
8-row tasks 65536: the cap is crossed by one task. ``--rounds`` repeats every plan
(flash-linear-attention, when it imports, runs once per op, beside the first plan of the first
round, in the same process), so a drift between rounds shows.

    python3 benchmarks/ab_launch_plans.py [--out DIR] [--rounds 2]
    python3 benchmarks/ab_launch_plans.py --quick     # CPU smoke run: small shapes, outputs gated, times meaningless

Writes ``DIR/launch_plans.json`` (one row per op, shape, mode, plan, round, provider) and prints
one line per row. Exits 1 when a row fails its gate.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend import backend  # noqa: E402  (before triton: it decides interpreter mode)
from fla_ascend.bench import suite  # noqa: E402
from fla_ascend.cli_common import output_dir, split_list  # noqa: E402
from fla_ascend.tiling import grid  # noqa: E402

conv = importlib.import_module("fla_ascend.ops.causal_conv1d.conv")

PLANS = {"capped": (grid.MAX_GRID, False), "grid-x": (grid.CUDA_MAX_GRID_X, False),
         "grid3d": (grid.CUDA_MAX_GRID_X, True)}
"""plan -> (largest 1-D grid, 3-D conv forward grid on)."""
JOBS = [("causal_conv1d", "conv-anchors", ["capped", "grid-x", "grid3d"]),
        ("l2norm", "gdn-b8-t2048", ["capped", "grid-x"])]


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _out_dir(ap: argparse.ArgumentParser, path: str) -> Path:
    """Create the output folder before any timing, so that a bad ``--out`` costs no device time."""
    try:
        out, created = output_dir(path, "--out")
    except (ValueError, OSError) as e:
        ap.error(str(e))
    if created:
        print(f"created folder {created} for --out", file=sys.stderr)
    return out


@contextmanager
def plan(name: str):
    """Run the block with launch plan ``name`` (see the module doc): the active target with that
    grid limit and conv forward grid; the previous target is back afterwards."""
    cap, grid3d = PLANS[name]
    t = backend.current()
    over = {k: dict(v) for k, v in t.overrides.items()}
    over["causal_conv1d"] = {**over.get("causal_conv1d", {}), "grid3d": grid3d}
    with backend.use(t.replace(cuda_max_grid_x=cap, overrides=over)):
        yield


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="A/B of the CUDA launch plans of the conv forward and l2norm, in one process.")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"), help="output folder (default $OUT or /tmp)")
    ap.add_argument("--rounds", type=_positive, default=2, help="times every plan is run, >= 1 (default 2)")
    ap.add_argument("--modes", default="fwd,fwdbwd", help="comma-separated, from fwd, fwdbwd (default both)")
    ap.add_argument("--quick", action="store_true", help="short timing budgets; small shapes on the CPU")
    args = ap.parse_args(argv)
    modes = split_list(args.modes) or []
    if not modes or any(m not in suite.MODES for m in modes):
        ap.error(f"--modes: expected a comma-separated list of {', '.join(suite.MODES)}, got {args.modes!r}")
    out = _out_dir(ap, args.out)
    rows, failed = [], False
    for rnd in range(args.rounds):
        for op, shapes, names in JOBS:
            for name in names:
                with_fla = rnd == 0 and name == names[0] and suite.fla_left_out() is None
                providers = ["fla_ascend", "fla"] if with_fla else ["fla_ascend"]
                with plan(name):
                    art = suite.run_suite(ops=[op], shapes=shapes, modes=modes, providers=providers,
                                          quick=args.quick, measure_peaks=False, progress=False)
                for r in art["results"]:
                    rows.append(dict(op=op, shape=r["shape"], mode=r["mode"], plan=name, round=rnd,
                                     provider=r["provider"], ms=r["ms"], correct=r["correct"], error=r["error"]))
                    failed |= r["correct"] is False
                    ms = f"{r['ms']:.4f} ms" if r["ms"] else "-"
                    gate = "SKIP" if r["correct"] is None else "PASS" if r["correct"] else "FAIL"
                    note = (r["error"] or r["skipped"] or "")[:80]
                    print(f"round {rnd} {name:7s} {op:14s} {r['shape']:24s} {r['mode']:6s} "
                          f"{r['provider']:10s} {ms:>12s} gate {gate} {note}", flush=True)
    (out / "launch_plans.json").write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
