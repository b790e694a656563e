"""Full benchmark table, one process per op (``--isolate case``: per (op, shape, mode)): JSON,
Markdown and PNG under --out.

    PYTHONPATH=. python benchmarks/run_all.py --out out --shapes all --modes fwd,fwdbwd
    PYTHONPATH=. python benchmarks/run_all.py --out out --shapes anchors --compare HEAD~1

Thin wrapper over :mod:`fla_ascend.bench.isolated`; see docs/bench.md.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend.bench.isolated import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
