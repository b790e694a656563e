"""Ours-only conv A/B timing in the current tree: fwdbwd and fwd at both conv anchors (do_bench median)."""
import os, sys
sys.path.insert(0, os.getcwd())
import fla_ascend  # noqa
import torch
from triton.testing import do_bench
from fla_ascend.bench.suite import op_call
tag = sys.argv[1]
for shape in ("conv-b4-t4096", "conv-t32k"):
    for mode in ("fwdbwd", "fwd"):
        call, _ = op_call("causal_conv1d", shape, mode, "fla_ascend", "bfloat16")
        call(); torch.cuda.synchronize()
        ms = do_bench(call, warmup=50, rep=200)
        print(f"{tag} {shape} {mode} {ms:.3f} ms", flush=True)
