"""Pure-PyTorch references of Kimi Delta Attention (KDA), written from the recurrence.

KDA is the gated delta rule with a per-channel decay: per value head, with state ``h`` ``[K, V]``
and token ``t``::

    h   = diag(exp(g_t)) h                  # g_t [K], log-space, <= 0
    v'  = beta_t (v_t - h^T k_t)
    h   = h + k_t v'^T
    o_t = h^T (scale q_t)

The recurrence is :func:`fla_ascend.ops.gated_delta_rule.reference.naive_recurrent_gated_delta_rule`
with its per-row decay ``gk``; this module adds KDA's gate activations and arguments. Differentiable
by autograd (the gradient reference too); float32 on the inputs' device, float64 when given float64.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule


def _real(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype == torch.float64 else x.float()


def kda_gate(g: torch.Tensor, A_log: torch.Tensor | None, dt_bias: torch.Tensor | None = None,
             lower_bound: float | None = None) -> torch.Tensor:
    """KDA's log-space decay from the raw gate input, in float32 (float64 for float64 ``g``).

    ``-exp(A_log) * softplus(g + dt_bias)``; with ``lower_bound``:
    ``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))`` (``A_log`` may then be ``None``:
    ``lower_bound * sigmoid(g + dt_bias)``), in ``[lower_bound, 0)``.

    Shapes: ``g`` ``[..., HV, K]``, ``A_log`` ``[HV]``, ``dt_bias`` ``[HV * K]``.
    Source: flash-linear-attention 0.6.0, ``fla.ops.kda.gate`` (``naive_kda_gate``,
    ``naive_kda_lowerbound_gate``), as Kimi Linear uses it.
    """
    HV, K = g.shape[-2:]
    x = _real(g)
    if dt_bias is not None:
        x = x + _real(dt_bias).view(HV, K)
    if lower_bound is None:
        return -_real(A_log).view(HV, 1).exp() * F.softplus(x)
    if A_log is not None:
        x = _real(A_log).view(HV, 1).exp() * x
    return lower_bound * torch.sigmoid(x)


def naive_recurrent_kda(
    q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
    use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None, dt_bias=None, lower_bound=None,
    use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, cu_seqlens=None, **_ignored,
):
    """Token-by-token KDA reference with flash-linear-attention's ``chunk_kda`` arguments.

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]``; g: ``[B, T, HV, K]`` log-space decay (the raw
            gate input with ``use_gate_in_kernel``, see :func:`kda_gate`); beta: ``[B, T, HV]`` (the
            logits with ``use_beta_sigmoid_in_kernel``: ``sigmoid``, ``2 sigmoid`` with
            ``allow_neg_eigval``).
        initial_state: ``[N, HV, K, V]``; cu_seqlens: ``[N + 1]`` (B = 1).
        Other keyword arguments (``chunk_size``, ``safe_gate``, ...) do not change the result and
        are ignored.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, HV, V]`` float32 (float64 for float64 inputs);
        ``final_state`` ``[N, HV, K, V]`` or ``None``.
    """
    gk = kda_gate(g, A_log, dt_bias, lower_bound) if use_gate_in_kernel else _real(g)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(_real(beta)) * (2 if allow_neg_eigval else 1)
    return naive_recurrent_gated_delta_rule(
        q, k, v, None, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens, gk=gk,
    )


def _chunk_matrices(qc, kc, G, bc):
    """``(Akk, Aqk)`` ``[HV, C, C]`` of one chunk (:func:`chunk_kda_ref`) from ``q``, ``k``, the
    in-chunk cumulative gates ``G`` (``[HV, C, K]``) and ``beta`` ``[HV, C]``."""
    C = G.shape[1]
    strict = torch.ones(C, C, dtype=torch.bool, device=G.device).tril(-1)
    causal = torch.ones(C, C, dtype=torch.bool, device=G.device).tril()
    # exp(G_i - G_j) for j <= i only (the upper part would overflow)
    diff = (G[:, :, None, :] - G[:, None, :, :]).masked_fill(~causal[None, :, :, None], 0).exp()
    Akk = (bc[:, :, None] * torch.einsum("hic,hjc,hijc->hij", kc, kc, diff)).masked_fill(~strict, 0)
    Aqk = torch.einsum("hic,hjc,hijc->hij", qc, kc, diff).masked_fill(~causal, 0)
    return Akk, Aqk


def chunk_kda_ref(
    q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
    use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None, dt_bias=None, lower_bound=None,
    use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, cu_seqlens=None, chunk_size=64, **_ignored,
):
    """Chunked (WY-representation) KDA reference, the algorithm the chunk kernels implement.

    Per chunk of ``C`` tokens with in-chunk cumulative gates ``G`` ``[C, K]``::

        Akk = strict_lower(beta_i sum_c k_ic k_jc exp(G_ic - G_jc)),  Ai = (I + Akk)^-1
        w   = Ai (beta k exp(G)),  u = Ai (beta v),  v' = u - w h
        Aqk = causal(sum_c q_ic k_jc exp(G_ic - G_jc))
        o   = (q exp(G)) h + Aqk v'
        h   = diag(exp(G_C)) h + (k exp(G_C - G))^T v'

    Arguments and returns as :func:`naive_recurrent_kda` (``q`` is scaled first). With grad
    enabled each chunk's ``Akk``, ``Aqk`` are recomputed in the backward
    (``torch.utils.checkpoint``): the ``[HV, C, C, K]`` decay tiles they come from would otherwise
    stay alive for every chunk (B1 T32768 HV32 K128: about 34 GB).
    """
    from fla_ascend.ops.gated_delta_rule.reference import _prepare, _segments

    gk = kda_gate(g, A_log, dt_bias, lower_bound) if use_gate_in_kernel else _real(g)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(_real(beta)) * (2 if allow_neg_eigval else 1)
    q, k, v, _, beta = _prepare(q, k, v, None, beta, scale, use_qk_l2norm_in_kernel, False, None, None)
    B, T, HV, V = v.shape
    K = k.shape[-1]
    o = v.new_zeros(B, T, HV, V)
    finals = []
    for n, (b, bos, eos) in enumerate(_segments(T, B, cu_seqlens)):
        h = q.new_zeros(HV, K, V) if initial_state is None else _real(initial_state[n])
        for s in range(bos, eos, chunk_size):
            e = min(s + chunk_size, eos)
            C = e - s
            qc, kc, vc, G = (x[b, s:e].transpose(0, 1) for x in (q, k, v, gk))  # [HV, C, *]
            G = G.cumsum(1)
            bc = beta[b, s:e].transpose(0, 1)  # [HV, C]
            if torch.is_grad_enabled():  # recomputed in the backward: [HV, C, C, K] per chunk is not kept
                Akk, Aqk = checkpoint(_chunk_matrices, qc, kc, G, bc, use_reentrant=False)
            else:
                Akk, Aqk = _chunk_matrices(qc, kc, G, bc)
            eye = torch.eye(C, device=q.device, dtype=q.dtype)
            Ai = torch.linalg.solve_triangular(Akk + eye, eye.expand(HV, C, C), upper=False)
            w = Ai @ (bc[..., None] * G.exp() * kc)
            u = Ai @ (bc[..., None] * vc)
            v_new = u - w @ h
            o[b, s:e] = ((qc * G.exp()) @ h + Aqk @ v_new).transpose(0, 1)
            G_last = G[:, -1:]
            h = G_last.exp().transpose(1, 2) * h + (kc * (G_last - G).exp()).transpose(1, 2) @ v_new
        finals.append(h)
    return o, (torch.stack(finals) if output_final_state else None)
