"""``fla-ascend ir ...``: capture and inspect the IR of every compilation stage of an op's kernels,
a thin layer over :mod:`fla_ascend.ir.capture`.

Bad arguments exit with status 2 through argparse, a :class:`~fla_ascend.cli_common.UsageError`
(``fla-ascend ir capture: error: <why>``: an unknown op, an output folder that cannot be used) or
``error: <why>``.
"""
from __future__ import annotations

import sys

from fla_ascend.cli_common import UsageError, check_outputs, interpreter_path


def register(sub) -> None:
    """Add the ``ir`` subcommand to ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser("ir", help="capture and inspect the IR of every compilation stage of an op's kernels")
    irs = p.add_subparsers(dest="ir_cmd", required=True)
    q = irs.add_parser("capture", help="trace the op's kernel launches and keep each compilation stage's IR")
    q.add_argument("op")
    q.add_argument("--dir", required=True, help="output directory (e.g. WORKSPACE/round-N/ir)")
    q.add_argument("--target", choices=["npu", "cuda"], default="npu")
    q.add_argument("--arch", help="NPU SoC (default Ascend910B2) or CUDA capability (default 90)")
    q.add_argument("--dtype", default="bfloat16", help="dtype of the traced example inputs")
    q.add_argument("--mode", choices=["fwd", "fwdbwd"], default="fwd")
    q.add_argument("--shape", help="traced input shape, e.g. B=1,T=64,H=2,HV=4,K=128,V=128 (default: the op's "
                                   "first default shape scaled down); head dims decide the compiled tiles")
    q.add_argument("--source", help="directory whose fla_ascend/ files overlay the checkout (e.g. round-N/src)")
    q.add_argument("--python", type=interpreter_path,
                   help="interpreter to run the capture in (one with the target's Triton)")
    q = irs.add_parser("stages", help="list captured stages; with a second DIR, diff them")
    q.add_argument("dir")
    q.add_argument("other", nargs="?")
    q.add_argument("--kernel", help="only this kernel")
    q.add_argument("--stage", help="only this stage (ttir, ttadapter, ttgir, ptx, ...)")
    q.add_argument("--diff", action="store_true", help="print unified diffs, not only counts")
    p.set_defaults(func=run_ir)


def run_ir(args) -> int:
    from fla_ascend.ir import capture as ir

    try:
        if args.ir_cmd == "capture":
            try:
                ir.check_capture(args.op, args.dir, target=args.target, arch=args.arch, mode=args.mode,
                                 shape=args.shape)
            except ValueError as e:
                raise UsageError(str(e)) from None
            check_outputs(folders=[("--dir", args.dir)])
            man = ir.capture(args.op, args.dir, target=args.target, arch=args.arch, dtype=args.dtype,
                             mode=args.mode, source=args.source, python=args.python, shape=args.shape)
            for k in man["kernels"]:
                stages = ", ".join(s["stage"] for s in k["stages"])
                print(f"{k['name']}: {stages}" + (f"  (stopped: {k['stopped']})" if k.get("stopped") else ""))
            print(f"manifest: {args.dir}/manifest.json")
            return 0 if man["kernels"] else 1
        if args.other:
            print(ir.diff_text(args.dir, args.other, kernel=args.kernel, stage=args.stage, full=args.diff))
        else:
            print(ir.stages_text(args.dir, kernel=args.kernel, stage=args.stage))
        return 0
    except UsageError:
        raise  # printed by fla-ascend's main as a usage error
    except (ValueError, ir.IRCaptureError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

