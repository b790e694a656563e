"""Backward of ``chunk_gated_delta_rule``: gradients of every input against autograd
through the float32 pure-PyTorch reference, for the loss ``(o * do).sum() + (ht * dht).sum()``.

Limits (rel-RMSE ratio ``||ref - out|| / ||ref||``, :func:`fla_ascend.ops.utils.rel_rmse`):
0.008 for dq, dk, dv, dh0 and 0.02 for dg, dbeta, dA_log, ddt_bias (the gate gradients are
sums of many products of the others, so they collect more rounding).

The dense case table is a pairwise covering set of the forward issue's grid (checked by
``test_case_table_is_pairwise``): every pair of values of T, (H, HV), K, V, chunk size, B,
initial state, dht used, gate mode and l2norm-in-kernel appears in some case. The cases that
take long under the interpreter are marked slow; the quick ones still contain every single
value. Special values (zero gates, zero beta, T = 1, strong decay, empty and short varlen
sequences), a finite-difference check independent of the reference, determinism and the
gradients' dtypes have their own tests. The CPU tier runs in float32 and float16 (the
interpreter's bf16 ``tl.dot`` is broken); the GPU tier (``-m gpu``) runs bfloat16, including
Qwen3-Next's layer shape.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
import torch

from fla_ascend import backend
from fla_ascend.bench.timing import peak_live_bytes
from fla_ascend.ops import chunk_gated_delta_rule
from fla_ascend.ops.gated_delta_rule.chunk import CUDA_MIN_BWD_HEAD_DIM, chunk_gated_delta_rule_bwd
from fla_ascend.ops.gated_delta_rule.reference import chunk_gated_delta_rule_ref, naive_recurrent_gated_delta_rule

from helpers import MAX_RELAX, assert_close, bf16_input_movement, bf16_limits, make_inputs, nan_empty  # noqa: F401  (nan_empty is a fixture)

RATIO = 8e-3
"""Limit for dq, dk, dv, dh0."""
GATE_RATIO = 2e-2
"""Limit for dg, dbeta, dA_log, ddt_bias."""
REF_RATIO = 1e-5
"""Chunked vs naive reference gradients, both float32 (only the summation order differs)."""

GRAD_INPUTS = ("q", "k", "v", "g", "beta", "initial_state", "A_log", "dt_bias")
"""The op's differentiable inputs, in the order the gradients are reported."""
LIMITS = dict(q=RATIO, k=RATIO, v=RATIO, initial_state=RATIO,
              g=GATE_RATIO, beta=GATE_RATIO, A_log=GATE_RATIO, dt_bias=GATE_RATIO)
GRAD_NAME = dict(q="dq", k="dk", v="dv", g="dg", beta="dbeta", initial_state="dh0", A_log="dA_log",
                 dt_bias="ddt_bias")


@dataclass(frozen=True)
class Case:
    B: int
    T: int
    H: int
    HV: int
    K: int
    V: int
    chunk_size: int = 64
    h0: bool = True
    dht: bool = True  # the loss uses the final state (output_final_state=True); else it is not returned
    gate: str = "none"  # "none" (log-space g) | "kernel" (A_log + dt_bias) | "kernel-nobias" (A_log only)
    l2norm: bool = False
    varlen: tuple[int, ...] | None = None
    marks: tuple = field(default=(), compare=False)

    @property
    def id(self) -> str:
        s = f"B{self.B}-T{self.T}-H{self.H}-HV{self.HV}-K{self.K}-V{self.V}-C{self.chunk_size}"
        if self.varlen is not None:
            s += "-varlen" + "_".join(map(str, self.varlen))
        s += "-h0" if self.h0 else ""
        s += "-dht" if self.dht else ""
        s += f"-{self.gate}" if self.gate != "none" else ""
        s += "-l2" if self.l2norm else ""
        return s

    def inputs(self, dtype, device, seed=0) -> dict:
        """Inputs as in the forward tests, every float tensor a leaf that requires grad."""
        x = make_inputs(
            self.B, self.T, self.H, self.HV, self.K, self.V, dtype, device,
            varlen=list(self.varlen) if self.varlen is not None else None, h0=self.h0,
            gate_in_kernel=self.gate != "none", dt_bias=self.gate == "kernel", seed=seed,
        )
        if self.l2norm:  # rows of varying norm, so the in-kernel normalisation (and its backward) matters
            gen = torch.Generator().manual_seed(seed + 1)
            for name in ("q", "k"):
                scale = torch.rand(x[name].shape[:-1] + (1,), generator=gen) * 4 + 0.25
                x[name] = (x[name].float() * scale.to(device)).to(dtype)
        return _leaves(x)

    def cotangents(self, x: dict, seed=0):
        """``do`` in the inputs' dtype ``[B, T, HV, V]``; ``dht`` float32 ``[N, HV, K, V]`` or None."""
        gen = torch.Generator().manual_seed(seed + 2)
        v = x["v"]
        do = torch.randn(v.shape, generator=gen).to(device=v.device, dtype=v.dtype)
        if not self.dht:
            return do, None
        N = self.B if self.varlen is None else len(self.varlen) - 1
        return do, torch.randn(N, self.HV, self.K, self.V, generator=gen).to(v.device)


