"""``chunk_kda``: the output, the final state and the gradient of every input against autograd
through the token-by-token float64 reference (:func:`fla_ascend.ops.kda.reference.naive_recurrent_kda`),
for the loss ``(o * do).sum() + (ht * dht).sum()``, with NaN-filled allocations.

Limits (rel-RMSE ratio ``||ref - out|| / ||ref||``): float32 (the CPU tier) 1e-4, 1e-3 for the gate
gradients (dA_log sums a whole head's cancelling terms: 2.5e-4 measured);
float16 and bfloat16 (the GPU tier) 8e-3 for o, the final state, dq, dk, dv, dh0 and 2e-2 for dg,
dbeta, ddt_bias (sums of many products of the others), as for the gated delta rule; 4e-2 for dA_log
(:data:`DA_LOG_LIMIT`).
The CPU tier runs float32 and float16 (the interpreter's bf16 ``tl.dot`` is broken).
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from fla_ascend import backend
from fla_ascend.ops.common import tiles
from fla_ascend.ops.kda import chunk_kda
from fla_ascend.ops.kda.reference import chunk_kda_ref, naive_recurrent_kda

from helpers import assert_close, nan_empty  # noqa: F401  (nan_empty is a fixture)

LIMITS = {torch.float32: (1e-4, 1e-3), torch.float16: (8e-3, 2e-2), torch.bfloat16: (8e-3, 2e-2)}
"""dtype -> (limit for o, ht, dq, dk, dv, dh0; limit for dg, dbeta, dA_log, ddt_bias)."""
DA_LOG_LIMIT = {torch.float16: 4e-2, torch.bfloat16: 4e-2}
"""dA_log in float16 / bfloat16: a head's sum of ``T * K`` terms that cancel (at T256 H2 K=V=128 the
sum is about 1/400 of the terms' magnitudes), so it carries the largest relative error: bf16 on the
H200 0.013-0.020 (flash-linear-attention 0.6.0 on the same inputs: 0.013). bf16 operands in the
intra-chunk backward's dots gave 0.12 there, which this limit fails."""
GATE_GRADS = ("g", "beta", "A_log", "dt_bias")


