"""``fla-ascend check``: the static NPU readiness check (lowering + IR facts + source lint)."""
from __future__ import annotations

import os
import subprocess
import sys


def worker_env() -> dict:
    """Environment for the worker: no interpreter, backend told it targets an NPU, line info on."""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["FLA_ASCEND_DEVICE"] = "npu"
    env["TRITON_DISABLE_LINE_INFO"] = "0"
    return env


def run_worker(argv: list[str], extra_path: str | None = None, module: str = "fla_ascend.check.worker",
               **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m <module> *argv`` (default the check's worker) in a clean process; returns the
    ``CompletedProcess`` (``kwargs`` go to ``subprocess.run``). ``extra_path`` is prepended to
    ``PYTHONPATH`` (tests use it to load a registry of test kernels)."""
    env = worker_env()
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", module, *argv], env=env, **kwargs)


def register(sub) -> None:
    p = sub.add_parser("check", help="lower every kernel for an Ascend chip and report NPU readiness")
    p.add_argument("--chip", action="append", default=None,
                   help="Ascend SoC as TRITON_ASCEND_ARCH spells it (repeatable; default Ascend910B2)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the full results as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    argv = []
    for c in args.chip or ["Ascend910B2"]:
        argv += ["--chip", c]
    if args.json:
        argv += ["--json", args.json]
    return run_worker(argv).returncode