@pytest.fixture(autouse=True)
def _flush_denormals():
    """Autograd through long decays makes float32 denormals, which CPUs handle ~30x slower (one
    reference backward: 30 s instead of 1 s). Flushing them to zero changes values below 1e-38
    only, far under any tolerance here. The flag is per thread and PyTorch's intra-op worker
    threads do not get it, so the test runs single-threaded (these references are loops of
    small ops: one thread is no slower). Both settings are restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    yield
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)


def _leaves(x: dict) -> dict:
    """Detach every differentiable input of ``x`` and make it a leaf that requires grad."""
    return {k: (t.detach().requires_grad_() if k in GRAD_INPUTS and t is not None else t) for k, t in x.items()}


def _loss(o, ht, do, dht):
    loss = (o.float() * do.float()).sum()
    return loss if dht is None else loss + (ht * dht).sum()


def op_grads(case: Case, x: dict, do, dht) -> dict:
    """Gradients through the op, keyed by input name (inputs that are None are left out)."""
    names = [n for n in GRAD_INPUTS if x.get(n) is not None]
    o, ht = chunk_gated_delta_rule(**x, output_final_state=dht is not None, use_qk_l2norm_in_kernel=case.l2norm,
                                   chunk_size=case.chunk_size)
    assert o.dtype == x["v"].dtype and o.shape == x["v"].shape
    assert (ht is None) == (dht is None)
    grads = torch.autograd.grad(_loss(o, ht, do, dht), [x[n] for n in names])
    return dict(zip(names, grads))


def ref_grads(case: Case, x: dict, do, dht, ref=naive_recurrent_gated_delta_rule, **kw) -> dict:
    """Gradients of the same loss through a float32 reference, on float32 copies of the inputs
    (so a float16 test compares against the exact gradient at its rounded inputs)."""
    xr = _leaves({k: (t.detach().float() if k in GRAD_INPUTS and t is not None else t) for k, t in x.items()})
    names = [n for n in GRAD_INPUTS if xr.get(n) is not None]
    o, ht = ref(**xr, output_final_state=dht is not None, use_qk_l2norm_in_kernel=case.l2norm, **kw)
    grads = torch.autograd.grad(_loss(o, ht, do, dht), [xr[n] for n in names], allow_unused=True)
    return {n: (torch.zeros_like(xr[n]) if gr is None else gr) for n, gr in zip(names, grads)}


def compare(ref: dict, out: dict, x: dict, limits: dict = LIMITS) -> dict:
    """Every gradient: present, the input's dtype and shape, within its limit. Checks them all
    and reports every failure at once. Returns ``{name: ratio}``."""
    assert ref.keys() == out.keys(), f"gradients for {sorted(out)} != expected {sorted(ref)}"
    ratios, failures = {}, []
    for n in ref:
        if out[n].dtype != x[n].dtype:
            failures.append(f"{GRAD_NAME[n]}: dtype {out[n].dtype} != input dtype {x[n].dtype}")
            continue
        try:
            ratios[n] = assert_close(GRAD_NAME[n], ref[n], out[n], limits[n])
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "; ".join(failures)
    return ratios


def _snapshot(x: dict) -> dict:
    return {k: v.detach().clone() for k, v in x.items() if isinstance(v, torch.Tensor)}


def check_case(case: Case, dtype, device, ref=naive_recurrent_gated_delta_rule, seed=0, prepare=None,
               **ref_kw) -> dict:
    """The op's gradients of every input vs the reference's; ``prepare`` (dict -> dict) edits
    the inputs first (special values). Returns ``{input name: rel-RMSE ratio}``."""
    x = case.inputs(dtype, device, seed)
    if min(case.K, case.V) < CUDA_MIN_BWD_HEAD_DIM and torch.device(device).type == "cuda" \
            and not backend.is_interpreter():  # refused there (chunk.CUDA_MIN_BWD_HEAD_DIM)
        do, dht = case.cotangents(x, seed)
        with pytest.raises(NotImplementedError, match=r"^chunk_gated_delta_rule: the backward on CUDA needs"):
            op_grads(case, x, do, dht)
        return {}
    if prepare is not None:
        x = _leaves(prepare({k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in x.items()}))
    do, dht = case.cotangents(x, seed)
    before = _snapshot({**x, "do": do, "dht": dht})
    out = op_grads(case, x, do, dht)
    for name, old in before.items():  # the backward must not write into its inputs
        now = {**x, "do": do, "dht": dht}[name]
        assert torch.equal(now.detach(), old), f"{name} was modified in place by the op"
    if dtype != torch.bfloat16:
        return compare(ref_grads(case, x, do, dht, ref, **ref_kw), out, x)
    # bf16 (GPU tier): a gradient of a few elements that is ill-conditioned gets a limit from
    # its conditioning (bf16_limits); every other gradient keeps the limit
    expected, limits = bf16_limits(lambda xp: ref_grads(case, xp, do, dht, ref, **ref_kw), x, LIMITS)
    return compare(expected, out, x, limits)


# --- the case table --------------------------------------------------------------------------

slow = (pytest.mark.slow,)
GRID = dict(
    T=(1, 15, 63, 64, 65, 75, 500),
    heads=((1, 1), (2, 4), (4, 8)),
    K=(32, 60, 64, 100, 128),
    V=(32, 60, 64, 100, 128),
    chunk_size=(16, 32, 64),
    B=(1, 2),
    h0=(True, False),
    dht=(True, False),
    gate=("none", "kernel", "kernel-nobias"),
    l2norm=(False, True),
)
"""The forward issue's grid (plus B, dht and the gate modes), covered pairwise by DENSE."""

