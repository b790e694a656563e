"""fla_ascend.modules: flash-linear-attention's ShortConvolution, RMSNorm, L2Norm and
FusedRMSNormGated over our ops, against the float32 references."""
from __future__ import annotations

import pytest
import torch

from fla_ascend.modules import FusedRMSNormGated, L2Norm, RMSNorm, ShortConvolution
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.norm.reference import l2norm_ref, rms_norm_residual_ref
from fla_ascend.ops.utils import rel_rmse

TOL = 1e-5


def test_short_convolution_prefill_then_decode(device):
    """A prefill that returns the cache, then decode steps (in place on the cache) give the
    outputs of one pass over the whole sequence; the weight's gradient matches the reference."""
    D, W, T = 12, 4, 9
    conv = ShortConvolution(D, W, bias=True, device=device)
    assert conv.state_size == D * W and conv.weight.shape == (D, 1, W)
    x = torch.randn(2, T, D, device=device)
    ref, ref_ht = causal_conv1d_ref(x, conv.weight.squeeze(1), conv.bias, None, None, True, "silu")
    with torch.no_grad():
        y, cache = conv(x[:, :5], output_final_state=True)
        steps = []
        for t in range(5, T):
            out, same = conv(x[:, t:t + 1], cache=cache, output_final_state=True)
            assert same is cache  # the decode step updates the cache in place
            steps.append(out)
    assert rel_rmse(ref, torch.cat([y, *steps], 1)) < TOL
    assert rel_rmse(ref_ht, cache) < TOL
    y, _ = conv(x)
    (dw,) = torch.autograd.grad(y.sum(), conv.weight)
    (rdw,) = torch.autograd.grad(causal_conv1d_ref(x, conv.weight.squeeze(1), conv.bias, None, None, False,
                                                   "silu")[0].sum(), conv.weight)
    assert rel_rmse(rdw, dw) < 1e-4


def test_short_convolution_mask_and_varlen(device, monkeypatch):
    D, W = 8, 3
    conv = ShortConvolution(D, W, activation=None, device=device)
    x = torch.randn(1, 10, D, device=device)
    mask = torch.ones(1, 10, device=device)
    mask[0, :3] = 0
    x0 = x.clone()
    y, _ = conv(x, mask=mask)
    assert torch.equal(x, x0)  # not modified in place
    ref, _ = causal_conv1d_ref(x * mask[..., None], conv.weight.squeeze(1), None, None, None, False, None)
    assert rel_rmse(ref, y) < TOL
    cu = torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    y, ht = conv(x, cu_seqlens=cu, output_final_state=True)
    ref, ref_ht = causal_conv1d_ref(x, conv.weight.squeeze(1), None, None, None, True, None, cu)
    assert rel_rmse(ref, y) < TOL and rel_rmse(ref_ht, ht) < TOL
    with pytest.raises(ValueError, match="mask or cu_seqlens"):
        conv(x, mask=mask, cu_seqlens=cu)
    with pytest.raises(NotImplementedError, match="backend='cuda'"):
        ShortConvolution(D, W, backend="cuda")
    monkeypatch.setenv("FLA_CONV_BACKEND", "cuda")
    with pytest.raises(NotImplementedError, match="backend='cuda'"):
        ShortConvolution(D, W)


@pytest.mark.parametrize("prenorm", [False, True])
def test_rms_norm_module(prenorm, device):
    norm = RMSNorm(16, bias=True, device=device)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    x, res = torch.randn(3, 16, device=device), torch.randn(3, 16, device=device)
    out = norm(x, res, prenorm)
    ref = rms_norm_residual_ref(x, None, norm.weight, norm.bias, res, norm.eps)
    y = out[0] if prenorm else out
    assert rel_rmse(ref[0], y) < TOL
    if prenorm:
        assert rel_rmse(ref[1], out[1]) < TOL


def test_l2norm_and_gated_modules(device):
    x = torch.randn(4, 32, device=device)
    y = L2Norm(output_dtype=torch.float16)(x)
    assert y.dtype == torch.float16 and rel_rmse(l2norm_ref(x), y.float()) < 1e-3
    g = torch.randn(4, 32, device=device)
    norm = FusedRMSNormGated(32, device=device)
    y, r = norm(x, g, residual=x, prenorm=True)
    ref = rms_norm_residual_ref(x, g, norm.weight, None, x, norm.eps)
    assert rel_rmse(ref[0], y) < TOL and rel_rmse(ref[1], r) < TOL


def test_module_errors_name_the_input():
    """A wrong input size is reported against the module's hidden_size (the op's message blamed
    the weight), a wrong mask names mask, a bad kernel_size is a ValueError at construction."""
    sc = ShortConvolution(32, 4)
    with pytest.raises(ValueError,
                       match=r"ShortConvolution: x must have shape \[B, T, hidden_size=32\], got \(2, 10, 16\)"):
        sc(torch.randn(2, 10, 16))
    with pytest.raises(ValueError,
                       match=r"ShortConvolution: mask must have shape \[B, T\] = \[2, 10\] \(x's\), got \(2, 9\)"):
        sc(torch.randn(2, 10, 32), mask=torch.ones(2, 9))
    for bad in (0, 17):
        with pytest.raises(ValueError, match=rf"ShortConvolution: kernel_size must be an int in \[1, 16\], got {bad}"):
            ShortConvolution(32, bad)
    with pytest.raises(ValueError,
                       match=r"RMSNorm: x's last dimension must be hidden_size=16, got 8 \(x shape \(3, 8\)\)"):
        RMSNorm(16)(torch.randn(3, 8))


@pytest.mark.parametrize("path, names", [
    ("l2norm", ["L2Norm", "l2norm", "l2_norm"]),
    ("fused_norm_gate", ["FusedRMSNormGated", "rms_norm_gated"]),
    ("layernorm", ["RMSNorm", "rms_norm"]),
    ("convolution", ["ShortConvolution", "causal_conv1d", "causal_conv1d_update"]),
])
def test_fla_module_paths(path, names):
    """flash-linear-attention 0.6.0's ``fla.modules.<path>`` imports work with fla_ascend.modules:
    each name is the one fla_ascend.ops / fla_ascend.modules defines (a re-export, not a copy)."""
    import importlib

    import fla_ascend.modules as modules
    import fla_ascend.ops as ops

    mod = importlib.import_module(f"fla_ascend.modules.{path}")
    assert sorted(mod.__all__) == sorted(names)
    for name in names:
        assert getattr(mod, name) is getattr(modules, name, None) or getattr(mod, name) is getattr(ops, name)
