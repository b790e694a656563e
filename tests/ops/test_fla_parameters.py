"""flash-linear-attention 0.6.0's parameters added for the drop-in, each against the
float32 reference: beta sigmoid / negative eigenvalues / V-first states / ``cu_seqlens_cpu`` /
``chunk_indices`` of the chunked op (with gradients), optional ``g``/``gk``/``gv``/``beta`` of the
recurrent op, the conv's ``backend`` / varlen hints, ``l2norm``'s ``output_dtype``, the norms'
residual path, and what is refused."""
from __future__ import annotations

import importlib
import warnings

import pytest
import torch
import torch.nn.functional as F

from fla_ascend import backend
from fla_ascend.ops import (
    causal_conv1d,
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    l2norm,
    rms_norm,
    rms_norm_gated,
)
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule
from fla_ascend.ops.norm.reference import l2norm_ref, rms_norm_residual_ref
from fla_ascend.ops.utils import prepare_chunk_indices

from helpers import assert_close, make_inputs

conv_mod = importlib.import_module("fla_ascend.ops.causal_conv1d.conv")
chunk_mod = importlib.import_module("fla_ascend.ops.gated_delta_rule.chunk")
index_mod = importlib.import_module("fla_ascend.ops.utils.index")
validation_mod = importlib.import_module("fla_ascend.ops.utils.validation")
# the interpreter computes in exact fp32; compiled CUDA runs the chunked op's fp32 dots in tf32
# (the chunk op tests' RATIO): 1.2e-3 to 1.8e-3 measured on the H200 for o here
FWD, BWD = (1e-5, 1e-4) if backend.is_interpreter() else (5e-3, 2e-2)
B, T, H, HV, K, V = 2, 23, 1, 2, 16, 16


def _grads(out, inputs, dout):
    return torch.autograd.grad(out, inputs, dout, allow_unused=True)


@pytest.mark.parametrize("neg", [False, True])
def test_chunk_beta_sigmoid_state_v_first(neg, device):
    """use_beta_sigmoid_in_kernel (and allow_neg_eigval: beta = 2 sigmoid) with V-first states,
    forward and the gradient of every input, against the reference fed the activated beta and
    transposed states."""
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device, requires_grad=True)
    logits = torch.randn(B, T, HV, device=device, requires_grad=True)
    h0_vk = torch.randn(B, HV, V, K, device=device, requires_grad=True)
    o, ht = chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], logits, None, h0_vk, True, False, True, neg, True)
    assert ht.shape == (B, HV, V, K)
    beta = torch.sigmoid(logits) * (2 if neg else 1)
    ro, rht = naive_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], beta,
                                               initial_state=h0_vk.transpose(-1, -2), output_final_state=True)
    assert_close("o", ro, o, FWD)
    assert_close("ht", rht.transpose(-1, -2), ht, FWD)
    do, dht = torch.randn_like(o), torch.randn_like(ht)
    inputs = [x["q"], x["k"], x["v"], x["g"], logits, h0_vk]
    for name, r, g in zip(["q", "k", "v", "g", "beta", "h0"], _grads((ro, rht.transpose(-1, -2)), inputs, (do, dht)),
                          _grads((o, ht), inputs, (do, dht))):
        assert_close(f"d{name}", r, g, BWD)


def test_chunk_flag_errors(device):
    x = make_inputs(1, 8, 1, 1, 16, 16, torch.float32, device)
    x.pop("use_gate_in_kernel")
    with pytest.raises(ValueError, match="allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True"):
        chunk_gated_delta_rule(**x, allow_neg_eigval=True)
    with pytest.raises(TypeError, match="cp_context must be an FLACPContext"):
        chunk_gated_delta_rule(**x, cp_context=object())
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['foo'\]"):
        chunk_gated_delta_rule(**x, foo=1)
    with pytest.raises(DeprecationWarning, match="head_first"):
        chunk_gated_delta_rule(**x, head_first=False)
    with pytest.raises(ValueError, match=r"initial_state must have shape \[1, 1, 8, 16\], got \(1, 1, 16, 16\)"):
        chunk_gated_delta_rule(**{**x, "v": x["v"][..., :8].contiguous()}, state_v_first=True)
    with pytest.warns(DeprecationWarning, match="transpose_state_layout"):
        o, _ = chunk_gated_delta_rule(**x, transpose_state_layout=True)
    o2, _ = chunk_gated_delta_rule(**{**x, "initial_state": x["initial_state"].transpose(-1, -2)}, state_v_first=False)
    assert_close("o", o2, o, FWD)


