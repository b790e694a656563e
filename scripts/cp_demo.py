"""Context parallelism demo: one packed batch split across the ranks of a torchrun job.

    torchrun --nproc-per-node 2 scripts/cp_demo.py                   # CPU, gloo, Triton interpreter
    torchrun --nproc-per-node 2 scripts/cp_demo.py --layout zigzag

Every rank builds the same global batch (same seed), keeps its slice, runs the short convolution and
the chunked gated delta rule with ``cp_context=``, backpropagates, and compares its output and input
gradients with the single-process ops on the whole batch (rank 0 prints the relative RMSE of each,
gathered over the ranks). On CUDA it uses NCCL and one GPU per rank.
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

from fla_ascend.cli_common import split_list
from fla_ascend.ops import causal_conv1d, chunk_gated_delta_rule
from fla_ascend.ops.cp import build_cp_context
from fla_ascend.ops.utils import rel_rmse


def my_tokens(x: torch.Tensor, rank: int, world: int, layout: str) -> torch.Tensor:
    """This rank's slice of ``[1, T, ...]``: part ``rank`` of ``world``, or zigzag's parts ``rank`` and
    ``2 * world - 1 - rank`` of ``2 * world``."""
    if layout == "contiguous":
        return x.chunk(world, dim=1)[rank]
    parts = x.chunk(2 * world, dim=1)
    return torch.cat([parts[rank], parts[2 * world - 1 - rank]], dim=1)


def layer(x, conv_w, A_log, dt_bias, gate, beta, H, K, cu_seqlens, cp_context):
    """A GatedDeltaNet-like token mixer: causal conv over q/k/v, then the gated delta rule."""
    y, _ = causal_conv1d(x, conv_w, activation="silu", cu_seqlens=cu_seqlens, cp_context=cp_context)
    q, k, v = y.view(1, y.shape[1], 3, H, K).unbind(2)
    o, _ = chunk_gated_delta_rule(q, k, v, gate, beta.sigmoid(), use_qk_l2norm_in_kernel=True,
                                  use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, cu_seqlens=cu_seqlens,
                                  cp_context=cp_context)
    return o


def _seqlens(text: str) -> list[int]:
    """One ``--seqlens`` word: lengths separated by commas or semicolons (cli_common.split_list)."""
    items = split_list(text) or []
    try:
        lens = [int(s) for s in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by spaces, commas or semicolons, "
                                         f"got {text!r}") from None
    if not lens or min(lens) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return lens


def parse_args(argv=None) -> argparse.Namespace:
    """The demo's options; ``--seqlens 40,150,67`` and ``--seqlens 40 150 67`` are the same."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", choices=["contiguous", "zigzag"], default="contiguous")
    p.add_argument("--seqlens", type=_seqlens, nargs="+", default=[[40, 150, 66]],
                   help="sequence lengths of the packed batch, separated by spaces, commas or semicolons "
                        "(their sum must divide by the number of parts)")
    args = p.parse_args(argv)
    args.seqlens = [n for part in args.seqlens for n in part]
    return args


def main() -> None:
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32

    H, K, W = 2, 32, 4
    T = sum(args.seqlens)
    gen = torch.Generator().manual_seed(0)  # the same global batch on every rank
    rnd = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    full = dict(x=rnd(1, T, 3 * H * K), gate=rnd(1, T, H), beta=rnd(1, T, H), do=rnd(1, T, H, K))
    params = dict(conv_w=rnd(3 * H * K, W) / W, A_log=rnd(H) * 0.5 - 1.0, dt_bias=rnd(H))
    full = {n: t.to(device, dtype) for n, t in full.items()}
    params = {n: t.to(device, dtype if n == "conv_w" else torch.float32).requires_grad_() for n, t in params.items()}
    cu_seqlens = torch.tensor([0] + torch.tensor(args.seqlens).cumsum(0).tolist(), dtype=torch.int32, device=device)

    # context parallel: every rank its slice; the context says where the sequences cross ranks
    cp = build_cp_context(cu_seqlens, group=dist.group.WORLD, conv1d_kernel_size=W, layout=args.layout)
    mine = {n: my_tokens(t, rank, world, args.layout).detach().requires_grad_(n == "x") for n, t in full.items()}
    o = layer(mine["x"], params["conv_w"], params["A_log"], params["dt_bias"], mine["gate"], mine["beta"],
              H, K, None, cp)
    o.backward(mine["do"])
    dx, dparams = mine["x"].grad, {n: t.grad.clone() for n, t in params.items()}
    for t in dparams.values():  # parameter gradients are per-rank shares: sum them (as DDP/FSDP would)
        dist.all_reduce(t)

    # the same layer on one process, whole batch
    for t in params.values():
        t.grad = None
    x1 = full["x"].detach().requires_grad_()
    o1 = layer(x1, params["conv_w"], params["A_log"], params["dt_bias"], full["gate"], full["beta"],
               H, K, cu_seqlens, None)
    o1.backward(full["do"])
    for name, got, ref in [("o", o, o1), ("dx", dx, x1.grad)]:
        err = rel_rmse(my_tokens(ref, rank, world, args.layout).float(), got.float())
        errs = [torch.zeros((), device=device) for _ in range(world)]
        dist.all_gather(errs, torch.tensor(err, device=device))
        if rank == 0:
            print(f"{name:8s} rel-RMSE per rank: " + ", ".join(f"{float(e):.1e}" for e in errs))
    if rank == 0:
        for n, t in params.items():
            print(f"d{n:7s} rel-RMSE: {rel_rmse(t.grad.float(), dparams[n].float()):.1e}")
        print(f"{world} ranks, layout {args.layout}, sequences {args.seqlens}: local cu_seqlens of rank 0 "
              f"{cp.cu_seqlens_cpu.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
