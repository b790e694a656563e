#!/usr/bin/env python3
"""Run flash-linear-attention's own tests (``tests/ops/test_gdn.py`` and ``tests/modules/test_conv.py``
of its repository, at the commit of the installed release) with fla-ascend enabled as a backend of
fla's registry (:func:`fla_ascend.integrations.fla.enable`), and write a summary.

    python scripts/fla_tests_with_backend.py DIR [--out FILE] [--devices cuda,npu] [--ops OP,...]
                                             [--no-backend] [-- PYTEST ARGS...]

DIR holds the two test files anywhere below it (fetched for the run, never part of this
repository); a ``conftest.py`` of fla's beside them (its ``tests/conftest.py``, which fills fla's
``torch.empty`` with NaN) is used when present, since pytest runs in DIR. pytest is started with
this file as a plugin (``-p fla_tests_with_backend``): the plugin enables the backend in
``pytest_configure``, before any test is collected, in every process (pytest-xdist workers too);
``--no-backend`` runs the same tests on fla's own kernels, for a baseline. With ``--devices cpu`` on
a machine without GPU/NPU (a check of this script and of the backend under the Triton interpreter),
fla's ``fla.utils.device``, which 0.6.0 sets to ``"cuda"`` there, is set to ``"cpu"`` so that its
tests put their tensors where fla-ascend takes them.

The summary (``--out``, default ``fla_tests_summary.md``, and the same data as ``.json`` beside it)
has the counts (passed, failed, error, skipped, xfailed, xpassed), each failure's test id with its
first error line, the skip reasons, and :func:`fla_ascend.integrations.fla.stats` (the calls fla's
registry gave fla-ascend, and why it kept the others), summed over the processes. The exit status
is pytest's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV = "FLA_ASCEND_FLA_TESTS"
"""The environment variable carrying the plugin's settings (JSON) into pytest's processes."""
TEST_FILES = ("test_gdn.py", "test_conv.py")


# ----------------------------------------------------------------------------- the plugin
_settings: dict = json.loads(os.environ.get(ENV, "{}"))
_results: dict = {"outcomes": Counter(), "failures": [], "skips": Counter()}

if __name__ != "__main__" and _settings.get("backend", True):
    # loaded by pytest (-p), before any conftest imports fla and with it Triton: on a machine without
    # GPU/NPU fla_ascend must switch Triton to its interpreter first
    import fla_ascend.backend  # noqa: F401

    if "cpu" in _settings.get("devices", ()) and fla_ascend.backend.device_type() == "cpu":
        # fla 0.6.0's fla.utils.device is "cuda" on a machine without an accelerator (it picks the
        # autocast device type so): its tests would put every tensor on CUDA. Here they go to the CPU,
        # where the backend takes them (fla's own kernels cannot run there)
        import fla.utils
        import fla.utils.hardware
        import torch

        for _m in (fla.utils, fla.utils.hardware):
            _m.device, _m.device_torch_lib = "cpu", torch.cpu


def _first_line(report) -> str:
    """The first error line of a failed report (``E   ...``), or its crash message."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.strip().splitlines()[0]
    text = str(longrepr)
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return text.strip().splitlines()[-1] if text.strip() else "(no message)"


def pytest_configure(config):
    if not _settings.get("backend", True):
        return
    from fla_ascend.integrations import fla as ff

    ff.enable(_settings.get("ops"), devices=_settings.get("devices", ("npu", "cuda")))


def pytest_collectreport(report):
    if report.failed:
        _results["outcomes"]["error"] += 1
        _results["failures"].append({"test": report.nodeid or "(collection)", "when": "collect",
                                     "first_line": _first_line(report)})


def pytest_runtest_logreport(report):
    outcome = None
    if hasattr(report, "wasxfail"):
        if report.when == "call" or report.skipped:
            outcome = "xpassed" if report.passed else "xfailed"
    elif report.when == "call":
        outcome = report.outcome
    elif report.failed:
        outcome = "error"
    elif report.skipped:
        outcome = "skipped"
    if outcome is None:
        return
    _results["outcomes"][outcome] += 1
    if outcome in ("failed", "error"):
        _results["failures"].append({"test": report.nodeid, "when": report.when, "first_line": _first_line(report)})
    elif outcome == "skipped":
        _results["skips"][_first_line(report)] += 1
    if "out" in _settings and not _is_worker():
        _write(_out(), None, _stats())  # after every test: a run killed at a time limit leaves its summary so far


def _stats() -> dict:
    if not _settings.get("backend", True):
        return {}
    from fla_ascend.integrations import fla as ff

    return ff.stats()


def _merge(into: dict, stats: dict) -> None:
    for fn, counts in stats.items():
        for key, n in counts.items():
            into.setdefault(fn, Counter())[key] += n


def _out() -> Path:
    return Path(_settings.get("out", "fla_tests_summary.md"))


