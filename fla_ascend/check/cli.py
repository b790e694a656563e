"""``fla-ascend check``: the static NPU readiness check (lowering, bishengir-compile, IR and plan
facts, source lint)."""
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
    from fla_ascend.check.worker import add_arguments

    p = sub.add_parser("check", help="lower every kernel launch for Ascend chips, compile it with bishengir-compile "
                                     "and report NPU readiness")
    add_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from fla_ascend.check.worker import check_output_options

    check_output_options(args)  # before the worker starts: a bad path is a usage error (status 2), not a finding
    argv = []
    for c in args.chip or []:
        argv += ["--chip", c]
    for opt in ("kernels", "ops"):
        if getattr(args, opt):
            argv += ["--" + opt, ",".join(getattr(args, opt))]
    for flag in ("no_default_chips", "full", "no_cache", "lowering_only", "strict_a5"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    argv += ["--jobs", str(args.jobs), "--compile-timeout", str(args.compile_timeout)]
    if args.cache_dir:
        argv += ["--cache-dir", os.path.abspath(args.cache_dir)]
    for opt in ("json", "markdown"):
        if getattr(args, opt):
            argv += ["--" + opt, os.path.abspath(getattr(args, opt))]
    return run_worker(argv).returncode
