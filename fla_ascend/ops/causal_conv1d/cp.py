"""``causal_conv1d`` under context parallelism: the ``W - 1`` halo tokens before each part.

A part whose first sequence started earlier needs the ``W - 1`` inputs before it (those of the same
sequence; older positions read zero). Every rank contributes the last ``min(W - 1, part_len)`` tokens
of each of its parts to one ``all_gather``; each part takes its halo from the tokens before it in
chain order (several parts back when ``part_len < W - 1``) and hands it to the single-device op as
the conv ``initial_state`` of its first sequence. The backward sends the halo's gradient back the
same way (one ``all_gather``) and adds it to the tokens it came from, as a fixed-order matmul
(deterministic).

Communication per rank and call: forward ``parts * min(W - 1, part_len) * D`` elements of ``x``'s
dtype sent, ``world`` times that received; backward ``parts * (W - 1) * D`` sent, ``world`` times
that received. Independent of ``T``. ``weight``/``bias`` gradients are this rank's share.
"""
from __future__ import annotations

import torch

from fla_ascend.ops.cp.comm import gather_parts
from fla_ascend.ops.cp.context import FLACPContext


def _halo_sources(cp: FLACPContext, W: int, slots) -> torch.Tensor:
    """For each halo position ``j`` (``0 .. W - 2``, oldest first) of each slot in ``slots``: its index in
    the gathered tail stream (``[n_parts * L]``, ``L = min(W - 1, part_len)``), or -1 before token 0.
    Returns ``[len(slots), W - 1]`` int64."""
    pl, L = cp.part_len, min(W - 1, cp.part_len)
    s = torch.as_tensor(list(slots), dtype=torch.int64)[:, None]
    pos = s * pl - (W - 1) + torch.arange(W - 1)[None, :]  # global token positions
    src = (pos.div(pl, rounding_mode="floor")) * L + pos.remainder(pl) - (pl - L)
    return torch.where(pos >= 0, src, -1)


def _halo_mask(cp: FLACPContext, W: int) -> torch.Tensor:
    """``[parts, W - 1, 1]`` bool: halo positions of this rank's parts inside the part's first sequence."""
    j = torch.arange(W - 1)[None, :]
    pre = torch.tensor([p.pre_num_conv_tokens for p in cp.parts])[:, None]
    return (j >= W - 1 - pre)[..., None]


class HaloExchange(torch.autograd.Function):
    """``tails`` ``[parts, L, D]`` (each part's last ``L`` tokens) -> ``halo`` ``[parts, W - 1, D]`` (the
    ``W - 1`` tokens before each part, zero outside its first sequence)."""

    @staticmethod
    def forward(ctx, tails, cp, W):
        stream = gather_parts(tails, cp).flatten(0, 1)  # [n_parts * L, D]
        src = _halo_sources(cp, W, [p.slot for p in cp.parts]).to(tails.device)
        mask = _halo_mask(cp, W).to(tails.device)
        halo = stream[src.clamp(min=0)] * (mask & (src >= 0)[..., None])
        ctx.cp, ctx.W, ctx.L = cp, W, tails.shape[1]
        return halo

    @staticmethod
    def backward(ctx, dhalo):
        cp, W, L = ctx.cp, ctx.W, ctx.L
        dev = dhalo.device
        dhalo = dhalo * _halo_mask(cp, W).to(dev)  # only positions the forward passed on carry gradient
        d_all = gather_parts(dhalo.float(), cp).flatten(0, 1)  # [n_parts * (W - 1), D]
        src_all = _halo_sources(cp, W, range(cp.n_parts)).flatten()  # [n_parts * (W - 1)]
        mine = torch.tensor([p.slot * L + i for p in cp.parts for i in range(L)])  # my tails' stream indices
        # [parts * L, n_parts * (W - 1)]: which gathered halo position came from which of my tokens
        route = (src_all[None, :] == mine[:, None]).to(device=dev, dtype=torch.float32)
        dtails = (route @ d_all).view(len(cp.parts), L, -1).to(dhalo.dtype)
        return dtails, None, None


def conv_initial_state(x: torch.Tensor, W: int, cp: FLACPContext) -> torch.Tensor | None:
    """The conv ``initial_state`` ``[N_local, D, W]`` of this rank's local batch (``x`` ``[1, T_local, D]``):
    each part's first sequence gets its halo (differentiable in ``x`` across ranks), every other
    sequence zeros. ``None`` for ``W == 1``."""
    if W == 1:
        return None
    pl, L, D = cp.part_len, min(W - 1, cp.part_len), x.shape[2]
    tails = torch.stack([x[0, p.offset + pl - L: p.offset + pl] for p in cp.parts])  # [parts, L, D]
    halo = HaloExchange.apply(tails, cp, W)  # [parts, W - 1, D]
    rows = torch.cat([halo.new_zeros(len(cp.parts), 1, D), halo], dim=1)  # [parts, W, D]: column 0 unused
    idx = torch.tensor([p.first_seq for p in cp.parts], device=x.device)
    h0 = x.new_zeros(cp.num_seqs, W, D).index_put((idx,), rows)
    return h0.transpose(1, 2)
