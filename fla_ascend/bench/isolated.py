"""Run the suite in subprocesses, one per op (default) or one per ``(op, shape, mode)``, and merge.

The main job on a GPU or NPU (``scripts/bench.sh``) and the full table (``scripts/gpu_bench.sh``)
run here. Isolation:

- ``op`` (default): one process runs every planned shape and mode of one op, with all providers
  of each case side by side. Triton's in-process caches and autotune results are kept from one
  shape to the next, so compile and autotune are paid once per op, not once per case (Triton's
  on-disk cache persists between runs as well). A process that crashes or hangs loses the case it
  was running (error rows); the op's remaining cases run in a fresh process.
- ``case``: one process per ``(op, shape, mode)``, for long runs where every case must start
  from a clean process.

The parent never touches the device (apart from device detection): a child writes its artifact
after every provider row; the parent reads it, prints one line per finished case with its time,
and rewrites the merged JSON and Markdown after every case and the PNG after every op.

``compare=REV`` (``--compare``) benchmarks another git revision of fla-ascend beside this tree:
``git archive REV fla_ascend`` is unpacked into a temporary folder, and after each group of this
tree's cases a second process runs that revision's own ``fla-ascend bench`` for the same cases
with provider ``fla_ascend`` only; its rows are merged under the provider name
``fla_ascend@<short commit>``, so the tables get an ``x fla_ascend@<short commit>`` column.

``python -m fla_ascend.bench.isolated --peaks PATH`` measures copy bandwidth and matmul peak
alone and writes them as JSON (used once per run); ``--child SPEC`` is one group's process.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from fla_ascend.cli_common import output_dir, split_list

__all__ = ["ISOLATION", "EXIT_HOOK", "run_isolated", "prepare_revision", "main"]

ISOLATION = {
    "op": "one process per op (all its shapes and modes)",
    "case": "one process per (op, shape, mode)",
}
"""``isolate`` choices and the words ``meta.isolation`` records for each."""

EXIT_HOOK = "FLA_ASCEND_BENCH_EXIT_AT"
"""Environment variable read by a child process: ``op/shape key/mode/provider``
(``l2norm/B1-T20-H1-K16/fwd/torch_ref``) makes that case end the process (``os._exit(70)``) when
it comes to that provider, the way a kernel that crashes the process would. The crash-recovery
tests use it."""

ROOT = Path(__file__).resolve().parents[2]
POLL_S = 0.25


def _subprocess_env(tree: Path | None = None) -> dict:
    """The environment of a child: the checkout (or ``tree``, another revision's folder) first on
    ``PYTHONPATH``; for ``tree`` this checkout is taken off it."""
    env = dict(os.environ)
    first = str(tree or ROOT)
    rest = [p for p in (env.get("PYTHONPATH") or "").split(os.pathsep)
            if p and (tree is None or Path(p).resolve() != ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([first, *rest])
    return env


def _measure_peaks(path: str) -> int:
    from fla_ascend.bench import timing

    timer = timing.make_timer()
    out = {"copy_bandwidth_gbps": timing.copy_bandwidth_gbps(timer), "matmul_tflops": timing.matmul_tflops(timer)}
    Path(path).write_text(json.dumps(out))
    return 0


def _write_atomic(artifact: dict, path: Path) -> None:
    """Write the artifact so that a reader never sees half a file."""
    from fla_ascend.bench import suite

    tmp = path.with_suffix(".tmp")
    suite.write_json(artifact, tmp)
    os.replace(tmp, path)


def _arm_exit_hook(suite) -> None:
    """Make the case named by :data:`EXIT_HOOK` end the process before its provider runs."""
    target = os.environ.get(EXIT_HOOK)
    if not target:
        return
    want = tuple(target.split("/"))
    run_case = suite._run_case

    def hooked(spec, r, *args, **kw):
        if (r["op"], r["shape"], r["mode"], r["provider"]) == want:
            os._exit(70)
        return run_case(spec, r, *args, **kw)

    suite._run_case = hooked


def _child(spec_path: str) -> int:
    """One group's process: run the cases named in the spec file and write the artifact after
    every provider row."""
    from fla_ascend.bench import report, suite

    spec = json.loads(Path(spec_path).read_text())
    part = Path(spec["part"])
    _arm_exit_hook(suite)
    art = suite.run_suite(
        ops=[spec["op"]], shapes=spec["shapes"], modes=spec["modes"], providers=spec["providers"],
        dtype=spec["dtype"], quick=spec["quick"], progress=False, measure_peaks=False,
        command=spec["command"], on_case=lambda a: _write_atomic(a, part), only=spec["cases"],
    )
    _write_atomic(art, part)
    return 1 if report.failed(art) else 0


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=120)


def prepare_revision(rev: str, dest: Path, repo: Path = ROOT) -> dict:
    """Unpack ``fla_ascend/`` of git revision ``rev`` of ``repo`` into ``dest``.

    Returns:
        ``{"rev": rev, "commit": full hash, "short": short hash, "tree": str(dest)}``.

    Raises:
        ValueError: git is missing, ``repo`` is not a git checkout, or ``rev`` names no commit
            there (the message says which).
    """
    if shutil.which("git") is None:
        raise ValueError("--compare needs git on the PATH")
    try:
        r = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], repo)
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueError(f"--compare {rev}: git failed in {repo}: {e}") from e
    if r.returncode != 0:
        inside = _git(["rev-parse", "--is-inside-work-tree"], repo).returncode == 0
        raise ValueError(f"--compare {rev}: " + (f"no such revision in {repo}" if inside else
                                                 f"{repo} is not a git checkout"))
    commit = r.stdout.decode().strip()
    short = _git(["rev-parse", "--short", commit], repo).stdout.decode().strip() or commit[:7]
    tar = _git(["archive", "--format=tar", commit, "fla_ascend"], repo)
    if tar.returncode != 0:
        raise ValueError(f"--compare {rev}: git archive failed: {tar.stderr.decode().strip()[:300]}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as tf:
        tf.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return {"rev": rev, "commit": commit, "short": short, "tree": str(dest)}


# the other revision's own command line, with its package (not this checkout's) imported
_REV_MAIN = ("import os, sys; tree = os.path.realpath(sys.argv.pop(1)); sys.path.insert(0, tree); "
             "import fla_ascend; where = os.path.realpath(fla_ascend.__file__); "
             "assert where.startswith(tree + os.sep), f'fla_ascend imported from {where}, not from {tree}'; "
             "from fla_ascend.cli import main; sys.exit(main(sys.argv[1:]))")


def _watch(cmd, env, cwd, part: Path, log_path: Path, timeout_s: float, deadline: float | None, on_rows,
           started=None):
    """Run one child, calling ``on_rows(rows)`` whenever its artifact changes; ``on_rows`` returns
    how many cases the new rows finished. The child is killed when no case has finished for
    ``timeout_s`` seconds, or once a case finishes after ``deadline``. ``started()``, when given,
    runs once while the child starts up (the previous process's plot is drawn then).

    Returns:
        ``(status, tail)``: the exit code, ``"timeout"`` or ``"budget"``; the last lines of the
        child's output.
    """
    def read():
        try:
            stamp = part.stat().st_mtime_ns
        except OSError:
            return 0, None
        if stamp == state["stamp"]:
            return 0, None
        try:
            rows = json.loads(part.read_text())["results"]
        except (OSError, ValueError, KeyError):
            return 0, None  # written again in a moment
        state["stamp"] = stamp
        return on_rows(rows), rows

    state = {"stamp": None}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if started is not None:
            started()
        last = time.monotonic()
        status = None
        while status is None:
            rc = proc.poll()
            finished, _ = read()
            now = time.monotonic()
            if finished:
                last = now
            if rc is not None:
                status = rc
            elif finished and deadline is not None and now > deadline:
                status = "budget"
            elif now - last > timeout_s:
                status = "timeout"
            else:
                time.sleep(POLL_S)
                continue
            if rc is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
                proc.wait()
                read()
    try:
        tail = [s for s in log_path.read_text(errors="replace").strip().splitlines() if s.strip()][-3:]
    except OSError:
        tail = []
    return status, tail


def run_isolated(
    out_dir: str | Path,
    ops: list[str] | None = None,
    shapes: str | list[str] | None = None,
    modes: list[str] | None = None,
    providers: list[str] | None = None,
    dtype: str | None = None,
    quick: bool = False,
    timeout_s: float = 300.0,
    budget_s: float | None = None,
    stem: str = "bench",
    log=print,
    isolate: str = "op",
    compare: str | None = None,
) -> dict:
    """Run every planned case in child processes grouped by ``isolate`` and merge the artifacts.

    Args:
        out_dir: folder for ``{stem}.json``, ``{stem}.md``, ``{stem}.png`` and ``parts/`` (each
            process's artifact and output log).
        ops, shapes, modes, providers, dtype, quick: as :func:`fla_ascend.bench.suite.run_suite`
            (``ops=None``: every op whose fla_ascend function imports; ``providers=None``:
            fla_ascend, torch_ref, and fla when it imports). A provider an op does not register
            is left out for that op.
        timeout_s: a process that finishes no case for this many seconds is killed; the case it
            was running becomes error rows and the op's remaining cases go on in a new process.
        budget_s: start no case after this many seconds (the rest get ``skipped`` rows);
            ``None``: no limit.
        stem: file name stem of the merged outputs.
        log: callable for one-line progress messages.
        isolate: ``"op"`` (one process per op) or ``"case"`` (one per ``(op, shape, mode)``).
        compare: a git revision of this checkout to benchmark beside it (provider
            ``fla_ascend@<short commit>``; see the module docstring); ``None``: none.

    Returns:
        The merged artifact (also written to ``out_dir``).

    Raises:
        ValueError: bad selection (as :func:`suite.run_suite`), unknown ``isolate``, or a
            ``compare`` revision that cannot be unpacked.
    """
    from fla_ascend import backend
    from fla_ascend.bench import cases as C
    from fla_ascend.bench import report, suite

    if isolate not in ISOLATION:
        raise ValueError(f"isolate: expected one of {', '.join(ISOLATION)}; got {isolate!r}")
    out_dir = Path(out_dir)
    parts = (out_dir / "parts").resolve()
    parts.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    deadline = None if budget_s is None else t0 + budget_s
    if ops:
        suite._check_names("ops", ops, list(C.OPS))
    else:
        ops = [n for n, s in C.OPS.items() if s.available("fla_ascend") is None]
    modes = modes or ["fwd"]
    suite._check_names("modes", modes, suite.MODES)
    if providers is None:
        providers = [p for p in suite.PROVIDERS if p != "fla" or suite.fla_left_out() is None]
    suite._check_names("providers", providers, sorted({p for op in ops for p in C.OPS[op].providers}))
    tdtype = suite.parse_dtype(dtype)
    dtype_name = str(tdtype).replace("torch.", "")
    if isinstance(shapes, (list, tuple)):
        shapes = ";".join(shapes)
    plan, notes = suite.plan_cases(ops, shapes, modes, quick=quick)
    keys = [(op, C.shape_key(shape), mode) for op, _, shape, _, mode in plan]
    op_providers = {op: [p for p in providers if p in C.OPS[op].providers] for op in ops}

    groups: list[list[int]] = []
    for i, (op, *_rest) in enumerate(plan):
        if isolate == "op" and groups and plan[groups[-1][0]][0] == op:
            groups[-1].append(i)
        else:
            groups.append([i])

    rev_dir, rev = None, None
    if compare:
        rev_dir = Path(tempfile.mkdtemp(prefix="fla-ascend-rev-"))
        try:
            rev = prepare_revision(compare, rev_dir)
        except ValueError:
            shutil.rmtree(rev_dir, ignore_errors=True)
            raise
        rev["provider"] = f"fla_ascend@{rev['short']}"
        log(f"--compare {compare}: {rev['commit']} unpacked, provider {rev['provider']}")

    env = _subprocess_env()
    peaks = {"copy_bandwidth_gbps": None, "matmul_tflops": None}
    if backend.device_type() != "cpu":
        peaks_path = parts / "peaks.json"
        try:
            rc = subprocess.run([sys.executable, "-m", "fla_ascend.bench.isolated", "--peaks", str(peaks_path)],
                                env=env, cwd=ROOT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc == 0:
            peaks = json.loads(peaks_path.read_text())
        else:
            notes.append(f"machine peaks not measured (process exit {rc})")
        log(f"peaks: {peaks}")

    done: dict[int, list[dict]] = {}  # case index -> this tree's rows
    done_rev: dict[int, list[dict]] = {}  # case index -> the compared revision's rows
    merged = {"schema": suite.SCHEMA, "meta": None, "results": [], "notes": notes}
    stats = {"processes": 0, "plot": False}

    def flush(plot: bool, complete: bool = False):
        merged["results"] = [r for i in range(len(plan)) for r in done.get(i, []) + done_rev.get(i, [])]
        suite._add_speedups(merged["results"])
        if merged["meta"] is None:
            merged["meta"] = _fallback_meta(tdtype, providers, modes, ops)
        meta = merged["meta"]
        meta.update(peaks)
        meta.update(providers=providers, modes=modes, ops=ops, complete=complete)
        meta["command"] = [Path(sys.argv[0]).name, *sys.argv[1:]]
        meta["isolation"] = ISOLATION[isolate]
        meta["processes"] = stats["processes"]
        meta["wall_s"] = round(time.monotonic() - t0, 1)
        if rev:
            meta["compare"] = {k: rev[k] for k in ("rev", "commit", "provider")}
            meta["providers"] = [*providers, rev["provider"]] if rev["provider"] not in providers else providers
        suite.write_json(merged, out_dir / f"{stem}.json")
        report.write_markdown(merged, out_dir / f"{stem}.md")
        if plot:
            try:
                report.write_plot(merged, out_dir / f"{stem}.png")
            except Exception as e:  # a plot problem must not lose the table
                log(f"plot failed: {e}")

    def plot_pending():
        if stats["plot"]:
            stats["plot"] = False
            flush(plot=True)

    def tag(i):
        op, _, shape, _, mode = plan[i]
        return f"[{i + 1}/{len(plan)}] {op} {C.shape_key(shape)} {mode}"

    def rows_for(i, provs, msg=None, skipped=None):
        op, label, shape, full, mode = plan[i]
        rows = []
        for p in provs:
            r = suite._row(op, label, shape, full, mode, p, tdtype)
            if skipped:
                r.update(skipped=skipped)
            else:
                r.update(correct=False, error=msg)
            rows.append(r)
        return rows

    def status_line(rows):
        return ", ".join(f"{r['provider']} {report._status(r)}" + (f" {r['ms']:.3f} ms" if r["ms"] else "")
                         for r in rows)

    def run_group(todo: list[int], which: str):
        """Run the cases ``todo`` (all of one op) in this tree (``which="here"``) or in the
        compared revision (``"rev"``); a crash costs the case it was running."""
        op = plan[todo[0]][0]
        provs = op_providers[op] if which == "here" else ["fla_ascend"]
        store = done if which == "here" else done_rev
        suffix = "" if which == "here" else f" {rev['provider']}"
        todo = list(todo)
        idle = 0
        while todo:
            if deadline is not None and time.monotonic() > deadline:
                for i in todo:
                    store[i] = rows_for(i, provs if which == "here" else [rev["provider"]],
                                        skipped=f"time budget of {budget_s:.0f} s spent")
                    log(f"{tag(i)}{suffix}: skipped (budget)")
                flush(plot=False)
                return
            n = stats["processes"]
            stats["processes"] += 1
            part = parts / f"{n:03d}-{which}-{op}.json"
            part.unlink(missing_ok=True)
            log_path = part.with_suffix(".log")
            wanted = {keys[i]: i for i in todo}
            got: dict[int, list[dict]] = {}
            clock = {"t": time.monotonic()}
            if which == "here":
                spec_path = part.with_suffix(".spec.json")
                spec_path.write_text(json.dumps({
                    "op": op, "shapes": shapes, "modes": modes, "providers": provs, "dtype": dtype_name,
                    "quick": quick, "cases": [list(keys[i]) for i in todo], "part": str(part),
                    "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
                }))
                cmd = [sys.executable, "-m", "fla_ascend.bench.isolated", "--child", str(spec_path)]
                cwd, cenv = ROOT, env
            else:
                group_modes = [m for m in modes if any(keys[i][2] == m for i in todo)]
                cmd = [sys.executable, "-c", _REV_MAIN, rev["tree"], "bench", "--ops", op, "--modes",
                       ",".join(group_modes), "--providers", "fla_ascend", "--dtype", dtype_name, "--no-peaks",
                       "--no-progress", "--compact", "--json", str(part.resolve())]
                if isolate == "case":
                    cmd[cmd.index("--modes"):cmd.index("--modes")] = ["--shapes", plan[todo[0]][1]]
                elif shapes:
                    cmd[cmd.index("--modes"):cmd.index("--modes")] = ["--shapes", shapes]
                cmd += ["--quick"] if quick else []
                cwd, cenv = Path(rev["tree"]), _subprocess_env(Path(rev["tree"]))

            def on_rows(rows, wanted=wanted, got=got, clock=clock, provs=provs):
                by_case: dict[int, list[dict]] = {}
                for r in rows:
                    i = wanted.get((r["op"], r["shape"], r["mode"]))
                    if i is not None:
                        by_case.setdefault(i, []).append(r)
                finished = 0
                for i, rs in by_case.items():
                    if i in got or len(rs) < len(provs):
                        continue
                    if which == "rev":
                        rs = [dict(r, provider=rev["provider"], speedup={}) for r in rs]
                    got[i] = store[i] = rs
                    now = time.monotonic()
                    log(f"{tag(i)}: {status_line(rs)} ({now - clock['t']:.0f} s)")
                    clock["t"] = now
                    finished += 1
                if finished:
                    flush(plot=False)
                return finished

            status, tail = _watch(cmd, cenv, cwd, part, log_path, timeout_s, deadline, on_rows, started=plot_pending)
            if part.exists() and merged["meta"] is None and which == "here":
                try:
                    merged["meta"] = json.loads(part.read_text())["meta"]
                except (OSError, ValueError, KeyError):
                    pass
            if part.exists():
                try:
                    art = json.loads(part.read_text())
                    merged["notes"].extend(n for n in art.get("notes", []) if n not in merged["notes"])
                    if which == "here" and merged["meta"] is not None:
                        for k, v in art["meta"].items():
                            merged["meta"].setdefault(k, v)
                except (OSError, ValueError, KeyError):
                    pass
            todo = [i for i in todo if i not in got]
            if not todo:
                break
            if status == "budget":
                continue  # the budget check above marks the rest
            if status == "timeout":
                msg = f"timed out: no case finished for {timeout_s:.0f} s"
            elif status in (0, 1):
                msg = "the process ended without this case's rows"
            else:
                msg = f"process failed (exit {status})" + "".join(f": {' | '.join(tail)}" for _ in tail[:1])
            msg = msg[:500]
            idle = 0 if got else idle + 1
            first, todo = todo[0], todo[1:]
            partial = [r for r in _partial(part, keys[first]) if which == "here"]
            have = {r["provider"] for r in partial}
            store[first] = partial + rows_for(first, [p for p in provs if p not in have] if which == "here"
                                              else [rev["provider"]], msg=msg)
            log(f"{tag(first)}{suffix}: {msg[:300]}")
            if which == "rev" or idle >= 2 or isolate == "case":
                why = ("the compared revision's process is not restarted" if which == "rev" else
                       "its process died twice before finishing a case" if idle >= 2 else "")
                for i in todo:
                    store[i] = rows_for(i, provs if which == "here" else [rev["provider"]],
                                        msg=f"not run: {msg}" + (f" ({why})" if why else ""))
                    log(f"{tag(i)}{suffix}: not run")
                todo = []
            flush(plot=False)

    try:
        for group in groups:
            run_group(group, "here")
            if rev:
                run_group(group, "rev")
            stats["plot"] = True  # drawn while the next process starts, or at the end
        flush(plot=True, complete=True)
    finally:
        if rev_dir is not None:
            shutil.rmtree(rev_dir, ignore_errors=True)
    return merged


def _partial(part: Path, key: tuple) -> list[dict]:
    """The rows of case ``key`` that a process finished before it died."""
    try:
        rows = json.loads(part.read_text())["results"]
    except (OSError, ValueError, KeyError):
        return []
    return [r for r in rows if (r["op"], r["shape"], r["mode"]) == key]


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
    """Command line of ``benchmarks/run_all.py``, ``scripts/gpu_bench.sh`` and the main job of
    ``scripts/bench.sh`` on a GPU/NPU. Exit status 1 when any case failed its gate, raised or
    crashed; 0 otherwise; 2 for bad arguments."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peaks", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.environ.get("OUT", "out"), help="output folder (default $OUT or ./out)")
    p.add_argument("--ops", default=None, help="op names, commas or semicolons between them (default: all that import)")
    p.add_argument("--shapes", default="all",
                   help="as fla-ascend bench --shapes (default: all = anchors + fla defaults)")
    p.add_argument("--modes", default="fwd,fwdbwd")
    p.add_argument("--providers", default=None, help="default: fla_ascend,torch_ref and fla when it imports")
    p.add_argument("--dtype", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--isolate", choices=list(ISOLATION), default="op",
                   help="op (default): one process per op, its shapes and modes in it, compile and autotune "
                        "paid once per op; case: one process per (op, shape, mode)")
    p.add_argument("--compare", default=None, metavar="REV",
                   help="also benchmark git revision REV of this checkout (provider fla_ascend@<short commit>, "
                        "its own fla-ascend bench in a process per op, right after this tree's)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="kill a process that finishes no case for this many seconds (default 300)")
    p.add_argument("--budget", type=float, default=None, help="start no case after this many seconds")
    p.add_argument("--stem", default="bench")
    args = p.parse_args(argv)
    if args.peaks:
        return _measure_peaks(args.peaks)
    if args.child:
        return _child(args.child)
    from fla_ascend.bench import report

    try:
        output_dir(args.out, "--out")
        art = run_isolated(args.out, ops=split_list(args.ops), shapes=args.shapes, modes=split_list(args.modes),
                           providers=split_list(args.providers), dtype=args.dtype, quick=args.quick,
                           timeout_s=args.timeout, budget_s=args.budget, stem=args.stem,
                           log=lambda m: print(m, flush=True), isolate=args.isolate, compare=args.compare)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report.print_table(art, compact=True)
    n = art["meta"].get("processes")
    print(f"wrote {args.out}/{args.stem}.json, .md, .png ({art['meta'].get('wall_s')} s, "
          f"{n} process{'' if n == 1 else 'es'}, {ISOLATION[args.isolate]})")
    return 1 if report.failed(art) else 0


if __name__ == "__main__":
    sys.exit(main())