def _no_sync_guard(monkeypatch, cu):
    """Fail when the device ``cu_seqlens`` object is read on the host (validation) or turned into
    a chunk list without a host copy. On the CPU tier ``cu`` is treated as if on an accelerator
    (``on_host`` says no for every tensor), so the device path is the one tested."""
    real_check, real_prepare = validation_mod.check_cu_seqlens, index_mod.prepare_chunk_indices

    def check(t, *a):
        assert t is not cu, "cu_seqlens was read back from the device"
        return real_check(t, *a)

    def prepare(t, chunk_size, cu_seqlens_cpu=None):
        assert t is not cu or cu_seqlens_cpu is not None, "chunk indices built from the device cu_seqlens"
        return real_prepare(t, chunk_size, cu_seqlens_cpu)

    monkeypatch.setattr(validation_mod, "check_cu_seqlens", check)
    monkeypatch.setattr(validation_mod, "on_host", lambda t: False)
    monkeypatch.setattr(index_mod, "prepare_chunk_indices", prepare)
    monkeypatch.setattr(chunk_mod, "prepare_chunk_indices", prepare)
    monkeypatch.setattr(conv_mod, "prepare_chunk_indices", prepare)


@pytest.mark.parametrize("hint", ["cu_seqlens_cpu", "chunk_indices"])
def test_chunk_varlen_hints_no_sync(hint, device, monkeypatch):
    """With cu_seqlens_cpu or chunk_indices the op never reads the device cu_seqlens back; the
    results and gradients equal the reference's."""
    lens = [0, 5, 5, 70, 90]
    x = make_inputs(1, 90, H, HV, K, V, torch.float32, device, varlen=lens, requires_grad=True)
    cu = x["cu_seqlens"]
    hints = {"cu_seqlens_cpu": cu.cpu().clone()} if hint == "cu_seqlens_cpu" else \
        {"chunk_indices": prepare_chunk_indices(cu, 64).long()}
    _no_sync_guard(monkeypatch, cu)
    args = {k: x[k] for k in ("q", "k", "v", "g", "beta", "initial_state")}
    o, ht = chunk_gated_delta_rule(**args, output_final_state=True, cu_seqlens=cu, **hints)
    monkeypatch.undo()
    ro, rht = naive_recurrent_gated_delta_rule(**args, output_final_state=True, cu_seqlens=cu)
    assert_close("o", ro, o, FWD)
    assert_close("ht", rht, ht, FWD)
    do = torch.randn_like(o)
    _no_sync_guard(monkeypatch, cu)
    got = _grads(o, list(args.values()), do)
    monkeypatch.undo()
    for name, r, g in zip(args, _grads(ro, list(args.values()), do), got):
        assert_close(f"d{name}", r, g, BWD)


def test_varlen_hint_errors(device):
    x = make_inputs(1, 10, 1, 1, 16, 16, torch.float32, device, varlen=[0, 4, 10])
    x.pop("use_gate_in_kernel")
    with pytest.raises(ValueError, match="cu_seqlens_cpu must have cu_seqlens' length 3, got 2"):
        chunk_gated_delta_rule(**x, cu_seqlens_cpu=torch.tensor([0, 10]))
    with pytest.raises(ValueError, match=r"chunk_indices must have shape \[NT, 2\]"):
        chunk_gated_delta_rule(**x, chunk_indices=torch.zeros(3, dtype=torch.long, device=device))
    with pytest.raises(ValueError, match="cu_seqlens_cpu describes a packed"):
        chunk_gated_delta_rule(**{**x, "cu_seqlens": None, "initial_state": None}, cu_seqlens_cpu=torch.tensor([0, 10]))


