"""flash-linear-attention's norm modules over our kernels: ``FusedRMSNormGated`` (defined with its
op), ``RMSNorm`` and ``L2Norm``."""
from __future__ import annotations

import torch
import torch.nn as nn

from fla_ascend.ops.norm import FusedRMSNormGated, l2norm, rms_norm
from fla_ascend.ops.norm.l2norm import MAX_D
from fla_ascend.ops.utils import check_bools

__all__ = ["FusedRMSNormGated", "RMSNorm", "L2Norm"]


class RMSNorm(nn.Module):
    """RMSNorm over the last dimension, flash-linear-attention 0.6.0's ``fla.modules.RMSNorm``:
    ``weight`` ``[hidden_size]`` (ones), optional ``bias`` (zeros); ``forward(x, residual=None,
    prenorm=False, residual_in_fp32=False)`` calls :func:`fla_ascend.ops.rms_norm`.

    Raises:
        ValueError: ``hidden_size`` outside ``[1, 8192]``; in ``forward``, ``x``'s last dimension
            not ``hidden_size``.
        TypeError: ``elementwise_affine`` or ``bias`` not a bool (in ``forward``: ``prenorm``,
            ``residual_in_fp32``).
    """

    def __init__(self, hidden_size: int, elementwise_affine: bool = True, bias: bool = False, eps: float = 1e-5,
                 device: torch.device | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if not 1 <= hidden_size <= MAX_D:
            raise ValueError(f"RMSNorm: hidden_size must be in [1, {MAX_D}], got {hidden_size}")
        elementwise_affine, bias = check_bools("RMSNorm", elementwise_affine=elementwise_affine, bias=bias)
        self.hidden_size = hidden_size
        self.elementwise_affine = elementwise_affine
        self.eps = eps
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
            if bias:
                self.bias = nn.Parameter(torch.zeros(hidden_size, device=device, dtype=dtype))

    def extra_repr(self) -> str:
        return f"{self.hidden_size}, eps={self.eps}"

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None, prenorm: bool = False,
                residual_in_fp32: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``[..., hidden_size]`` -> same shape and dtype (``(y, residual_out)`` with ``prenorm``)."""
        if isinstance(x, torch.Tensor) and (x.dim() == 0 or x.shape[-1] != self.hidden_size):
            raise ValueError(f"RMSNorm: x's last dimension must be hidden_size={self.hidden_size}, got "
                             f"{x.shape[-1] if x.dim() else None} (x shape {tuple(x.shape)})")
        return rms_norm(x, self.weight, self.bias, residual, self.eps, prenorm, residual_in_fp32)


class L2Norm(nn.Module):
    """``l2norm`` as a module, flash-linear-attention 0.6.0's ``fla.modules.L2Norm(eps, output_dtype)``."""

    def __init__(self, eps: float = 1e-6, output_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.output_dtype = output_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., D]`` -> ``x / sqrt(sum(x^2) + eps)`` in ``output_dtype`` (default x's)."""
        return l2norm(x, self.eps, self.output_dtype)
