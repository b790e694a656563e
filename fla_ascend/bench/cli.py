"""``fla-ascend bench``: the correctness-gated benchmark (the library's main job).

Exit status: 0 when every gate that ran passed, 1 when any case failed its gate or raised,
2 for bad arguments.
"""
from __future__ import annotations

import argparse
import sys

from fla_ascend.cli_common import check_outputs, list_arg, plot_suffixes


def register(sub) -> None:
    """Add the ``bench`` subparser to ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser(
        "bench",
        help="correctness-gated benchmark of the ops (gate vs the fp32 reference, then time)",
        description=(
            "For each op x shape x mode x provider: compare with the float32 PyTorch reference "
            "(relative RMSE; a failing case is reported and not timed), then time it and print "
            "time, tokens/s, achieved GB/s and TFLOP/s. Default: the Qwen3-Next GatedDeltaNet "
            "shape at full size on GPU/NPU, scaled down on CPU."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "shapes: names (qwen3next, gdn-b4-t4096, gdn-t32k, gdn-b8-t2048, decode-b64, "
            "decode-b256, conv-b4-t4096, conv-t32k, fla-...), groups (anchors, gdn-anchors, "
            "decode-anchors, conv-anchors, fla-defaults, all) or free form "
            "'B=1,T=4096,H=16,HV=32,K=128,V=128'. Every list option takes commas or semicolons "
            "between items; two free-form shapes need a ';' between them. On the CPU interpreter "
            "shapes are scaled down (a line says from what to what); --full-size runs them as given."
        ),
    )
    p.add_argument("--ops", type=list_arg, default=None, help="op names, as --list prints them (default: all)")
    p.add_argument("--shapes", default=None, help="shape names, groups or B=..,T=.. specs")
    p.add_argument("--modes", type=list_arg, default=None, help="fwd,fwdbwd (default: fwd)")
    p.add_argument("--providers", type=list_arg, default=None,
                   help="fla_ascend,torch_ref,fla (default: all; fla only when it imports)")
    p.add_argument("--dtype", default=None, help="bfloat16 | float16 | float32 (default: bf16 on GPU/NPU, fp32 on CPU)")
    p.add_argument("--json", dest="json_path", default=None, metavar="PATH", help="write the JSON artifact")
    p.add_argument("--markdown", default=None, metavar="PATH", help="write the Markdown table")
    p.add_argument("--plot", default=None, metavar="PATH",
                   help="write the plot; its suffix picks the format (.png, .pdf, .svg, ...: what matplotlib writes)")
    p.add_argument("--quick", action="store_true", help="shorter timing, smaller CPU shapes")
    p.add_argument("--full-size", action="store_true", help="on CPU, do not scale shapes down")
    p.add_argument("--no-peaks", action="store_true", help="skip the copy-bandwidth / matmul-peak measurement")
    p.add_argument("--no-progress", action="store_true", help="no progress bar / per-case lines")
    p.add_argument("--compact", action="store_true", help="narrower final table")
    p.add_argument("--list", action="store_true", help="list ops, providers and named shapes, then exit")
    p.add_argument("--layer", action="store_true",
                   help="time a whole GatedDeltaNet layer (Qwen3-Next configuration, B1 T4096 on GPU/NPU; a "
                        "small one on CPU), forward and forward+backward, after a correctness gate against "
                        "the layer's pure-PyTorch reference")
    p.set_defaults(func=run)


def _list() -> int:
    from fla_ascend.bench import cases as C

    for name, spec in C.OPS.items():
        print(f"op {name}: dims {','.join(spec.dims)}; modes {','.join(spec.modes)}; "
              f"providers {','.join(spec.providers)}; default shapes {','.join(spec.default_shapes)}")
    for name, shape in C.NAMED_SHAPES.items():
        print(f"shape {name}: {C.shape_key(shape)}")
    for name, members in C.SHAPE_GROUPS.items():
        print(f"group {name}: {', '.join(members)}")
    return 0


def _command(args) -> list[str]:
    """The ``fla-ascend bench`` command line equivalent to ``args`` (recorded in meta)."""
    cmd = ["fla-ascend", "bench"]
    for opt in ("ops", "modes", "providers"):
        if getattr(args, opt):
            cmd += [f"--{opt}", ",".join(getattr(args, opt))]
    for opt, dest in (("shapes", "shapes"), ("dtype", "dtype"), ("json", "json_path"), ("markdown", "markdown"),
                      ("plot", "plot")):
        if getattr(args, dest):
            cmd += [f"--{opt}", str(getattr(args, dest))]
    for flag in ("quick", "full_size", "no_peaks", "no_progress", "compact"):
        if getattr(args, flag):
            cmd.append("--" + flag.replace("_", "-"))
    return cmd


def run(args) -> int:
    """Run the suite from parsed arguments; print the table; write the requested files."""
    if args.list:
        return _list()
    if args.quick and args.full_size:
        print("fla-ascend bench: --quick runs smaller CPU shapes and --full-size runs them as given: pass one "
              "of them", file=sys.stderr)
        return 2
    if args.layer:
        given = [opt for opt, v in (("--json", args.json_path), ("--markdown", args.markdown), ("--plot", args.plot))
                 if v]
        if given:
            print(f"fla-ascend bench: --layer prints one table; {', '.join(given)} "
                  f"{'is' if len(given) == 1 else 'are'} for the op suite", file=sys.stderr)
            return 2
        return _run_layer()
    from fla_ascend.console import make_console

    err = make_console(stderr=True)
    check_outputs(files=[("--json", args.json_path, None), ("--markdown", args.markdown, None),
                         ("--plot", args.plot, plot_suffixes() if args.plot else None)], log=err.print)
    from fla_ascend.bench import report, suite  # torch: after the cheap checks
    try:
        artifact = suite.run_suite(
            ops=args.ops, shapes=args.shapes, modes=args.modes, providers=args.providers,
            dtype=args.dtype, quick=args.quick, progress=not args.no_progress,
            full_size=args.full_size, measure_peaks=not args.no_peaks,
            command=_command(args),
            on_case=(lambda partial: suite.write_json(partial, args.json_path)) if args.json_path else None,
        )
    except ValueError as e:
        err.print(f"[red]fla-ascend bench: {e}[/red]")
        return 2
    except OSError as e:  # the --json artifact is rewritten after every case
        err.print(f"[red]fla-ascend bench: cannot write an output file: {e}[/red]")
        return 2
    if not artifact["results"]:  # the error and why (the notes), not an empty table before it
        err.print("[red]fla-ascend bench: no case matched the selection (ops, shapes and modes)"
                  + "".join(f"\n  {n}" for n in artifact.get("notes") or []) + "[/red]", highlight=False)
        return 2
    report.print_table(artifact, compact=args.compact)
    try:
        _write_outputs(args, artifact, suite, report, err)
    except OSError as e:
        err.print(f"[red]fla-ascend bench: cannot write an output file: {e}[/red]")
        return 2
    bad = report.failed(artifact)
    if bad:
        err.print(f"[red]{len(bad)} case(s) failed their correctness gate or raised[/red]")
        return 1
    if all(r["skipped"] for r in artifact["results"]):
        err.print("[red]fla-ascend bench: every case was skipped (see the note column): nothing was measured[/red]")
        return 2
    return 0


LAYER_TOLERANCE = {"float32": 0.005, "bfloat16": 0.01}
"""Relative-RMSE gate of the layer's output against ``GatedDeltaNet.forward_reference`` (fp32
ops on the same parameters): the ops' 0.005 in fp32; bf16 adds the rounding of the projections,
so the suite's fwd+bwd tolerance, 0.01, applies."""