@pytest.mark.parametrize("gates", ["none", "gk", "gv", "g+gk+gv", "beta_sigmoid_v_first", "beta_per_v"])
def test_fused_recurrent_optional_gates(gates, device):
    """g, gk, gv and beta optional (a plain delta rule when all are None), beta per value column,
    beta logits and V-first states, against the reference."""
    x = make_inputs(B, 9, H, HV, K, V, torch.float32, device)
    gk = F.logsigmoid(torch.randn(B, 9, HV, K, device=device) + 3)
    gv = F.logsigmoid(torch.randn(B, 9, HV, V, device=device) + 3)
    kw = dict(q=x["q"], k=x["k"], v=x["v"], initial_state=x["initial_state"], output_final_state=True)
    ref_kw = dict(kw, g=None, beta=None)
    if gates == "gk":
        kw.update(gk=gk, beta=x["beta"])
        ref_kw.update(gk=gk, beta=x["beta"])
    elif gates == "gv":
        kw.update(gv=gv)
        ref_kw.update(gv=gv)
    elif gates == "g+gk+gv":
        kw.update(g=x["g"], gk=gk, gv=gv, beta=x["beta"])
        ref_kw.update(g=x["g"], gk=gk, gv=gv, beta=x["beta"])
    elif gates == "beta_per_v":
        beta_v = torch.rand(B, 9, HV, V, device=device)
        kw.update(g=x["g"], beta=beta_v)
        ref_kw.update(g=x["g"], beta=beta_v)
    elif gates == "beta_sigmoid_v_first":
        logits = torch.randn(B, 9, HV, device=device)
        kw.update(g=x["g"], beta=logits, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True, state_v_first=True,
                  initial_state=x["initial_state"].transpose(-1, -2).contiguous())
        ref_kw.update(g=x["g"], beta=2 * torch.sigmoid(logits))
    o, ht = fused_recurrent_gated_delta_rule(**kw)
    ro, rht = naive_recurrent_gated_delta_rule(**ref_kw)
    if gates == "beta_sigmoid_v_first":
        rht = rht.transpose(-1, -2)
    assert_close("o", ro, o, FWD)
    assert_close("ht", rht, ht, FWD)


def test_fused_recurrent_gate_errors(device):
    x = make_inputs(1, 4, 1, 1, 16, 16, torch.float32, device)
    with pytest.raises(ValueError, match=r"gk must have shape \[1, 4, 1, 16\]"):
        fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], gk=torch.zeros(1, 4, 1, 8, device=device))
    with pytest.raises(ValueError, match="use_gate_in_kernel=True requires g"):
        fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], use_gate_in_kernel=True,
                                         A_log=torch.zeros(1, device=device))


def _conv_inputs(device, lens=(0, 3, 40, 100)):
    T, D, W = lens[-1], 20, 4
    x = torch.randn(1, T, D, device=device, requires_grad=True)
    w = torch.randn(D, W, device=device, requires_grad=True)
    b = torch.randn(D, device=device, requires_grad=True)
    cu = torch.tensor(lens, dtype=torch.int32, device=device)
    return x, w, b, cu


@pytest.mark.parametrize("hint", ["cu_seqlens_cpu", "chunk_indices"])
def test_conv_varlen_hints(hint, device, monkeypatch):
    """The conv with cu_seqlens_cpu or 64-token chunk_indices (flash-linear-attention's) reads no
    device cu_seqlens back in its forward; results and gradients equal the reference's."""
    x, w, b, cu = _conv_inputs(device)
    hints = {"cu_seqlens_cpu": cu.cpu().clone()} if hint == "cu_seqlens_cpu" else \
        {"chunk_indices": prepare_chunk_indices(cu, 64).long()}
    _no_sync_guard(monkeypatch, cu)
    y, ht = causal_conv1d(x, w, b, output_final_state=True, activation="silu", cu_seqlens=cu, **hints)
    monkeypatch.undo()
    ry, rht = causal_conv1d_ref(x, w, b, None, None, True, "silu", cu)
    assert_close("y", ry, y, FWD)
    assert_close("ht", rht, ht, FWD)
    dy = torch.randn_like(y)
    for name, r, g in zip("xwb", _grads(ry, (x, w, b), dy), _grads(y, (x, w, b), dy)):
        assert_close(f"d{name}", r, g, BWD)


