"""``fla-ascend round ...``: thin layer over :mod:`fla_ascend.round`.

Refusals (:class:`RoundError`) print ``refused: <why>`` on stderr and exit with status 2; bad
arguments exit with status 2 through argparse or ``error: <why>``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from fla_ascend.cli_common import UsageError, check_outputs, interpreter_path
from fla_ascend.cli_common import split_list as _csv


def register(sub) -> None:
    """Add the ``round`` subcommand to ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser("round", help="optimisation rounds with correctness and performance gates")
    rs = p.add_subparsers(dest="round_cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", "-w", default=os.environ.get("FLA_ROUND_WORKSPACE", "."),
                        help="workspace directory (default $FLA_ROUND_WORKSPACE or .)")

    def add(name, **kw):
        return rs.add_parser(name, parents=[common], **kw)

    q = add("init", help="record the baseline: source snapshot, correctness, canonical artifact")
    q.add_argument("op")
    q.add_argument("--shapes", help="suite shape keys, separated by commas or semicolons (default: the op's shape set)")
    q.add_argument("--modes", default="fwd,fwdbwd", help="subset of fwd,fwdbwd")
    q.add_argument("--dtype", default=None,
                   help="bfloat16 | float16 | float32 (default: bf16 on GPU/NPU, fp32 on the CPU interpreter)")
    q.add_argument("--target", choices=["operator", "kernel"], default="operator",
                   help="operator: compare whole-op time; kernel: kernel time where the profiler gives it")
    q.add_argument("--quick", action="store_true", help="suite quick settings for every canonical run")
    q.add_argument("--files", help="source files overriding the op's file list (commas or semicolons between them)")
    q.add_argument("--extra-files", help="source files added to the op's file list")
    q.add_argument("--suite", default=None, help="benchmark function module:function (default: the package suite)")
    q.add_argument("--suite-path", action="append", default=[], help="extra import directory for --suite")
    q.add_argument("--python", type=interpreter_path, help="interpreter for benchmark subprocesses")

    q = add("start", help="open round-N from the last accepted round")
    q.add_argument("--hypothesis", required=True)
    q.add_argument("--analysis-level", choices=["pattern", "profile", "ir"], default="pattern")
    q.add_argument("--reason", help="why this analysis level")

    q = add("set", help="change the open round's analysis level (logged as an escalation)")
    q.add_argument("--analysis-level", choices=["pattern", "profile", "ir"], required=True)
    q.add_argument("--reason", required=True)

    q = add("log", help="append a note to the open round's attempts.md")
    q.add_argument("text")

    q = add("sync", help="copy the op's files from a checkout into the open round's snapshot")
    q.add_argument("--from", dest="source_root", help="directory holding fla_ascend/ (default: this checkout)")

    q = add("probe", help="screening benchmark (quick, few shapes); never the round's result")
    q.add_argument("--shapes", type=int, default=2, help="how many of the baseline's shapes")

    add("bench", help="correctness gate, then the canonical benchmark artifact")

    q = add("compare", help="speedups vs baseline and parent: the only source of claimed speedups")
    q.add_argument("--metric", choices=["total-op", "kernel"])

    q = add("submit", help="close the open round as accepted or rejected")
    q.add_argument("--status", choices=["accepted", "rejected"], required=True)
    q.add_argument("--note", help="the round's conclusion")
    q.add_argument("--allow-slower", metavar="REASON", help="accept a round slower than its parent, with the reason")

    q = add("lesson", help="append a reusable lesson to learned_lessons.md, with evidence")
    q.add_argument("text")
    q.add_argument("--evidence", required=True, help="a file inside the workspace")
    q.add_argument("--scope", help="where the lesson applies or what limits it")

    q = add("status", help="workspace state and what the open round still lacks")
    q.add_argument("--json", action="store_true")
    p.set_defaults(func=run_round)


