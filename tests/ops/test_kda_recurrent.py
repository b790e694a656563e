"""``fused_recurrent_kda`` against the token recurrence ``naive_recurrent_kda`` in float64 (relative
RMSE ratio, NaN-filled allocations): decode and short prefills, K/V 60/100/128, GVA, varlen with an
empty sequence, log-space gates (mild, strong, -inf), the gate in the kernel (with and without
``dt_bias``), the lower-bound gate (with and without ``A_log``), beta logits with negative
eigenvalues, V-first states, grad mode on; flash-linear-attention's extra keywords and bad input."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from fla_ascend import backend
from fla_ascend.ops import fused_recurrent_kda
from fla_ascend.ops.kda.reference import naive_recurrent_kda

from helpers import assert_close, nan_empty  # noqa: F401  (nan_empty is a fixture)

RATIO = 5e-3
"""Limit of the relative RMSE ratio vs the float64 reference (fp32 and fp16 inputs)."""
CPU_DTYPES = [torch.float32, torch.float16]


@dataclass(frozen=True)
class Case:
    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    gate: str = "log"  # log | strong | inf | kernel | kernel-nobias | lb | lb-noA
    beta: str = "plain"  # plain | sigmoid | neg (2 sigmoid) | per-v
    varlen: tuple[int, ...] | None = None
    h0: bool = True
    l2norm: bool = True
    state_v_first: bool = False

    @property
    def id(self) -> str:
        s = f"B{self.B}-T{self.T}-H{self.H}-HV{self.HV}-K{self.K}-V{self.V}-{self.gate}-{self.beta}"
        if self.varlen is not None:
            s += "-varlen" + "_".join(map(str, self.varlen))
        return s + ("-h0" if self.h0 else "") + ("" if self.l2norm else "-nol2") + ("-vfirst" if self.state_v_first
                                                                                   else "")

    def inputs(self, dtype, device) -> dict:
        gen = torch.Generator().manual_seed(0)

        def randn(*shape):
            return torch.randn(*shape, generator=gen)

        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        N = B if self.varlen is None else len(self.varlen) - 1
        x = dict(q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, HV, V))
        if not self.l2norm:
            x["k"] = F.normalize(x["k"], dim=-1)
        raw = randn(B, T, HV, K)
        kw = {}
        if self.gate == "log":
            x["g"] = F.logsigmoid(raw + 3.0)
        elif self.gate == "strong":
            x["g"] = -torch.rand(B, T, HV, K, generator=gen) * 30.0
        elif self.gate == "inf":
            x["g"] = torch.where(torch.rand(B, T, HV, K, generator=gen) < 0.2, float("-inf"), F.logsigmoid(raw + 3.0))
        else:
            x["g"] = raw
            kw["use_gate_in_kernel"] = True
            if self.gate != "lb-noA":
                x["A_log"] = torch.empty(HV).uniform_(-1.0, 1.0, generator=gen)
            if self.gate != "kernel-nobias":
                x["dt_bias"] = 0.5 * randn(HV * K)
            if self.gate.startswith("lb"):
                kw["lower_bound"] = -5.0
        if self.beta == "plain":
            x["beta"] = torch.rand(B, T, HV, generator=gen)
        elif self.beta == "per-v":
            x["beta"] = torch.rand(B, T, HV, V, generator=gen)
        else:
            x["beta"] = randn(B, T, HV)
            kw["use_beta_sigmoid_in_kernel"] = True
            kw["allow_neg_eigval"] = self.beta == "neg"
        if self.h0:
            x["initial_state"] = randn(N, HV, K, V)
        for name in ("q", "k", "v", "beta"):
            x[name] = x[name].to(dtype)
        x = {n: t.to(device) for n, t in x.items()}
        if self.varlen is not None:
            x["cu_seqlens"] = torch.tensor(self.varlen, dtype=torch.int32, device=device)
        return {**x, **kw, "use_qk_l2norm_in_kernel": self.l2norm}


def _reference(x: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 token recurrence; ``beta`` per value column is applied as v' = beta * (v - h^T k)
    by running the reference once per value column."""
    xd = {n: (t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in x.items()}
    if xd["beta"].dim() == 3:
        return naive_recurrent_kda(**xd, output_final_state=True)
    V = xd["v"].shape[-1]
    outs = [naive_recurrent_kda(**{**xd, "v": xd["v"][..., j:j + 1], "beta": xd["beta"][..., j],
                                   "initial_state": (None if xd.get("initial_state") is None
                                                     else xd["initial_state"][..., j:j + 1])},
                                output_final_state=True) for j in range(V)]
    return torch.cat([o for o, _ in outs], -1), torch.cat([h for _, h in outs], -1)


def _check(case: Case, dtype, device, **extra):
    x = case.inputs(dtype, device)
    ref_o, ref_h = _reference(x)
    call = dict(x)
    if case.state_v_first:
        if call.get("initial_state") is not None:
            call["initial_state"] = call["initial_state"].transpose(-1, -2).contiguous()
        call["state_v_first"] = True
    before = {n: t.clone() for n, t in call.items() if isinstance(t, torch.Tensor)}
    o, ht = fused_recurrent_kda(**call, output_final_state=True, **extra)
    for n, t in before.items():
        assert torch.equal(call[n], t), f"{n} was modified in place"
    if case.state_v_first:
        ht = ht.transpose(-1, -2)
    assert o.dtype == dtype and o.shape == x["v"].shape
    assert ht.dtype == torch.float32 and ht.shape == ref_h.shape
    assert_close("o", ref_o, o, RATIO)
    assert_close("final_state", ref_h, ht, RATIO)
    return o, ht


CASES = [
    Case(2, 1, 2, 4, 128, 128),  # decode, GVA
    Case(2, 7, 2, 2, 60, 100),
    Case(1, 9, 1, 2, 100, 60, gate="strong"),
    Case(2, 5, 2, 4, 64, 32, gate="inf"),
    Case(2, 6, 1, 2, 60, 100, gate="kernel"),
    Case(2, 6, 2, 4, 100, 60, gate="kernel-nobias"),
    Case(2, 6, 2, 2, 128, 60, gate="lb"),
    Case(2, 6, 1, 2, 60, 128, gate="lb-noA", beta="sigmoid"),
    Case(2, 5, 2, 4, 60, 100, gate="kernel", beta="neg", l2norm=False),
    Case(1, 12, 2, 4, 60, 100, gate="kernel", varlen=(0, 3, 3, 10, 12)),  # an empty sequence
    Case(1, 8, 1, 2, 100, 60, varlen=(0, 0, 1, 8), h0=False),
    Case(2, 4, 2, 4, 60, 100, gate="lb", state_v_first=True),
    Case(2, 4, 1, 1, 32, 48, beta="per-v", h0=False),
]


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_fused_recurrent_kda(case, dtype, device, nan_empty):
    with torch.no_grad():
        _check(case, dtype, device)


KIMI_DECODE = [Case(64, 1, 32, 32, 128, 128, gate="kernel", beta="sigmoid"),  # Kimi Linear's decode call
               Case(64, 1, 32, 32, 128, 128, gate="kernel", beta="sigmoid", state_v_first=True)]


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES + KIMI_DECODE])
def test_fused_recurrent_kda_gpu_bf16(case, device, nan_empty):
    with torch.no_grad():
        _check(case, torch.bfloat16, device)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in (
    Case(2, 3, 2, 4, 256, 100, gate="lb"), Case(1, 6, 1, 2, 60, 128, gate="kernel", varlen=(0, 2, 6)),
    Case(1, 3, 1, 1, 256, 256, gate="lb", state_v_first=True))])