# Generated once by a greedy pairwise (AETG-style) search weighted by interpreter cost, then
# frozen here; slow = about 5 s or more per run under the interpreter on the 2-core CI machine
# (measured with --durations; the whole slow set takes about 2 minutes per Triton flavour).
DENSE = [
    Case(1, 1, 1, 1, 32, 32, 16, h0=True, dht=False, gate="none", l2norm=True),
    Case(2, 1, 1, 1, 60, 128, 16, h0=True, dht=False, gate="kernel", l2norm=True),
    Case(1, 1, 1, 1, 64, 64, 32, h0=False, dht=True, gate="kernel-nobias", l2norm=True),
    Case(1, 1, 2, 4, 64, 128, 64, h0=True, dht=True, gate="kernel", l2norm=False),
    Case(1, 1, 2, 4, 128, 100, 16, h0=True, dht=False, gate="kernel-nobias", l2norm=False),
    Case(1, 1, 4, 8, 100, 60, 16, h0=False, dht=True, gate="kernel-nobias", l2norm=True),
    Case(2, 15, 1, 1, 60, 60, 32, h0=False, dht=True, gate="kernel-nobias", l2norm=False),
    Case(1, 15, 1, 1, 100, 32, 64, h0=True, dht=False, gate="kernel-nobias", l2norm=True),
    Case(1, 15, 2, 4, 32, 64, 64, h0=False, dht=True, gate="none", l2norm=True),
    Case(1, 15, 4, 8, 64, 100, 16, h0=False, dht=False, gate="none", l2norm=False),
    Case(1, 15, 4, 8, 128, 128, 32, h0=True, dht=False, gate="kernel", l2norm=False, marks=slow),
    Case(1, 63, 1, 1, 60, 100, 16, h0=False, dht=False, gate="kernel-nobias", l2norm=False),
    Case(1, 63, 1, 1, 64, 60, 32, h0=False, dht=False, gate="none", l2norm=False),
    Case(1, 63, 1, 1, 100, 128, 64, h0=False, dht=False, gate="none", l2norm=True),
    Case(1, 63, 1, 1, 128, 32, 64, h0=False, dht=True, gate="kernel", l2norm=True),
    Case(1, 63, 2, 4, 64, 64, 64, h0=False, dht=True, gate="kernel", l2norm=True),
    Case(2, 63, 4, 8, 32, 32, 64, h0=True, dht=True, gate="kernel-nobias", l2norm=False, marks=slow),
    Case(1, 64, 1, 1, 32, 100, 32, h0=False, dht=True, gate="kernel", l2norm=True),
    Case(1, 64, 1, 1, 32, 128, 64, h0=False, dht=False, gate="kernel-nobias", l2norm=False),
    Case(1, 64, 1, 1, 64, 32, 16, h0=False, dht=True, gate="none", l2norm=False),
    Case(1, 64, 1, 1, 128, 60, 64, h0=False, dht=False, gate="none", l2norm=True),
    Case(2, 64, 2, 4, 100, 100, 64, h0=True, dht=False, gate="none", l2norm=False, marks=slow),
    Case(1, 64, 4, 8, 60, 64, 64, h0=True, dht=True, gate="kernel-nobias", l2norm=True),
    Case(1, 65, 1, 1, 32, 60, 64, h0=False, dht=True, gate="kernel", l2norm=True),
    Case(2, 65, 1, 1, 64, 64, 16, h0=True, dht=False, gate="kernel-nobias", l2norm=False),
    Case(1, 65, 1, 1, 100, 100, 64, h0=True, dht=False, gate="none", l2norm=False),
    Case(1, 65, 1, 1, 128, 128, 64, h0=True, dht=False, gate="none", l2norm=False),
    Case(1, 65, 2, 4, 60, 32, 32, h0=False, dht=False, gate="none", l2norm=True),
    Case(1, 65, 4, 8, 32, 32, 64, h0=False, dht=True, gate="none", l2norm=False, marks=slow),
    Case(1, 75, 1, 1, 32, 32, 16, h0=True, dht=True, gate="kernel-nobias", l2norm=True),
    Case(1, 75, 1, 1, 64, 100, 64, h0=False, dht=False, gate="kernel-nobias", l2norm=True),
    Case(1, 75, 1, 1, 100, 64, 32, h0=False, dht=True, gate="kernel-nobias", l2norm=True),
    Case(2, 75, 1, 1, 128, 128, 64, h0=False, dht=True, gate="none", l2norm=True),
    Case(1, 75, 2, 4, 60, 60, 64, h0=True, dht=False, gate="kernel", l2norm=False),
    Case(1, 75, 4, 8, 32, 32, 64, h0=True, dht=True, gate="kernel", l2norm=False, marks=slow),
    Case(2, 500, 1, 1, 32, 32, 64, h0=False, dht=True, gate="none", l2norm=False, marks=slow),
    Case(1, 500, 1, 1, 32, 32, 32, h0=False, dht=True, gate="kernel-nobias", l2norm=True, marks=slow),
    Case(1, 500, 1, 1, 32, 32, 16, h0=False, dht=False, gate="kernel", l2norm=True, marks=slow),
    Case(1, 500, 1, 1, 32, 128, 64, h0=True, dht=False, gate="kernel-nobias", l2norm=True),
    Case(1, 500, 1, 1, 60, 60, 64, h0=False, dht=False, gate="kernel-nobias", l2norm=True),
    Case(1, 500, 1, 1, 64, 100, 64, h0=False, dht=True, gate="kernel", l2norm=True),
    Case(1, 500, 1, 1, 100, 32, 64, h0=False, dht=True, gate="kernel", l2norm=False),
    Case(1, 500, 1, 1, 128, 64, 64, h0=True, dht=True, gate="none", l2norm=False),
    Case(1, 500, 2, 4, 32, 32, 64, h0=False, dht=True, gate="kernel", l2norm=True, marks=slow),
    Case(1, 500, 4, 8, 32, 32, 64, h0=True, dht=False, gate="none", l2norm=False, marks=slow),
]
BIG_HEAD = [Case(1, 70, 1, 1, 256, 256, 64, gate="kernel", l2norm=True)]
"""K = V = 256, the largest head dims (whole [K, BV] state slice on chip)."""
SMALL_HEAD = [Case(1, 70, 1, 1, 16, 16, 64, gate="kernel", l2norm=True), Case(1, 40, 1, 2, 1, 1, 64, dht=False),
              Case(1, 70, 1, 2, 128, 16, 64, gate="kernel", l2norm=True)]
