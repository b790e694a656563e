"""``fla-ascend profile``: analyze a run, compare two runs, or collect a profile of one of our ops.

    fla-ascend profile analyze DIR [--top N] [--by type|name] [--out DIR] [--no-plots] [--json]
    fla-ascend profile compare BASE NEW [--top N] [--by type|name] [--out DIR] [--no-plots]
    fla-ascend profile op NAME [--shapes B=1,T=4096,...] [--dtype bfloat16] [--backward]
                               [--warmup N] [--active N] [--out DIR] [--level L] [--metrics M]

``analyze`` and ``compare`` need no device. ``op`` needs an NPU or a CUDA GPU and exits with
status 2 and a message otherwise.
"""
from __future__ import annotations

import sys
from pathlib import Path

# op name -> default shapes. Inputs follow flash-linear-attention's layout: q, k [B, T, H, K];
# v [B, T, HV, V]; g (log-space decay, <= 0) and beta (0-1) [B, T, HV].
_OP_DEFAULTS = {
    "chunk_gated_delta_rule": {"B": 1, "T": 4096, "H": 16, "HV": 32, "K": 128, "V": 128},
    "fused_recurrent_gated_delta_rule": {"B": 32, "T": 1, "H": 16, "HV": 32, "K": 128, "V": 128},
}


def register(sub) -> None:
    """Add the ``profile`` subcommand (``analyze``, ``compare``, ``op``) to an argparse
    subparsers object."""
    p = sub.add_parser("profile", help="analyze / compare Ascend profiler output, or profile one op")
    ps = p.add_subparsers(dest="profile_command", required=True)

    a = ps.add_parser("analyze", help="diagnose one profiler run (no device needed)")
    a.add_argument("dir", help="a *_ascend_pt / *_ascend_ms / *_cuda_pt directory or its parent")
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
    c.set_defaults(func=run_compare)

    o = ps.add_parser("op", help="profile one of our ops on the current NPU or CUDA device")
    o.add_argument("name", help=f"op name, e.g. {', '.join(_OP_DEFAULTS)}")
    o.add_argument("--shapes", default="", help="comma-separated KEY=VALUE over B,T,H,HV,K,V "
                   "(defaults per op: " + "; ".join(f"{k}: " + ",".join(f"{a}={b}" for a, b in v.items())
                                                    for k, v in _OP_DEFAULTS.items()) + ")")
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
    from rich.console import Console

    return Console()


def _rich_table(df, cols, title):
    from rich.table import Table

    from .analyze import _fmt

    t = Table(title=title)
    cols = [c for c in cols if c in df.columns]
    for c in cols:
        t.add_column(c, overflow="fold")
    for _, r in df.iterrows():
        t.add_row(*[_fmt(r[c]) for c in cols])
    return t


def _fail(msg: str, code: int = 2) -> int:
    print(f"fla-ascend profile: error: {msg}", file=sys.stderr)
    return code


def _print_report(rep, console) -> None:
    t = rep.totals
    console.print(f"[bold]{rep.source}[/bold]: {t['kernels']} kernel launches, {t['steps']} step(s), "
                  f"device time {t['device_us']:.3f} us, wait {t['wait_us']:.3f} us")
    b = rep.bounds.head(rep.top).merge(rep.summary[["type", "core", "input_shapes", "mean_us"]],
                                       on=["type", "core", "input_shapes"], how="left")
    console.print(_rich_table(b, ["type", "core", "input_shapes", "count", "total_us", "mean_us", "share", "bound",
                                  "room"], f"Top {rep.top} kernels"))
    if rep.findings:
        console.print("[bold]Findings[/bold]")
        for f in rep.findings:
            console.print(f"  - {f}", highlight=False)


def run_analyze(args) -> int:
    """``profile analyze``: print the report; with ``--out`` also write it (Markdown, JSON, PNGs)."""
    from .analyze import analyze
    from .readers import read_msprof_op

    if args.top < 1:
        return _fail(f"--top must be >= 1, got {args.top}")
    try:
        op = read_msprof_op(args.msprof_op) if args.msprof_op else None
        rep = analyze(args.dir, top=args.top, by=args.by, msprof_op=op)
    except (FileNotFoundError, ValueError) as e:
        return _fail(str(e))
    if args.json:
        print(rep.to_json())
    else:
        _print_report(rep, _console())
    if args.out:
        files = rep.write(args.out, plots=not args.no_plots)
        if not args.json:
            _console().print("wrote " + ", ".join(str(p) for p in files.values()), highlight=False)
    return 0


