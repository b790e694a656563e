"""Extreme gates: ``g = -inf`` (a decay of exactly 0, the state resets), very negative finite
gates and whole chunks whose cumulative gate underflows, for both gated delta rule ops, forward
and backward, against the float64 per-token recurrence.

The chunk form needs ``exp(G_i - G_j)`` of in-chunk cumulative gates; without care one
``-inf`` makes it ``-inf - (-inf) = NaN`` for the whole sequence and a gate of ``-1e30``
cancels every other gate of its chunk in float32. ``ops.common.cumsum.GATE_FLOOR`` is the
remedy; these tests are its proof.
"""
from __future__ import annotations

import math

import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
from fla_ascend.ops.common.cumsum import GATE_FLOOR
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule

from helpers import assert_close, make_inputs, nan_empty  # noqa: F401  (nan_empty is a fixture)

if not backend.is_interpreter():
    pytest.skip("CPU tier (the GPU tier's bf16 tests cover the same kernels)", allow_module_level=True)

LIMIT = 5e-5
"""float32 kernels against the float64 recurrence: 100x below the forward's usual 5e-3, so a
gate that loses the other gates of its chunk (1e-4 at g = -1e4, 0.13 at -1e7 without the floor)
fails. Measured: 1e-7 to 2e-6 with one reset in a chunk; 2e-5 with five in one 64-token chunk
(each adds ``GATE_FLOOR`` to ``G``, so the later cumulative gates carry ~5 x 110 in float32)."""
GRAD_LIMIT = 5e-5
"""The same for gradients (measured 1e-7 to 3e-6)."""

B, T, H, HV, K, V = 1, 40, 1, 2, 16, 16
GRADS = ("q", "k", "v", "g", "beta", "initial_state")


def _inputs(dtype=torch.float32, T=T, varlen=None, seed=0):
    x = make_inputs(B, T, H, HV, K, V, dtype, "cpu", varlen=varlen, seed=seed)
    x.pop("use_gate_in_kernel")
    return x


def _ref(x, **kw):
    x64 = {n: (t.detach().double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
           for n, t in x.items()}
    return naive_recurrent_gated_delta_rule(**x64, output_final_state=True, **kw)


def _positions(chunk_size):
    """The first, a middle and the last token of the first two chunks, and the sequence's last token."""
    c = chunk_size
    return sorted({t for t in (0, c // 2, c - 1, c, c + c // 2, 2 * c - 1) if t < T} | {T - 1})


@pytest.mark.parametrize("chunk_size", [16, 32, 64])
@pytest.mark.parametrize("value", [-math.inf, -1e30, -1e7, -1e4, -200.0, GATE_FLOOR, -50.0])
def test_one_extreme_gate_forward(value, chunk_size):
    for pos in _positions(chunk_size):
        x = _inputs()
        x["g"][0, pos, 0] = value  # value head 0 only: head 1 is the untouched control
        ref_o, ref_h = _ref(x)
        for name, op, kw in (("chunk", chunk_gated_delta_rule, dict(chunk_size=chunk_size)),
                             ("fused_recurrent", fused_recurrent_gated_delta_rule, {})):
            o, ht = op(**x, output_final_state=True, **kw)
            assert_close(f"{name} o (g={value} at t={pos})", ref_o.float(), o, LIMIT)
            assert_close(f"{name} final_state (g={value} at t={pos})", ref_h.float(), ht, LIMIT)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_gates_with_inf(dtype):
    """An fp16/bf16 gate that overflowed to -inf, with q/k/v float32 (g's dtype is free)."""
    x = _inputs()
    g = x["g"].to(dtype)
    g[0, 3, 1] = -math.inf
    g[0, 17, 0] = float(torch.finfo(dtype).min)
    g[0, 30:34, :] = -math.inf  # consecutive resets
    x["g"] = g
    ref_o, ref_h = _ref(x)
    for chunk_size in (16, 64):
        o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=chunk_size)
        assert_close(f"o (chunk {chunk_size})", ref_o.float(), o, LIMIT)
        assert_close(f"final_state (chunk {chunk_size})", ref_h.float(), ht, LIMIT)


@pytest.mark.parametrize("per_token", [-5.0, -20.0, -1e3])
def test_whole_chunk_underflows(per_token):
    """Every gate strongly negative: ``exp(G)`` of the chunk's cumulative gate underflows to 0."""
    x = _inputs()
    x["g"] = torch.full_like(x["g"], per_token)
    ref_o, ref_h = _ref(x)
    for chunk_size in (16, 64):
        o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=chunk_size)
        assert_close("o", ref_o.float(), o, LIMIT)
        assert_close("final_state", ref_h.float(), ht, LIMIT)


def test_varlen_inf_stays_in_its_sequence(nan_empty):
    """A reset in one sequence of a varlen batch changes nothing in the others."""
    cu = [0, 7, 7, 30, 40]
    x = _inputs(varlen=cu)
    x["g"][0, 12, :] = -math.inf
    x["g"][0, 29, 1] = -1e30
    ref_o, ref_h = _ref(x)
    for chunk_size in (16, 32):
        o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=chunk_size)
        assert_close("o", ref_o.float(), o, LIMIT)
        assert_close("final_state", ref_h.float(), ht, LIMIT)
        clean = _inputs(varlen=cu)
        oc, _ = chunk_gated_delta_rule(**clean, output_final_state=True, chunk_size=chunk_size)
        torch.testing.assert_close(o[:, :7], oc[:, :7], rtol=0, atol=0)
        torch.testing.assert_close(o[:, 30:], oc[:, 30:], rtol=0, atol=0)


def test_gate_in_kernel_overflowing_to_inf():
    """The in-kernel gate ``-exp(A_log) * softplus(g + dt_bias)`` reaches -inf for a raw gate of
    +inf and is huge for a large ``A_log``; a raw gate of -inf means no decay (softplus 0)."""
    x = make_inputs(B, T, H, HV, K, V, torch.float32, "cpu", gate_in_kernel=True, seed=3)
    x.pop("use_gate_in_kernel")
    x["g"][0, 5, 0] = math.inf
    x["g"][0, 6, 1] = -math.inf
    x["g"][0, 20, 1] = 1e30
    x["A_log"][0] = 60.0  # exp(60) ~ 1e26: every gate of head 0 is below the floor
    ref_o, ref_h = _ref(x, use_gate_in_kernel=True)
    o, ht = chunk_gated_delta_rule(**x, output_final_state=True, use_gate_in_kernel=True, chunk_size=16)
    assert_close("o", ref_o.float(), o, LIMIT)
    assert_close("final_state", ref_h.float(), ht, LIMIT)
    of, hf = fused_recurrent_gated_delta_rule(**x, output_final_state=True, use_gate_in_kernel=True)
    assert_close("o (fused_recurrent)", ref_o.float(), of, LIMIT)
    assert_close("final_state (fused_recurrent)", ref_h.float(), hf, LIMIT)


def _grads(x, fn, names):
    leaves = {n: (t.detach().clone().requires_grad_() if n in names else t) for n, t in x.items()}
    o, ht = fn(leaves)
    gen = torch.Generator().manual_seed(7)
    do = torch.randn(o.shape, generator=gen).to(o.dtype)  # drawn in float32 for every dtype
    dht = torch.randn(ht.shape, generator=gen).to(ht.dtype)
    loss = (o * do).sum() + (ht * dht).sum()
    return dict(zip(names, torch.autograd.grad(loss, [leaves[n] for n in names])))


@pytest.mark.parametrize("value", [-math.inf, -1e30, -1e4])
@pytest.mark.parametrize("gate_in_kernel", [False, True])
def test_backward_with_extreme_gates(value, gate_in_kernel, nan_empty):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, "cpu", gate_in_kernel=gate_in_kernel, seed=5)
    x.pop("use_gate_in_kernel")
    # positions: the first, a middle and the last token of a 16-token chunk, and one in the next chunk
    for t, h in ((0, 0), (8, 1), (15, 0), (27, 1)):
        # in-kernel gate: a huge raw gate drives -exp(A_log) softplus(.) to the extreme (3e38, not +inf:
        # the float64 reference's dA_log would be 0 * inf = NaN there; +inf is checked below)
        x["g"][0, t, h] = min(-value, 3e38) if gate_in_kernel else value
    names = GRADS + (("A_log", "dt_bias") if gate_in_kernel else ())
    kw = dict(use_gate_in_kernel=gate_in_kernel)
    ref = _grads({n: (t.double() if isinstance(t, torch.Tensor) else t) for n, t in x.items()},
                 lambda a: naive_recurrent_gated_delta_rule(**a, output_final_state=True, **kw), names)
    for chunk_size in (16, 64):
        got = _grads(x, lambda a: chunk_gated_delta_rule(**a, output_final_state=True, chunk_size=chunk_size, **kw),
                     names)
        for n in names:
            assert_close(f"d{n} (chunk {chunk_size})", ref[n].float(), got[n], GRAD_LIMIT)
        assert (got["g"][0, 0, 0] == 0) or gate_in_kernel  # a reset token's own gate has gradient 0