"""K, V <= 16 at chunk 64: the WY stages' slabs are padded to 32 off the NPU (16 x 16 faulted on
the H200 in an A/B; cases.md, Hopper findings). The last is K = 128 with V = 16, where dv' stays
fp32 (``wy.dv_operand_dtype`` needs V >= 32) while the K-side stages take their K >= 64 path."""
# Varlen (B = 1, sequences packed along T). The last three hold empty sequences and sequences
# shorter than one chunk: the empty ones' dh0 is dht (or zero without it).
VARLEN = [
    Case(1, 15, 1, 1, 64, 64, 64, varlen=(0, 15)),
    Case(1, 1000, 2, 4, 32, 64, 64, gate="kernel", varlen=(0, 256, 500, 1000), marks=slow),
    Case(1, 1000, 1, 1, 60, 32, 32, dht=False, l2norm=True, varlen=(0, 256, 500, 1000), marks=slow),
    Case(1, 2000, 1, 1, 32, 32, 64, gate="kernel-nobias", varlen=(0, 15, 100, 300, 1200, 2000), marks=slow),
    Case(1, 80, 2, 4, 60, 32, 32, gate="kernel", varlen=(0, 0, 15, 15, 80, 80)),
    Case(1, 80, 1, 2, 32, 32, 64, dht=False, varlen=(0, 0, 15, 15, 80, 80)),
    Case(1, 130, 1, 2, 100, 64, 32, h0=False, l2norm=True, varlen=(0, 1, 65, 65, 130)),
]
FP16 = [DENSE[i] for i in (0, 3, 5, 7, 8, 12, 14, 17, 23, 26, 31, 39)] + [VARLEN[0], VARLEN[4]]
"""The float16 subset: every T, head pair, chunk size, gate mode, l2norm, h0 and dht value."""
CPU_DTYPES = [torch.float32, torch.float16]


def _params(cases, with_marks=True):
    return [pytest.param(c, id=c.id, marks=c.marks if with_marks else ()) for c in cases]


def _factors(c: Case) -> dict:
    return dict(T=c.T, heads=(c.H, c.HV), K=c.K, V=c.V, chunk_size=c.chunk_size, B=c.B, h0=c.h0, dht=c.dht,
                gate=c.gate, l2norm=c.l2norm)


def test_case_table_is_pairwise():
    """DENSE covers every pair of GRID values; its quick part still has every single value;
    the float16 subset has every value of the factors named in its docstring."""
    seen = {(a, fa[a], b, fa[b]) for fa in map(_factors, DENSE) for a, b in itertools.combinations(GRID, 2)}
    missing = [(a, va, b, vb) for a, b in itertools.combinations(GRID, 2)
               for va in GRID[a] for vb in GRID[b] if (a, va, b, vb) not in seen]
    assert not missing, f"{len(missing)} pairs not covered, e.g. {missing[:5]}"
    quick = [_factors(c) for c in DENSE if pytest.mark.slow not in c.marks]
    for name, values in GRID.items():
        assert {f[name] for f in quick} == set(values), f"quick cases miss a value of {name}"
    half = [_factors(c) for c in FP16]
    for name in ("T", "heads", "chunk_size", "gate", "l2norm", "h0", "dht"):
        assert set(GRID[name]) <= {f[name] for f in half}, f"float16 cases miss a value of {name}"
    assert all(pytest.mark.slow not in c.marks for c in FP16)


# --- CPU tier: the op's gradients vs autograd through the reference ---------------------------


@pytest.mark.parametrize("case", _params(DENSE + BIG_HEAD + SMALL_HEAD + VARLEN))
def test_chunk_bwd_fp32(case, device, nan_empty):
    check_case(case, torch.float32, device)


@pytest.mark.parametrize("case", _params(FP16))
def test_chunk_bwd_fp16(case, device, nan_empty):
    check_case(case, torch.float16, device)


def test_chunk_reference_grads_match_naive(device):
    """The chunked reference (used on the GPU where the naive one is too slow) has the naive
    one's gradients: varlen with an empty sequence, GVA, gate-in-kernel, l2norm."""
    case = Case(1, 90, 1, 2, 32, 16, 16, gate="kernel", l2norm=True, varlen=(0, 7, 7, 70, 90))
    x = case.inputs(torch.float32, device)
    do, dht = case.cotangents(x)
    naive = ref_grads(case, x, do, dht)
    chunked = ref_grads(case, x, do, dht, chunk_gated_delta_rule_ref, chunk_size=case.chunk_size)
    compare(naive, chunked, x, dict.fromkeys(GRAD_INPUTS, REF_RATIO))


# --- special values --------------------------------------------------------------------------


def _zero(name):
    def prepare(x):
        x[name] = torch.zeros_like(x[name])
        return x
    return prepare


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=str)
def test_all_gates_zero(dtype, device, nan_empty):
    """g = 0 everywhere (no decay: the state only accumulates); dg is still nonzero."""
    check_case(Case(1, 40, 2, 4, 32, 32, 32), dtype, device, prepare=_zero("g"))


def test_some_gates_zero(device, nan_empty):
    def prepare(x):
        x["g"] = torch.where(torch.rand(x["g"].shape, generator=torch.Generator().manual_seed(5)) < 0.3,
                             torch.zeros_like(x["g"]), x["g"])
        return x
    check_case(Case(1, 70, 1, 2, 64, 32, 16, dht=False), torch.float32, device, prepare=prepare)


@pytest.mark.parametrize("gate", ["none", "kernel"])
def test_beta_zero(gate, device, nan_empty):
    """beta = 0: nothing is written, so dk = dv = 0 exactly (rel_rmse then measures the absolute
    error) while dbeta, dq, dg and dh0 are not zero."""
    ratios = check_case(Case(1, 40, 1, 2, 32, 32, 16, gate=gate), torch.float32, device, prepare=_zero("beta"))
    assert ratios["k"] < 1e-6 and ratios["v"] < 1e-6, ratios


def test_state_recurrences_fall_back_when_out_of_shared_memory(device, nan_empty, monkeypatch):
    """A state-recurrence launch that does not fit on chip (Triton's OutOfResources when it loads
    the kernel, e.g. num_stages 3 at K = 256 on the H200) is retried with the next candidate,
    and the gradients are still the reference's. Simulated: every candidate with BV > 16 is
    refused, in both recurrences."""
    from triton.runtime.errors import OutOfResources

    from fla_ascend.ops.common import chunk_h, tiles

    monkeypatch.setattr(tiles, "_FIRST_FIT", {})
    monkeypatch.setattr(chunk_h, "_state_launches", lambda *a, **k: [(64, {}), (32, {}), (16, {})])
    tried = []

    class Refusing:
        def __init__(self, name):
            self.name, self.real = name, getattr(chunk_h, name)

        def __getitem__(self, grid):
            def launch(**kw):
                tried.append((self.name, kw["BV"]))
                if kw["BV"] > 16:
                    raise OutOfResources(300000, 232448, "shared memory")
                return self.real[grid](**kw)
            return launch

    for name in ("chunk_fwd_h_kernel", "chunk_bwd_dh_kernel"):
        monkeypatch.setattr(chunk_h, name, Refusing(name))
    check_case(Case(1, 70, 1, 2, 32, 32, 64, h0=True, dht=True), torch.float32, device)
    fwd = [bv for n, bv in tried if n == "chunk_fwd_h_kernel"]
    dh = [bv for n, bv in tried if n == "chunk_bwd_dh_kernel"]
    # the backward's recompute of the forward recurrence starts at the candidate that loaded
    assert fwd[:3] == [64, 32, 16] and len(fwd) > 3 and set(fwd[3:]) == {16}, fwd
    assert dh == [64, 32, 16], dh


