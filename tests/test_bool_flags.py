"""Every boolean parameter of every public op, module and layer takes a ``bool`` (or a NumPy
``bool_``) only: ``"False"``, ``0``, ``1`` or ``None`` raise ``TypeError`` naming the parameter,
never a feature switched on by truthiness.

The parameters are found from the signatures (a default that is a bool, or a ``bool``
annotation), so a new flag without a check, or a new public callable without a call here,
fails this test.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import fla_ascend.layers
import fla_ascend.modules
import fla_ascend.ops
from fla_ascend import backend
from fla_ascend.integrations import transformers as tf_integration

B, T, H, K, D, W = 1, 4, 1, 8, 8, 4


def _gdr_args():
    g = torch.Generator().manual_seed(0)
    dev = backend.device()
    q, k, v = (torch.randn(B, T, H, K, generator=g).to(dev) for _ in range(3))
    gate = -torch.rand(B, T, H, generator=g).to(dev)
    beta = torch.rand(B, T, H, generator=g).to(dev)
    return (q, k, v), dict(g=gate, beta=beta)


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(backend.device())


def _layer():
    return fla_ascend.layers.GatedDeltaNet(hidden_size=16, num_k_heads=1, num_v_heads=1, head_k_dim=8,
                                           head_v_dim=8, device=backend.device())


def _kda_args():
    (q, k, v), _ = _gdr_args()
    g = torch.Generator().manual_seed(2)
    gate = -torch.rand(B, T, H, K, generator=g).to(backend.device())
    beta = torch.rand(B, T, H, generator=g).to(backend.device())
    return (q, k, v), dict(g=gate, beta=beta)


def _kda_layer():
    return fla_ascend.layers.KimiDeltaAttention(hidden_size=16, head_dim=8, num_heads=1, device=backend.device())


CALLS = {
    # qualified name -> () -> (callable, args, kwargs) of a valid call
    "chunk_gated_delta_rule": lambda: (fla_ascend.ops.chunk_gated_delta_rule, *_gdr_args()),
    "fused_recurrent_gated_delta_rule": lambda: (fla_ascend.ops.fused_recurrent_gated_delta_rule, *_gdr_args()),
    "chunk_kda": lambda: (fla_ascend.ops.chunk_kda, *_kda_args()),
    "fused_recurrent_kda": lambda: (fla_ascend.ops.fused_recurrent_kda, *_kda_args()),
    "KimiDeltaAttention.__init__": lambda: (fla_ascend.layers.KimiDeltaAttention, (), dict(
        hidden_size=16, head_dim=8, num_heads=1, device=backend.device())),
    "KimiDeltaAttention.forward": lambda: (_kda_layer(), (_x(B, T, 16),), {}),
    "KimiDeltaAttention.forward_reference": lambda: (_kda_layer().forward_reference, (_x(B, T, 16),), {}),
    "causal_conv1d": lambda: (fla_ascend.ops.causal_conv1d, (_x(B, T, D), _x(D, W)), {}),
    "rms_norm_gated": lambda: (fla_ascend.ops.rms_norm_gated, (_x(T, D), _x(T, D), None, None), {}),
    "rms_norm": lambda: (fla_ascend.ops.rms_norm, (_x(T, D), None, None), {}),
    "FusedRMSNormGated.__init__": lambda: (fla_ascend.ops.FusedRMSNormGated, (D,), {}),
    "FusedRMSNormGated.forward": lambda: (fla_ascend.ops.FusedRMSNormGated(D, device=backend.device()),
                                          (_x(T, D), _x(T, D)), {}),
    "RMSNorm.__init__": lambda: (fla_ascend.modules.RMSNorm, (D,), {}),
    "RMSNorm.forward": lambda: (fla_ascend.modules.RMSNorm(D, device=backend.device()), (_x(T, D),), {}),
    "ShortConvolution.__init__": lambda: (fla_ascend.modules.ShortConvolution, (D, W), {}),
    "ShortConvolution.forward": lambda: (fla_ascend.modules.ShortConvolution(D, W, device=backend.device()),
                                         (_x(B, T, D),), {}),
    "ShortConvolution.step": lambda: (fla_ascend.modules.ShortConvolution(D, W, device=backend.device()),
                                      (_x(B, 1, D), None, None), {}),
    "GatedDeltaNet.forward": lambda: (_layer(), (_x(B, T, 16),), {}),
    "GatedDeltaNet.forward_reference": lambda: (_layer().forward_reference, (_x(B, T, 16),), {}),
    "conv1d_fn": lambda: (tf_integration.conv1d_fn, (_x(B, D, T), _x(D, W)), {}),
}
NOT_A_FLAG = ("not a bool", "False", 0, 1, None, torch.tensor(True))


def _public_callables():
    """(qualified name, function) of every public op, module and layer and their public methods."""
    seen = {}
    objs = [(n, getattr(m, n)) for m in (fla_ascend.ops, fla_ascend.modules, fla_ascend.layers)
            for n in m.__all__]
    objs.append(("conv1d_fn", tf_integration.conv1d_fn))
    for name, obj in objs:
        if inspect.isclass(obj):
            for meth, fn in vars(obj).items():
                if inspect.isfunction(fn) and (meth == "__init__" or not meth.startswith("_")):
                    seen[f"{name}.{meth}"] = fn
        elif callable(obj):
            seen[name] = obj
    return seen


def _flags(fn):
    out = []
    for p in inspect.signature(fn).parameters.values():
        if isinstance(p.default, bool) or p.annotation in (bool, "bool", "bool | None"):
            out.append(p.name)
    return out


FLAGS = [(qual, flag) for qual, fn in sorted(_public_callables().items()) for flag in _flags(fn)]


def test_every_public_flag_has_a_call():
    """The audit covers them all: a public callable with a flag and no call in CALLS fails here."""
    missing = sorted({qual for qual, _ in FLAGS} - set(CALLS))
    assert not missing, f"add a valid call to CALLS for {missing}"
    assert len(FLAGS) >= 20


@pytest.mark.parametrize("qual,flag", FLAGS)
@pytest.mark.parametrize("bad", NOT_A_FLAG, ids=repr)
def test_non_bool_flag_is_refused(qual, flag, bad):
    fn, args, kwargs = CALLS[qual]()
    with pytest.raises(TypeError, match=rf"{flag} must be a bool"):
        fn(*args, **kwargs, **{flag: bad})


@pytest.mark.parametrize("qual,flag", FLAGS)
def test_numpy_bool_is_a_bool(qual, flag):
    """A flag read with NumPy (``np.bool_``) is accepted and means what it says."""
    fn, args, kwargs = CALLS[qual]()
    if flag == "allow_neg_eigval" and not qual.startswith("KimiDeltaAttention"):  # the layer's needs nothing
        kwargs["use_beta_sigmoid_in_kernel"] = True
    fn(*args, **kwargs, **{flag: np.bool_(False)})


def test_numpy_true_switches_the_norm_on():
    """``np.bool_(True)`` acts as ``True`` (the same output), ``True`` as ``True``."""
    args, kw = _gdr_args()
    op = fla_ascend.ops.fused_recurrent_gated_delta_rule
    want, _ = op(*args, **kw, use_qk_l2norm_in_kernel=True)
    got, _ = op(*args, **kw, use_qk_l2norm_in_kernel=np.bool_(True))
    off, _ = op(*args, **kw, use_qk_l2norm_in_kernel=False)
    assert torch.equal(want, got) and not torch.allclose(want, off)


def test_deprecated_transpose_state_layout_is_a_flag_too():
    args, kw = _gdr_args()
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="transpose_state_layout must be a bool"):
        fla_ascend.ops.chunk_gated_delta_rule(*args, **kw, transpose_state_layout="True")
