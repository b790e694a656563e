"""Pure-PyTorch references of the causal depthwise convolution, built on ``F.conv1d``.

Semantics (flash-linear-attention's): the state ``[N, D, W]`` holds the last ``W`` inputs of a
sequence, newest in column ``W - 1``; the output at token ``t`` is
``sum_w weight[d, w] * x[t - (W - 1) + w]`` (+ bias), where positions before the sequence start
read the initial state's columns ``1 .. W - 1`` (zeros without one); then the activation, then
the residual is added.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _one_sequence(x, weight, bias, h0, activation):
    # x [L, D] float32, weight [D, W], h0 [D, W] or None
    L, D = x.shape
    W = weight.shape[-1]
    prefix = h0[:, 1:] if h0 is not None else x.new_zeros(D, W - 1)
    xs = torch.cat([prefix, x.t()], dim=1)  # [D, W - 1 + L]
    if L > 0:
        y = F.conv1d(xs[None], weight[:, None, :], bias, groups=D)[0].t()  # [L, D]
    else:
        y = x.new_zeros(0, D)
    if activation in ("silu", "swish"):
        y = F.silu(y)
    full = torch.cat([h0 if h0 is not None else x.new_zeros(D, W), x.t()], dim=1)
    final = full[:, full.shape[1] - W:]
    return y, final


def causal_conv1d_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    activation: str | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Float32 reference of :func:`fla_ascend.ops.causal_conv1d.causal_conv1d` (same arguments;
    differentiable through autograd). Returns ``(y in x.dtype, final_state in float32 or None)``."""
    B, T, D = x.shape
    w = weight.reshape(D, -1).float()
    b = bias.float() if bias is not None else None
    if cu_seqlens is not None:
        bounds = cu_seqlens.tolist()
        segs = [(0, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    else:
        segs = [(i, 0, T) for i in range(B)]
    ys, finals = [], []
    for n, (bi, bos, eos) in enumerate(segs):
        h0 = initial_state[n].float() if initial_state is not None else None
        y, f = _one_sequence(x[bi, bos:eos].float(), w, b, h0, activation)
        ys.append(y)
        finals.append(f)
    if cu_seqlens is not None:
        y = torch.cat(ys, 0)[None]
    else:
        y = torch.stack(ys, 0)
    if residual is not None:
        y = y + residual.float()
    return y.to(x.dtype), (torch.stack(finals, 0) if output_final_state else None)


def causal_conv1d_update_ref(
    x: torch.Tensor,
    cache: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    residual: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step: ``x`` ``[N, D]``, ``cache`` ``[N, D, W]`` (not modified). Returns
    ``(y [N, D] in x.dtype, new cache [N, D, W] float32)``."""
    N, D = x.shape
    new = torch.cat([cache.float()[:, :, 1:], x.float()[:, :, None]], dim=2)
    y = (new * weight.reshape(D, -1).float()[None]).sum(-1)
    if bias is not None:
        y = y + bias.float()
    if activation in ("silu", "swish"):
        y = F.silu(y)
    if residual is not None:
        y = y + residual.float()
    return y.to(x.dtype), new