def test_final_state_returned_but_unused(device, nan_empty):
    """``output_final_state=True`` with a loss on ``o`` only (autograd passes a zero dht) gives
    the gradients of ``output_final_state=False``."""
    case = Case(1, 40, 1, 2, 32, 32, 16, gate="kernel", dht=False)
    x = case.inputs(torch.float32, device)
    do, _ = case.cotangents(x)
    names = [n for n in GRAD_INPUTS if x.get(n) is not None]
    o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=case.chunk_size)
    with_ht = dict(zip(names, torch.autograd.grad(_loss(o, None, do, None), [x[n] for n in names])))
    without = op_grads(case, x, do, None)
    compare(without, with_ht, x, dict.fromkeys(GRAD_INPUTS, 1e-6))
    compare(ref_grads(case, x, do, None), with_ht, x)


def _strong_decay(seed=1):
    """Qwen3-Next's gate at initialisation: A_log = log(U(0, 16)), raw gate ~ N(0, 1): one token
    can decay by exp(-30) and the in-chunk cumulative gate falls far below -88, where
    exp(-G) overflows float32 (the NaN regression fixed in the forward stages)."""
    def prepare(x):
        gen = torch.Generator().manual_seed(seed)
        x["A_log"] = torch.empty(x["A_log"].shape).uniform_(0.0, 16.0, generator=gen).log().to(x["A_log"].device)
        x["g"] = torch.randn(x["g"].shape, generator=gen).to(x["g"].device)
        return x
    return prepare


@pytest.mark.parametrize("T, chunk_size, gate", [(33, 64, "kernel"), (100, 64, "kernel"), (64, 64, "kernel"),
                                                 (40, 16, "kernel-nobias")])
def test_strong_decay(T, chunk_size, gate, device, nan_empty):
    check_case(Case(1, T, 1, 2, 32, 32, chunk_size, gate=gate), torch.float32, device, prepare=_strong_decay())


@pytest.mark.parametrize("chunk_size", [16, 64])
def test_strong_decay_varlen(chunk_size, device, nan_empty):
    case = Case(1, 90, 1, 2, 32, 32, chunk_size, gate="kernel", varlen=(0, 7, 7, 70, 90))
    check_case(case, torch.float32, device, prepare=_strong_decay())


# --- independent of the reference ------------------------------------------------------------


def _loss64(case: Case, x: dict, do, dht) -> float:
    with torch.no_grad():
        o, ht = chunk_gated_delta_rule(**x, output_final_state=True, use_qk_l2norm_in_kernel=case.l2norm,
                                       chunk_size=case.chunk_size)
    return float((o.double() * do.double()).sum() + (ht.double() * dht.double()).sum())


FD_EPS = 1e-2
FD_ATOL, FD_RTOL = 1e-3, 1e-2
"""Central differences of the float32 op, loss summed in float64. Error budget: the outputs
carry float32 rounding (relative ~1e-7 per entry); over ~1e3 output entries of size ~1 that
is ~3e-6 on the loss, ~2e-4 after dividing by 2 * eps (eps = 1e-2 keeps this small). The
truncation error eps^2 / 6 * L''' is the larger term where the loss curves most (k through
the l2norm: measured 6.6e-4 relative on dk = -27.9). Measured worst |fd - grad| /
(1e-3 + 1% |grad|) on this shape: 0.1 (a 10x margin); a wrong gradient (a missing term, a
sign, a dropped chunk) is off by far more than 1%."""


@pytest.mark.parametrize("gate", ["none", "kernel"])
def test_finite_differences(gate, device, nan_empty):
    """A few entries of every gradient vs central differences of the op's own forward: the
    largest-magnitude entry and a random one per input (two chunks, the second partial;
    GVA; l2norm in kernel)."""
    case = Case(1, 20, 1, 2, 16, 16, 16, gate=gate, l2norm=True)
    x = case.inputs(torch.float32, device)
    do, dht = case.cotangents(x)
    grads = op_grads(case, x, do, dht)
    xd = {k: (t.detach().clone() if isinstance(t, torch.Tensor) else t) for k, t in x.items()}
    gen = torch.Generator().manual_seed(3)
    worst, bad = 0.0, []
    for name, grad in grads.items():
        flat = xd[name].view(-1)
        picks = [int(grad.abs().argmax())] + torch.randint(flat.numel(), (1,), generator=gen).tolist()
        for i in picks:
            old = flat[i].item()
            flat[i] = old + FD_EPS
            up = _loss64(case, xd, do, dht)
            flat[i] = old - FD_EPS
            down = _loss64(case, xd, do, dht)
            flat[i] = old
            fd, an = (up - down) / (2 * FD_EPS), grad.view(-1)[i].item()
            err = abs(fd - an) / (FD_ATOL + FD_RTOL * abs(an))
            worst = max(worst, err)
            if err > 1:
                bad.append(f"{GRAD_NAME[name]}[{i}]: finite difference {fd:.5f} vs gradient {an:.5f}")
    assert not bad, "; ".join(bad) + f" (worst error / tolerance {worst:.2f})"