def test_backward_raw_gate_inf_is_the_limit():
    """A raw gate of +inf (decay exactly 0) has the gradients of a raw gate of 3e38 (the same
    floored decay), all finite: the exact limit, where the reference's autograd gives
    ``0 * inf = NaN`` for ``dA_log``."""
    x = make_inputs(B, T, H, HV, K, V, torch.float32, "cpu", gate_in_kernel=True, seed=6)
    x.pop("use_gate_in_kernel")
    names = GRADS + ("A_log", "dt_bias")
    kw = dict(use_gate_in_kernel=True, chunk_size=16)
    runs = []
    for raw in (math.inf, 3e38):
        x["g"][0, 9, 1] = raw
        runs.append(_grads(x, lambda a: chunk_gated_delta_rule(**a, output_final_state=True, **kw), names))
    for n in names:
        assert torch.isfinite(runs[0][n]).all(), n
        torch.testing.assert_close(runs[0][n], runs[1][n], rtol=0, atol=0)


@pytest.mark.parametrize("op", ["chunk", "recurrent"])
@pytest.mark.parametrize("A_log, raw", [(20.0, -20.0), (10.0, -15.0), (3.0, -30.0)])
def test_in_kernel_gate_with_large_A_log_and_negative_raw_gate(op, A_log, raw):
    """``-exp(A_log) * softplus(raw)`` with ``softplus`` of a very negative input: float32's
    ``log(1 + exp(x))`` rounds to 0 below x = -16.6, which made a gate of about -1 (A_log 20, raw
    -20) a gate of 0 (rel-RMSE 7e2); the series branch of ``ops.utils.math.softplus`` keeps it."""
    x = _inputs()
    x["g"] = torch.full_like(x["g"], raw) + 0.1 * torch.randn_like(x["g"])
    HV = x["g"].shape[-1]
    x.update(use_gate_in_kernel=True, A_log=torch.full((HV,), A_log), dt_bias=torch.zeros(HV))
    fn = chunk_gated_delta_rule if op == "chunk" else fused_recurrent_gated_delta_rule
    o, ht = fn(**x, output_final_state=True)
    ro, rht = _ref(x)
    assert_close("o", ro, o, LIMIT)
    assert_close("ht", rht, ht, LIMIT)
