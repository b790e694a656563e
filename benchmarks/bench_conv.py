"""causal_conv1d (silu, bias) fwd and fwd+bwd at the anchor shapes, in one process.

    PYTHONPATH=. python benchmarks/bench_conv.py [--json PATH] [any fla-ascend bench option]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", "--ops", "causal_conv1d", "--shapes", "conv-anchors", "--modes", "fwd,fwdbwd",
                   *sys.argv[1:]]))
