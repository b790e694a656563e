"""Benchmark a candidate implementation: the package with a round's source snapshot overlaid.

Mechanism (chosen for isolation; see docs/round.md):

1. copy the ``fla_ascend`` package of the running checkout to a fresh temporary directory
   (``__pycache__`` left out);
2. copy the round's snapshot files over their originals in that copy (only the workspace's
   declared source files; the suite, the references and everything else stay as in the
   checkout);
3. run the benchmark suite in a *new Python process* whose ``sys.path`` starts with that
   directory, so ``import fla_ascend`` there is the candidate; the worker
   (:mod:`fla_ascend.round._worker`) verifies that it really imported the copy and that every
   overlaid file has the snapshot's hash before running anything;
4. read the artifact JSON the worker wrote, then delete the directory.

A subprocess is used, not an in-process re-import, because Triton's ``@jit`` objects, the
interpreter's rewritten-function cache and ``sys.modules`` all hold the first version of a
kernel; a fresh process guarantees the candidate's code is what runs and times.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fla_ascend.round.sources import PACKAGE, package_root, tree_hashes

DEFAULT_SUITE = "fla_ascend.bench.suite:run_suite"


class RunnerError(RuntimeError):
    """The benchmark subprocess failed; the message carries the end of its output."""


@dataclass
class SuiteRequest:
    """Arguments of one ``run_suite`` call (the benchmark contract's signature).

    ``suite`` is ``"module:function"``; ``pythonpath`` lists extra directories appended after the
    candidate package (for a suite that lives outside the package, e.g. in tests).
    """

    ops: list[str]
    shapes: list[str] | None = None
    modes: list[str] = field(default_factory=lambda: ["fwd"])
    providers: list[str] = field(default_factory=lambda: ["fla_ascend"])
    dtype: str = "bfloat16"
    quick: bool = False
    suite: str = DEFAULT_SUITE
    pythonpath: list[str] = field(default_factory=list)

    def validate(self) -> None:
        """Raises ValueError naming the field when a value has the wrong type or is empty."""
        if not self.ops or not all(isinstance(o, str) and o for o in self.ops):
            raise ValueError(f"ops must be a non-empty list of op names, got {self.ops!r}")
        if self.shapes is not None and not all(isinstance(s, str) for s in self.shapes):
            raise ValueError(f"shapes must be None or a list of shape keys, got {self.shapes!r}")
        bad = [m for m in self.modes if m not in ("fwd", "fwdbwd")]
        if not self.modes or bad:
            raise ValueError(f"modes must be a non-empty subset of ['fwd', 'fwdbwd'], got {self.modes!r}")
        if ":" not in self.suite:
            raise ValueError(f"suite must be 'module:function', got {self.suite!r}")


def run_suite_isolated(
    request: SuiteRequest,
    snapshot_dir: Path | None,
    files: list[str],
    python: str | None = None,
    timeout_s: float | None = None,
) -> dict:
    """Run the benchmark suite on the package with ``snapshot_dir``'s files overlaid.

    Args:
        request: what to run (:class:`SuiteRequest`).
        snapshot_dir: directory holding ``files`` at their repository-relative paths; ``None``
            runs the checkout unchanged.
        files: repository-relative paths to overlay (``fla_ascend/ops/norm/l2norm.py``).
        python: interpreter for the subprocess; default the running one.
        timeout_s: wall-clock limit of the subprocess in seconds, ``None`` for none.

    Returns:
        The suite's artifact dict, with ``meta["source_overlay"] = {path: sha256}`` added.

    Raises:
        ValueError: bad request fields.
        FileNotFoundError: a file of ``files`` is missing in ``snapshot_dir``.
        RunnerError: the subprocess failed or wrote no artifact (message: its last output).
    """
    request.validate()
    root = package_root()
    overlay = tree_hashes(files, snapshot_dir) if snapshot_dir is not None else {}
    missing = [f for f, h in overlay.items() if not h]
    if missing:
        raise FileNotFoundError(f"snapshot {snapshot_dir} lacks {missing}")
    tmp = Path(tempfile.mkdtemp(prefix="fla-round-"))
    try:
        shutil.copytree(root / PACKAGE, tmp / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for rel in overlay:
            shutil.copy2(Path(snapshot_dir) / rel, tmp / rel)
        req_path, out_path = tmp / "request.json", tmp / "artifact.json"
        req = asdict(request) | {"overlay": overlay, "root": str(tmp), "out": str(out_path)}
        req_path.write_text(json.dumps(req, indent=1))
        env = dict(os.environ)
        extra = [str(Path(p).resolve()) for p in request.pythonpath]
        env["PYTHONPATH"] = os.pathsep.join([str(tmp), *extra] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.pop("TRITON_INTERPRET", None)  # the child's backend decides again, as any process does
        try:
            proc = subprocess.run(
                [python or sys.executable, "-m", f"{PACKAGE}.round._worker", str(req_path)],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as e:
            raise RunnerError(f"benchmark subprocess exceeded {timeout_s} s") from e
        if proc.returncode != 0 or not out_path.is_file():
            tail = (proc.stdout[-2000:] + "\n" + proc.stderr[-4000:]).strip()
            raise RunnerError(f"benchmark subprocess failed (exit {proc.returncode}):\n{tail}")
        return json.loads(out_path.read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
