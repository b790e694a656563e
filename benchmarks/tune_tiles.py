"""Which off-NPU tile and warp count is fastest for a memory-bound op, every variant passing the correctness gate?

An A/B of the op's tile and warp count, in one run; exit status 1 when any variant fails its gate.

Every variant runs the benchmark suite (``fla-ascend bench``'s protocol: the correctness gate
against the fp32 reference first, then the median time, peak memory and achieved GB/s) on the
op's anchor shapes. Only the tile choice differs between variants: each runs under the active
target with the op's launch table overridden (``fla_ascend.backend.Target.overrides``: ``conv.CUDA_TILES``,
``fused_recurrent.CUDA_TILES``, the norms' ``CUDA_TILES``). The tiles apply off the NPU (CUDA and the
interpreter; an NPU keeps its UB-model tiles), ``num_warps`` on CUDA.

Ops and their variant syntax (each op's default list starts with its tile before the H200 A/B):

- ``causal_conv1d``: ``BTxBDwNW`` (token tile x channel tile, warps) for both the forward and the
  backward sequence kernel, or ``FWD/BWD`` with one such tile each (``32x128w4/32x64w2``); conv
  anchors, fwd and fwd+bwd (the backward's time is the difference).
- ``fused_recurrent_gated_delta_rule``: ``BVwNW`` (value slice of the state, warps); decode anchors.
- ``l2norm``, ``rms_norm_gated``: ``BMwNW`` (rows per task, warps); GatedDeltaNet anchors, fwd and
  fwd+bwd.

    python3 benchmarks/tune_tiles.py --op causal_conv1d [--out DIR] [--variants 64x128w4,128x128w8]
    python3 benchmarks/tune_tiles.py --op fused_recurrent_gated_delta_rule --variants 32w4,16w2
    python3 benchmarks/tune_tiles.py --op causal_conv1d --quick --variants 16x32w2   # CPU smoke run

Writes ``DIR/<op>_tiles.json`` (one suite artifact per variant) and ``DIR/<op>_tiles.md``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from contextlib import contextmanager

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend import backend  # noqa: E402  (before triton: it decides interpreter mode)
from fla_ascend.bench import report, suite  # noqa: E402
from fla_ascend.cli_common import output_dir, split_list  # noqa: E402

# The modules (their packages re-export functions of the same names).
conv = importlib.import_module("fla_ascend.ops.causal_conv1d.conv")
fused_recurrent = importlib.import_module("fla_ascend.ops.gated_delta_rule.fused_recurrent")
l2norm = importlib.import_module("fla_ascend.ops.norm.l2norm")
rms_norm_gated = importlib.import_module("fla_ascend.ops.norm.rms_norm_gated")


@contextmanager
def _overrides(**tables):
    """Run the block with the active target's launch tables ``tables`` (name -> entries) overridden
    (:attr:`fla_ascend.backend.Target.overrides`); the previous target is back afterwards."""
    with backend.use(backend.current().replace(overrides=tables)):
        yield


@contextmanager
def _conv_tile(BT: int, BD: int, nw: int, *bwd: int):
    """The forward tile ``(BT, BD, nw)``; the backward's is ``bwd`` when given, else the same."""
    with _overrides(causal_conv1d={"fwd": (BT, BD, nw), "bwd": tuple(bwd) or (BT, BD, nw)}):
        yield


@contextmanager
def _decode_tile(BV: int, nw: int):
    with _overrides(fused_recurrent_gated_delta_rule={"bv": BV, "num_warps": nw}):
        yield


@contextmanager
def _norm_tile(BM: int, nw: int):
    with _overrides(l2norm={"rows": BM, "num_warps": nw}, rms_norm_gated={"rows": BM, "num_warps": nw}):
        yield


TARGETS = {
    # op: (tile parameters, patch, shapes, modes, default variants)
    "causal_conv1d": (("BT", "BD"), _conv_tile, "conv-anchors", ["fwd", "fwdbwd"],
                      ["64x128w4", "128x128w4", "128x128w8", "256x64w4", "32x256w4", "64x256w8", "256x128w8"]),
    "fused_recurrent_gated_delta_rule": (("BV",), _decode_tile, "decode-anchors", ["fwd"],
                                         ["32w4", "16w4", "16w2", "32w2", "32w8", "64w4", "64w8"]),
    "l2norm": (("BM",), _norm_tile, "gdn-anchors", ["fwd", "fwdbwd"], ["32w4", "8w4", "16w4", "64w4", "64w8"]),
    "rms_norm_gated": (("BM",), _norm_tile, "gdn-anchors", ["fwd", "fwdbwd"], ["32w4", "8w4", "16w4", "64w4", "64w8"]),
}
"""The default variant lists start with the tiles shipped before the 2026-11-30 A/B (conv ``[64, 128]``
4 warps, decode ``BV = 32`` 4 warps, norms 32 rows at ``D = 128``, 4 warps); what ships now is in
each op's module (``conv.CUDA_TILES``, ``fused_recurrent.CUDA_TILES``, ``l2norm.CUDA_TILES``)."""


