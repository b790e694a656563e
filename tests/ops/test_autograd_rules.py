"""Autograd rules every op keeps (fla_ascend.ops.utils.autograd): a kernel backward refuses a
double backward with the op's name instead of returning gradients without second-order terms;
the decode ops refuse inputs that require grad."""
from __future__ import annotations

import pytest
import torch
from helpers import make_inputs

from fla_ascend.ops import (
    causal_conv1d, causal_conv1d_update, chunk_gated_delta_rule, fused_recurrent_gated_delta_rule, l2norm,
    rms_norm_gated,
)


def _gdn(device):
    x = make_inputs(1, 20, 1, 1, 16, 16, torch.float32, device)
    return x["q"], lambda q: chunk_gated_delta_rule(**{**x, "q": q})[0]


def _conv(device):
    w = torch.randn(16, 4, device=device)
    return torch.randn(1, 12, 16, device=device), lambda x: causal_conv1d(x, w)[0]


def _l2norm(device):
    return torch.randn(4, 16, device=device), l2norm


def _rmsg(device):
    g = torch.randn(4, 16, device=device)
    return torch.randn(4, 16, device=device), lambda x: rms_norm_gated(x, g, torch.ones(16, device=device))


@pytest.mark.parametrize("op, make", [("chunk_gated_delta_rule", _gdn), ("causal_conv1d", _conv),
                                      ("l2norm", _l2norm), ("rms_norm_gated", _rmsg)])
def test_gradient_penalty_raises(op, make, device):
    """A gradient penalty (create_graph=True, then a loss on the gradient) would otherwise get a
    silently wrong gradient: the first-order gradient would come back without a graph."""
    x, fn = make(device)
    x.requires_grad_()
    y = fn(x)
    with pytest.raises(RuntimeError, match=f"^{op}: double backward"):
        torch.autograd.grad(y.sum(), [x], create_graph=True)
    (dx,) = torch.autograd.grad(fn(x).sum(), [x])  # the plain backward still works
    assert dx.shape == x.shape and dx.isfinite().all()


def test_decode_ops_are_forward_only(device):
    """Both decode ops name the inputs that require grad; under no_grad they run."""
    w = torch.randn(16, 4, device=device, requires_grad=True)
    cache = torch.zeros(2, 16, 4, device=device)
    x = torch.randn(2, 16, device=device)
    with pytest.raises(RuntimeError, match=r"^causal_conv1d_update is forward only \(weight requires grad\)"):
        causal_conv1d_update(x, cache, weight=w)
    with torch.no_grad():
        y, _ = causal_conv1d_update(x, cache, weight=w)
    assert y.shape == x.shape
    s = make_inputs(2, 1, 1, 1, 16, 16, torch.float32, device)
    s["q"].requires_grad_()
    with pytest.raises(RuntimeError, match=r"^fused_recurrent_gated_delta_rule is forward only \(q requires grad\)"):
        fused_recurrent_gated_delta_rule(**s)