def run_round(args) -> int:
    from fla_ascend.bench.report import INTERPRETER_LABEL
    from fla_ascend.round import RoundError, Workspace
    from fla_ascend.round.compare import ComparisonError, comparison_markdown
    from fla_ascend.round.runner import RunnerError

    try:
        if args.round_cmd == "init":
            check_outputs(folders=[("--workspace", args.workspace)])
            kw = {}
            if args.suite:
                kw["suite"] = args.suite
            ws = Workspace.init(
                args.op, args.workspace, shapes=_csv(args.shapes), modes=_csv(args.modes),
                dtype=args.dtype, target=args.target, quick=args.quick, files=_csv(args.files),
                extra_files=_csv(args.extra_files), suite_pythonpath=args.suite_path, python=args.python, **kw,
            )
            c = ws.state_of("baseline")["correctness"]
            print(f"baseline recorded in {ws.path}: {len(ws.config['files'])} source files, correctness "
                  f"{c['status']} ({c['n_cases']} cases), artifact baseline/bench.json")
            return 0
        ws = Workspace(args.workspace)
        if args.round_cmd == "start":
            r = ws.start(args.hypothesis, args.analysis_level, args.reason)
            print(f"opened round-{r.n} from {r.state['parent']}; edit {r.path / 'src'} (or `round sync`), "
                  "then `round bench` and `round compare`")
        elif args.round_cmd == "set":
            ws.set_state(args.analysis_level, args.reason)
            print(f"analysis level set to {args.analysis_level}")
        elif args.round_cmd == "log":
            ws.log(args.text)
        elif args.round_cmd == "sync":
            changed = ws.sync(args.source_root)
            print("changed vs parent: " + (", ".join(changed) or "none"))
        elif args.round_cmd == "probe":
            rec = ws.probe(args.shapes)
            s = rec["screen"]["summary"]
            if rec["screen"].get("interpreter"):
                print(f"[{INTERPRETER_LABEL}]")
            print(f"[{rec['label']}]\nverdict: {rec['verdict']} (screening geomean "
                  f"{s['geomean_speedup'] if s['geomean_speedup'] is None else round(s['geomean_speedup'], 3)} "
                  f"over {s['n_cases']} cases; candidate correctness {rec['candidate_correctness']['status']})")
        elif args.round_cmd == "bench":
            st = ws.bench()
            c = st["correctness"]
            if c["status"] == "passed":
                print(f"correctness passed ({c['n_cases']} cases); canonical artifact {st['benchmark']['artifact']}")
            else:
                print(f"correctness FAILED ({len(c['failing'])} of {c['n_cases']} cases); evidence {c['evidence']}; "
                      "no canonical artifact, the round can only be submitted as rejected")
                return 1
        elif args.round_cmd == "compare":
            out = ws.compare(args.metric)
            print(comparison_markdown(out["vs_baseline"], "vs baseline"))
            print(comparison_markdown(out["vs_parent"], f"vs parent ({out['parent']})"))
        elif args.round_cmd == "submit":
            r = ws.submit(args.status, note=args.note, allow_slower=args.allow_slower)
            print(f"round-{r.n} submitted as {args.status}; summary {r.path / 'summary.md'}; "
                  f"ledger {ws.path / 'opt-note.md'}")
        elif args.round_cmd == "lesson":
            ws.lesson(args.text, args.evidence, args.scope)
            print(f"lesson appended to {ws.path / 'learned_lessons.md'}")
        elif args.round_cmd == "status":
            st = ws.status()
            if args.json:
                print(json.dumps(st, indent=2))
            else:
                print(f"op {st['op']}, best {st['best']}, {len(st['rounds'])} rounds submitted")
                o = st["open_round"]
                if o:
                    print(f"open: {o['name']} (parent {o['parent']}, level {o['analysis_level']}): correctness "
                          f"{o['correctness']}, benchmark {o['benchmark']}, compared {o['compared']}")
                    for m in o["missing_for_accepted"]:
                        print(f"  missing for accepted: {m}")
        return 0
    except UsageError:
        raise  # printed by fla-ascend's main as a usage error
    except RoundError as e:
        print(f"refused: {e}", file=sys.stderr)
        return 2
    except (ValueError, ComparisonError, RunnerError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
