"""Run the suite one ``(op, shape, mode)`` group per subprocess and merge the artifacts.

For long device runs (``scripts/gpu_bench.sh``): a kernel that crashes the process (illegal
address, segfault) or hangs only loses its own group, which is recorded as error rows; every
provider of a group still runs in the same process, so the speed ratios are side by side.
After each group the merged JSON / Markdown / PNG are rewritten, so a run cut short by a time
limit still leaves its results.

``python -m fla_ascend.bench.isolated --peaks PATH`` measures copy bandwidth and matmul peak
alone and writes them as JSON (used once per run).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fla_ascend.cli_common import output_dir, split_list

__all__ = ["run_isolated", "main"]


def _subprocess_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), root) if p)
    return env


def _measure_peaks(path: str) -> int:
    from fla_ascend.bench import timing

    timer = timing.make_timer()
    out = {"copy_bandwidth_gbps": timing.copy_bandwidth_gbps(timer), "matmul_tflops": timing.matmul_tflops(timer)}
    Path(path).write_text(json.dumps(out))
    return 0


def _error_rows(op, label, shape, full, mode, providers, dtype, msg):
    from fla_ascend.bench import suite

    rows = []
    for p in providers:
        r = suite._row(op, label, shape, full, mode, p, dtype)
        r.update(correct=False, error=msg)
        rows.append(r)
    return rows


def run_isolated(
    out_dir: str | Path,
    ops: list[str] | None = None,
    shapes: str | None = None,
    modes: list[str] | None = None,
    providers: list[str] | None = None,
    dtype: str | None = None,
    quick: bool = False,
    timeout_s: float = 300.0,
    budget_s: float | None = None,
    stem: str = "bench",
    log=print,
) -> dict:
    """Run every planned ``(op, shape, mode)`` group in its own ``fla-ascend bench`` process.

    Args:
        out_dir: folder for ``{stem}.json``, ``{stem}.md``, ``{stem}.png`` and ``parts/``.
        ops, shapes, modes, providers, dtype, quick: as :func:`fla_ascend.bench.suite.run_suite`
            (``ops=None``: every op whose fla_ascend function imports).
        timeout_s: wall-clock limit of one group's process (seconds); past it the group is
            recorded as error rows.
        budget_s: stop starting new groups after this many seconds (the rest get
            ``skipped`` rows); ``None``: no limit.
        stem: file name stem of the merged outputs.
        log: callable for one-line progress messages.

    Returns:
        The merged artifact (also written to ``out_dir``).

    Raises:
        ValueError: bad selection (as :func:`suite.run_suite`).
    """
    import torch

    from fla_ascend import backend
    from fla_ascend.bench import cases as C
    from fla_ascend.bench import report, suite

    out_dir = Path(out_dir)
    parts = out_dir / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if ops:
        suite._check_names("ops", ops, list(C.OPS))
    else:
        ops = [n for n, s in C.OPS.items() if s.available("fla_ascend") is None]
    modes = modes or ["fwd"]
    suite._check_names("modes", modes, suite.MODES)
    if providers is None:
        providers = [p for p in suite.PROVIDERS if p != "fla" or suite.fla_left_out() is None]
    tdtype = suite.parse_dtype(dtype)
    plan, notes = suite.plan_cases(ops, shapes, modes, quick=quick)

    env = _subprocess_env()
    peaks = {"copy_bandwidth_gbps": None, "matmul_tflops": None}
    if backend.device_type() != "cpu":
        peaks_path = parts / "peaks.json"
        rc = subprocess.run([sys.executable, "-m", "fla_ascend.bench.isolated", "--peaks", str(peaks_path)],
                            env=env, timeout=timeout_s).returncode
        if rc == 0:
            peaks = json.loads(peaks_path.read_text())
        else:
            notes.append(f"machine peaks not measured (process exit {rc})")
        log(f"peaks: {peaks}")

    merged = {"schema": suite.SCHEMA, "meta": None, "results": [], "notes": notes}

    def flush():
        suite._add_speedups(merged["results"])
        if merged["meta"] is None:
            merged["meta"] = _fallback_meta(tdtype, providers, modes, ops)
        merged["meta"].update(peaks)
        merged["meta"]["command"] = [Path(sys.argv[0]).name, *sys.argv[1:]]
        merged["meta"]["isolation"] = "one process per (op, shape, mode)"
        suite.write_json(merged, out_dir / f"{stem}.json")
        report.write_markdown(merged, out_dir / f"{stem}.md")
        try:
            report.write_plot(merged, out_dir / f"{stem}.png")
        except Exception as e:  # a plot problem must not lose the table
            log(f"plot failed: {e}")

    for i, (op, label, shape, full, mode) in enumerate(plan):
        tag = f"[{i + 1}/{len(plan)}] {op} {C.shape_key(shape)} {mode}"
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            for r in _error_rows(op, label, shape, full, mode, providers, tdtype, None):
                r.update(correct=None, skipped=f"time budget of {budget_s:.0f} s spent before this case")
                merged["results"].append(r)
            log(f"{tag}: skipped (budget)")
            continue
        part = parts / f"{i:03d}.json"
        cmd = [sys.executable, "-m", "fla_ascend.cli", "bench", "--ops", op, "--shapes", label, "--modes", mode,
               "--providers", ",".join(providers), "--dtype", str(tdtype).replace("torch.", ""),
               "--no-peaks", "--no-progress", "--compact", "--json", str(part)]
        if quick:
            cmd.append("--quick")
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, timeout=timeout_s, capture_output=True, text=True)
            rc, tail = proc.returncode, (proc.stderr or "").strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            rc, tail = None, [f"timed out after {timeout_s:.0f} s"]
        took = time.monotonic() - start
        if part.exists() and rc in (0, 1):
            art = suite.read_json(part)
            if merged["meta"] is None:
                merged["meta"] = art["meta"]
            rows = [r for r in art["results"] if r["op"] == op and r["mode"] == mode]
            merged["results"].extend(rows)
            merged["notes"].extend(n for n in art.get("notes", []) if n not in merged["notes"])
            status = ", ".join(f"{r['provider']} {report._status(r)}" + (f" {r['ms']:.3f} ms" if r["ms"] else "")
                               for r in rows)
            log(f"{tag}: {status} ({took:.0f} s)")
        else:
            msg = f"process failed (exit {rc}): " + " | ".join(tail) if rc is not None else tail[0]
            merged["results"].extend(_error_rows(op, label, shape, full, mode, providers, tdtype, msg[:500]))
            log(f"{tag}: {msg[:300]}")
        flush()
        if backend.device_type() == "cuda":
            torch.cuda.empty_cache()
    flush()
    return merged


def _fallback_meta(tdtype, providers, modes, ops):
    import datetime

    from fla_ascend import backend
    from fla_ascend.bench import cases as C
    from fla_ascend.bench import timing

    info = backend.info()
    timer = timing.make_timer()
    return {
        "device": info.device_type, "device_name": info.device_name, "triton_flavour": info.triton_flavour,
        "triton_version": info.triton_version, "torch_version": info.torch_version, "fla_version": C.fla_version(),
        "timing_method": timer.method, "warmup_ms": timer.warmup_ms, "rep_ms": timer.rep_ms,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [], "copy_bandwidth_gbps": None, "matmul_tflops": None,
        "dtype": str(tdtype).replace("torch.", ""), "providers": providers, "modes": modes, "ops": ops,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line of ``benchmarks/run_all.py`` / ``scripts/gpu_bench.sh``. Exit status 1 when
    any case failed its gate, raised or crashed; 0 otherwise; 2 for bad arguments."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peaks", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.environ.get("OUT", "out"), help="output folder (default $OUT or ./out)")
    p.add_argument("--ops", default=None, help="op names, commas or semicolons between them (default: all that import)")
    p.add_argument("--shapes", default="all",
                   help="as fla-ascend bench --shapes (default: all = anchors + fla defaults)")
    p.add_argument("--modes", default="fwd,fwdbwd")
    p.add_argument("--providers", default=None, help="default: fla_ascend,torch_ref and fla when it imports")
    p.add_argument("--dtype", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per (op, shape, mode) process")
    p.add_argument("--budget", type=float, default=None, help="stop starting new cases after this many seconds")
    p.add_argument("--stem", default="bench")
    args = p.parse_args(argv)
    if args.peaks:
        return _measure_peaks(args.peaks)
    from fla_ascend.bench import report

    try:
        output_dir(args.out, "--out")
        art = run_isolated(args.out, ops=split_list(args.ops), shapes=args.shapes, modes=split_list(args.modes),
                           providers=split_list(args.providers), dtype=args.dtype, quick=args.quick,
                           timeout_s=args.timeout, budget_s=args.budget, stem=args.stem,
                           log=lambda m: print(m, flush=True))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report.print_table(art, compact=True)
    print(f"wrote {args.out}/{args.stem}.json, .md, .png")
    return 1 if report.failed(art) else 0


if __name__ == "__main__":
    sys.exit(main())
