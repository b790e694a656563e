"""The check's worker process: ``python -m fla_ascend.check.worker [options]``.

Started by ``fla-ascend check`` with ``TRITON_INTERPRET`` removed and ``FLA_ASCEND_DEVICE=npu``
so that ``@triton.jit`` builds compiled (lowerable) kernels. Do not import it from a process
that runs the interpreter.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fla_ascend.check.worker")
    p.add_argument("--chip", action="append", default=None, help="SoC name (repeatable); default Ascend910B2")
    p.add_argument("--json", default=None, help="write the results as JSON to this path")
    p.add_argument("--registry", default="fla_ascend.check.registry",
                   help="module with CASES (list of Case) and optional ALLOW (allow-list)")
    p.add_argument("--discover", default="fla_ascend.ops",
                   help="package whose *_kernel functions must all be registered ('' to skip)")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    return p


def collect(chips: list[str], registry: str, discover: str) -> dict:
    """Run everything and return the report dict (see docs/check.md for its keys)."""
    from fla_ascend.check import runner
    from fla_ascend.check.lower import require_compiler
    from fla_ascend.tiling.chips import get_chip

    require_compiler()
    t0 = time.perf_counter()
    specs = [get_chip(c) for c in chips]
    kernels, import_errors = runner.discover_kernels(discover) if discover else ({}, [])
    reg = importlib.import_module(registry)
    cases = list(reg.CASES)
    allow = list(getattr(reg, "ALLOW", []))
    registered = {c.kernel for c in cases}
    missing = sorted(set(kernels) - registered)
    lint_src = dict(kernels)
    for c in cases:
        if c.kernel not in lint_src:
            mod, name = c.kernel.rsplit(".", 1)
            lint_src[c.kernel] = getattr(importlib.import_module(mod), name)
    results = {s.name: runner.check_cases(cases, s, lint_src) for s in specs}
    lint_findings = runner.lint_modules(lint_src)
    for rs in results.values():
        runner.apply_allowlist(rs, lint_findings, allow)
    flat = [r for rs in results.values() for r in rs]
    fails = runner.failures(flat, lint_findings, missing, import_errors)
    return {
        "chips": {s.name: {"ub_bytes": s.ub_bytes, "cube_cores": s.cube_cores, "vector_cores": s.vector_cores}
                  for s in specs},
        "results": {k: [r.to_dict() for r in v] for k, v in results.items()},
        "lint": lint_findings,
        "missing": missing,
        "import_errors": import_errors,
        "failures": fails,
        "n_cases": len(flat),
        "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from fla_ascend.check.report import print_report, write_json

    try:
        data = collect(args.chip or ["Ascend910B2"], args.registry, args.discover)
    except (RuntimeError, ValueError) as e:
        print(f"fla-ascend check: {e}", file=sys.stderr)
        return 2
    if args.json:
        write_json(data, args.json)
    if args.quiet:
        print("FAIL" if data["failures"] else "PASS", len(data["failures"]))
    else:
        print_report(data)
    return 1 if data["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
