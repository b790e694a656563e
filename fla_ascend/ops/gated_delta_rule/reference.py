"""Pure-PyTorch fp32 references of the gated delta rule, written from the recurrence.

Per value head, with state ``h`` of shape ``[K, V]`` and token ``t``::

    h   = exp(g_t) * h                     # decay (g_t is log-space, <= 0)
    v'  = beta_t * (v_t - h^T k_t)          # delta rule correction
    h   = h + k_t v'^T
    o_t = h^T (scale * q_t)

Both references are differentiable by autograd and serve as the gradient reference too.
They compute in float32 on the inputs' device and return outputs in float32; given float64
inputs they compute and return float64 (the tests' reference for extreme gates).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _real(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32, or as it is when it is float64."""
    return x if x.dtype == torch.float64 else x.float()


def gate_activation(g: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor | None) -> torch.Tensor:
    """GatedDeltaNet decay ``g = -exp(A_log) * softplus(g + dt_bias)`` in float32.

    Shapes: ``g`` ``[B, T, HV]``, ``A_log`` and ``dt_bias`` ``[HV]``.
    Source: Qwen3-Next's GatedDeltaNet (``-A_log.exp() * softplus(a + dt_bias)``).
    """
    x = _real(g) if dt_bias is None else _real(g) + _real(dt_bias)
    return -_real(A_log).exp() * F.softplus(x)


def l2normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(sum(x^2) + eps)`` over the last dim, float32."""
    x = _real(x)
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _prepare(q, k, v, g, beta, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias):
    if beta is None:  # a plain delta rule step: beta = 1
        beta = v.new_ones(v.shape[:3])
    if g is None:  # no scalar decay
        g = v.new_zeros(v.shape[:3])
    q, k, v, beta = (_real(x) for x in (q, k, v, beta))
    g = gate_activation(g, A_log, dt_bias) if use_gate_in_kernel else _real(g)
    if use_qk_l2norm_in_kernel:
        q, k = l2normalize(q), l2normalize(k)
    H, HV = q.shape[2], v.shape[2]
    if HV != H:
        q = q.repeat_interleave(HV // H, dim=2)
        k = k.repeat_interleave(HV // H, dim=2)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return q * scale, k, v, g, beta


def _segments(T: int, B: int, cu_seqlens: torch.Tensor | None):
    """(batch index, start, end) for each sequence."""
    if cu_seqlens is None:
        return [(b, 0, T) for b in range(B)]
    bounds = cu_seqlens.tolist()
    return [(0, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def naive_recurrent_gated_delta_rule(
    q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
    use_qk_l2norm_in_kernel=False, cu_seqlens=None, use_gate_in_kernel=False, A_log=None, dt_bias=None,
    gk=None, gv=None,
):
    """Token-by-token reference. Arguments and shapes as :func:`fla_ascend.ops.chunk_gated_delta_rule`;
    ``g`` / ``beta`` may be ``None`` (no scalar decay / beta = 1), ``beta`` ``[B, T, HV, V]`` (one per
    value column), and ``gk`` ``[B, T, HV, K]`` /
    ``gv`` ``[B, T, HV, V]`` decay the state per row / per column (``h = h * exp(gk)[:, None] *
    exp(gv)[None, :]`` after the scalar decay), as the fused recurrent op.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` float32; ``final_state`` ``[N, HV, K, V]``
        float32, or ``None`` when ``output_final_state`` is False.
    """
    q, k, v, g, beta = _prepare(q, k, v, g, beta, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias)
    B, T, HV, V = v.shape
    K = k.shape[-1]
    outs = [[None] * T for _ in range(B)]
    finals = []
    for n, (b, bos, eos) in enumerate(_segments(T, B, cu_seqlens)):
        h = q.new_zeros(HV, K, V) if initial_state is None else _real(initial_state[n])
        for t in range(bos, eos):
            h = h * g[b, t].exp()[:, None, None]
            if gk is not None:
                h = h * _real(gk[b, t]).exp()[:, :, None]
            if gv is not None:
                h = h * _real(gv[b, t]).exp()[:, None, :]
            b_t = beta[b, t] if beta.dim() == 4 else beta[b, t][:, None]  # [HV, V] or [HV, 1]
            v_new = b_t * (v[b, t] - torch.einsum("hkv,hk->hv", h, k[b, t]))
            h = h + torch.einsum("hk,hv->hkv", k[b, t], v_new)
            outs[b][t] = torch.einsum("hkv,hk->hv", h, q[b, t])
        finals.append(h)
    o = (torch.stack([torch.stack(row) if T else v.new_zeros(0, HV, V) for row in outs]) if T
         else v.new_zeros(B, 0, HV, V))
    return o, (torch.stack(finals) if output_final_state else None)


def chunk_gated_delta_rule_ref(
    q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
    use_qk_l2norm_in_kernel=False, cu_seqlens=None, use_gate_in_kernel=False, A_log=None, dt_bias=None,
    chunk_size=64,
):
    """Chunked (WY-representation) reference, the algorithm the kernels implement.

    Per chunk of ``C`` tokens with in-chunk cumulative gates ``G``::

        A   = strict_lower(beta_i k_i.k_j exp(G_i - G_j)),  T_ = (I + A)^-1
        w   = T_ (beta exp(G) k),  u = T_ (beta v)
        v'  = u - w h,  o = (q exp(G)) h + causal(q.k exp(G_i - G_j)) v'
        h   = exp(G_C) h + (k exp(G_C - G))^T v'

    Arguments as :func:`naive_recurrent_gated_delta_rule`; same returns.
    """
    q, k, v, g, beta = _prepare(q, k, v, g, beta, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias)
    B, T, HV, V = v.shape
    K = k.shape[-1]
    o = v.new_zeros(B, T, HV, V)
    finals = []
    for n, (b, bos, eos) in enumerate(_segments(T, B, cu_seqlens)):
        h = q.new_zeros(HV, K, V) if initial_state is None else _real(initial_state[n])
        for s in range(bos, eos, chunk_size):
            e = min(s + chunk_size, eos)
            qc, kc, vc = (x[b, s:e].transpose(0, 1) for x in (q, k, v))  # [HV, C, *]
            bc = beta[b, s:e].transpose(0, 1)  # [HV, C]
            G = g[b, s:e].transpose(0, 1).cumsum(-1)  # [HV, C]
            C = e - s
            decay = (G[:, :, None] - G[:, None, :]).tril().exp()  # [HV, C, C] (upper part masked below)
            strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
            causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
            A = (bc[:, :, None] * (kc @ kc.transpose(1, 2)) * decay).masked_fill(~strict, 0)
            Tm = torch.linalg.solve_triangular(
                A + torch.eye(C, device=q.device), torch.eye(C, device=q.device).expand(HV, C, C), upper=False
            )
            w = Tm @ (bc[..., None] * G.exp()[..., None] * kc)
            u = Tm @ (bc[..., None] * vc)
            v_new = u - w @ h
            attn = ((qc @ kc.transpose(1, 2)) * decay).masked_fill(~causal, 0)
            o[b, s:e] = ((qc * G.exp()[..., None]) @ h + attn @ v_new).transpose(0, 1)
            G_last = G[:, -1:]
            h = G_last.exp()[..., None] * h + (kc * (G_last - G).exp()[..., None]).transpose(1, 2) @ v_new
        finals.append(h)
    return o, (torch.stack(finals) if output_final_state else None)
