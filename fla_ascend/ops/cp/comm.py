"""The collectives of context parallelism (``torch.distributed``; the device they need)."""
from __future__ import annotations

import torch
import torch.distributed as dist


def comm_device(group, like: torch.device) -> torch.device:
    """Device of the tensors a collective of ``group`` takes: the host for gloo, ``like`` otherwise."""
    return torch.device("cpu") if dist.get_backend(group) == "gloo" else like


def gather_parts(x: torch.Tensor, ctx) -> torch.Tensor:
    """``all_gather`` over the group of ``ctx`` (an :class:`~fla_ascend.ops.cp.context.FLACPContext`) of
    every rank's per-part tensors ``x`` ``[parts, ...]``, returned in chain (slot) order ``[n_parts, ...]``
    on ``x``'s device."""
    dev = comm_device(ctx.group, x.device)
    mine = x.to(dev).contiguous()
    out = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(out, mine, group=ctx.group)
    by_rank = torch.stack(out).to(x.device)  # [world, parts, ...]
    if len(ctx.parts) == 1:
        return by_rank[:, 0]
    # zigzag: rank r's front is slot r, its back slot 2 * world - 1 - r
    return torch.cat([by_rank[:, 0], by_rank[:, 1].flip(0)])