def test_conv_refusals(device):
    x, w, b, cu = _conv_inputs(device)
    for name in ("cuda", "mix"):
        with pytest.raises(NotImplementedError, match=f"backend='{name}'"):
            causal_conv1d(x, w, backend=name)
    with pytest.raises(ValueError, match="backend must be one of"):
        causal_conv1d(x, w, backend="tpu")
    with pytest.raises(TypeError, match="cp_context must be an FLACPContext"):
        causal_conv1d(x, w, cp_context=object())
    with pytest.raises(NotImplementedError, match="seq_idx"):
        causal_conv1d(x, w, seq_idx=torch.zeros(1, 100, dtype=torch.int32))
    with pytest.raises(TypeError, match="weight"):
        causal_conv1d(x)
    y, _ = causal_conv1d(x, w, None, None, None, False, None, "triton", cu, seq_idx=None)  # fla's positional order
    assert_close("y", causal_conv1d_ref(x, w, None, None, None, False, None, cu)[0], y, FWD)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_l2norm_output_dtype(out_dtype, device):
    x = torch.randn(6, 33, device=device, dtype=torch.float32 if out_dtype == torch.float16 else torch.float16,
                    requires_grad=True)
    y = l2norm(x, 1e-6, out_dtype)
    assert y.dtype == out_dtype
    ref = l2norm_ref(x.float()).to(out_dtype)
    assert_close("y", ref.float(), y.float(), 1e-3)
    dy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, dy)
    (rdx,) = torch.autograd.grad(l2norm_ref(x.float()), x, dy.float())
    assert dx.dtype == x.dtype
    assert_close("dx", rdx.float(), dx.float(), 2e-3)
    with pytest.raises(TypeError, match="output_dtype"):
        l2norm(x, 1e-6, torch.int32)


@pytest.mark.parametrize("case", ["residual", "residual_prenorm", "fp32_prenorm", "plain_rms_norm"])
def test_norm_residual_path(case, device):
    """rms_norm_gated / rms_norm with residual, prenorm and residual_in_fp32 against the reference
    (values, the returned residual and its dtype, gradients of every input)."""
    D = 40
    x = torch.randn(3, 5, D, device=device, dtype=torch.float16, requires_grad=True)
    z = torch.randn(3, 5, D, device=device, dtype=torch.float16, requires_grad=True)
    w = torch.randn(D, device=device, requires_grad=True)
    res = torch.randn(3, 5, D, device=device, dtype=torch.float16, requires_grad=True)
    fp32 = case == "fp32_prenorm"
    residual = None if fp32 else res
    prenorm = case != "residual"
    if case == "plain_rms_norm":
        out = rms_norm(x, w, None, residual, 1e-5, prenorm, fp32)
        ref = rms_norm_residual_ref(x, None, w, None, residual, 1e-5, "swish", fp32)
    else:
        out = rms_norm_gated(x, z, w, None, "swish", residual, prenorm, fp32, 1e-5)
        ref = rms_norm_residual_ref(x, z, w, None, residual, 1e-5, "swish", fp32)
    y, r = out if prenorm else (out, None)
    assert y.dtype == x.dtype
    assert_close("y", ref[0].float(), y.float(), 1e-3)
    if prenorm:
        assert r.dtype == ref[1].dtype
        assert_close("residual_out", ref[1].float(), r.float(), 1e-3)
    inputs = [t for t in (x, z, w, res) if t is not None and (t is not res or residual is not None)]
    dy = torch.randn_like(y)
    got = _grads(y, inputs, dy)
    want = _grads(ref[0], inputs, dy)
    for i, (r_, g_) in enumerate(zip(want, got)):
        if r_ is None:
            assert g_ is None or g_.abs().max() == 0
            continue
        assert_close(f"grad {i}", r_.float(), g_.float(), 2e-3)


