"""Static NPU time estimates of every op at its anchor shapes, ours beside flash-linear-attention
0.6.0's NPU kernels, and the calibration against public hardware measurements.

Runs ``fla-ascend estimate`` once per op (and ``calibration``) with the triton-ascend environment
and writes, under ``--out``: ``<op>.json|md|png``, ``calibration.json|md`` and ``summary.md``.
Needs triton-ascend 3.2.0, ascendnpu-ir (bishengir-compile) and flash-linear-attention importable
(``pip download --no-deps fla-core==0.6.0`` and unpack it on ``PYTHONPATH``; never a runtime
dependency). The calibration's rows match what was measured with flash-linear-attention as of its
notes (its main branch at the merge of flash-linear-attention PR 1126) and vllm-ascend 0.18.0rc1's
unpacked wheel on ``PYTHONPATH`` (docs/estimate.md, Calibration); rows whose project is missing are
listed as not run. Compiles are cached (``$FLA_ASCEND_COMPILE_CACHE``); a cold run takes about an hour of
CPU on a 2-core machine, mostly flash-linear-attention's kernels at T = 32768.

    .venv-ascend/bin/python benchmarks/npu_estimate.py [--out DIR] [--chip Ascend910B2] [--summary-only]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend.estimate.cli import markdown, plot_png, side_by_side, summary_markdown  # noqa: E402
from fla_ascend.estimate.model import estimated_ops  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/npu-estimate")
    p.add_argument("--chip", default="Ascend910B2")
    p.add_argument("--summary-only", action="store_true",
                   help="estimate nothing: re-render every <op>.md/.png and summary.md from the JSON files")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    status = 0
    if not args.summary_only:
        for op in estimated_ops() + ["calibration"]:
            base = os.path.join(args.out, op)
            cmd = [sys.executable, "-m", "fla_ascend.cli", "estimate", op, "--chip", args.chip, "--json",
                   base + ".json", "--markdown", base + ".md", "--quiet"]
            if op != "calibration":
                cmd += ["--shape", "anchors", "--against", "fla", "--png", base + ".png"]
            print("$", " ".join(cmd[2:]), flush=True)
            status |= subprocess.run(cmd).returncode
    reports = []
    for op in estimated_ops():
        path = os.path.join(args.out, op + ".json")
        if os.path.exists(path):
            with open(path) as f:
                rep = json.load(f)
            if args.summary_only:  # re-render the tables from the counts (stage names may have changed)
                for case in rep["cases"]:
                    case["rows"] = side_by_side(case["ours"], case["fla"])
                with open(path, "w") as f:
                    json.dump(rep, f, indent=1, default=str)
                with open(os.path.join(args.out, op + ".md"), "w") as f:
                    f.write(markdown(rep))
                plot_png(rep, os.path.join(args.out, op + ".png"))
            reports.append(rep)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary_markdown(reports))
    print(open(os.path.join(args.out, "summary.md")).read())
    return status


if __name__ == "__main__":
    sys.exit(main())