def _is_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def pytest_sessionfinish(session, exitstatus):
    out = _out()
    worker = getattr(session.config, "workerinput", None)
    if worker is not None:  # a pytest-xdist worker: its reports reach the controller, its stats do not
        out.with_name(f"{out.stem}.stats-{worker['workerid']}.json").write_text(json.dumps(_stats()))
        return
    stats: dict = {}
    _merge(stats, _stats())
    for part in sorted(out.parent.glob(f"{out.stem}.stats-*.json")):
        _merge(stats, json.loads(part.read_text()))
        part.unlink()
    _write(out, exitstatus, stats)


_env_cache: dict = {}


def _environment() -> dict:
    if _env_cache:
        return _env_cache
    import importlib.metadata as md

    import torch

    env = {"python": sys.version.split()[0], "torch": torch.__version__}
    for dist in ("fla-core", "fla-ascend", "triton", "triton-ascend"):
        try:
            env[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
    else:
        env["device"] = "cpu"
    _env_cache.update(env)
    return env


def _write(out: Path, exitstatus, stats: dict) -> None:
    """The summary as Markdown at ``out`` and JSON beside it; ``exitstatus`` ``None``: the run is not
    over (written after each test)."""
    res = _results
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    counts = {k: res["outcomes"].get(k, 0) for k in order}
    data = {
        "backend": _settings.get("backend", True), "devices": _settings.get("devices"), "ops": _settings.get("ops"),
        "environment": _environment(), "args": _settings.get("args", []),
        "exit_status": None if exitstatus is None else int(exitstatus), "finished": exitstatus is not None,
        "counts": counts, "failures": res["failures"],
        "skips": [{"reason": r, "count": n} for r, n in res["skips"].most_common()],
        "stats": {fn: dict(c) for fn, c in stats.items()},
    }
    out.with_suffix(".json").write_text(json.dumps(data, indent=2))
    env = data["environment"]
    backend_line = (f"fla-ascend enabled as fla's backend: ops {data['ops'] or 'all'}, devices {data['devices']}"
                    if data["backend"] else "fla-ascend not enabled (fla's own kernels: the baseline)")
    lines = [
        "# flash-linear-attention's tests with fla-ascend as its backend", "",
        f"- {backend_line}",
        "- " + ", ".join(f"{k} {v}" for k, v in env.items()),
        f"- pytest {' '.join(data['args'])} "
        + (f"(exit status {data['exit_status']})" if data["finished"] else "(not finished: the counts so far)"), "",
        "## Counts", "",
        ", ".join(f"{k} {v}" for k, v in counts.items()), "",
        "## Calls fla's registry gave fla-ascend", "",
    ]
    if stats:
        lines += ["| fla function | taken by fla-ascend | kept by fla: reason (calls) |", "|---|---|---|"]
        for fn, c in sorted(stats.items()):
            c = Counter(c)
            kept = "; ".join(f"{r} ({n})" for r, n in c.most_common() if r != "fla_ascend") or "-"
            lines.append(f"| {fn} | {c.get('fla_ascend', 0)} | {kept} |")
    else:
        lines.append("none" if data["backend"] else "(backend not enabled)")
    lines += ["", f"## Failures and errors ({len(res['failures'])}): first error line", ""]
    lines += [f"- `{f['test']}` ({f['when']}): {f['first_line']}" for f in res["failures"]] or ["none"]
    lines += ["", "## Skip reasons", ""]
    lines += [f"- {n} x {r}" for r, n in res["skips"].most_common()] or ["none"]
    out.write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- the command
def main(argv: list[str] | None = None) -> int:
    """Find the two test files under DIR, run pytest on them with this file as a plugin, return its
    exit status. Exits with status 2 when DIR lacks one of the files."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dir", type=Path, help="a folder holding test_gdn.py and test_conv.py (anywhere below it)")
    p.add_argument("--out", type=Path, default=Path("fla_tests_summary.md"),
                   help="the summary (Markdown; the same data as .json beside it)")
    p.add_argument("--devices", default="npu,cuda",
                   help="device types routed to fla-ascend (comma-separated; cpu: under the Triton interpreter)")
    p.add_argument("--ops", default=None, help="ops to route (comma-separated; default all: "
                                               "chunk_gated_delta_rule, causal_conv1d, causal_conv1d_update, "
                                               "l2norm, rms_norm_gated)")
    p.add_argument("--no-backend", action="store_true", help="run on fla's own kernels (a baseline)")
    args = p.parse_args(argv)
    folder = args.dir.resolve()
    files = []
    for name in TEST_FILES:
        found = sorted(folder.rglob(name))
        if not found:
            print(f"{name} not found under {folder}", file=sys.stderr)
            return 2
        files.append(found[0])
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    rel = [str(f.relative_to(folder)) for f in files]
    pytest_args = ["-p", "fla_tests_with_backend", "-p", "no:cacheprovider", "--rootdir", str(folder), *rel, *extra]
    settings = {"backend": not args.no_backend, "devices": args.devices.split(","),
                "ops": args.ops.split(",") if args.ops else None, "out": str(out), "args": rel + extra}
    env = dict(os.environ, **{ENV: json.dumps(settings)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    rc = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], cwd=folder, env=env).returncode
    print(f"summary: {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
