"""Subprocess side of :func:`fla_ascend.round.runner.run_suite_isolated` (not a public API).

``python -m fla_ascend.round._worker REQUEST.json``: checks that ``fla_ascend`` is the overlaid
copy and that each overlaid file has the snapshot's hash, runs the suite, writes the artifact.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[0]).read_text())
    root = Path(req["root"]).resolve()
    import fla_ascend

    pkg = Path(fla_ascend.__file__).resolve().parent
    if pkg.parent != root:
        print(f"overlay not active: fla_ascend imported from {pkg}, expected under {root}", file=sys.stderr)
        return 3
    for rel, sha in req["overlay"].items():
        got = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        if got != sha:
            print(f"overlay file {rel} has sha256 {got}, snapshot says {sha}", file=sys.stderr)
            return 3
    from fla_ascend import backend  # noqa: F401  (before the suite imports triton: it decides interpreter mode)

    mod_name, fn_name = req["suite"].split(":", 1)
    run_suite = getattr(importlib.import_module(mod_name), fn_name)
    artifact = run_suite(
        ops=req["ops"], shapes=req["shapes"], modes=req["modes"], providers=req["providers"],
        dtype=req["dtype"], quick=req["quick"], progress=False,
    )
    artifact.setdefault("meta", {})["source_overlay"] = req["overlay"]
    Path(req["out"]).write_text(json.dumps(artifact, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
