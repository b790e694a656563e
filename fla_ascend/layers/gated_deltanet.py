"""GatedDeltaNet token mixer with Qwen3-Next's configuration and parameter names.

Pipeline (per token): ``in_proj_qkvz`` and ``in_proj_ba`` projections, split per key head
(Qwen3-Next's grouped layout: for each of the ``num_k_heads`` groups, ``[q | k | v | z]`` with
``v``/``z`` holding ``num_v_heads / num_k_heads`` value heads, and ``[b | a]`` likewise);
causal depthwise conv (SiLU, no bias) over the concatenated ``q, k, v``; the gated delta rule
with the gate computed in the kernel (``g = -exp(A_log) * softplus(a + dt_bias)``),
``beta = sigmoid(b)`` and q/k L2-normalised in the kernel; gated RMSNorm of each value head with
``z``; ``out_proj``. Layout and names follow transformers' ``Qwen3NextGatedDeltaNet``
(``in_proj_qkvz``, ``in_proj_ba``, ``conv1d.weight`` ``[conv_dim, 1, W]``, ``dt_bias``, ``A_log``,
``norm.weight``, ``out_proj.weight``), so its state dict loads as is. Qwen3.5's
``Qwen3_5GatedDeltaNet`` state dict loads too: its ungrouped ``in_proj_qkv`` (``[q | k | v]``),
``in_proj_z``, ``in_proj_b`` and ``in_proj_a`` are regrouped per key head into ``in_proj_qkvz`` /
``in_proj_ba`` on load (:meth:`GatedDeltaNet._load_from_state_dict`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from fla_ascend.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from fla_ascend.ops.causal_conv1d.conv import MAX_W
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla_ascend.ops.gated_delta_rule.inputs import MAX_HEAD_DIM
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule
from fla_ascend.ops.norm import FusedRMSNormGated
from fla_ascend.ops.norm.reference import rms_norm_gated_ref
from fla_ascend.ops.utils.validation import check_bool, check_tensor, op_errors


@dataclass
class GatedDeltaNetCache:
    """Decode state of one layer: ``conv_state`` ``[N, conv_dim, W]`` (dtype of the layer) and
    ``recurrent_state`` ``[N, num_v_heads, head_k_dim, head_v_dim]`` float32."""

    conv_state: torch.Tensor
    recurrent_state: torch.Tensor


class GatedDeltaNet(nn.Module):
    """GatedDeltaNet layer; defaults are Qwen3-Next-80B-A3B's linear-attention layer.

    Args:
        hidden_size: model width (2048).
        num_k_heads, num_v_heads: query/key heads (16) and value heads (32); ``num_v_heads`` must
            be a multiple of ``num_k_heads`` (GVA).
        head_k_dim, head_v_dim: 128 and 128.
        conv_kernel_size: ``W`` of the short convolution (4).
        norm_eps: epsilon of the gated RMSNorm (1e-6, Qwen3-Next's ``rms_norm_eps``).
        fused_recurrent_max_len: in eval mode (no autograd), inputs of at most this many tokens use
            the fused recurrent kernel instead of the chunked one (64, as flash-linear-attention).
        device, dtype: of the parameters.

    Raises:
        ValueError: non-positive sizes, ``head_k_dim`` / ``head_v_dim`` above 256 or
            ``conv_kernel_size`` above 16 (the ops' limits), or ``num_v_heads`` not a multiple of
            ``num_k_heads``.
    """

    def __init__(
        self,
        hidden_size: int = 2048,
        num_k_heads: int = 16,
        num_v_heads: int = 32,
        head_k_dim: int = 128,
        head_v_dim: int = 128,
        conv_kernel_size: int = 4,
        norm_eps: float = 1e-6,
        fused_recurrent_max_len: int = 64,
        layer_idx: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        for name, val in dict(hidden_size=hidden_size, num_k_heads=num_k_heads, num_v_heads=num_v_heads,
                              head_k_dim=head_k_dim, head_v_dim=head_v_dim,
                              conv_kernel_size=conv_kernel_size).items():
            if not isinstance(val, int) or val <= 0:
                raise ValueError(f"GatedDeltaNet: {name} must be a positive int, got {val!r}")
        for name, val, limit in (("head_k_dim", head_k_dim, MAX_HEAD_DIM), ("head_v_dim", head_v_dim, MAX_HEAD_DIM),
                                 ("conv_kernel_size", conv_kernel_size, MAX_W)):
            if val > limit:
                raise ValueError(f"GatedDeltaNet: {name} must be <= {limit} (the ops' limit), got {val}")
        if num_v_heads % num_k_heads:
            raise ValueError(f"GatedDeltaNet: num_v_heads ({num_v_heads}) must be a multiple of num_k_heads "
                             f"({num_k_heads})")
        fk = dict(device=device, dtype=dtype)
        self.hidden_size = hidden_size
        self.num_k_heads, self.num_v_heads = num_k_heads, num_v_heads
        self.head_k_dim, self.head_v_dim = head_k_dim, head_v_dim
        self.key_dim, self.value_dim = num_k_heads * head_k_dim, num_v_heads * head_v_dim
        self.conv_kernel_size = conv_kernel_size
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.fused_recurrent_max_len = fused_recurrent_max_len
        self.layer_idx = layer_idx
        self.in_proj_qkvz = nn.Linear(hidden_size, 2 * self.key_dim + 2 * self.value_dim, bias=False, **fk)
        self.in_proj_ba = nn.Linear(hidden_size, 2 * num_v_heads, bias=False, **fk)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel_size, groups=self.conv_dim,
                                padding=conv_kernel_size - 1, bias=False, **fk)
        self.dt_bias = nn.Parameter(torch.ones(num_v_heads, **fk))
        self.A_log = nn.Parameter(torch.log(torch.empty(num_v_heads, **fk).uniform_(0, 16)))
        self.norm = FusedRMSNormGated(head_v_dim, eps=norm_eps, activation="swish", **fk)
        self.out_proj = nn.Linear(self.value_dim, hidden_size, bias=False, **fk)

    QWEN3_5_NAMES = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")
    """Qwen3.5's projection names (transformers' ``Qwen3_5GatedDeltaNet``), accepted on load."""

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Load Qwen3-Next's names as they are, or Qwen3.5's: ``in_proj_qkv`` ``[2 H K + HV V, hidden]``
        (all q rows, then k, then v), ``in_proj_z`` ``[HV V, hidden]``, ``in_proj_b`` / ``in_proj_a``
        ``[HV, hidden]``, regrouped per key head ``h`` as ``[q_h | k_h | v_h | z_h]`` and ``[b_h | a_h]``
        (value heads ``h r .. h r + r - 1``, ``r = HV / H``: the same heads Qwen3.5's GVA gives key
        head ``h``)."""
        keys = [f"{prefix}{n}.weight" for n in self.QWEN3_5_NAMES]
        if all(k in state_dict for k in keys):
            qkv, z, b, a = (state_dict.pop(k) for k in keys)
            H, K, V, r = self.num_k_heads, self.head_k_dim, self.head_v_dim, self.num_v_heads // self.num_k_heads
            hid = qkv.shape[-1]
            q, k, v = torch.split(qkv, [H * K, H * K, H * r * V], dim=0)
            state_dict[f"{prefix}in_proj_qkvz.weight"] = torch.cat(
                [q.reshape(H, K, hid), k.reshape(H, K, hid), v.reshape(H, r * V, hid), z.reshape(H, r * V, hid)], 1
            ).reshape(-1, hid)
            state_dict[f"{prefix}in_proj_ba.weight"] = torch.cat(
                [b.reshape(H, r, hid), a.reshape(H, r, hid)], 1).reshape(-1, hid)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ pieces
    def _project(self, x: torch.Tensor):
        """``x`` ``[B, T, hidden]`` -> ``mixed_qkv`` ``[B, T, conv_dim]``, ``z`` ``[B, T, HV, V]``,
        ``b``, ``a`` ``[B, T, HV]`` (Qwen3-Next's per-key-head grouped layout)."""
        B, T, _ = x.shape
        H, HV, K, V = self.num_k_heads, self.num_v_heads, self.head_k_dim, self.head_v_dim
        r = HV // H
        qkvz = self.in_proj_qkvz(x).view(B, T, H, 2 * K + 2 * r * V)
        ba = self.in_proj_ba(x).view(B, T, H, 2 * r)
        q, k, v, z = torch.split(qkvz, [K, K, r * V, r * V], dim=-1)
        b, a = torch.split(ba, [r, r], dim=-1)
        mixed_qkv = torch.cat([q.reshape(B, T, H * K), k.reshape(B, T, H * K), v.reshape(B, T, HV * V)], dim=-1)
        return mixed_qkv, z.reshape(B, T, HV, V), b.reshape(B, T, HV), a.reshape(B, T, HV)

    def _split_qkv(self, mixed_qkv: torch.Tensor):
        B, T, _ = mixed_qkv.shape
        q, k, v = torch.split(mixed_qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        return (q.reshape(B, T, self.num_k_heads, self.head_k_dim), k.reshape(B, T, self.num_k_heads, self.head_k_dim),
                v.reshape(B, T, self.num_v_heads, self.head_v_dim))

    def _output(self, o: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        B, T = o.shape[:2]
        o = self.norm(o.to(z.dtype), z)
        return self.out_proj(o.reshape(B, T, self.value_dim))

    def _check_input(self, hidden_states, cu_seqlens, use_cache=False):
        with op_errors("GatedDeltaNet"):
            check_bool("use_cache", use_cache)
            check_tensor("hidden_states", hidden_states, shape=(None, None, self.hidden_size))
            if hidden_states.dtype != self.conv1d.weight.dtype:
                raise TypeError(f"hidden_states must have the layer's dtype {self.conv1d.weight.dtype}, "
                                f"got {hidden_states.dtype}")
            if cu_seqlens is not None and hidden_states.shape[0] != 1:
                raise ValueError(f"with cu_seqlens hidden_states must have B == 1, got B={hidden_states.shape[0]}")

    def init_cache(self, batch_size: int, device=None, dtype=None) -> GatedDeltaNetCache:
        """Zero states for ``batch_size`` sequences."""
        p = self.conv1d.weight
        return GatedDeltaNetCache(
            conv_state=torch.zeros(batch_size, self.conv_dim, self.conv_kernel_size, device=device or p.device,
                                   dtype=dtype or p.dtype),
            recurrent_state=torch.zeros(batch_size, self.num_v_heads, self.head_k_dim, self.head_v_dim,
                                        device=device or p.device, dtype=torch.float32),
        )

    # ------------------------------------------------------------------ forward / step
    def forward(
        self,
        hidden_states: torch.Tensor,
        cu_seqlens: torch.Tensor | None = None,
        cache: GatedDeltaNetCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, GatedDeltaNetCache | None]:
        """Prefill / training forward.

        Args:
            hidden_states: ``[B, T, hidden_size]`` (``B == 1`` with ``cu_seqlens``).
            cu_seqlens: ``[N + 1]`` int boundaries of packed sequences, or ``None``.
            cache: states to start from (e.g. an earlier prefill), or ``None`` for zeros.
            use_cache: return the states after the last token (a new cache object).

        Returns:
            ``(out [B, T, hidden_size], cache or None)``.

        Raises:
            TypeError / ValueError: bad ``hidden_states`` / ``cu_seqlens`` (from the ops' checks),
                ``use_cache`` not a bool.
        """
        self._check_input(hidden_states, cu_seqlens, use_cache)
        mixed_qkv, z, b, a = self._project(hidden_states)
        want_state = use_cache or cache is not None
        mixed_qkv, conv_state = causal_conv1d(
            mixed_qkv, self.conv1d.weight, None, None, cache.conv_state if cache is not None else None,
            output_final_state=want_state, activation="silu", cu_seqlens=cu_seqlens,
        )
        q, k, v = self._split_qkv(mixed_qkv)
        T = hidden_states.shape[1]
        # the fused recurrent kernel has no backward: only for short inputs without autograd
        use_recurrent = T <= self.fused_recurrent_max_len and not torch.is_grad_enabled()
        rule = fused_recurrent_gated_delta_rule if use_recurrent else chunk_gated_delta_rule
        o, rec_state = rule(
            q, k, v, g=a, beta=b.sigmoid(), initial_state=cache.recurrent_state if cache is not None else None,
            output_final_state=want_state, use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens,
            use_gate_in_kernel=True, A_log=self.A_log, dt_bias=self.dt_bias,
        )
        out = self._output(o, z)
        new_cache = GatedDeltaNetCache(conv_state, rec_state) if want_state else None
        return out, new_cache

    @torch.no_grad()
    def step(self, hidden_states: torch.Tensor, cache: GatedDeltaNetCache) -> torch.Tensor:
        """One decode token per sequence; updates ``cache`` in place (conv state shifted, recurrent
        state replaced).

        Args:
            hidden_states: ``[N, hidden_size]`` or ``[N, 1, hidden_size]``.
            cache: from :meth:`init_cache` or ``forward(..., use_cache=True)``, ``N`` sequences.

        Returns:
            ``[N, 1, hidden_size]`` or ``[N, hidden_size]`` (the input's rank).
        """
        if not isinstance(cache, GatedDeltaNetCache):
            raise TypeError(f"GatedDeltaNet.step needs the cache from init_cache() or forward(..., use_cache=True), "
                            f"got {type(cache).__name__}")
        squeeze = hidden_states.dim() == 2
        x = hidden_states[:, None] if squeeze else hidden_states
        self._check_input(x, None)
        if x.shape[1] != 1:
            raise ValueError(f"GatedDeltaNet.step takes one token per sequence, got hidden_states of shape "
                             f"{tuple(hidden_states.shape)}")
        mixed_qkv, z, b, a = self._project(x)
        y, _ = causal_conv1d_update(mixed_qkv[:, 0], cache.conv_state, weight=self.conv1d.weight, activation="silu")
        q, k, v = self._split_qkv(y[:, None])
        o, rec_state = fused_recurrent_gated_delta_rule(
            q, k, v, g=a, beta=b.sigmoid(), initial_state=cache.recurrent_state, output_final_state=True,
            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=self.A_log, dt_bias=self.dt_bias,
        )
        cache.recurrent_state = rec_state
        out = self._output(o, z)
        return out[:, 0] if squeeze else out

    def forward_reference(self, hidden_states, cu_seqlens=None, cache=None, use_cache=False):
        """The same layer with pure-PyTorch float32 references of every op (tests; slow)."""
        self._check_input(hidden_states, cu_seqlens, use_cache)
        mixed_qkv, z, b, a = self._project(hidden_states)
        want_state = use_cache or cache is not None
        mixed_qkv, conv_state = causal_conv1d_ref(
            mixed_qkv, self.conv1d.weight.squeeze(1), None, None, cache.conv_state if cache is not None else None,
            want_state, "silu", cu_seqlens,
        )
        q, k, v = self._split_qkv(mixed_qkv)
        o, rec_state = naive_recurrent_gated_delta_rule(
            q, k, v, g=a, beta=b.sigmoid(), initial_state=cache.recurrent_state if cache is not None else None,
            output_final_state=want_state, use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens,
            use_gate_in_kernel=True, A_log=self.A_log, dt_bias=self.dt_bias,
        )
        B, T = o.shape[:2]
        o = rms_norm_gated_ref(o.float(), z.float(), self.norm.weight.float(), eps=self.norm.eps)
        out = F.linear(o.reshape(B, T, self.value_dim).to(z.dtype), self.out_proj.weight)
        return out, (GatedDeltaNetCache(conv_state, rec_state) if want_state else None)

