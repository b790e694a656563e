"""chunk_gated_delta_rule (fwd, fwd+bwd) and its decode path at the anchor shapes, in one process.

    PYTHONPATH=. python benchmarks/bench_gated_delta_rule.py [--json PATH] [any fla-ascend bench option]

Same as ``fla-ascend bench --ops chunk_gated_delta_rule,fused_recurrent_gated_delta_rule
--shapes gdn-anchors;decode-anchors --modes fwd,fwdbwd``; later options override these.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fla_ascend.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", "--ops", "chunk_gated_delta_rule,fused_recurrent_gated_delta_rule",
                   "--shapes", "gdn-anchors;decode-anchors", "--modes", "fwd,fwdbwd", *sys.argv[1:]]))