def test_backward_releases_intermediates(device):
    """Peak memory of one forward+backward, measured on any device by counting live tensor
    storages: each recomputed intermediate is released after its last stage, so the peak is
    the dq/dk/dw stage's working set (9.3 units of T x HV x K fp32 here), not the sum of every
    intermediate (13.9 units when they were all held to the end)."""
    from fla_ascend.bench.suite import op_call

    call, s = op_call("chunk_gated_delta_rule", "B=1,T=256,H=1,HV=2,K=64,V=64", "fwdbwd", dtype="float32")
    call()  # compile outside the measurement
    unit = s["B"] * s["T"] * s["HV"] * s["K"] * 4
    assert peak_live_bytes(call) <= 10 * unit


def test_deterministic(device, nan_empty):
    """Two backward runs on the same inputs give bit-identical gradients (GVA reductions of dq,
    dk and the chunk reductions of dA_log, ddt_bias must run in a fixed order)."""
    case = Case(1, 70, 2, 4, 32, 32, 32, gate="kernel", l2norm=True, varlen=(0, 30, 30, 70))
    x = case.inputs(torch.float32, device)
    do, dht = case.cotangents(x)
    a, b = op_grads(case, x, do, dht), op_grads(case, x, do, dht)
    for n in a:
        assert torch.equal(a[n], b[n]), f"{GRAD_NAME[n]} differs between two runs"


@pytest.mark.parametrize("dtype", [torch.float16, pytest.param(torch.bfloat16, marks=pytest.mark.gpu)], ids=str)
@pytest.mark.parametrize("gva", [False, True])
def test_backward_reuses_forward_wy_inverse(gva, dtype, device, nan_empty, monkeypatch):
    """The backward takes the forward's stored WY inverse ``Ai`` instead of inverting ``A``
    again: its gradients are bit-identical to a backward that recomputes ``Ai`` (the recomputed
    ``w``, ``u`` read the same ``Ai`` bits), with and without GVA (without it dq and dk leave
    their last stage in the input dtype, with it they pass the fp32 group sum)."""
    from fla_ascend.ops.common import wy
    from fla_ascend.ops.gated_delta_rule import chunk as chunk_mod

    case = Case(1, 75, 2, 4 if gva else 2, 32, 32, 32, h0=True, dht=True, gate="kernel", varlen=(0, 30, 75))
    x = case.inputs(dtype, device)  # bf16 (GPU tier): the production path, Ai stored in bf16 on CUDA
    do, dht = case.cotangents(x)
    modes = []
    real_fwd = wy.chunk_wy_fwd

    def spy(*args, **kw):
        modes.append("load" if kw.get("Ai") is not None else "store" if kw.get("store_ai") else "none")
        return real_fwd(*args, **kw)

    monkeypatch.setattr(chunk_mod, "chunk_wy_fwd", spy)
    saved = op_grads(case, x, do, dht)
    assert modes == ["store", "load"], modes
    real_bwd = chunk_mod.chunk_gated_delta_rule_bwd
    monkeypatch.setattr(chunk_mod, "chunk_gated_delta_rule_bwd", lambda *a, Ai=None, **kw: real_bwd(*a, **kw))
    modes.clear()
    recomputed = op_grads(case, x, do, dht)
    assert modes == ["store", "store"], modes
    for n in saved:
        assert saved[n].dtype == x[n].dtype, GRAD_NAME[n]
        assert torch.equal(saved[n], recomputed[n]), f"{GRAD_NAME[n]} differs with the stored Ai"


def test_forward_stores_wy_inverse_only_when_a_backward_can_follow(device, monkeypatch):
    """Inference (no_grad, or no input requiring grad) does not store ``Ai``; any one input that
    requires grad (here only the initial state, or only A_log) does."""
    from fla_ascend.ops.gated_delta_rule import chunk as chunk_mod

    stored = []
    real = chunk_mod.chunk_wy_fwd
    monkeypatch.setattr(chunk_mod, "chunk_wy_fwd", lambda *a, **kw: stored.append(kw["store_ai"]) or real(*a, **kw))
    x = make_inputs(1, 20, 1, 1, 16, 16, torch.float32, device, gate_in_kernel=True)
    detached = {k: (t.detach() if isinstance(t, torch.Tensor) else t) for k, t in x.items()}
    with torch.no_grad():
        chunk_gated_delta_rule(**x)
    chunk_gated_delta_rule(**detached)
    assert stored == [False, False]
    for name in ("initial_state", "A_log"):
        stored.clear()
        one = {**detached, name: detached[name].clone().requires_grad_()}
        o, _ = chunk_gated_delta_rule(**one)
        o.sum().backward()
        assert stored == [True, False], (name, stored)  # stored by the forward, loaded by the backward
        assert one[name].grad is not None and one[name].grad.isfinite().all()


def test_stored_wy_inverse_is_checked(device):
    """``chunk_wy_fwd`` refuses an ``Ai`` from another chunk size (it would read out of bounds)."""
    from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
    from fla_ascend.ops.common.wy import chunk_wy_fwd

    x = make_inputs(1, 64, 1, 1, 16, 16, torch.float32, device)
    g_cum, beta_t = chunk_gate_cumsum(x["g"], x["beta"], 32, 2)
    _, _, ai = chunk_wy_fwd(x["k"], x["v"], g_cum, beta_t, 32, 2, store_ai=True)
    with pytest.raises(ValueError, match=r"Ai must be a contiguous \[1, 64, 1, 64\] tensor"):
        chunk_wy_fwd(x["k"], x["v"], g_cum, beta_t, 64, 1, Ai=ai)
    with pytest.raises(ValueError, match="either store_ai or Ai"):
        chunk_wy_fwd(x["k"], x["v"], g_cum, beta_t, 32, 2, store_ai=True, Ai=ai)


