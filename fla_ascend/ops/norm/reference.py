"""Pure-PyTorch float32 references of the norm ops (tests and benchmark correctness gates)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def l2norm_ref(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(sum(x^2, -1) + eps)`` in float32, returned in ``x.dtype``."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


def rms_norm_gated_ref(
    x: torch.Tensor,
    z: torch.Tensor | None,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    activation: str = "swish",
) -> torch.Tensor:
    """``x * rsqrt(mean(x^2, -1) + eps) * weight + bias``, times ``act(z)`` (swish / silu or sigmoid)
    when ``z`` is given; float32 math, returned in ``x.dtype``."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    if z is not None:
        zf = z.float()
        y = y * (F.silu(zf) if activation in ("swish", "silu") else torch.sigmoid(zf))
    return y.to(x.dtype)


def rms_norm_residual_ref(
    x: torch.Tensor,
    z: torch.Tensor | None,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    eps: float = 1e-5,
    activation: str = "swish",
    residual_in_fp32: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """flash-linear-attention's pre-norm residual path: ``s = x + residual`` in float32, ``y`` =
    :func:`rms_norm_gated_ref` of ``s`` (in ``x.dtype``); returns ``(y, s)`` with ``s`` in
    ``residual``'s dtype, else float32 with ``residual_in_fp32``, else ``x``'s."""
    s = x.float() if residual is None else x.float() + residual.float()
    y = rms_norm_gated_ref(s, z, weight, bias, eps, activation).to(x.dtype)
    dtype = residual.dtype if residual is not None else (torch.float32 if residual_in_fp32 else x.dtype)
    return y, s.to(dtype)
