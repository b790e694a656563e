"""``ShortConvolution``: the depthwise causal convolution module of flash-linear-attention's
GatedDeltaNet / DeltaNet layers, over :func:`fla_ascend.ops.causal_conv1d` (prefill, training)
and :func:`fla_ascend.ops.causal_conv1d_update` (decode). Also flash-linear-attention 0.6.0's
``fla.modules.convolution`` path: ``causal_conv1d`` and ``causal_conv1d_update`` are re-exported
here (its long convolution is not implemented)."""
from __future__ import annotations

import os
import warnings

import torch
import torch.nn as nn

from fla_ascend.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from fla_ascend.ops.causal_conv1d.conv import BACKENDS, MAX_W
from fla_ascend.ops.utils import check_bools

__all__ = ["ShortConvolution", "causal_conv1d", "causal_conv1d_update"]


class ShortConvolution(nn.Conv1d):
    """Depthwise causal convolution with optional SiLU and a cache, flash-linear-attention 0.6.0's
    ``fla.modules.ShortConvolution`` (same constructor, ``forward``, ``step`` and ``state_size``).

    The parameters are ``nn.Conv1d``'s (``weight`` ``[hidden_size, 1, kernel_size]``, ``bias``
    ``[hidden_size]`` or None), so its state dict is interchangeable with flash-linear-attention's.

    Args:
        hidden_size: channels ``D``.
        kernel_size: width ``W`` (1 to 16).
        bias: learn a channel bias (default False).
        activation: ``"silu"`` (default), ``"swish"`` or ``None``.
        backend: ``"triton"`` (our kernels; the environment variable ``FLA_CONV_BACKEND`` overrides
            it, as in flash-linear-attention).
        device, dtype: of the parameters.
        **kwargs: the deprecated ``use_fast_conv1d`` (ignored with a warning, as flash-linear-attention
            does); other names raise ``TypeError``.

    Raises:
        ValueError: ``hidden_size`` below 1, ``kernel_size`` outside ``[1, 16]``, an unknown
            activation or backend.
        TypeError: ``bias`` not a bool; an unknown keyword argument.
        NotImplementedError: ``backend="cuda"`` (the causal-conv1d package's path).
    """

    def __init__(
        self,
        hidden_size: int,
        kernel_size: int,
        bias: bool = False,
        activation: str | None = "silu",
        backend: str | None = "triton",
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
        **kwargs,
    ) -> None:
        for name, value, high in (("hidden_size", hidden_size, None), ("kernel_size", kernel_size, MAX_W)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (high and value > high):
                raise ValueError(f"ShortConvolution: {name} must be an int in [1, {high or 'inf'}], got {value!r}")
        bias, = check_bools("ShortConvolution", bias=bias)
        super().__init__(hidden_size, hidden_size, kernel_size, padding=kernel_size - 1, groups=hidden_size,
                         bias=bias, device=device, dtype=dtype)
        if activation not in (None, "silu", "swish"):
            raise ValueError(f"ShortConvolution: activation must be None, 'silu' or 'swish', got {activation!r}")
        if "use_fast_conv1d" in kwargs:
            kwargs.pop("use_fast_conv1d")
            warnings.warn("ShortConvolution: use_fast_conv1d is deprecated and ignored; use backend",
                          DeprecationWarning, stacklevel=2)
        if kwargs:
            raise TypeError(f"ShortConvolution: unexpected keyword arguments {sorted(kwargs)}")
        backend = os.environ.get("FLA_CONV_BACKEND", backend)
        if backend == "cuda":
            raise NotImplementedError("ShortConvolution: backend='cuda' (the causal-conv1d package) is not "
                                      "implemented here; use backend='triton' (fla-ascend's kernels)")
        if backend not in BACKENDS:
            raise ValueError(f"ShortConvolution: backend must be 'triton' or 'cuda', got {backend!r}")
        self.hidden_size = hidden_size
        self.activation = activation
        self.backend = backend

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation}, backend={self.backend}"

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        cache: torch.Tensor | None = None,
        output_final_state: bool = False,
        cu_seqlens: torch.LongTensor | None = None,
        chunk_indices: torch.LongTensor | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` ``[B, T, D]`` (``B = 1`` with ``cu_seqlens``) -> ``(y [B, T, D], final_state or None)``.

        Args:
            residual: ``[B, T, D]`` added after the activation, or ``None``.
            mask: ``[B, T]`` padding mask (1 keeps a token, 0 zeroes it before the convolution);
                not with ``cu_seqlens``. Unlike flash-linear-attention, ``x`` is not modified in place.
            cache: ``[N, D, W]`` state of the previous call, or ``None``. With grad mode off and one
                token per sequence, the decode kernel updates it in place (as flash-linear-attention).
            output_final_state: return the state ``[N, D, W]``.
            cu_seqlens, chunk_indices, **kwargs: passed to :func:`fla_ascend.ops.causal_conv1d`
                (``cu_seqlens_cpu``, ``cp_context``).

        Raises:
            TypeError: ``output_final_state`` not a bool.
            ValueError: ``x`` not ``[B, T, hidden_size]``; ``mask`` not ``[B, T]`` or with
                ``cu_seqlens``; plus :func:`fla_ascend.ops.causal_conv1d`'s errors.
        """
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.hidden_size:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"ShortConvolution: x must have shape [B, T, hidden_size={self.hidden_size}], got {got}")
        output_final_state, = check_bools("ShortConvolution", output_final_state=output_final_state)
        B, T = x.shape[:2]
        N = B if cu_seqlens is None else cu_seqlens.numel() - 1
        if mask is not None:
            if cu_seqlens is not None:
                raise ValueError("ShortConvolution: pass either mask or cu_seqlens, not both")
            if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (B, T):
                got = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
                raise ValueError(f"ShortConvolution: mask must have shape [B, T] = [{B}, {T}] (x's), got {got}")
            x = x * mask.unsqueeze(-1).to(x.dtype)
        if (not torch.is_grad_enabled() and B * T == N
                and (cu_seqlens is None or bool((cu_seqlens.diff() == 1).all()))):
            return self.step(x, residual, cache, output_final_state, cu_seqlens)
        return causal_conv1d(
            x, self.weight, self.bias, residual, cache, output_final_state, self.activation, self.backend,
            cu_seqlens=cu_seqlens, chunk_indices=chunk_indices, **kwargs,
        )

    def step(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        cache: torch.Tensor | None,
        output_final_state: bool = False,
        cu_seqlens: torch.LongTensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One token per sequence (``x`` ``[N, 1, D]`` or ``[1, N, D]``): :func:`causal_conv1d_update`
        on ``cache`` (zeros when ``None``), updated in place. Returns ``(y, cache or None)``."""
        output_final_state, = check_bools("ShortConvolution.step", output_final_state=output_final_state)
        N = x.shape[0] * x.shape[1] if cu_seqlens is None else cu_seqlens.numel() - 1
        if cache is None:
            cache = x.new_zeros(N, self.hidden_size, self.kernel_size[0])
        y, cache = causal_conv1d_update(x, cache, residual, self.weight, self.bias, self.activation)
        return y, (cache if output_final_state else None)

    @property
    def state_size(self) -> int:
        """Elements of one sequence's cache: ``hidden_size * kernel_size``."""
        return self.hidden_size * self.kernel_size[0]
