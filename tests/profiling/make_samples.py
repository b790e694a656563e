"""Regenerate the committed fixture and the shipped sample runs:

    PYTHONPATH=. python tests/profiling/make_samples.py

``tests/profiling/fixtures/a2_pipe_utilization``: the four public A2 rows, one step.
``fla_ascend/profiling/samples/{base,new}``: a synthetic 3-step / 4-step pair for the README
example (real PMU rows; durations, counts and kernels varied by known factors: new has
MatMulV3 x0.8, two Add launches per step, no FlashAttentionScore, one new fused kernel).
"""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import profiling_builders as B  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def main():
    fx = ROOT / "tests" / "profiling" / "fixtures" / "a2_pipe_utilization"
    shutil.rmtree(fx, ignore_errors=True)
    B.make_run(fx, name="host_1234_20250109100000000_ascend_pt")
    s = ROOT / "fla_ascend" / "profiling" / "samples"
    shutil.rmtree(s, ignore_errors=True)
    B.make_steps_run(s / "base", name="host_1234_20250109100000000_ascend_pt", steps=3)
    B.make_steps_run(s / "new", name="host_1234_20250110100000000_ascend_pt", steps=4,
                     scales={"MatMulV3": 0.8}, counts={"Add": 2}, drop=("FlashAttentionScore",),
                     add=[("fused_gdn_kernel", "FusedGDN", "MIX_AIV", 250.0)])
    print(fx, s)


if __name__ == "__main__":
    main()
