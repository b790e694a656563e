"""Kimi Delta Attention token mixer with flash-linear-attention's constructor and parameter names.

Pipeline (per token): ``q_proj``, ``k_proj``, ``v_proj``; a causal depthwise short convolution with
SiLU on each (``q_conv1d``, ``k_conv1d``, ``v_conv1d``); the per-channel forget gate from the
low-rank ``f_proj`` (``hidden -> head_v_dim -> HV * K``), activated in the kernel
(``-exp(A_log) * softplus(f + dt_bias)``, or ``lower_bound * sigmoid(exp(A_log) * (f + dt_bias))``);
beta logits from ``b_proj`` (``sigmoid`` in the kernel, ``2 sigmoid`` with ``allow_neg_eigval``);
q/k L2-normalised in the kernel; KDA with a V-first state ``[N, HV, V, K]``; a sigmoid-gated RMSNorm
of each value head with the low-rank ``g_proj`` (``hidden -> head_v_dim -> value_dim``, with bias);
``o_proj``. Names and shapes follow flash-linear-attention's ``fla.layers.kda.KimiDeltaAttention``,
so its state dict loads as is. Kimi Linear's checkpoints load too: their ``f_a_proj`` / ``f_b_proj``
/ ``g_a_proj`` / ``g_b_proj`` (no bias: a zero ``g_proj.1.bias``), ``A_log`` ``[1, 1, HV, 1]`` and
transformers' ``KimiLinearDeltaAttention`` names (``forget_gate.*``, one ``conv1d.weight`` over
``[q | k | v]``) are renamed on load (:meth:`KimiDeltaAttention._load_from_state_dict`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from fla_ascend.modules import ShortConvolution
from fla_ascend.ops.causal_conv1d.conv import MAX_W
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule.inputs import MAX_HEAD_DIM
from fla_ascend.ops.kda import fused_recurrent_kda
from fla_ascend.ops.kda.chunk import SAFE_LOWER_BOUND
from fla_ascend.ops.kda.reference import naive_recurrent_kda
from fla_ascend.ops.norm import FusedRMSNormGated
from fla_ascend.ops.norm.reference import rms_norm_gated_ref
from fla_ascend.ops.utils.validation import check_bool, check_tensor, op_errors

MODES = ("chunk", "fused_recurrent")


@dataclass
class KimiDeltaAttentionCache:
    """Decode state of one layer: ``conv_state`` ``(q, k, v)`` states ``[N, key_dim, W]``,
    ``[N, key_dim, W]``, ``[N, value_dim, W]`` (the layer's dtype; ``None`` without short
    convolutions) and ``recurrent_state`` ``[N, num_v_heads, head_v_dim, head_k_dim]`` float32
    (V-first, as flash-linear-attention's layer keeps it)."""

    conv_state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None
    recurrent_state: torch.Tensor


class KimiDeltaAttention(nn.Module):
    """Kimi Delta Attention layer, flash-linear-attention's ``KimiDeltaAttention`` (same constructor
    arguments, defaults and parameter names).

    Args:
        hidden_size: model width (2048).
        expand_v: ``head_v_dim = head_dim * expand_v`` (1); must give integer sizes.
        head_dim: ``head_k_dim`` (128).
        num_heads: query/key heads (16).
        num_v_heads: value heads (``None``: ``num_heads``); a multiple of ``num_heads`` (GVA).
        mode: ``"chunk"`` (prefill, training) or ``"fused_recurrent"``; in eval mode with grad mode off,
            inputs of at most ``fused_recurrent_max_len`` tokens use ``"fused_recurrent"`` (as
            flash-linear-attention at 64 tokens).
        use_short_conv: the q/k/v short convolutions (else SiLU of the projections).
        allow_neg_eigval: ``beta = 2 sigmoid(b)`` instead of ``sigmoid(b)``.
        safe_gate: passed to ``chunk_kda`` (needs ``lower_bound``).
        lower_bound: the lower-bound gate's bound (a float < 0, in ``[-5, 0)`` with ``safe_gate``; e.g.
            -5.0), or ``None``.
        conv_size: ``W`` of the short convolutions (4); conv_bias: their bias (False).
        layer_idx: index in the model (kept, not used).
        norm_eps: epsilon of the gated RMSNorm (1e-5).
        **kwargs: ``fused_recurrent_max_len`` (64), ``device``, ``dtype`` (of the parameters; ``A_log``
            and ``dt_bias`` stay float32). Other names raise ``TypeError``.

    Raises:
        ValueError: non-positive sizes, head dims above 256 or ``conv_size`` above 16 (the ops'
            limits), ``num_v_heads`` not a multiple of ``num_heads``, an ``expand_v`` that does not
            give integer sizes, an unknown ``mode``, ``safe_gate`` without ``lower_bound``, a
            ``lower_bound`` that is not negative (or, with ``safe_gate``, not in ``[-5, 0)``).
        TypeError: an unknown keyword argument, a flag that is not a bool.
    """

    def __init__(
        self,
        hidden_size: int = 2048,
        expand_v: float = 1,
        head_dim: int = 128,
        num_heads: int = 16,
        num_v_heads: int = None,
        mode: str = "chunk",
        use_short_conv: bool = True,
        allow_neg_eigval: bool = False,
        safe_gate: bool = False,
        lower_bound: float | None = None,
        conv_size: int = 4,
        conv_bias: bool = False,
        layer_idx: int = None,
        norm_eps: float = 1e-5,
        **kwargs,
    ) -> None:
        super().__init__()
        op = "KimiDeltaAttention"
        kwargs = dict(kwargs)
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        fused_recurrent_max_len = kwargs.pop("fused_recurrent_max_len", 64)
        if kwargs:
            raise TypeError(f"{op}: unexpected keyword arguments {sorted(kwargs)}")
        with op_errors(op):
            use_short_conv = check_bool("use_short_conv", use_short_conv)
            allow_neg_eigval = check_bool("allow_neg_eigval", allow_neg_eigval)
            safe_gate = check_bool("safe_gate", safe_gate)
            conv_bias = check_bool("conv_bias", conv_bias)
        num_v_heads = num_heads if num_v_heads is None else num_v_heads
        for name, val in dict(hidden_size=hidden_size, head_dim=head_dim, num_heads=num_heads,
                              num_v_heads=num_v_heads, conv_size=conv_size).items():
            if isinstance(val, bool) or not isinstance(val, int) or val <= 0:
                raise ValueError(f"{op}: {name} must be a positive int, got {val!r}")
        head_v_dim = head_dim * expand_v
        if not math.isclose(head_v_dim, round(head_v_dim), rel_tol=1e-5) or round(head_v_dim) < 1:
            raise ValueError(f"{op}: head_dim * expand_v must be a positive integer, got {head_dim} * {expand_v} "
                             f"= {head_v_dim}")
        head_v_dim = int(round(head_v_dim))
        for name, val, limit in (("head_dim", head_dim, MAX_HEAD_DIM), ("head_v_dim", head_v_dim, MAX_HEAD_DIM),
                                 ("conv_size", conv_size, MAX_W)):
            if val > limit:
                raise ValueError(f"{op}: {name} must be <= {limit} (the ops' limit), got {val}")
        if num_v_heads % num_heads:
            raise ValueError(f"{op}: num_v_heads ({num_v_heads}) must be a multiple of num_heads ({num_heads})")
        if mode not in MODES:
            raise ValueError(f"{op}: mode must be one of {MODES}, got {mode!r}")
        if safe_gate and lower_bound is None:
            raise ValueError(f"{op}: safe_gate=True requires lower_bound (the gate's range [lower_bound, 0))")
        if lower_bound is not None and not (math.isfinite(lower_bound) and lower_bound < 0):
            raise ValueError(f"{op}: lower_bound must be a finite negative log decay (chunk_kda's rule), got "
                             f"{lower_bound}")
        lo, hi = SAFE_LOWER_BOUND
        if safe_gate and not lo <= lower_bound < hi:
            raise ValueError(f"{op}: safe_gate=True requires lower_bound in [{lo:g}, {hi:g}) (chunk_kda's rule), "
                             f"got {lower_bound}")
        fk = dict(device=device, dtype=dtype)
        self.mode, self.allow_neg_eigval, self.safe_gate, self.lower_bound = mode, allow_neg_eigval, safe_gate, \
            lower_bound
        self.hidden_size, self.expand_v = hidden_size, expand_v
        self.use_short_conv, self.conv_size, self.conv_bias = use_short_conv, conv_size, conv_bias
        self.head_dim, self.num_heads, self.num_v_heads = head_dim, num_heads, num_v_heads
        self.head_k_dim, self.head_v_dim = head_dim, head_v_dim
        self.key_dim, self.value_dim = num_heads * head_dim, num_v_heads * head_v_dim
        self.gate_dim = num_v_heads * head_dim
        self.layer_idx = layer_idx
        self.fused_recurrent_max_len = fused_recurrent_max_len

        self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False, **fk)
        self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False, **fk)
        self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False, **fk)
        if use_short_conv:
            self.q_conv1d = ShortConvolution(self.key_dim, conv_size, bias=conv_bias, activation="silu", **fk)
            self.k_conv1d = ShortConvolution(self.key_dim, conv_size, bias=conv_bias, activation="silu", **fk)
            self.v_conv1d = ShortConvolution(self.value_dim, conv_size, bias=conv_bias, activation="silu", **fk)
        self.f_proj = nn.Sequential(nn.Linear(hidden_size, head_v_dim, bias=False, **fk),
                                    nn.Linear(head_v_dim, self.gate_dim, bias=False, **fk))
        self.b_proj = nn.Linear(hidden_size, num_v_heads, bias=False, **fk)
        f32 = dict(device=device, dtype=torch.float32)
        if safe_gate:
            self.A_log = nn.Parameter(torch.zeros(num_v_heads, **f32))
        else:
            self.A_log = nn.Parameter(torch.log(torch.empty(num_v_heads, **f32).uniform_(1, 16)))
        # dt in [1e-3, 1e-1] log-uniformly; dt_bias its inverse softplus (Mamba's initialisation)
        dt = torch.exp(torch.rand(self.gate_dim, **f32) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        dt = dt.clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.A_log._no_weight_decay = True
        self.dt_bias._no_weight_decay = True
        self.g_proj = nn.Sequential(nn.Linear(hidden_size, head_v_dim, bias=False, **fk),
                                    nn.Linear(head_v_dim, self.value_dim, bias=True, **fk))
        self.o_norm = FusedRMSNormGated(head_v_dim, activation="sigmoid", eps=norm_eps, **fk)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False, **fk)

    # ------------------------------------------------------------------ loading
    KIMI_NAMES = {"f_a_proj.weight": "f_proj.0.weight", "f_b_proj.weight": "f_proj.1.weight",
                  "g_a_proj.weight": "g_proj.0.weight", "g_b_proj.weight": "g_proj.1.weight",
                  "g_b_proj.bias": "g_proj.1.bias",
                  "forget_gate.f_a_proj.weight": "f_proj.0.weight", "forget_gate.f_b_proj.weight": "f_proj.1.weight",
                  "forget_gate.A_log": "A_log", "forget_gate.dt_bias": "dt_bias"}
    """Kimi Linear's checkpoint names and transformers' ``KimiLinearDeltaAttention`` names -> ours."""

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Load flash-linear-attention's names as they are, or Kimi Linear's (:data:`KIMI_NAMES`;
        ``A_log`` of ``num_v_heads`` elements in any singleton shape; a ``g_b_proj`` without bias gets a
        zero ``g_proj.1.bias``; transformers' ``conv1d.weight`` ``[2 key_dim + value_dim, 1, W]`` is split
        into the q, k and v convolutions)."""
        renamed = False
        for old, new in self.KIMI_NAMES.items():
            if prefix + old in state_dict:
                state_dict[prefix + new] = state_dict.pop(prefix + old)
                renamed = True
        if renamed and prefix + "g_proj.1.weight" in state_dict and prefix + "g_proj.1.bias" not in state_dict:
            w = state_dict[prefix + "g_proj.1.weight"]
            state_dict[prefix + "g_proj.1.bias"] = w.new_zeros(w.shape[0])
        conv = state_dict.pop(prefix + "conv1d.weight", None)
        if conv is not None and self.use_short_conv:
            q, k, v = torch.split(conv, [self.key_dim, self.key_dim, self.value_dim], dim=0)
            for name, w in (("q_conv1d", q), ("k_conv1d", k), ("v_conv1d", v)):
                state_dict[f"{prefix}{name}.weight"] = w
        elif conv is not None:
            state_dict[prefix + "conv1d.weight"] = conv  # reported as unexpected
        a = state_dict.get(prefix + "A_log")
        if a is not None and a.dim() != 1 and a.numel() == self.num_v_heads:
            state_dict[prefix + "A_log"] = a.reshape(self.num_v_heads)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ------------------------------------------------------------------ pieces
    def _check_input(self, hidden_states, cu_seqlens, use_cache=False):
        with op_errors("KimiDeltaAttention"):
            check_bool("use_cache", use_cache)
            check_tensor("hidden_states", hidden_states, shape=(None, None, self.hidden_size))
            if hidden_states.dtype != self.q_proj.weight.dtype:
                raise TypeError(f"hidden_states must have the layer's dtype {self.q_proj.weight.dtype}, "
                                f"got {hidden_states.dtype}")
            if cu_seqlens is not None and hidden_states.shape[0] != 1:
                raise ValueError(f"with cu_seqlens hidden_states must have B == 1, got B={hidden_states.shape[0]}")

    def _heads(self, x, q, k, v):
        B, T, _ = x.shape
        g = self.f_proj(x).view(B, T, self.num_v_heads, self.head_k_dim)
        beta = self.b_proj(x)
        return (q.reshape(B, T, self.num_heads, self.head_k_dim), k.reshape(B, T, self.num_heads, self.head_k_dim),
                v.reshape(B, T, self.num_v_heads, self.head_v_dim), g, beta)

    def _gate_kwargs(self) -> dict:
        return dict(A_log=self.A_log, dt_bias=self.dt_bias, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                    use_beta_sigmoid_in_kernel=True, allow_neg_eigval=self.allow_neg_eigval,
                    lower_bound=self.lower_bound)

    def _output(self, x, o):
        B, T, _ = x.shape
        gate = self.g_proj(x).view(B, T, self.num_v_heads, self.head_v_dim)
        o = self.o_norm(o.to(gate.dtype), gate)
        return self.o_proj(o.reshape(B, T, self.value_dim))

    def init_cache(self, batch_size: int, device=None, dtype=None) -> KimiDeltaAttentionCache:
        """Zero states for ``batch_size`` sequences."""
        p = self.q_proj.weight
        device, dtype = device or p.device, dtype or p.dtype
        conv = None
        if self.use_short_conv:
            conv = tuple(torch.zeros(batch_size, d, self.conv_size, device=device, dtype=dtype)
                         for d in (self.key_dim, self.key_dim, self.value_dim))
        return KimiDeltaAttentionCache(conv, torch.zeros(batch_size, self.num_v_heads, self.head_v_dim,
                                                         self.head_k_dim, device=device, dtype=torch.float32))

    # ------------------------------------------------------------------ forward / step
    def forward(
        self,
        hidden_states: torch.Tensor,
        cu_seqlens: torch.Tensor | None = None,
        cache: KimiDeltaAttentionCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, KimiDeltaAttentionCache | None]:
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
                ``use_cache`` not a bool; ``mode="fused_recurrent"`` in training mode.
            ImportError: the chunked path without :func:`fla_ascend.ops.kda.chunk_kda` in this build.
        """
        self._check_input(hidden_states, cu_seqlens, use_cache)
        T = hidden_states.shape[1]
        if self.training and self.mode == "fused_recurrent":
            raise ValueError("KimiDeltaAttention: mode='fused_recurrent' has no backward; training needs mode='chunk'")
        # the fused recurrent kernel has no backward: chosen for short inputs only without autograd
        use_recurrent = not self.training and (
            self.mode == "fused_recurrent" or (T <= self.fused_recurrent_max_len and not torch.is_grad_enabled()))
        want_state = use_cache or cache is not None
        x = hidden_states
        if self.use_short_conv:
            states = cache.conv_state if cache is not None and cache.conv_state is not None else (None, None, None)
            outs = [conv(x=proj(x), cache=s, output_final_state=want_state, cu_seqlens=cu_seqlens)
                    for conv, proj, s in ((self.q_conv1d, self.q_proj, states[0]), (self.k_conv1d, self.k_proj,
                                                                                   states[1]),
                                          (self.v_conv1d, self.v_proj, states[2]))]
            (q, cq), (k, ck), (v, cv) = outs
            conv_state = (cq, ck, cv) if want_state else None
        else:
            q, k, v = F.silu(self.q_proj(x)), F.silu(self.k_proj(x)), F.silu(self.v_proj(x))
            conv_state = None
        q, k, v, g, beta = self._heads(x, q, k, v)
        h0 = cache.recurrent_state if cache is not None else None
        if use_recurrent:
            o, rec = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=want_state,
                                         state_v_first=True, cu_seqlens=cu_seqlens, **self._gate_kwargs())
        else:
            from fla_ascend.ops.kda import chunk_kda

            o, rec = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=want_state, state_v_first=True,
                               safe_gate=self.safe_gate, cu_seqlens=cu_seqlens, **self._gate_kwargs())
        out = self._output(x, o)
        return out, (KimiDeltaAttentionCache(conv_state, rec) if want_state else None)

    @torch.no_grad()
    def step(self, hidden_states: torch.Tensor, cache: KimiDeltaAttentionCache) -> torch.Tensor:
        """One decode token per sequence; updates ``cache`` in place (conv states shifted, the
        recurrent state overwritten).

        Args:
            hidden_states: ``[N, hidden_size]`` or ``[N, 1, hidden_size]``.
            cache: from :meth:`init_cache` or ``forward(..., use_cache=True)``, ``N`` sequences.

        Returns:
            ``[N, 1, hidden_size]`` or ``[N, hidden_size]`` (the input's rank).

        Raises:
            TypeError: ``cache`` is not a :class:`KimiDeltaAttentionCache`; as :meth:`forward`.
            ValueError: more than one token per sequence.
        """
        if not isinstance(cache, KimiDeltaAttentionCache):
            raise TypeError(f"KimiDeltaAttention.step needs the cache from init_cache() or forward(..., "
                            f"use_cache=True), got {type(cache).__name__}")
        squeeze = hidden_states.dim() == 2
        x = hidden_states[:, None] if squeeze else hidden_states
        self._check_input(x, None)
        if x.shape[1] != 1:
            raise ValueError(f"KimiDeltaAttention.step takes one token per sequence, got hidden_states of shape "
                             f"{tuple(hidden_states.shape)}")
        if self.use_short_conv:
            q, _ = self.q_conv1d.step(self.q_proj(x), None, cache.conv_state[0])
            k, _ = self.k_conv1d.step(self.k_proj(x), None, cache.conv_state[1])
            v, _ = self.v_conv1d.step(self.v_proj(x), None, cache.conv_state[2])
        else:
            q, k, v = F.silu(self.q_proj(x)), F.silu(self.k_proj(x)), F.silu(self.v_proj(x))
        q, k, v, g, beta = self._heads(x, q, k, v)
        h = cache.recurrent_state
        inplace = h.dtype == torch.float32 and h.is_contiguous()
        o, rec = fused_recurrent_kda(q, k, v, g, beta, initial_state=h, output_final_state=True, state_v_first=True,
                                     inplace_final_state=inplace, **self._gate_kwargs())
        cache.recurrent_state = rec
        out = self._output(x, o)
        return out[:, 0] if squeeze else out

    def forward_reference(self, hidden_states, cu_seqlens=None, cache=None, use_cache=False):
        """The same layer with pure-PyTorch float32 references of every op (tests; slow)."""
        self._check_input(hidden_states, cu_seqlens, use_cache)
        want_state = use_cache or cache is not None
        x = hidden_states
        if self.use_short_conv:
            states = cache.conv_state if cache is not None and cache.conv_state is not None else (None, None, None)
            outs = [causal_conv1d_ref(proj(x), conv.weight.squeeze(1), conv.bias, None, s, want_state, "silu",
                                      cu_seqlens)
                    for conv, proj, s in ((self.q_conv1d, self.q_proj, states[0]), (self.k_conv1d, self.k_proj,
                                                                                   states[1]),
                                          (self.v_conv1d, self.v_proj, states[2]))]
            (q, cq), (k, ck), (v, cv) = outs
            conv_state = (cq, ck, cv) if want_state else None
        else:
            q, k, v = F.silu(self.q_proj(x)), F.silu(self.k_proj(x)), F.silu(self.v_proj(x))
            conv_state = None
        q, k, v, g, beta = self._heads(x, q, k, v)
        h0 = cache.recurrent_state.transpose(-1, -2) if cache is not None else None
        o, rec = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=want_state,
                                     cu_seqlens=cu_seqlens, **self._gate_kwargs())
        if rec is not None:
            rec = rec.transpose(-1, -2).contiguous()
        B, T, _ = x.shape
        gate = self.g_proj(x).view(B, T, self.num_v_heads, self.head_v_dim)
        o = rms_norm_gated_ref(o.float(), gate.float(), self.o_norm.weight.float(), eps=self.o_norm.eps,
                               activation="sigmoid")
        out = F.linear(o.reshape(B, T, self.value_dim).to(gate.dtype), self.o_proj.weight)
        return out, (KimiDeltaAttentionCache(conv_state, rec) if want_state else None)