def parse_variant(op: str, text: str) -> tuple[int, ...]:
    """``"128x64w8"`` -> ``(128, 64, 8)`` for an op with two tile parameters; powers of two only.
    For causal_conv1d, ``"FWD/BWD"`` gives the forward's values followed by the backward's.

    Raises:
        ValueError: not of the op's form, or a value that is not a power of two.
    """
    params = TARGETS[op][0]
    form = "x".join(params) + "wNUM_WARPS"
    if op == "causal_conv1d":
        form += f" (both directions) or {form}/{form} (forward/backward)"
        parts = text.split("/")
        if len(parts) == 2:
            try:
                return parse_variant(op, parts[0]) + parse_variant(op, parts[1])
            except ValueError:
                raise ValueError(f"variant {text!r}: expected {form}") from None
        if len(parts) > 2:
            raise ValueError(f"variant {text!r}: expected {form}")
    m = re.fullmatch(r"x".join([r"(\d+)"] * len(params)) + r"w(\d+)", text.strip())
    if not m:
        raise ValueError(f"variant {text!r}: expected {form} for {op}")
    vals = tuple(int(g) for g in m.groups())
    if any(v < 1 or v & (v - 1) for v in vals):
        raise ValueError(f"variant {text!r}: {', '.join(params)} and num_warps must be powers of two, got {vals}")
    return vals


def run_variant(op: str, vals: tuple[int, ...], quick: bool, shapes: str | None = None,
                modes: list[str] | None = None) -> dict:
    """The suite's artifact for ``op`` with the tile and warps ``vals``, on ``shapes`` and ``modes``
    (default: the op's anchors and modes in :data:`TARGETS`)."""
    _, patch, anchor_shapes, anchor_modes, _ = TARGETS[op]
    shapes, modes = shapes or anchor_shapes, modes or anchor_modes
    with patch(*vals):
        return suite.run_suite(ops=[op], shapes=shapes, modes=modes, providers=["fla_ascend"], quick=quick,
                               progress=False, measure_peaks=not quick)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", required=True, choices=sorted(TARGETS))
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--variants", help="comma-separated variants (default: the op's list, which starts with the "
                   "tile used before the 2026-11-30 A/B)")
    p.add_argument("--shapes", help="';'-separated shapes as in fla-ascend bench (default: the op's anchors)")
    p.add_argument("--modes", help="fwd,fwdbwd (default: the op's)")
    p.add_argument("--quick", action="store_true", help="short timing; on the CPU, small shapes")
    args = p.parse_args(argv)
    spec = split_list(args.variants) if args.variants is not None else TARGETS[args.op][4]
    modes = split_list(args.modes)
    try:
        variants = [(v.strip(), parse_variant(args.op, v)) for v in spec if v.strip()]
        if not variants:
            raise ValueError(f"--variants: no variant in {args.variants!r}")
        plan_modes = modes or TARGETS[args.op][3]
        suite._check_names("modes", plan_modes, suite.MODES)
        plan, notes = suite.plan_cases([args.op], args.shapes or TARGETS[args.op][2], plan_modes, quick=args.quick)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not plan:
        print(f"error: no case of {args.op} fits --shapes/--modes (see the notes above)", file=sys.stderr)
        return 2
    try:
        out, created = output_dir(args.out, "--out")
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if created:
        print(f"created folder {created} for --out", file=sys.stderr)
    arts, lines = {}, []
    for name, vals in variants:
        art = run_variant(args.op, vals, args.quick, args.shapes, modes)
        arts[name] = art
        head, rows = report.table_rows(art)  # the suite's own columns, a variant column first
        if not lines:
            lines = ["| variant | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 1)]
        for cells in rows:
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
        (out / f"{args.op}_tiles.json").write_text(json.dumps(arts, indent=1, default=str) + "\n")
        (out / f"{args.op}_tiles.md").write_text("\n".join(lines) + "\n")
    bad = [n for n, a in arts.items() if any(not r["correct"] for r in a["results"])]
    if bad:
        print(f"variants with a failed gate: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
