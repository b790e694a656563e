"""``fla-ascend profile``: analyze a run, compare two runs, or collect a profile of one of our ops.

    fla-ascend profile analyze PATH [--top N] [--by type|name] [--chip NAME] [--strict] [--out DIR]
                               [--no-plots] [--json]
    fla-ascend profile compare BASE NEW [--top N] [--by type|name] [--strict] [--out DIR] [--no-plots]
    fla-ascend profile op NAME [--shapes NAME|B=1,T=4096,...] [--provider fla_ascend|fla|torch_ref]
                               [--dtype bfloat16] [--backward] [--warmup N] [--active N] [--out DIR]
                               [--level L] [--metrics M]

``analyze`` and ``compare`` need no device and import only pandas, NumPy, matplotlib and rich.
PATH is a run (``*_ascend_pt``, ``*_ascend_ms``, msprof ``PROF_*`` / ``mindstudio_profiler_output``),
a parent folder of one job's ranks (one section per rank and a cross-rank table; runs of several jobs
are refused), one profiler file, or a folder holding only one profiler file.
``op`` needs an NPU or a CUDA GPU and exits with status 2 and a message otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    """Add the ``profile`` subcommand (``analyze``, ``compare``, ``op``) to an argparse
    subparsers object."""
    p = sub.add_parser("profile", help="analyze / compare Ascend profiler output, or profile one op")
    ps = p.add_subparsers(dest="profile_command", required=True)

    a = ps.add_parser("analyze", help="diagnose one profiler run (no device needed)")
    a.add_argument("dir", help="a *_ascend_pt / *_ascend_ms / *_cuda_pt / PROF_* directory, a parent folder of "
                   "one job's ranks, or one profiler file (kernel_details.csv, op_summary_*.csv, "
                   "step_trace_time.csv...)")
    a.add_argument("--chip", default=None, help="Ascend chip for the roofline and Memory rule (default: the chip "
                   "table's default, with a warning)")
    a.add_argument("--strict", action="store_true", help="stop at the first malformed row instead of skipping it")
    a.add_argument("--top", type=int, default=10, help="kernel keys to show (default 10)")
    a.add_argument("--by", choices=("type", "name"), default="type", help="kernel key: op Type or kernel Name")
    a.add_argument("--msprof-op", default=None, help="an msprof op output directory for per-block load")
    a.add_argument("--out", default=None, help="write report.md, report.json and PNGs here")
    a.add_argument("--no-plots", action="store_true", help="with --out: skip the PNGs")
    a.add_argument("--json", action="store_true", help="print the JSON report instead of tables")
    a.set_defaults(func=run_analyze)

    c = ps.add_parser("compare", help="compare two profiler runs per kernel key (no device needed)")
    c.add_argument("base")
    c.add_argument("new")
    c.add_argument("--top", type=int, default=15, help="rows to show (default 15)")
    c.add_argument("--by", choices=("type", "name"), default="type")
    c.add_argument("--out", default=None, help="write compare.md, compare.json and compare.png here")
    c.add_argument("--no-plots", action="store_true")
    c.add_argument("--strict", action="store_true", help="stop at the first malformed row instead of skipping it")
    c.set_defaults(func=run_compare)

    o = ps.add_parser("op", help="profile one of our ops on the current NPU or CUDA device")
    o.add_argument("name", help="an op of the benchmark suite (fla-ascend bench --list), e.g. chunk_gated_delta_rule")
    o.add_argument("--shapes", default=None, help="one shape: a name from fla-ascend bench --list (gdn-t32k) or "
                   "KEY=VALUE pairs over the op's dims (T=1024,HV=16), the others from the op's default shape")
    o.add_argument("--provider", default="fla_ascend",
                   help="whose kernels: fla_ascend (default), fla (flash-linear-attention, when it imports) "
                   "or torch_ref")
    o.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    o.add_argument("--backward", action="store_true", help="profile forward + backward")
    o.add_argument("--warmup", type=int, default=2)
    o.add_argument("--active", type=int, default=5)
    o.add_argument("--level", default="Level1", help="NPU profiler level (default Level1)")
    o.add_argument("--metrics", default="PipeUtilization", help="NPU PMU metric group")
    o.add_argument("--out", default="profile_out", help="output directory (default ./profile_out)")
    o.add_argument("--top", type=int, default=10)
    o.set_defaults(func=run_op)


def _console():
    from fla_ascend.console import make_console

    return make_console()


def _rich_table(df, cols, title):
    from rich.table import Table

    from .text import fmt_cell

    t = Table(title=title)
    cols = [c for c in cols if c in df.columns]
    for c in cols:
        t.add_column(c, overflow="fold")
    for _, r in df.iterrows():
        t.add_row(*[fmt_cell(r[c]) for c in cols])
    return t


def _fail(msg: str, code: int = 2) -> int:
    print(f"fla-ascend profile: error: {msg}", file=sys.stderr)
    return code


def _check_out(args) -> str | None:
    """Check ``--out`` before any work, as every command does (:func:`fla_ascend.cli_common.check_outputs`:
    a writable folder, a missing chain of folders only under the current directory); the error
    message, or None."""
    from fla_ascend.cli_common import UsageError, check_outputs

    try:
        check_outputs(folders=[("--out", getattr(args, "out", None))])
    except UsageError as e:
        return str(e)
    return None


def _print_report(rep, console) -> None:
    title = f"[bold]{rep.source}[/bold]" + (f" (rank {rep.rank})" if rep.rank is not None else "")
    console.print(f"{title}: {rep.headline()}", highlight=False)
    for w in rep.warnings:
        console.print(f"  [yellow]warning[/yellow]: {w}", highlight=False)
    if rep.step is not None and not rep.step.empty:
        cols = [c for c in ("type", "index", "step") if c in rep.step] + [
            "computing", "communication_not_overlapped", "overlapped", "free", "stage", "computing_share",
            "communication_not_overlapped_share", "free_share"]
        console.print(_rich_table(rep.step, cols,
                                  f"Step split (us; shares of the step, from {rep.step['source'].iloc[0]})"))
    if rep.communication is not None and not rep.communication.empty:
        console.print(_rich_table(rep.communication, list(rep.communication.columns), "Communication per collective"))
    if not rep.bounds.empty:
        b, cols = rep.top_kernels()
        console.print(_rich_table(b, cols, f"Top {rep.top} compute kernels (share = of compute kernel time)"))
    if rep.findings:
        console.print("[bold]Findings[/bold]")
        for f in rep.findings:
            console.print(f"  - {f}", highlight=False)
    for i in rep.issues:
        console.print(f"  [yellow]skipped[/yellow]: {i}", highlight=False)


def run_analyze(args) -> int:
    """``profile analyze``: print the report (one section per rank and a cross-rank table for a
    folder of ranks); with ``--out`` also write it (Markdown, JSON, PNGs)."""
    from .analyze import ClusterReport, analyze, analyze_ranks
    from .readers import csv_kind, find_runs, read_msprof_op, resolve_input

    if args.top < 1:
        return _fail(f"--top must be >= 1, got {args.top}")
    if (err := _check_out(args)) is not None:
        return _fail(err)
    try:
        p = resolve_input(args.dir)  # a folder holding only one profiler file stands for that file
        several = (p.is_dir() and len(find_runs(p)) > 1) or (
            p.is_file() and p.suffix == ".csv" and csv_kind(p) == "cluster_step_trace")
        if several and args.msprof_op:
            return _fail("--msprof-op applies to one run; PATH holds several ranks: pass one rank's directory")
        op = read_msprof_op(args.msprof_op) if args.msprof_op else None
        if several:
            rep = analyze_ranks(p, top=args.top, by=args.by, chip=args.chip, strict=args.strict)
        else:
            rep = analyze(p, top=args.top, by=args.by, msprof_op=op, chip=args.chip, strict=args.strict)
    except (FileNotFoundError, ValueError) as e:
        return _fail(str(e))
    if args.json:
        print(rep.to_json())
    else:
        con = _console()
        if isinstance(rep, ClusterReport):
            con.print(f"[bold]{rep.source}[/bold]: {len(rep.ranks)} rank{'' if len(rep.ranks) == 1 else 's'}",
                      highlight=False)
            cols = ["rank", "kernels", "compute_us", "computing", "communication_not_overlapped", "overlapped", "free",
                    "stage", "stage_vs_fastest"]
            con.print(_rich_table(rep.cross, cols, "Across ranks (us per step)"))
            if rep.verdict:
                con.print(rep.verdict, highlight=False)
            for r in rep.ranks:
                con.print()
                _print_report(r, con)
        else:
            _print_report(rep, con)
    if args.out:
        files = rep.write(args.out, plots=not args.no_plots)
        if not args.json:
            _console().print("wrote " + ", ".join(str(p) for p in files.values()), highlight=False)
    return 0


def run_compare(args) -> int:
    """``profile compare``: print per-key table and totals; with ``--out`` write them and a PNG."""
    from .compare import compare, geomean_text, ratio_text

    if args.top < 1:
        return _fail(f"--top must be >= 1, got {args.top}")
    if (err := _check_out(args)) is not None:
        return _fail(err)
    try:
        from .readers import load_run

        cmp = compare(load_run(args.base, strict=args.strict), load_run(args.new, strict=args.strict), by=args.by)
    except (FileNotFoundError, ValueError) as e:
        return _fail(str(e))
    con = _console()
    t = cmp.totals
    con.print(f"compute kernels: base {t['base_us']:.3f} us/step ({t['steps_base']} steps), new {t['new_us']:.3f} "
              f"us/step ({t['steps_new']} steps): {ratio_text(t)}, {geomean_text(t)}; communication (not "
              f"compared): base {t['communication_base_us']:.3f}, new {t['communication_new_us']:.3f} us/step; "
              f"{t['keys_base_only']} base-only, {t['keys_new_only']} new-only",
              highlight=False)
    con.print(_rich_table(cmp.table.head(args.top), cmp.key + ["count_base", "count_new", "total_base_us",
                                                              "total_new_us", "ratio", "status"],
                          "per kernel key (per step; ratio = new / base)"))
    if args.out:
        files = cmp.write(args.out, plots=not args.no_plots, top=args.top)
        con.print("wrote " + ", ".join(str(p) for p in files.values()), highlight=False)
    return 0


def run_op(args) -> int:
    """``profile op NAME``: collect on the current device, then print the analysis."""
    from fla_ascend.bench.suite import op_call, resolve_case

    from .collect import NoDeviceError, detect_device, profile_op

    mode = "fwdbwd" if args.backward else "fwd"
    try:
        shape = resolve_case(args.name, args.shapes, mode, args.provider)  # bad arguments first, before any device
        device = detect_device()
        if (err := _check_out(args)) is not None:
            return _fail(err)
        call, _ = op_call(args.name, shape, mode, args.provider, args.dtype)
    except (ValueError, NoDeviceError) as e:
        return _fail(str(e))
    run_dir = profile_op(call, warmup=args.warmup, active=args.active, out_dir=args.out, device=device,
                         level=args.level, aic_metrics=args.metrics)
    from .analyze import analyze

    con = _console()
    con.print(f"profiled {args.provider} {args.name} {shape} {args.dtype}{' fwd+bwd' if args.backward else ''} "
              f"on {device}: {run_dir}", highlight=False)
    rep = analyze(run_dir, top=args.top)
    _print_report(rep, con)
    rep.write(Path(args.out) / "report", plots=True)
    return 0