@dataclass(frozen=True)
class Case:
    T: int = 100
    H: int = 1
    HV: int = 2
    K: int = 32
    V: int = 32
    chunk_size: int = 64
    B: int = 2
    varlen: tuple[int, ...] | None = None
    gate: str = "none"  # "none" | "kernel" (A_log, dt_bias) | "lower" (lower_bound, A_log) | "lower-noA"
    # "mild" | "strong" (decays down to -1e4, some -inf, per channel) | "mixed" (every other 16 tokens
    # decay by 1.5-3.5 each, beyond the intra stages' diag_dot_range over a sub-chunk; the others mild)
    strength: str = "mild"
    h0: bool = True

    @property
    def id(self) -> str:
        s = f"T{self.T}-H{self.H}-HV{self.HV}-K{self.K}-V{self.V}-C{self.chunk_size}"
        s += f"-varlen{'_'.join(map(str, self.varlen))}" if self.varlen else f"-B{self.B}"
        s += "" if self.gate == "none" else f"-{self.gate}"
        s += "" if self.strength == "mild" else f"-{self.strength}"
        return s + ("" if self.h0 else "-noh0")

    def inputs(self, dtype, device, seed=0) -> dict:
        gen = torch.Generator().manual_seed(seed)
        B = 1 if self.varlen else self.B
        N = len(self.varlen) - 1 if self.varlen else B
        T, H, HV, K, V = self.T, self.H, self.HV, self.K, self.V

        def randn(*shape):
            return torch.randn(*shape, generator=gen)

        x = dict(q=randn(B, T, H, K).to(dtype), k=F.normalize(randn(B, T, H, K), dim=-1).to(dtype),
                 v=randn(B, T, HV, V).to(dtype), beta=torch.sigmoid(randn(B, T, HV)).to(dtype))
        if self.gate == "none":
            g = F.logsigmoid(randn(B, T, HV, K) + 3.0)
            if self.strength == "strong":
                g = g * torch.exp(4 * torch.rand(B, T, HV, K, generator=gen)) ** 2  # down to about -1e4
                g[:, 3::11, :, ::5] = float("-inf")  # resets of some channels' state rows
            elif self.strength == "mixed":
                fast = (torch.arange(T) // 16 % 2 == 1)[None, :, None, None]
                g = torch.where(fast, -1.5 - 2.0 * torch.rand(B, T, HV, K, generator=gen), g)
            x["g"] = g
        else:
            x["g"] = randn(B, T, HV, K)
            if self.gate in ("kernel", "lower"):
                x["A_log"] = torch.empty(HV).uniform_(-1.0, 1.0, generator=gen)
            x["dt_bias"] = 0.5 * randn(HV * K)
        if self.h0:
            x["initial_state"] = randn(N, HV, K, V)
        x = {n: t.to(device).requires_grad_() for n, t in x.items()}
        if self.varlen:
            x["cu_seqlens"] = torch.tensor(self.varlen, dtype=torch.int32, device=device)
        if self.gate != "none":
            x["use_gate_in_kernel"] = True
        if self.gate.startswith("lower"):
            x["lower_bound"] = -5.0
        return x


CASES = [
    Case(),
    Case(chunk_size=32, T=75),
    Case(chunk_size=16, T=40, H=2, HV=4),
    Case(K=60, V=100, chunk_size=32, T=70),
    Case(K=128, V=64, H=2, HV=2, T=70, B=1),
    Case(varlen=(0, 30, 30, 100), chunk_size=32),
    Case(varlen=(0, 1, 17, 80), T=80, chunk_size=16, h0=False),
    Case(gate="kernel"),
    Case(gate="lower", chunk_size=32, T=50),
    Case(gate="lower-noA", chunk_size=16, T=40),
    Case(strength="strong", chunk_size=32),
    Case(strength="strong", chunk_size=64, T=70, h0=False),
    Case(strength="mixed", chunk_size=64, T=120),
    Case(strength="mixed", chunk_size=32, T=90, varlen=(0, 41, 90)),
]


def _reference(x: dict, chunked: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    fn = chunk_kda_ref if chunked else naive_recurrent_kda
    xr = {n: (t.detach().double().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
              else t) for n, t in x.items()}
    o, ht = fn(**xr, output_final_state=True)
    return xr, o, ht


def _check(x: dict, dtype, chunk_size: int, chunked_ref: bool = False, **kw):
    o, ht = chunk_kda(**x, output_final_state=True, chunk_size=chunk_size, **kw)
    xr, o_ref, ht_ref = _reference(x, chunked_ref)
    lim, gate_lim = LIMITS[dtype]
    assert_close("o", o_ref, o.double(), lim)
    assert_close("final_state", ht_ref, ht.double(), lim)
    gen = torch.Generator().manual_seed(7)
    do = torch.randn(o.shape, generator=gen).to(o.device, o.dtype)
    dht = torch.randn(ht.shape, generator=gen).to(ht.device)
    ((o * do).sum() + (ht * dht).sum()).backward()
    ((o_ref * do.double()).sum() + (ht_ref * dht.double()).sum()).backward()
    for n, t in x.items():
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert t.grad is not None, f"d{n}: no gradient"
            assert t.grad.dtype == t.dtype, f"d{n}: dtype {t.grad.dtype} != {t.dtype}"
            limit = gate_lim if n in GATE_GRADS else lim
            limit = DA_LOG_LIMIT.get(dtype, limit) if n == "A_log" else limit
            assert_close(f"d{n}", xr[n].grad, t.grad.double(), limit)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_chunk_kda_against_recurrence(case, device, nan_empty):
    _check(case.inputs(torch.float32, device), torch.float32, case.chunk_size)


@pytest.mark.parametrize("case", [Case(K=128, V=100, T=70, B=1), Case(K=60, V=100, chunk_size=32, T=70),
                                  Case(varlen=(0, 1, 17, 80), T=80, chunk_size=16, h0=False),
                                  Case(gate="kernel", strength="mixed", K=64, V=64, T=90)], ids=lambda c: c.id)
@pytest.mark.parametrize("v_block", [32, 64])
def test_chunk_kda_wy_bwd_cuda_form(case, v_block, device, nan_empty):
    """The WY backward's CUDA form (``split_u`` off: the inverse and the states loaded transposed,
    u's part in the first K block's V loop), with V blocks apart from the K blocks of 64."""
    from fla_ascend.bench.tuning import stage_variant

    if backend.device_type() == "npu":
        pytest.skip("an NPU always runs the WY backward's NPU form")
    entry = {**tiles.cuda_launch("kda_wy_bwd"), "split_u": False, "v_block": v_block}
    with stage_variant("kda_wy_bwd", entry):
        _check(case.inputs(torch.float32, device), torch.float32, case.chunk_size)


@pytest.mark.parametrize("case", [Case(), Case(gate="kernel", chunk_size=32, T=60)], ids=lambda c: c.id)
def test_chunk_kda_float16(case, device, nan_empty):
    _check(case.inputs(torch.float16, device), torch.float16, case.chunk_size)


@pytest.mark.parametrize("flags", [dict(use_qk_l2norm_in_kernel=True), dict(use_beta_sigmoid_in_kernel=True),
                                   dict(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)],
                         ids=lambda f: "-".join(f))
def test_chunk_kda_flags(flags, device, nan_empty):
    """The in-kernel flags: the reference applies the same transform (l2norm, sigmoid, 2 sigmoid)."""
    case = Case(T=50, chunk_size=32)
    x = case.inputs(torch.float32, device)
    _check({**x, **flags}, torch.float32, case.chunk_size)


def test_chunk_kda_state_v_first_and_recompute(device, nan_empty):
    """A V-first state layout and ``disable_recompute`` give the default's results (the state
    transposed)."""
    case = Case(T=50, chunk_size=16, K=32, V=16)
    x = case.inputs(torch.float32, device)
    o, ht = chunk_kda(**x, output_final_state=True, chunk_size=16)
    h0t = x["initial_state"].detach().transpose(-1, -2).contiguous().requires_grad_()
    o2, ht2 = chunk_kda(**{**x, "initial_state": h0t}, output_final_state=True, chunk_size=16, state_v_first=True)
    assert torch.equal(o, o2) and torch.equal(ht, ht2.transpose(-1, -2))
    o3, ht3 = chunk_kda(**x, output_final_state=True, chunk_size=16, disable_recompute=True)
    g1 = torch.autograd.grad(o.sum() + ht.sum(), [x["q"], x["g"], x["initial_state"]])
    g3 = torch.autograd.grad(o3.sum() + ht3.sum(), [x["q"], x["g"], x["initial_state"]])
    assert torch.equal(o, o3) and torch.equal(ht, ht3)
    for a, b in zip(g1, g3):
        assert torch.equal(a, b)


def test_chunk_kda_intermediate_states(device):
    """``return_intermediate_states``: the state at each chunk's start, as the chunked reference
    computes it, under inference mode only."""
    case = Case(T=40, chunk_size=16, B=2)
    x = {n: t.detach() if isinstance(t, torch.Tensor) else t for n, t in case.inputs(torch.float32, device).items()}
    with torch.inference_mode():
        o, ht, h = chunk_kda(**x, output_final_state=True, chunk_size=16, return_intermediate_states=True)
    assert h.shape == (2, 3, case.HV, case.K, case.V)
    _, ht_ref = naive_recurrent_kda(**{**x, "q": x["q"][:, :16], "k": x["k"][:, :16], "v": x["v"][:, :16],
                                        "g": x["g"][:, :16], "beta": x["beta"][:, :16]}, output_final_state=True)
    assert_close("h[1]", ht_ref.double(), h[:, 1].double(), 1e-4)
    assert torch.equal(h[:, 0], x["initial_state"])
    with pytest.raises(ValueError, match="inference_mode"):
        chunk_kda(**x, chunk_size=16, return_intermediate_states=True)


def test_chunk_kda_deterministic(device):
    case = Case(T=70, chunk_size=32, H=1, HV=2)
    grads = []
    for _ in range(2):
        x = case.inputs(torch.float32, device)
        o, ht = chunk_kda(**x, output_final_state=True, chunk_size=32)
        (o.sum() + ht.sum()).backward()
        grads.append([o, ht] + [t.grad for t in x.values() if isinstance(t, torch.Tensor) and t.requires_grad])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@pytest.mark.parametrize("bad, match", [
    (dict(g="shape"), r"g must have shape \[2, 100, 2, 32\]"),
    (dict(chunk_size=128), "chunk_size must be one of"),
    (dict(use_gate_in_kernel=True), "requires A_log"),
    (dict(A_log="given"), "use_gate_in_kernel=False would not be used"),
    (dict(safe_gate=True, use_gate_in_kernel=True, lower_bound=-6.0, A_log="given"), r"lower_bound in \[-5, 0\)"),
    (dict(lower_bound=1.0), "finite negative"),
    (dict(allow_neg_eigval=True), "requires use_beta_sigmoid_in_kernel"),
    (dict(output_final_state="yes"), "output_final_state must be a bool"),
    (dict(bogus=1), "unexpected keyword"),
])
def test_chunk_kda_bad_input(bad, match, device):
    x = {n: t.detach() for n, t in Case().inputs(torch.float32, device).items()}
    kw = dict(bad)
    if kw.get("g") == "shape":
        kw["g"] = x["g"][..., :-1]
    if kw.get("A_log") == "given":
        kw["A_log"] = torch.zeros(2, device=device)
    with pytest.raises((TypeError, ValueError), match=match):
        chunk_kda(**{**x, **kw})


def test_chunk_kda_not_supported(device):
    x = {n: t.detach() for n, t in Case().inputs(torch.float32, device).items()}
    with pytest.raises(NotImplementedError, match="cp_context"):
        chunk_kda(**x, cp_context=object())
    with pytest.raises(NotImplementedError, match="use_graph"):
        chunk_kda(**x, use_graph=True)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [
    Case(T=300, H=2, HV=4, K=128, V=128, B=2),
    Case(T=200, K=64, V=64, chunk_size=32, varlen=(0, 0, 77, 200)),
    Case(T=256, H=2, HV=2, K=128, V=128, gate="kernel", B=1),
    Case(T=256, H=2, HV=2, K=128, V=128, gate="lower", B=1),
    Case(T=200, H=1, HV=2, K=128, V=128, strength="strong", B=1),
    Case(T=256, H=1, HV=2, K=128, V=128, strength="mixed", B=1),
    Case(T=256, H=1, HV=1, K=256, V=256, B=1),
], ids=lambda c: c.id)
def test_chunk_kda_bf16_gpu(case, device, nan_empty):
    if not backend.is_cuda_compiled() and backend.device_type() != "npu":
        pytest.skip("GPU tier")
    # the chunked float64 reference is faster; with -inf gates it forms exp(-inf - -inf) (NaN), so the
    # strong-gate case runs the token-by-token one
    _check(case.inputs(torch.bfloat16, device), torch.bfloat16, case.chunk_size,
           chunked_ref=case.strength != "strong")
