"""Mixed input dtypes, as flash-linear-attention 0.6.0 accepts them, with its output dtype rules:

- ``chunk_gated_delta_rule``: q, k, v of any float dtypes; ``o`` in q's dtype (its
  ``o.to(q.dtype)``), computed in the widest of the three; the final state float32.
- ``fused_recurrent_gated_delta_rule``: the same inputs; ``o`` in v's dtype (its
  ``torch.empty_like(v)``), each input read as float32.
- ``causal_conv1d``: x, weight, bias, initial_state of any float dtypes; ``y`` and the final state
  in x's dtype.
- ``rms_norm_gated``: x, g, weight of any float dtypes; ``y`` in x's dtype.

Every case is compared with the float64 reference of the same (mixed) inputs, and each input's
gradient must come back in its own dtype. bfloat16 runs only on an accelerator for the chunked op
(the interpreter's bf16 dots), unless the mix promotes it to float32.
"""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from fla_ascend import backend
from fla_ascend.ops import causal_conv1d, chunk_gated_delta_rule, fused_recurrent_gated_delta_rule, rms_norm_gated
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule
from fla_ascend.ops.norm.reference import rms_norm_gated_ref

from helpers import assert_close

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
LIMIT = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}
"""rel-RMSE bound by the narrowest dtype in the computation (its rounding of the output)."""
MIXES = [m for m in itertools.product(DT, repeat=3) if len(set(m)) > 1]


def _limit(*dtypes):
    return max(LIMIT[d] for d in dtypes)


def _skip_bf16_dots(*dtypes):
    wide = dtypes[0]
    for d in dtypes[1:]:
        wide = torch.promote_types(wide, d)
    if backend.is_interpreter() and wide == torch.bfloat16:
        pytest.skip("bf16 dots are not computed correctly by the Triton interpreter (README, Tests)")


def _gdr_inputs(qd, kd, vd, device, T=40, H=1, HV=2, K=16, V=16):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, T, H, K, generator=g).to(device, DT[qd])
    k = F.normalize(torch.randn(1, T, H, K, generator=g), dim=-1).to(device, DT[kd])
    v = torch.randn(1, T, HV, V, generator=g).to(device, DT[vd])
    gate = F.logsigmoid(torch.randn(1, T, HV, generator=g)).to(device)
    beta = torch.rand(1, T, HV, generator=g).to(device)
    h0 = torch.randn(1, HV, K, V, generator=g).to(device)
    return dict(q=q, k=k, v=v, g=gate, beta=beta, initial_state=h0)


def _ref(x):
    o, ht = naive_recurrent_gated_delta_rule(**{n: t.double() for n, t in x.items()}, output_final_state=True)
    return o, ht


@pytest.mark.parametrize("qd,kd,vd", MIXES, ids="-".join)
def test_chunk_mixed_qkv(qd, kd, vd, device):
    _skip_bf16_dots(DT[qd], DT[kd], DT[vd])
    x = {n: t.requires_grad_() for n, t in _gdr_inputs(qd, kd, vd, device).items()}
    o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=16)
    assert o.dtype == DT[qd] and ht.dtype == torch.float32
    ref_o, ref_ht = _ref({n: t.detach() for n, t in x.items()})
    limit = _limit(DT[qd], DT[kd], DT[vd])
    assert_close("o", ref_o, o, limit)
    assert_close("ht", ref_ht, ht, limit)
    (o.float().square().sum() + ht.sum()).backward()
    ref = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    r_o, r_ht = naive_recurrent_gated_delta_rule(**ref, output_final_state=True)
    (r_o.square().sum() + r_ht.sum()).backward()
    for n, t in x.items():
        assert t.grad.dtype == t.dtype, n
        assert_close(f"d{n}", ref[n].grad, t.grad, 4 * limit)


@pytest.mark.parametrize("qd,kd,vd", MIXES, ids="-".join)
def test_fused_recurrent_mixed_qkv(qd, kd, vd, device):
    x = _gdr_inputs(qd, kd, vd, device)
    o, ht = fused_recurrent_gated_delta_rule(**x, output_final_state=True)
    assert o.dtype == DT[vd] and ht.dtype == torch.float32
    ref_o, ref_ht = _ref(x)
    limit = _limit(DT[qd], DT[kd], DT[vd])
    assert_close("o", ref_o, o, limit)
    assert_close("ht", ref_ht, ht, limit)


@pytest.mark.parametrize("xd,wd,sd", [("f16", "f32", "f32"), ("f32", "f16", "bf16"), ("bf16", "f32", "f16"),
                                      ("f32", "bf16", "f32")], ids="-".join)
def test_conv_mixed_dtypes(xd, wd, sd, device):
    g = torch.Generator().manual_seed(0)
    B, T, D, W = 2, 24, 16, 4
    x = torch.randn(B, T, D, generator=g).to(device, DT[xd]).requires_grad_()
    w = torch.randn(D, W, generator=g).to(device, DT[wd]).requires_grad_()
    b = torch.randn(D, generator=g).to(device, DT[wd]).requires_grad_()
    h0 = torch.randn(B, D, W, generator=g).to(device, DT[sd]).requires_grad_()
    y, ht = causal_conv1d(x, w, b, initial_state=h0, output_final_state=True, activation="silu")
    assert y.dtype == DT[xd] and ht.dtype == DT[xd]
    leaves = (x, w, b, h0)
    ref = [t.detach().double().requires_grad_() for t in leaves]
    ry, rht = causal_conv1d_ref(*ref[:3], None, ref[3], True, "silu")
    limit = _limit(DT[xd], DT[wd], DT[sd])
    assert_close("y", ry, y, limit)
    assert_close("final_state", rht, ht, limit)
    (y.float().square().sum() + ht.float().sum()).backward()
    (ry.square().sum() + rht.sum()).backward()
    for name, t, r in zip(("x", "weight", "bias", "initial_state"), leaves, ref):
        assert t.grad.dtype == t.dtype, name
        assert_close(f"d{name}", r.grad, t.grad, 4 * limit)


@pytest.mark.parametrize("xd,gd,wd", [("f32", "f16", "bf16"), ("f16", "f32", "f32"), ("bf16", "f16", "f32")],
                         ids="-".join)
def test_rms_norm_gated_mixed_dtypes(xd, gd, wd, device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 32, generator=g).to(device, DT[xd]).requires_grad_()
    z = torch.randn(8, 32, generator=g).to(device, DT[gd]).requires_grad_()
    w = torch.randn(32, generator=g).to(device, DT[wd]).requires_grad_()
    y = rms_norm_gated(x, z, w, None, "swish", eps=1e-6)
    assert y.dtype == DT[xd]
    ref = [t.detach().double().requires_grad_() for t in (x, z, w)]
    ry = rms_norm_gated_ref(*ref, eps=1e-6)
    limit = _limit(DT[xd], DT[gd], DT[wd])
    assert_close("y", ry, y, limit)
    y.float().square().sum().backward()
    ry.square().sum().backward()
    for name, t, r in zip(("x", "g", "weight"), (x, z, w), ref):
        assert t.grad.dtype == t.dtype, name
        assert_close(f"d{name}", r.grad, t.grad, 4 * limit)
