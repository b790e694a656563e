"""``chunk_gated_delta_rule`` under context parallelism (``cp_context=``).

Forward, on each rank, for each part it holds (one; two with zigzag):

1. if the part's last sequence continues into the next part, its map ``(A, b)`` over the part's last
   segment (:func:`fla_ascend.ops.cp.chain.part_maps`; ``A`` only when that segment is the whole part
   and its sequence started earlier, else zeros);
2. one ``all_gather`` of every part's ``[HV, K, K + V]`` fp32 map;
3. if the part's first sequence started in an earlier part, its start state: the chain folded over
   those earlier parts (:func:`fla_ascend.ops.cp.chain.compose`);
4. the single-device forward on the local batch with these start states as ``initial_state``.

Backward, the other way: the start-state gradient ``c`` of each part's first segment from its own
outputs (:func:`fla_ascend.ops.cp.chain.part_state_grad`), one ``all_gather`` of ``[HV, K, V]`` per
part, the end-state gradient of each part's last sequence folded from later parts through ``A^T``
(the maps gathered in the forward), then the single-device backward with these as ``dht``.

Communication per rank and call: forward ``parts * HV * K * (K + V)`` fp32 sent, ``world`` times that
received (one ``all_gather``); backward ``parts * HV * K * V`` sent, ``world`` times that received.
Independent of ``T``. ``A_log``/``dt_bias`` gradients are this rank's share (sum them over the
group, as for any parameter under context parallelism).
"""
from __future__ import annotations

import torch

from fla_ascend.ops.cp.chain import compose, part_maps, part_state_grad
from fla_ascend.ops.cp.comm import gather_parts
from fla_ascend.ops.gated_delta_rule.chunk import chunk_gated_delta_rule_bwd, chunk_gated_delta_rule_fwd
from fla_ascend.ops.utils.autograd import kernel_backward


class ChunkGatedDeltaRuleCPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, A_log, dt_bias, chunk_size, cp, grad_needed):
        HV, K, V = v.shape[2], k.shape[3], v.shape[3]
        maps = torch.zeros(len(cp.parts), HV, K, K + V, dtype=torch.float32, device=q.device)
        for i, p in enumerate(cp.parts):
            if p.post_num_ranks:
                end = p.offset + cp.part_len
                need_A = p.pre_num_ranks > 0 and p.last_seq_start == p.offset
                seg = [t[:, p.last_seq_start:end] for t in (k, v, g, beta)]
                A, b = part_maps(*seg, A_log, dt_bias, chunk_size, need_A)
                maps[i, ..., :K], maps[i, ..., K:] = A, b
        gathered = gather_parts(maps, cp)
        maps_A, maps_b = gathered[..., :K].contiguous(), gathered[..., K:].contiguous()
        h0 = torch.zeros(cp.num_seqs, HV, K, V, dtype=torch.float32, device=q.device)
        for p in cp.parts:
            if p.pre_num_ranks:
                h0[p.first_seq] = compose(maps_A, maps_b, range(p.slot - p.pre_num_ranks, p.slot))
        cu = cp.cu_seqlens
        o, _, Ai = chunk_gated_delta_rule_fwd(q, k, v, g, beta, scale, h0, False, cu, A_log, dt_bias, chunk_size,
                                              store_ai=grad_needed)
        ctx.save_for_backward(q, k, v, g, beta, A_log, dt_bias, Ai, h0, maps_A)
        ctx.scale, ctx.chunk_size, ctx.cp = scale, chunk_size, cp
        return o

    @staticmethod
    @kernel_backward("chunk_gated_delta_rule")
    def backward(ctx, do):
        q, k, v, g, beta, A_log, dt_bias, Ai, h0, maps_A = ctx.saved_tensors
        cp, scale, chunk_size = ctx.cp, ctx.scale, ctx.chunk_size
        do = do.contiguous()
        HV, K, V = v.shape[2], k.shape[3], v.shape[3]
        c = torch.zeros(len(cp.parts), HV, K, V, dtype=torch.float32, device=q.device)
        for i, p in enumerate(cp.parts):
            if p.pre_num_ranks:
                sq, sk, sv, sg, sb, sdo = (t[:, p.offset:p.first_seq_end] for t in (q, k, v, g, beta, do))
                c[i] = part_state_grad(sq, sk, sv, sg, sb, A_log, dt_bias, scale, sdo, chunk_size)
        c = gather_parts(c, cp)
        dht = torch.zeros(cp.num_seqs, HV, K, V, dtype=torch.float32, device=q.device)
        for p in cp.parts:
            if p.post_num_ranks:
                dht[p.last_seq] = compose(maps_A, c, range(p.slot + p.post_num_ranks, p.slot, -1), transpose=True)
        dq, dk, dv, dg, dbeta, _, dA_log, ddt_bias = chunk_gated_delta_rule_bwd(
            q, k, v, g, beta, scale, h0, cp.cu_seqlens, A_log, dt_bias, chunk_size, do, dht, Ai=Ai,
        )
        return dq, dk, dv, dg, dbeta, None, dA_log, ddt_bias, None, None, None