def _run_layer() -> int:
    """``fla-ascend bench --layer``: gate the layer's forward against its fp32 reference, then time
    forward and forward+backward with :func:`fla_ascend.bench.layer.bench_layer`."""
    import torch
    from rich.table import Table

    from fla_ascend import backend
    from fla_ascend.bench.layer import bench_layer
    from fla_ascend.console import make_console
    from fla_ascend.layers import GatedDeltaNet
    from fla_ascend.ops.utils import rel_rmse

    device = backend.device()
    on_cpu = device.type == "cpu"
    # the interpreter's bf16 tl.dot is wrong (README, "Tests"): fp32 and a small layer on the CPU
    dtype, seq_len = (torch.float32, 64) if on_cpu else (torch.bfloat16, 4096)
    config = dict(hidden_size=64, num_k_heads=2, num_v_heads=4, head_k_dim=32, head_v_dim=32) if on_cpu else {}
    torch.manual_seed(0)
    layer = GatedDeltaNet(**config, device=device, dtype=dtype)
    x = torch.randn(1, seq_len, layer.hidden_size, device=device, dtype=dtype)
    with torch.no_grad():
        ratio = rel_rmse(layer.forward_reference(x)[0].float(), layer(x)[0].float())
    console = make_console()
    tol = LAYER_TOLERANCE[str(dtype).removeprefix("torch.")]
    gate = f"{'PASS' if ratio <= tol else 'FAIL'} {ratio:.1e} (tol {tol})"
    table = Table(title=f"GatedDeltaNet layer on {backend.info().device_name}")
    for col in ("config", "B x T", "dtype", "gate", "fwd ms", "fwd+bwd ms"):
        table.add_column(col)
    times = {}
    if ratio <= tol:
        repeat = 3 if on_cpu else 20
        for mode in ("fwd", "fwdbwd"):
            times[mode] = bench_layer(seq_len=seq_len, dtype=dtype, mode=mode, warmup=1 if on_cpu else 5,
                                      repeat=repeat, layer=layer, device=device)["ms"]
    table.add_row("small (CPU)" if on_cpu else "Qwen3-Next", f"1 x {seq_len}", str(dtype).removeprefix("torch."),
                  gate, *(f"{times[m]:.3f}" if m in times else "-" for m in ("fwd", "fwdbwd")))
    console.print(table)
    return 0 if times else 1


def _write_outputs(args, artifact, suite, report, err) -> None:
    """Write the requested JSON / Markdown / PNG files (raises OSError)."""
    if args.json_path:
        err.print(f"wrote {suite.write_json(artifact, args.json_path)}")
    if args.markdown:
        err.print(f"wrote {report.write_markdown(artifact, args.markdown)}")
    if args.plot:
        err.print(f"wrote {report.write_plot(artifact, args.plot)}")
