"""Autograd rules every op keeps (fla_ascend.ops.utils.autograd): a kernel backward refuses a
double backward with the op's name instead of returning gradients without second-order terms;
the decode ops refuse inputs that require grad."""
from __future__ import annotations

import pytest
import torch

from fla_ascend.ops import (
    causal_conv1d,
    causal_conv1d_update,
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    l2norm,
    rms_norm_gated,
)

from helpers import make_inputs


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


def test_decode_ops_run_with_grad_and_refuse_backward(device):
    """Both decode ops run their forward with grad mode on and inputs that require grad (as
    flash-linear-attention's do), with the same results as under no_grad; a backward raises,
    naming the op."""
    w = torch.randn(16, 4, device=device, requires_grad=True)
    x = torch.randn(2, 16, device=device)
    cache = torch.randn(2, 16, 4, device=device)
    cache2 = cache.clone()
    y, c = causal_conv1d_update(x, cache, weight=w)
    assert c is cache and y.requires_grad
    with torch.no_grad():
        y2, _ = causal_conv1d_update(x, cache2, weight=w)
    torch.testing.assert_close(y.detach(), y2, rtol=0, atol=0)
    torch.testing.assert_close(cache, cache2, rtol=0, atol=0)
    with pytest.raises(NotImplementedError, match=r"^causal_conv1d_update has no backward"):
        y.sum().backward()
    s = make_inputs(2, 1, 1, 1, 16, 16, torch.float32, device)
    s["q"].requires_grad_()
    o, ht = fused_recurrent_gated_delta_rule(**s, output_final_state=True)
    with torch.no_grad():
        o2, ht2 = fused_recurrent_gated_delta_rule(**s, output_final_state=True)
    torch.testing.assert_close(o.detach(), o2, rtol=0, atol=0)
    torch.testing.assert_close(ht.detach(), ht2, rtol=0, atol=0)
    with pytest.raises(NotImplementedError, match=r"^fused_recurrent_gated_delta_rule has no backward"):
        o.sum().backward()


def _trainable_ops():
    from fla_ascend.ops import catalog

    return [n for n, s in catalog.specs().items() if "fwdbwd" in s.modes and s.grad_inputs]


@pytest.mark.parametrize("op", _trainable_ops())
def test_every_catalogued_op_refuses_double_backward(op, device):
    """The same rule for every op of the catalogue with a backward, at a small CPU-sized version of
    its first anchor shape (inputs from its spec), so an op added with a spec is covered here."""
    from fla_ascend.bench.cases import scale_for_cpu
    from fla_ascend.ops import catalog
    from fla_ascend.ops.spec import build_inputs, call

    spec = catalog.get(op)
    shape = scale_for_cpu(spec.complete_shape(catalog.named_shapes()[spec.shapes[0]]), quick=True)
    inputs = build_inputs(spec, shape, torch.float32, device, seed=0)
    name = spec.grad_inputs[0]
    x = inputs[name].requires_grad_()

    def loss():
        return sum(o.float().sum() for o in call(spec, spec.entry, inputs).values() if o.requires_grad)

    with pytest.raises(RuntimeError, match=f"^{op}: double backward"):
        torch.autograd.grad(loss(), [x], create_graph=True)
    (dx,) = torch.autograd.grad(loss(), [x])
    assert dx.shape == x.shape and dx.isfinite().all()
