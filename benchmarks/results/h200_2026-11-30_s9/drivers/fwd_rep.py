"""python3 fwd_rep.py TAG OP SHAPE MODE: three do_bench medians of the suite's call in one process."""
import os, sys
sys.path.insert(0, os.getcwd())
import fla_ascend  # noqa
import torch
from triton.testing import do_bench
from fla_ascend.bench.suite import op_call
tag, op, shape, mode = sys.argv[1:5]
call, _ = op_call(op, shape, mode, "fla_ascend", "bfloat16")
call(); torch.cuda.synchronize()
print(tag, op, shape, mode, " ".join(f"{do_bench(call, warmup=50, rep=300):.4f}" for _ in range(3)), "ms", flush=True)