def test_grad_dtypes_fp16(device, nan_empty):
    """float16 q, k, v, g, beta: each gradient has its input's dtype; dh0 (of the float32 state)
    is float32, as are dA_log and ddt_bias. Checked on the raw backward too, since autograd
    casts whatever a backward returns to the input's dtype."""
    x = make_inputs(1, 40, 2, 4, 32, 32, torch.float16, device, gate_in_kernel=True)
    x["g"] = x["g"].half()
    do = torch.randn_like(x["v"])
    dht = torch.randn_like(x["initial_state"])
    raw = chunk_gated_delta_rule_bwd(x["q"], x["k"], x["v"], x["g"], x["beta"], 32 ** -0.5, x["initial_state"],
                                     None, x["A_log"], x["dt_bias"], 64, do, dht)
    want = dict(q=torch.float16, k=torch.float16, v=torch.float16, g=torch.float16, beta=torch.float16,
                initial_state=torch.float32, A_log=torch.float32, dt_bias=torch.float32)
    for name, grad in zip(GRAD_INPUTS, raw):
        assert grad is not None and grad.dtype == want[name], f"raw {GRAD_NAME[name]}: {getattr(grad, 'dtype', None)}"
        assert grad.shape == x[name].shape and grad.isfinite().all(), GRAD_NAME[name]
    xl = _leaves(x)
    grads = op_grads(Case(1, 40, 2, 4, 32, 32, gate="kernel"), xl, do, dht)
    for name, grad in grads.items():
        assert grad.dtype == want[name], f"{GRAD_NAME[name]}: {grad.dtype} != {want[name]}"
        torch.testing.assert_close(grad, dict(zip(GRAD_INPUTS, raw))[name], rtol=0, atol=0)


@pytest.mark.parametrize("case", _params([FP16[1], FP16[-1]]))
def test_chunk_bwd_fp16_input_precision_dots(case, device, nan_empty, monkeypatch):
    """The mechanics of the WY stages' "input" dot precision (fp32 operands cast to the input
    dtype before the dot; on CUDA the table uses it for bf16 only, tiles.dot_precision) under the
    interpreter, with float16 standing in for bf16 (the interpreter's bf16 dots are wrong)."""
    from fla_ascend.ops.common import wy

    monkeypatch.setattr(wy, "dot_precision", lambda stage, dtype: "input")
    check_case(case, torch.float16, device)


def test_wy_operands_stored_in_input_dtype_are_exact(device, nan_empty, monkeypatch):
    """Under the "input" WY dot precision, Ai, dw and (at K >= 64, V >= 32) dv' are stored in the
    input dtype (wy.wy_bwd_operand_dtype, wy.dv_operand_dtype): their readers cast them to it
    before every dot anyway, so the gradients are bit-identical to storing them in fp32, with
    less memory. float16 stands in for bf16 (the interpreter's bf16 dots are wrong)."""
    from fla_ascend.ops.common import wy
    from fla_ascend.ops.gated_delta_rule import chunk as chunk_mod

    case = Case(1, 75, 2, 4, 64, 32, 32, h0=True, dht=True, gate="kernel", l2norm=True, varlen=(0, 30, 75))
    monkeypatch.setattr(wy, "dot_precision", lambda stage, dtype: "input")
    dv_dtypes = []
    real_bwd_dh = chunk_mod.chunk_bwd_dh

    def spy_bwd_dh(*args, **kwargs):
        out = real_bwd_dh(*args, **kwargs)
        dv_dtypes.append(out[1].dtype)
        return out

    monkeypatch.setattr(chunk_mod, "chunk_bwd_dh", spy_bwd_dh)
    x = case.inputs(torch.float16, device)
    do, dht = case.cotangents(x)
    assert wy.wy_bwd_operand_dtype(torch.float16) == torch.float16
    half = op_grads(case, x, do, dht)
    assert dv_dtypes == [torch.float16], dv_dtypes
    peak_half = peak_live_bytes(lambda: op_grads(case, x, do, dht))
    for mod in (wy, chunk_mod):
        monkeypatch.setattr(mod, "wy_bwd_operand_dtype", lambda dtype: torch.float32)
    dv_dtypes.clear()
    full = op_grads(case, x, do, dht)
    assert dv_dtypes == [torch.float32], dv_dtypes
    peak_full = peak_live_bytes(lambda: op_grads(case, x, do, dht))
    for n in half:
        assert torch.equal(half[n], full[n]), f"d{n} differs between fp16 and fp32 storage of Ai, dw and dv'"
    assert peak_half < peak_full


def test_cuda_refuses_backward_below_min_head_dim(monkeypatch):
    """On CUDA the backward refuses K or V below CUDA_MIN_BWD_HEAD_DIM before any launch, naming
    K and V (K = V = 1 gave wrong gradients on the H200); at K = V = 16 it goes on."""
    from fla_ascend import backend
    from fla_ascend.ops.gated_delta_rule import chunk as chunk_mod

    cuda = backend.Target(device_type="cuda", interpret=False, cube_cores=132, vector_cores=132, tensor_device="cpu")

    class Launched(Exception):
        pass

    def no_launch(*args, **kwargs):
        raise Launched

    monkeypatch.setattr(chunk_mod, "_chunking", no_launch)  # the backward's first step after the check
    for K, V in ((1, 1), (16, 8), (8, 64)):
        x = Case(1, 40, 1, 2, K, V, 64).inputs(torch.float32, "cpu")
        args = (x["q"], x["k"], x["v"], x["g"], x["beta"], K ** -0.5, x["initial_state"], None, None, None, 64,
                torch.ones_like(x["v"]), None)
        with backend.use(cuda), pytest.raises(NotImplementedError,
                                              match=rf"^chunk_gated_delta_rule: .*K, V >= 16, got K={K}, V={V}"):
            chunk_mod.chunk_gated_delta_rule_bwd(*args)
    x = Case(1, 40, 1, 2, 16, 16, 64).inputs(torch.float32, "cpu")
    with backend.use(cuda), pytest.raises(Launched):
        chunk_mod.chunk_gated_delta_rule_bwd(x["q"], x["k"], x["v"], x["g"], x["beta"], 0.25, x["initial_state"],
                                             None, None, None, 64, torch.ones_like(x["v"]), None)


