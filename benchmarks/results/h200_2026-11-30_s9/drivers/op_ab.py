"""Ours-only A/B timing in the current tree: python3 op_ab.py TAG OP SHAPE[,SHAPE] (fwdbwd and fwd, do_bench median)."""
import os, sys
sys.path.insert(0, os.getcwd())
import fla_ascend  # noqa
import torch
from triton.testing import do_bench
from fla_ascend.bench.suite import op_call
tag, op, shapes = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
for shape in shapes:
    for mode in ("fwdbwd", "fwd"):
        call, _ = op_call(op, shape, mode, "fla_ascend", "bfloat16")
        call(); torch.cuda.synchronize()
        ms = do_bench(call, warmup=50, rep=300)
        print(f"{tag} {op} {shape} {mode} {ms:.4f} ms", flush=True)