def test_npu_plan(case, nan_empty):
    """The Ascend910B2 launch plan (the UB-fitted ``BV`` with the per-row gate's tiles, the vector
    core count, ``multibuffer=False``), run under the interpreter; a V-first state at K = V = 256
    takes ``BV = 8`` (its tiles did not fit the UB model before)."""
    if not backend.is_interpreter():
        pytest.skip("the NPU plan is run under the interpreter here")
    from fla_ascend.tiling.chips import get_chip

    chip = get_chip("Ascend910B2")
    target = backend.current().replace(device_type="npu", chip=chip, cube_cores=chip.cube_cores,
                                       vector_cores=chip.vector_cores)
    with backend.use(target), torch.no_grad():
        _check(case, torch.float32, "cpu")


def test_empty_sequence_keeps_initial_state(device, nan_empty):
    case = Case(1, 5, 1, 2, 60, 100, gate="kernel", varlen=(0, 0, 5))
    x = case.inputs(torch.float32, device)
    _, ht = fused_recurrent_kda(**x, output_final_state=True)
    assert torch.equal(ht[0], x["initial_state"][0])


def test_grad_mode_on(device, nan_empty):
    """Grad mode on, inputs that require grad: the forward runs (in the graph), a backward refuses
    with a message naming the op and the chunked op."""
    case = Case(2, 3, 2, 4, 60, 100, gate="kernel")
    x = case.inputs(torch.float32, device)
    for n in ("q", "k", "v", "g", "A_log", "dt_bias"):
        x[n].requires_grad_(True)
    ref_o, ref_h = _reference({n: t.detach() if isinstance(t, torch.Tensor) else t for n, t in x.items()})
    o, ht = fused_recurrent_kda(**x, output_final_state=True)
    assert o.requires_grad
    assert_close("o", ref_o, o.detach(), RATIO)
    assert_close("final_state", ref_h, ht.detach(), RATIO)
    with pytest.raises(NotImplementedError, match="fused_recurrent_kda has no backward.*chunk_kda"):
        (o.sum() + ht.sum()).backward()