def test_dv_operand_dtype_rule(monkeypatch):
    """dv' is stored in the WY operand dtype only from K = 64 and V = 32 (the H200 miscompiled
    the dq/dk/dw stage with a bf16 dv' at K = 32 and K = V = 1); elsewhere, and without the
    "input" precision (here: the interpreter's "ieee"), fp32."""
    from fla_ascend.ops.common import wy

    assert wy.dv_operand_dtype(torch.bfloat16, 128, 128) == torch.float32  # interpreter: exact fp32 dots
    monkeypatch.setattr(wy, "dot_precision", lambda stage, dtype: "input")
    assert wy.dv_operand_dtype(torch.bfloat16, wy.DV_OPERAND_MIN_K, wy.DV_OPERAND_MIN_V) == torch.bfloat16
    assert wy.dv_operand_dtype(torch.bfloat16, 256, 256) == torch.bfloat16
    assert wy.dv_operand_dtype(torch.bfloat16, 32, 128) == torch.float32
    assert wy.dv_operand_dtype(torch.bfloat16, 128, 16) == torch.float32
    assert wy.dv_operand_dtype(torch.bfloat16, 1, 1) == torch.float32


def test_bf16_limits_for_ill_conditioned_gradients():
    """The bf16 GPU tier's limits, checked on the CPU (they use only the fp32 reference): dg of
    a single token (B1 T1 HV1, where both we and flash-linear-attention miss 0.02) is
    ill-conditioned and gets a larger, capped limit; the gradients of a multi-token, multi-head
    case keep the issue's limits exactly."""
    tiny = Case(1, 1, 1, 1, 32, 32, 16, h0=True, dht=False, gate="none", l2norm=True)
    x = tiny.inputs(torch.bfloat16, "cpu")
    grads = lambda xp: ref_grads(tiny, xp, *tiny.cotangents(x))  # noqa: E731
    assert bf16_input_movement(grads, x)["g"] > GATE_RATIO
    _, limits = bf16_limits(grads, x, LIMITS)
    assert GATE_RATIO < limits["g"] <= MAX_RELAX * GATE_RATIO
    assert all(LIMITS[n] <= limits[n] <= MAX_RELAX * LIMITS[n] for n in limits), limits
    wide = Case(1, 75, 4, 8, 32, 32, 64, h0=True, dht=True, gate="kernel")
    x = wide.inputs(torch.bfloat16, "cpu")
    grads = lambda xp: ref_grads(wide, xp, *wide.cotangents(x))  # noqa: E731
    movement = bf16_input_movement(grads, x)
    assert all(movement[n] < LIMITS[n] / 2 for n in ("q", "k", "v", "g", "beta", "initial_state")), movement
    _, limits = bf16_limits(grads, x, LIMITS)
    assert all(limits[n] == LIMITS[n] for n in ("q", "k", "v", "g", "beta", "initial_state"))


def test_no_initial_state_no_gate_grads(device, nan_empty):
    """Without initial_state / A_log / dt_bias the backward returns None for them."""
    x = make_inputs(1, 20, 1, 1, 32, 32, torch.float32, device, h0=False)
    out = chunk_gated_delta_rule_bwd(x["q"], x["k"], x["v"], x["g"], x["beta"], 32 ** -0.5, None, None, None, None,
                                     16, torch.randn_like(x["v"]), None)
    assert out[5] is None and out[6] is None and out[7] is None
    assert all(t is not None and t.isfinite().all() for t in out[:5])


# --- GPU tier --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("case", _params(DENSE + BIG_HEAD + SMALL_HEAD + VARLEN, with_marks=False))
def test_chunk_bwd_gpu_bf16(case, device, nan_empty):
    check_case(case, torch.bfloat16, device)


QWEN3_NEXT = [
    Case(1, 4096, 16, 32, 128, 128, 64, gate="kernel", l2norm=True),
    Case(1, 4096, 16, 32, 128, 128, 64, h0=False, dht=False),
    Case(1, 4000, 16, 32, 128, 128, 64, gate="kernel", l2norm=True,
         varlen=(0, 1, 64, 64, 1000, 2500, 4000)),
    Case(2, 1024, 4, 8, 256, 256, 64, gate="kernel", l2norm=True),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", _params(QWEN3_NEXT))
def test_chunk_bwd_gpu_qwen3_next(case, dtype, device, nan_empty):
    """Qwen3-Next's layer shape (B1 T4096 H16 HV32 K=V=128) and K = V = 256, against the chunked
    reference (the naive one takes minutes at these sizes; the two agree, see
    test_chunk_reference_grads_match_naive)."""
    check_case(case, dtype, device, ref=chunk_gated_delta_rule_ref, chunk_size=64)


@pytest.mark.gpu
@pytest.mark.parametrize("T", [4096, 4000])
def test_chunk_bwd_gpu_qwen3_next_strong_decay(T, device, nan_empty):
    case = Case(1, T, 16, 32, 128, 128, 64, gate="kernel", l2norm=True)
    check_case(case, torch.bfloat16, device, ref=chunk_gated_delta_rule_ref, prepare=_strong_decay(), chunk_size=64)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _params([Case(3, 256, 32, 32, 128, 128, 64, gate="kernel", l2norm=True),
                                          Case(1, 300, 2, 4, 256, 256, 64)]))
def test_chunk_bwd_gpu_fp32_wide(case, device, nan_empty):
    """float32 inputs where the state recurrences' deeper pipelines exceed the H200's shared
    memory (K = V = 128 at BV 64, from 3 x 32 value heads; K = V = 256): they step down
    (tiles.launch_first_fitting; the byte counts are in cases.md) and the gradients hold."""
    check_case(case, torch.float32, device, ref=chunk_gated_delta_rule_ref, chunk_size=64)


@pytest.mark.gpu
def test_deterministic_gpu_qwen3_next(device, nan_empty):
    """Bit-identical gradients from two runs at the layer shape (atomics would show here)."""
    case = QWEN3_NEXT[0]
    x = case.inputs(torch.bfloat16, device)
    do, dht = case.cotangents(x)
    a, b = op_grads(case, x, do, dht), op_grads(case, x, do, dht)
    for n in a:
        assert torch.equal(a[n], b[n]), f"{GRAD_NAME[n]} differs between two runs"


def test_interpreter_is_on_for_cpu_tier():
    """The CPU tier must run the kernels under the interpreter (else it tests nothing here)."""
    if backend.device_type() == "cpu":
        assert backend.is_interpreter()