def test_unused_kwargs_of_recurrent(device):
    x = make_inputs(1, 4, 1, 1, 16, 16, torch.float32, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="unexpected keyword arguments"):
            fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"], x["g"], beta=x["beta"], chunk_size=64)


def _two_seqs(device):
    x = make_inputs(1, 16, 1, 1, 16, 16, torch.float32, device, varlen=[0, 8, 16])
    x.pop("use_gate_in_kernel")
    return x


@pytest.mark.parametrize("rows, match, row_count", [
    ([[0, 0]], r"chunk_indices must have one row per 64-token chunk of cu_seqlens \(2 rows\), got 1 rows", True),
    ([[0, 5], [1, 7]], r"row 0 should be \[0, 0\], got \[0, 5\]", False),
    ([[1, 0], [0, 0]], r"row 0 should be \[0, 0\], got \[1, 0\]", False),
])
def test_chunk_indices_checked_against_cu_seqlens(rows, match, row_count, device):
    """chunk_indices that do not list cu_seqlens' chunks raise (they made the kernels read out of
    bounds: an abort, or a wrong output): every row on the CPU; on an accelerator the row count,
    with cu_seqlens_cpu (the rows' values are not read back there)."""
    x = _two_seqs(device)
    ci = torch.tensor(rows, device=device)
    if ci.device.type != "cpu" and not row_count:
        return
    if x["cu_seqlens"].device.type == "cpu":
        with pytest.raises(ValueError, match=match):
            chunk_gated_delta_rule(**x, chunk_indices=ci)
    with pytest.raises(ValueError, match=match):
        chunk_gated_delta_rule(**x, chunk_indices=ci, cu_seqlens_cpu=x["cu_seqlens"].cpu())
    with pytest.raises(TypeError, match="chunk_indices must have an integer dtype"):
        chunk_gated_delta_rule(**x, chunk_indices=ci.float())
    # the conv's 64-token chunk list is checked the same way
    xc = torch.randn(1, 16, 8, device=device)
    with pytest.raises(ValueError, match=match):
        causal_conv1d(xc, torch.randn(8, 4, device=device), cu_seqlens=x["cu_seqlens"], chunk_indices=ci,
                      cu_seqlens_cpu=x["cu_seqlens"].cpu())


def test_chunk_indices_of_another_chunk_size(device):
    """chunk_indices built for 16-token chunks passed with chunk_size=64 raise."""
    ci = prepare_chunk_indices(torch.tensor([0, 24, 40]), 16)
    x = make_inputs(1, 40, 1, 1, 16, 16, torch.float32, device, varlen=[0, 24, 40])
    x.pop("use_gate_in_kernel")
    with pytest.raises(ValueError, match=r"one row per 64-token chunk of cu_seqlens \(2 rows\), got 3 rows"):
        chunk_gated_delta_rule(**x, chunk_indices=ci.to(device), cu_seqlens_cpu=torch.tensor([0, 24, 40]))
    o = chunk_gated_delta_rule(**x, chunk_indices=ci.to(device), chunk_size=16)[0]
    assert torch.equal(o, chunk_gated_delta_rule(**x, chunk_size=16)[0])


def test_cu_seqlens_cpu_differs_from_cu_seqlens():
    """cu_seqlens on the host and a different cu_seqlens_cpu raise, naming both (cu_seqlens was
    used silently)."""
    x = _two_seqs("cpu")
    with pytest.raises(ValueError, match=r"cu_seqlens_cpu must hold the same boundaries as cu_seqlens; "
                                         r"got cu_seqlens=\[0, 8, 16\] and cu_seqlens_cpu=\[0, 4, 16\]"):
        chunk_gated_delta_rule(**x, cu_seqlens_cpu=torch.tensor([0, 4, 16]))
    xc = torch.randn(1, 16, 8)
    with pytest.raises(ValueError, match="cu_seqlens_cpu must hold the same boundaries"):
        causal_conv1d(xc, torch.randn(8, 4), cu_seqlens=x["cu_seqlens"], cu_seqlens_cpu=torch.tensor([0, 4, 16]))
