"""A/B of causal_conv1d's off-NPU tile (BT tokens x BD channels) and warp count, in one run.

Every variant runs the benchmark suite on the conv anchors (B4 T4096 D4096 W4 and B1 T32768
D8192 W4, silu, bias; fwd and fwd+bwd; ``fla-ascend bench``'s protocol): the correctness gate
against the fp32 reference first, then the median time, peak memory and achieved GB/s. Only the
tile choice differs between variants (``conv._tiles`` and the launches' ``num_warps`` are patched
for the run); the NPU tiles come from the UB model and are not touched.

    python3 benchmarks/tune_conv_tiles.py [--out DIR] [--variants 64x128w4,128x128w8]   # on a GPU
    python3 benchmarks/tune_conv_tiles.py --quick --variants 64x128w4,32x64w4          # CPU smoke run

Writes ``DIR/conv_tiles.json`` (one suite artifact per variant) and ``DIR/conv_tiles.md``.
"""
import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend import backend  # noqa: E402  (before triton: it decides interpreter mode)
import triton  # noqa: E402

from fla_ascend.bench import report, suite  # noqa: E402
from fla_ascend.ops.causal_conv1d import conv  # noqa: E402

VARIANTS = ["64x128w4", "128x128w4", "128x128w8", "256x64w4", "32x256w4", "64x256w8", "256x128w8"]
"""``BTxBDwNW``; the first is the shipped choice."""


def parse_variant(text: str) -> tuple[int, int, int]:
    """``"128x64w8"`` -> ``(BT, BD, num_warps)``; powers of two only.

    Raises:
        ValueError: not of that form, or a value that is not a power of two.
    """
    m = re.fullmatch(r"(\d+)x(\d+)w(\d+)", text.strip())
    if not m:
        raise ValueError(f"variant {text!r}: expected BTxBDwNUM_WARPS, e.g. 64x128w4")
    vals = tuple(int(g) for g in m.groups())
    if any(v < 1 or v & (v - 1) for v in vals):
        raise ValueError(f"variant {text!r}: BT, BD and num_warps must be powers of two, got {vals}")
    return vals


def run_variant(BT: int, BD: int, num_warps_v: int, quick: bool) -> dict:
    """The suite's artifact for the conv anchors with the tile ``[BT, BD]`` and ``num_warps_v`` warps."""
    tiles, launch = conv._tiles, conv.launch_options
    conv._tiles = lambda D: (BT, min(BD, triton.next_power_of_2(D)))
    conv.launch_options = lambda num_warps=4, **kw: backend.launch_options(num_warps=num_warps_v, **kw)
    try:
        return suite.run_suite(ops=["causal_conv1d"], shapes="conv-anchors", modes=["fwd", "fwdbwd"],
                               providers=["fla_ascend"], quick=quick, progress=False, measure_peaks=not quick)
    finally:
        conv._tiles, conv.launch_options = tiles, launch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated BTxBDwNUM_WARPS")
    p.add_argument("--quick", action="store_true", help="short timing; on the CPU, small shapes")
    args = p.parse_args(argv)
    try:
        variants = [(v.strip(), *parse_variant(v)) for v in args.variants.split(",") if v.strip()]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    arts, lines = {}, []
    for name, BT, BD, nw in variants:
        art = run_variant(BT, BD, nw, args.quick)
        arts[name] = art
        head, rows = report.table_rows(art, short=True)  # the suite's own columns, a variant column first
        if not lines:
            lines = ["| variant | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 1)]
        for cells in rows:
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
        (out / "conv_tiles.json").write_text(json.dumps(arts, indent=1, default=str) + "\n")
        (out / "conv_tiles.md").write_text("\n".join(lines) + "\n")
    bad = [n for n, a in arts.items() if any(not r["correct"] for r in a["results"])]
    if bad:
        print(f"variants with a failed gate: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