def run_compare(args) -> int:
    """``profile compare``: print per-key table and totals; with ``--out`` write them and a PNG."""
    from .compare import compare

    if args.top < 1:
        return _fail(f"--top must be >= 1, got {args.top}")
    try:
        cmp = compare(args.base, args.new, by=args.by)
    except (FileNotFoundError, ValueError) as e:
        return _fail(str(e))
    con = _console()
    t = cmp.totals
    con.print(f"base {t['base_us']:.3f} us/step ({t['steps_base']} steps), new {t['new_us']:.3f} us/step "
              f"({t['steps_new']} steps): speedup {t['speedup']:.3f}x, geomean {t['geomean_speedup']:.3f}x over "
              f"{t['keys_both']} common keys; {t['keys_base_only']} base-only, {t['keys_new_only']} new-only",
              highlight=False)
    con.print(_rich_table(cmp.table.head(args.top), cmp.key + ["count_base", "count_new", "total_base_us",
                                                              "total_new_us", "ratio", "status"],
                          "per kernel key (per step; ratio = new / base)"))
    if args.out:
        files = cmp.write(args.out, plots=not args.no_plots, top=args.top)
        con.print("wrote " + ", ".join(str(p) for p in files.values()), highlight=False)
    return 0


def parse_shapes_arg(text: str, name: str) -> dict:
    """``"T=2048,HV=16"`` -> the op's default shape dict updated with those values.

    Raises:
        ValueError: unknown op, unknown key, or a value that is not a positive int.
    """
    if name not in _OP_DEFAULTS:
        raise ValueError(f"op: expected one of {sorted(_OP_DEFAULTS)}, got {name!r}")
    shapes = dict(_OP_DEFAULTS[name])
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, val = part.partition("=")
        key = key.strip()
        if key not in shapes:
            raise ValueError(f"--shapes: unknown key {key!r}; expected some of {sorted(shapes)}")
        try:
            v = int(val)
        except ValueError:
            v = 0
        if v < 1:
            raise ValueError(f"--shapes: {key} must be a positive int, got {val!r}")
        shapes[key] = v
    if shapes["HV"] % shapes["H"]:
        raise ValueError(f"--shapes: HV must be a multiple of H, got HV={shapes['HV']}, H={shapes['H']}")
    return shapes


def build_op_call(name: str, shapes: dict, dtype: str, device: str, backward: bool):
    """Make a zero-argument callable running op ``name`` on random inputs of ``shapes``.

    q and k are L2-normalised along K, g = logsigmoid(randn) (log-space decay), beta =
    sigmoid(randn), as in flash-linear-attention's tests. Imports ``fla_ascend.ops`` (the one
    place the profiling package touches the ops).

    Raises:
        ValueError: an op name the ops package does not export or this command cannot build.
    """
    import importlib

    import torch
    import torch.nn.functional as F

    ops = importlib.import_module("fla_ascend.ops")
    if name not in getattr(ops, "__all__", []):
        raise ValueError(f"op: {name!r} is not in fla_ascend.ops (exports: {', '.join(getattr(ops, '__all__', []))})")
    if name not in _OP_DEFAULTS:
        raise ValueError(f"op: {name!r} exists but `profile op` cannot build inputs for it yet; "
                         f"supported: {', '.join(sorted(_OP_DEFAULTS))}")
    fn = getattr(ops, name)
    dt = getattr(torch, dtype)
    B, T, H, HV, K, V = (shapes[k] for k in ("B", "T", "H", "HV", "K", "V"))
    dev = torch.device(device)
    q = F.normalize(torch.randn(B, T, H, K, device=dev, dtype=torch.float32), dim=-1).to(dt)
    k = F.normalize(torch.randn(B, T, H, K, device=dev, dtype=torch.float32), dim=-1).to(dt)
    v = torch.randn(B, T, HV, V, device=dev, dtype=dt)
    g = F.logsigmoid(torch.randn(B, T, HV, device=dev, dtype=torch.float32)).to(dt)
    beta = torch.sigmoid(torch.randn(B, T, HV, device=dev, dtype=torch.float32)).to(dt)
    h0 = torch.randn(B, HV, K, V, device=dev, dtype=torch.float32) * 0.1
    tensors = [q, k, v, g, beta]
    if backward:
        for t in tensors:
            t.requires_grad_(True)

    def call():
        o, _ = fn(*tensors, initial_state=h0, output_final_state=True)
        if backward:
            o.backward(torch.ones_like(o))
        return o

    return call


def run_op(args) -> int:
    """``profile op NAME``: collect on the current device, then print the analysis."""
    from .collect import NoDeviceError, detect_device, profile_op

    try:
        shapes = parse_shapes_arg(args.shapes, args.name)
    except ValueError as e:
        return _fail(str(e))
    try:
        device = detect_device()
    except NoDeviceError as e:
        return _fail(str(e))
    try:
        call = build_op_call(args.name, shapes, args.dtype, device, args.backward)
    except ValueError as e:
        return _fail(str(e))
    run_dir = profile_op(call, warmup=args.warmup, active=args.active, out_dir=args.out, device=device,
                         level=args.level, aic_metrics=args.metrics)
    from .analyze import analyze

    con = _console()
    con.print(f"profiled {args.name} {shapes} {args.dtype}{' fwd+bwd' if args.backward else ''} on {device}: "
              f"{run_dir}", highlight=False)
    rep = analyze(run_dir, top=args.top)
    _print_report(rep, con)
    rep.write(Path(args.out) / "report", plots=True)
    return 0
