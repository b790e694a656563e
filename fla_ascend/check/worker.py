"""The check's worker process: ``python -m fla_ascend.check.worker [options]``.

Started by ``fla-ascend check`` with ``TRITON_INTERPRET`` removed and ``FLA_ASCEND_DEVICE=npu``
so that ``@triton.jit`` builds compiled (lowerable) kernels. Do not import it from a process
that runs the interpreter.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from fla_ascend.cli_common import check_outputs, list_arg

DEFAULT_CHIPS = ("Ascend910B2", "Ascend910_9599")
"""Checked on every run: A2/A3 (Ascend910B2) and A5 (Ascend910_9599)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The check's options (shared by ``fla-ascend check`` and the worker)."""
    p.add_argument("--chip", action="append", default=None,
                   help=f"also check this Ascend SoC (repeatable; {' and '.join(DEFAULT_CHIPS)} are always checked "
                        "unless --no-default-chips)")
    p.add_argument("--no-default-chips", action="store_true", help="check only the --chip names given")
    p.add_argument("--kernels", type=list_arg, default=None, metavar="NAME,...",
                   help="check only these kernels: short names (l2norm_fwd_kernel), full names or globs "
                        "(chunk_*_kernel); with --ops, the kernels of both")
    p.add_argument("--ops", type=list_arg, default=None, metavar="NAME,...",
                   help="check only the kernels these ops launch (chunk_gated_delta_rule, l2norm, ...)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the full results as JSON")
    p.add_argument("--markdown", default=None, metavar="PATH",
                   help="also write a per-kernel summary (compiled launches, core, planned UB/L1/L0C, syncs, "
                        "compile time, UB model / plan) as Markdown tables, one per chip")
    p.add_argument("--full", action="store_true",
                   help="the full launch matrix (every K, V, chunk size, flag, conv tile and norm width the ops "
                        "can pick) instead of one representative launch per kernel and plan")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles (default: CPU count)")
    p.add_argument("--compile-timeout", type=float, default=600.0, metavar="S",
                   help="seconds per compile before it is killed and reported as a timeout (default 600)")
    p.add_argument("--cache-dir", default=None,
                   help="compile cache (default $FLA_ASCEND_COMPILE_CACHE or ~/.cache/fla-ascend/compile)")
    p.add_argument("--no-cache", action="store_true", help="compile again even when the cache has the result")
    p.add_argument("--lowering-only", action="store_true", help="skip bishengir-compile (front end checks only)")
    p.add_argument("--strict-a5", action="store_true",
                   help="A5 plan findings (UB headroom, UB model against the plan) fail the check too "
                        "(default: reported; a launch that fails to compile fails the check on every chip)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fla_ascend.check.worker")
    add_arguments(p)
    p.add_argument("--registry", default="fla_ascend.check.registry",
                   help="module with CASES (and FULL_CASES for --full) and optional ALLOW (allow-list)")
    p.add_argument("--discover", default="fla_ascend.ops",
                   help="package whose *_kernel functions must all be registered ('' to skip)")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    return p


def check_output_options(args) -> None:
    """Check ``--json``, ``--markdown`` (files) and ``--cache-dir`` (a folder) before any work
    (:func:`fla_ascend.cli_common.check_outputs`); raises :class:`~fla_ascend.cli_common.UsageError`."""
    check_outputs(files=[("--json", args.json, None), ("--markdown", args.markdown, None)],
                  folders=[("--cache-dir", args.cache_dir)])


def chips_of(args) -> list[str]:
    """The chip names to check: the defaults (unless ``--no-default-chips``) then ``--chip``, deduplicated."""
    names = [] if args.no_default_chips else list(DEFAULT_CHIPS)
    for c in args.chip or []:
        if c not in names:
            names.append(c)
    if not names:
        raise ValueError("--no-default-chips needs at least one --chip")
    return names


def collect(args) -> dict:
    """Run everything and return the report dict (see docs/check.md for its keys)."""
    from fla_ascend.check import compiled, runner
    from fla_ascend.compiler.lower import require_compiler
    from fla_ascend.tiling.chips import get_chip

    require_compiler()
    t0 = time.perf_counter()
    specs = []
    for c in chips_of(args):
        s = get_chip(c)
        if s.name not in [x.name for x in specs]:
            specs.append(s)
    kernels, import_errors = runner.discover_kernels(args.discover) if args.discover else ({}, [])
    reg = importlib.import_module(args.registry)
    cases = list(getattr(reg, "FULL_CASES", reg.CASES) if args.full else reg.CASES)
    allow = list(getattr(reg, "ALLOW", []))
    registered = {c.kernel for c in cases}
    missing = sorted(set(kernels) - registered)
    selection = None
    if args.kernels or args.ops:
        chosen = runner.select_cases(cases, args.kernels, args.ops, unregistered=missing)
        selection = {"kernels": args.kernels, "ops": args.ops,
                     "selected": sorted({c.kernel for c in chosen}), "of": len(registered)}
        cases, missing = chosen, []  # a selection checks its kernels; the full run checks the registry
        kernels = {k: v for k, v in kernels.items() if k in selection["selected"]}
    lint_src = dict(kernels)
    for c in cases:
        if c.kernel not in lint_src:
            mod, name = c.kernel.rsplit(".", 1)
            lint_src[c.kernel] = getattr(importlib.import_module(mod), name)
    results, modes, stage_s = {}, {}, {}
    for s in specs:
        t1 = time.perf_counter()
        rs = compiled.merge_specialisations(runner.check_cases(cases, s, lint_src))
        t2 = time.perf_counter()
        if args.lowering_only:
            modes[s.name] = "lowering only: --lowering-only"
        else:
            modes[s.name] = compiled.compile_results(rs, s, args.jobs, args.compile_timeout, args.cache_dir,
                                                     use_cache=not args.no_cache, strict_a5=args.strict_a5)
        stage_s[s.name] = {"lower_s": round(t2 - t1, 1), "compile_s": round(time.perf_counter() - t2, 1)}
        results[s.name] = rs
    lint_findings = runner.lint_modules(lint_src)
    for rs in results.values():
        runner.apply_allowlist(rs, lint_findings, allow)
    flat = [r for rs in results.values() for r in rs]
    fails = runner.failures(flat, lint_findings, missing, import_errors)
    return {
        "chips": {s.name: {"ub_bytes": s.ub_bytes, "l1_bytes": s.l1_bytes, "l0c_bytes": s.l0c_bytes,
                           "cube_cores": s.cube_cores, "vector_cores": s.vector_cores, "mode": modes[s.name],
                           **stage_s[s.name]} for s in specs},
        "matrix": "full" if args.full else "representative",
        "selection": selection,
        "results": {k: [r.to_dict() for r in v] for k, v in results.items()},
        "lint": lint_findings,
        "missing": missing,
        "import_errors": import_errors,
        "failures": fails,
        "n_cases": len(flat),
        "jobs": args.jobs,
        "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from fla_ascend.check.report import print_report, write_json, write_markdown

    try:
        check_output_options(args)
        data = collect(args)
    except (RuntimeError, ValueError) as e:
        print(f"fla-ascend check: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        write_json(data, args.json)
    if args.markdown:
        write_markdown(data, args.markdown)
    if args.quiet:
        print("FAIL" if data["failures"] else "PASS", len(data["failures"]))
    else:
        print_report(data)
    return 1 if data["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