def test_out_and_inplace_final_state(device, nan_empty):
    case = Case(2, 1, 2, 4, 60, 100, gate="kernel")
    x = case.inputs(torch.float32, device)
    ref_o, ref_h = _reference(x)
    out = torch.full_like(x["v"], float("nan"))
    h0 = x["initial_state"].clone()
    with torch.no_grad():
        o, ht = fused_recurrent_kda(**{**x, "initial_state": h0}, out=out, inplace_final_state=True)
    assert o is out and ht is h0
    assert_close("o", ref_o, out, RATIO)
    assert_close("final_state", ref_h, h0, RATIO)
    h0 = x["initial_state"].clone()  # grad mode on, q requires grad: the same tensors come back
    o, ht = fused_recurrent_kda(**{**x, "q": x["q"].clone().requires_grad_(), "initial_state": h0},
                                out=torch.empty_like(x["v"]), inplace_final_state=True)
    assert ht is h0 and o.requires_grad
    assert_close("final_state (grad mode)", ref_h, h0, RATIO)
    with pytest.raises(ValueError, match="cannot overwrite an initial_state that requires grad"):
        fused_recurrent_kda(**{**x, "initial_state": h0.requires_grad_()}, inplace_final_state=True)
    with torch.no_grad():  # ssm_state_indices / num_accepted_tokens = None are accepted
        o, ht = fused_recurrent_kda(**x, ssm_state_indices=None, num_accepted_tokens=None)
    assert ht is None
    assert_close("o", ref_o, o, RATIO)


def test_transpose_state_layout_is_deprecated(device):
    case = Case(1, 2, 1, 1, 16, 16)
    x = case.inputs(torch.float32, device)
    x["initial_state"] = x["initial_state"].transpose(-1, -2).contiguous()
    with pytest.warns(DeprecationWarning, match="state_v_first"):
        _, ht = fused_recurrent_kda(**x, output_final_state=True, transpose_state_layout=True)
    assert ht.shape == (1, 1, 16, 16)


def _bad(x, match, exc=ValueError, **kw):
    with pytest.raises(exc, match=match):
        fused_recurrent_kda(**{**x, **kw})


def test_bad_input(device):
    case = Case(2, 3, 2, 4, 16, 32, gate="kernel")
    x = case.inputs(torch.float32, device)
    B, T, HV, K = 2, 3, 4, 16
    _bad(x, r"fused_recurrent_kda: g must have 4 dims \[2, 3, 4, 16\]", g=torch.zeros(B, T, HV))
    _bad(x, r"beta must be a tensor.*got None", beta=None)
    _bad(x, r"A_log must have shape \[HV\] = \[4\]", A_log=torch.zeros(3))
    _bad(x, r"dt_bias must have shape \[HV \* K\] = \[64\]", dt_bias=torch.zeros(HV))
    _bad(x, r"use_gate_in_kernel=True requires A_log", A_log=None)
    _bad(x, r"lower_bound must be a finite log decay <= 0.*got 1.0", lower_bound=1.0)
    _bad(x, r"lower_bound must be a float", TypeError, lower_bound="low")
    _bad(x, r"A_log and dt_bias given with use_gate_in_kernel=False", use_gate_in_kernel=False)
    _bad(x, r"use_gate_in_kernel must be a bool", TypeError, use_gate_in_kernel=1)
    _bad(x, r"allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True", allow_neg_eigval=True)
    _bad(x, r"initial_state must have shape", initial_state=torch.zeros(B, HV, K + 1, 32))
    _bad(x, r"out must have shape", out=torch.empty(B, T, HV, 31))
    _bad(x, r"out must have dtype in", TypeError, out=torch.empty(B, T, HV, 32, dtype=torch.float16))
    _bad(x, r"inplace_final_state=True needs initial_state as a contiguous float32", inplace_final_state=True,
         initial_state=None)
    _bad(x, r"ssm_state_indices \(continuous batching", NotImplementedError, ssm_state_indices=torch.zeros(2).long())
    _bad(x, r"num_accepted_tokens", NotImplementedError, num_accepted_tokens=torch.ones(2).long())
    _bad(x, r"unexpected keyword arguments \['chunk_size'\]", TypeError, chunk_size=64)
    x1 = Case(1, 3, 2, 4, 16, 32).inputs(torch.float32, device)
    _bad({**x1, "initial_state": None}, r"cu_seqlens", cu_seqlens=torch.tensor([0, 2, 1], dtype=torch.int32))
