"""fla-ascend as a backend of flash-linear-attention 0.6.0's registry
(:mod:`fla_ascend.integrations.fla`), on the CPU under the interpreter: fla's own entry points
(``fla.ops.gated_delta_rule.chunk_gated_delta_rule``, ``fla.ops.kda.chunk_kda``,
``fla.modules.ShortConvolution``, ``FusedRMSNormGated``, ``l2norm``) reach our ops and match a direct
call to them (``chunk_kda`` also the float64 reference); an unsupported argument or device falls
through to fla's code with the reason logged once, and each reason ``chunk_kda``'s verifier gives
is met by a call; disable restores
fla's dispatch; handles nest; a registry that is not 0.6.0's gives a clear error; the script that
runs fla's own tests with the backend summarises a run.

fla's own Triton kernels cannot run on a CPU (Triton has no CPU driver), so where a test needs to
see fla's code run, it replaces the fla kernel or autograd function that code calls with a recorder.

fla is not importable in the test environments: transformers 5.x binds fla's kernels whenever fla
imports, in place of the PyTorch path that tests/integrations/test_transformers.py and the README
compare against (and those kernels cannot run on a CPU). scripts/setup_env.sh installs fla-core
0.6.0 and einops into ``<venv>/fla-site`` instead, and :func:`test_in_a_process_with_fla` runs this
file in a child process that has that folder on its path.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fla_ascend.modules as our_modules
import fla_ascend.ops as our_ops
from fla_ascend import backend
from fla_ascend.ops.kda.reference import naive_recurrent_kda
from fla_ascend.ops.utils import rel_rmse

ff = pytest.importorskip("fla_ascend.integrations.fla")
our_l2 = importlib.import_module("fla_ascend.ops.norm.l2norm")
our_rms = importlib.import_module("fla_ascend.ops.norm.rms_norm_gated")

ROOT = Path(__file__).resolve().parents[2]
HAVE_FLA = importlib.util.find_spec("fla") is not None
FLA_SITE = Path(sys.prefix) / "fla-site"
"""fla-core 0.6.0 and einops, installed with ``pip install --target`` by scripts/setup_env.sh."""

FLA_MODULES = ("fla", "fla.backends", "fla.ops.gated_delta_rule", "fla.ops.gated_delta_rule.chunk", "fla.modules",
               "fla.modules.norm.l2norm", "fla.modules.causal_conv1d.ops", "fla.modules.norm.fused_norm_gate",
               "fla.ops.kda", "fla.ops.kda.chunk")
fla = fb = fla_gdr = fla_chunk = fla_modules = fla_l2 = fla_conv = fla_kda = fla_kda_chunk = None  # set by _fla


@pytest.mark.skipif(HAVE_FLA or not FLA_SITE.is_dir(),
                    reason="flash-linear-attention importable here (its cases run in this process), or not "
                           "installed in <venv>/fla-site (scripts/setup_env.sh)")
def test_in_a_process_with_fla():
    """This file's cases, in a child process with ``<venv>/fla-site`` on its path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(FLA_SITE), str(ROOT), os.environ.get("PYTHONPATH")) if p))
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", str(Path(__file__)), "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-o", "addopts="], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]


class _NoDevice:
    """A Triton driver for a machine without a device: what fla 0.6.0's imports ask of one."""

    def get_benchmarker(self):
        return lambda *args, **kwargs: [0.0]

    def get_current_target(self):
        raise RuntimeError("no device")


def _import_fla() -> list:
    """fla's modules, imported. Under triton-ascend 3.2.0 without an NPU, ``triton.autotune`` asks the
    active driver for a benchmarker when it decorates a kernel, and there is none ("0 active
    drivers"), so fla's modules import under :class:`_NoDevice`, put back afterwards (our kernels run
    on the interpreter and never ask for a driver; fla's kernels are not run here)."""
    if backend.triton_flavour() != "triton-ascend" or backend.device_type() != "cpu":
        return [importlib.import_module(m) for m in FLA_MODULES]
    import triton.runtime as tr

    saved = tr.driver.active
    tr.driver.set_active(_NoDevice())
    try:
        return [importlib.import_module(m) for m in FLA_MODULES]
    finally:
        tr.driver.set_active(saved)


@pytest.fixture(autouse=True)
def _fla(request):
    """fla's modules as this file's globals (imported on first use), and no backend enabled before or
    after a test; cases skip where fla is not importable."""
    global fla, fb, fla_gdr, fla_chunk, fla_modules, fla_l2, fla_conv, fla_kda, fla_kda_chunk
    if request.node.name == "test_in_a_process_with_fla":
        yield
        return
    if not HAVE_FLA:
        pytest.skip("flash-linear-attention is not importable here: the cases run in test_in_a_process_with_fla")
    if fla is None:
        fla, fb, fla_gdr, fla_chunk, fla_modules, fla_l2, fla_conv, _, fla_kda, fla_kda_chunk = _import_fla()
    ff.disable()
    ff.reset_stats()
    yield
    ff.disable()
    ff.reset_stats()


TOL = 1e-6


def spy(monkeypatch, owner, name):
    """Replace ``owner.name`` with a mock that calls the original and counts the calls."""
    m = mock.Mock(wraps=getattr(owner, name))
    monkeypatch.setattr(owner, name, m)
    return m


class FakeKernel:
    """Stands for one of fla's ``@triton.jit`` kernels: ``kernel[grid](...)`` records the call."""

    def __init__(self):
        self.calls = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls += 1
        return launch


def _gdn_inputs(B=1, T=24, H=2, HV=4, K=16, V=16, requires_grad=True):
    q = torch.randn(B, T, H, K)
    k = torch.randn(B, T, H, K)
    v = torch.randn(B, T, HV, V)
    g = F.logsigmoid(torch.randn(B, T, HV))
    beta = torch.rand(B, T, HV)
    h0 = torch.randn(B, HV, K, V)
    return [t.requires_grad_(requires_grad) for t in (q, k, v, g, beta, h0)]


def _grads(inputs, outputs):
    loss = sum((o * torch.randn_like(o, generator=torch.Generator().manual_seed(i))).sum()
               for i, o in enumerate(outputs))
    return torch.autograd.grad(loss, inputs)


def test_chunk_gated_delta_rule_reaches_fla_ascend(monkeypatch):
    """fla's chunk_gated_delta_rule (GVA, initial and final state, q/k l2norm in the kernel) runs our
    op, forward and backward, with the same numbers as calling ours."""
    ours = our_ops.chunk_gated_delta_rule
    entry = spy(monkeypatch, our_ops, "chunk_gated_delta_rule")
    inputs = _gdn_inputs()
    q, k, v, g, beta, h0 = inputs
    kw = dict(initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)
    with ff.enable("chunk_gated_delta_rule", devices="cpu"):
        o, ht = fla_gdr.chunk_gated_delta_rule(q, k, v, g, beta, **kw)
    assert entry.call_count == 1
    assert ff.stats() == {"chunk_gated_delta_rule": {"fla_ascend": 1}}
    got = _grads(inputs, (o, ht))
    o_ref, ht_ref = ours(q, k, v, g, beta, **kw)
    want = _grads(inputs, (o_ref, ht_ref))
    assert rel_rmse(o_ref, o) < TOL and rel_rmse(ht_ref, ht) < TOL
    for name, a, b in zip("q k v g beta h0".split(), want, got):
        assert rel_rmse(a, b) < TOL, name


KDA_CASES = {
    # name -> (input sizes, chunk_kda's keyword arguments besides the tensors)
    "plain-gate": (dict(B=2, T=20, H=1, HV=2, K=16, V=16, gate_in_kernel=False), dict(output_final_state=True)),
    "gate-in-kernel-gva-l2norm-chunk16": (
        dict(B=1, T=24, H=2, HV=4, K=16, V=16, gate_in_kernel=True),
        dict(output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, chunk_size=16)),
    "varlen-lower-bound-beta-logits-chunk32": (
        dict(B=1, T=40, H=1, HV=2, K=16, V=16, gate_in_kernel=True, cu_seqlens=(0, 7, 7, 40)),
        dict(output_final_state=True, use_gate_in_kernel=True, safe_gate=True, lower_bound=-5.0,
             use_beta_sigmoid_in_kernel=True, chunk_size=32)),
}
KDA_LIMITS = (1e-4, 1e-3)
"""rel-RMSE against the float64 recurrence in float32: o, the final state, dq, dk, dv, dh0; and dg,
dbeta, dA_log, ddt_bias (sums over whole chunks and heads), as tests/ops/test_kda_chunk.py."""
KDA_GATE_GRADS = ("g", "beta", "A_log", "dt_bias")


def _kda_inputs(B, T, H, HV, K, V, gate_in_kernel, cu_seqlens=None, requires_grad=True, seed=0):
    """``{name: tensor}`` of a chunk_kda call: q, k, v, g, beta, initial_state, and with the gate in
    the kernel the raw ``g``, A_log and dt_bias (else ``g`` is a log decay)."""
    gen = torch.Generator().manual_seed(seed)
    N = B if cu_seqlens is None else len(cu_seqlens) - 1
    x = dict(q=torch.randn(B, T, H, K, generator=gen), k=F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1),
             v=torch.randn(B, T, HV, V, generator=gen), g=torch.randn(B, T, HV, K, generator=gen),
             beta=torch.rand(B, T, HV, generator=gen), initial_state=torch.randn(N, HV, K, V, generator=gen))
    if gate_in_kernel:
        x["A_log"] = torch.empty(HV).uniform_(-1.0, 1.0, generator=gen)
        x["dt_bias"] = 0.5 * torch.randn(HV * K, generator=gen)
    else:
        x["g"] = F.logsigmoid(x["g"] + 3.0)
    x = {n: t.requires_grad_(requires_grad) for n, t in x.items()}
    if cu_seqlens is not None:
        x["cu_seqlens"] = torch.tensor(cu_seqlens, dtype=torch.int32)
    return x


def _kda_loss(o, ht, seed=7):
    """``(o * do).sum() + (ht * dht).sum()`` with fixed float32 cotangents (cast to the outputs' dtype)."""
    gen = torch.Generator().manual_seed(seed)
    do, dht = torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)
    return (o * do.to(o.dtype)).sum() + (ht * dht.to(ht.dtype)).sum()


@pytest.mark.parametrize("case", sorted(KDA_CASES))
def test_chunk_kda_reaches_fla_ascend(monkeypatch, case):
    """fla's chunk_kda, called as fla's users call it (A_log, dt_bias, chunk_size through its
    **kwargs), runs our op once, forward and backward: the output, the final state and the gradient
    of every input match a direct call to ours and the float64 token-by-token reference. chunk_size
    16, which fla's own code refuses, is ours to run."""
    sizes, kw = KDA_CASES[case]
    ours = our_ops.chunk_kda
    entry = spy(monkeypatch, our_ops, "chunk_kda")
    x = _kda_inputs(**sizes)
    leaves = [n for n, t in x.items() if isinstance(t, torch.Tensor) and t.requires_grad]
    with ff.enable("chunk_kda", devices="cpu"):
        o, ht = fla_kda.chunk_kda(**x, **kw)
        got = torch.autograd.grad(_kda_loss(o, ht), [x[n] for n in leaves])
    assert entry.call_count == 1
    assert ff.stats() == {"chunk_kda": {"fla_ascend": 1}}

    o_ours, ht_ours = ours(**x, **kw)
    want = torch.autograd.grad(_kda_loss(o_ours, ht_ours), [x[n] for n in leaves])
    assert rel_rmse(o_ours, o) < TOL and rel_rmse(ht_ours, ht) < TOL
    for name, a, b in zip(leaves, want, got):
        assert rel_rmse(a, b) < TOL, name

    x64 = {n: t.detach().double().requires_grad_() if n in leaves else t for n, t in x.items()}
    o_ref, ht_ref = naive_recurrent_kda(**x64, **kw)
    ref = torch.autograd.grad(_kda_loss(o_ref, ht_ref), [x64[n] for n in leaves])
    lim, gate_lim = KDA_LIMITS
    assert rel_rmse(o_ref, o.double()) < lim and rel_rmse(ht_ref, ht.double()) < lim
    for name, r, b in zip(leaves, ref, got):
        assert rel_rmse(r, b.double()) < (gate_lim if name in KDA_GATE_GRADS else lim), name
    assert {"q", "k", "v", "g", "beta", "initial_state"} <= set(leaves)
    assert ("A_log" in leaves) == kw.get("use_gate_in_kernel", False)


def _kda_call(K=16, V=16, T=8, requires_grad=False, **kw):
    """A small chunk_kda call fla-ascend takes (``{name: argument}``), with ``kw`` over it."""
    x = _kda_inputs(B=1, T=T, H=1, HV=2, K=K, V=V, gate_in_kernel=False, requires_grad=requires_grad)
    return {**x, **kw}


def _gate_call(**kw):
    """A call with the gate in the kernel (A_log, dt_bias) that fla-ascend takes, ``kw`` over it."""
    return {**_kda_inputs(B=1, T=8, H=1, HV=2, K=16, V=16, gate_in_kernel=True, requires_grad=False),
            "use_gate_in_kernel": True, **kw}


class _Context:
    """Stands for fla's FLACPContext (any object: the check is ``cp_context is not None``)."""

    cu_seqlens = None
    cu_seqlens_cpu = None


def _with(**kw):
    """The base call with ``kw`` over it."""
    return lambda call: {**call, **kw}


def _cast(dtype):
    """The base call with q, k, v in ``dtype``."""
    return lambda call: {n: t.to(dtype) if n in ("q", "k", "v") else t for n, t in call.items()}


KDA_REJECTED = {
    # name -> (a call fla-ascend takes, the change that makes it one it refuses, a fragment of the
    #          reason, the exception our chunk_kda raises on the changed call)
    "cp_context": (_kda_call, _with(cp_context=_Context()), "cp_context is flash-linear-attention's",
                   NotImplementedError),
    "use_graph": (_kda_call, _with(use_graph=True), "use_graph=True", NotImplementedError),
    "flag-not-a-bool": (_kda_call, _with(output_final_state=1), "output_final_state must be a bool", TypeError),
    "transpose_state_layout-not-a-bool": (_kda_call, _with(transpose_state_layout="yes"),
                                          "transpose_state_layout must be a bool", TypeError),
    "unknown-keyword": (_kda_call, _with(head_first=False), "keyword arguments ['head_first']", DeprecationWarning),
    "A_log-without-gate": (_kda_call, _with(A_log=torch.zeros(2)), "A_log / dt_bias without use_gate_in_kernel",
                           ValueError),
    "dt_bias-without-gate": (_kda_call, _with(dt_bias=torch.zeros(32)), "A_log / dt_bias without use_gate_in_kernel",
                             ValueError),
    "chunk_size-float": (_kda_call, _with(chunk_size=64.0), "chunk_size=64.0", ValueError),
    "chunk_size-128": (_kda_call, _with(chunk_size=128), "chunk_size=128", ValueError),
    "not-a-tensor": (_kda_call, _with(beta=None), "beta is a NoneType, not a tensor", TypeError),
    "float64": (_kda_call, _cast(torch.float64), "q of dtype torch.float64", TypeError),
    "integer-initial-state": (_kda_call, _with(initial_state=torch.zeros(1, 2, 16, 16, dtype=torch.int32)),
                              "initial_state of dtype torch.int32", TypeError),
    "q-not-4d": (_kda_call, _with(q=torch.randn(8, 1, 16)), "q or v is not a 4-D tensor", ValueError),
    "empty": (_kda_call, lambda call: _kda_call(T=0), "an empty call (T=0", ValueError),
    "K-above-256": (_kda_call, lambda call: _kda_call(K=257), "head dims K=257, V=16", ValueError),
    "V-above-256": (_kda_call, lambda call: _kda_call(V=257), "head dims K=16, V=257", ValueError),
    "A_log-of-another-shape": (_gate_call, _with(A_log=torch.zeros(1, 1, 2, 1)), "A_log of shape (1, 1, 2, 1)",
                               ValueError),
    "dt_bias-of-another-shape": (_gate_call, _with(dt_bias=torch.zeros(2, 16)), "dt_bias of shape (2, 16)",
                                 ValueError),
    "lower_bound-positive": (_gate_call, _with(lower_bound=0.5), "lower_bound=0.5", ValueError),
    "lower_bound-without-gate-inf": (_kda_call, _with(lower_bound=float("-inf")), "lower_bound=-inf", ValueError),
    "scale-inf": (_kda_call, _with(scale=float("inf")), "scale=inf", ValueError),
    "scale-a-tensor": (_kda_call, _with(scale=torch.tensor(0.25)), "scale=tensor(0.2500)", TypeError),
    "bfloat16-interpreter": (_kda_call, _cast(torch.bfloat16), "bfloat16 under the Triton interpreter", TypeError),
}


def _verdict(call: dict) -> str | None:
    return ff.ADAPTERS["chunk_kda"][1](**call)


@pytest.mark.parametrize("case", sorted(KDA_REJECTED))
def test_chunk_kda_rejections(case):
    """Each reason chunk_kda's verifier gives (so that fla's own code runs the call): the call
    without the one change is taken, the call with it is refused for that reason, and our chunk_kda
    called directly raises on it (the reason it must stay with fla)."""
    base, change, reason, our_error = KDA_REJECTED[case]
    with ff.enable("chunk_kda", devices="cpu"):
        call = base()
        assert _verdict(call) is None
        call = change(call)
        got = _verdict(call)
        assert got is not None and reason in got, got
    with pytest.raises(our_error), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # transpose_state_layout's own warning
        our_ops.chunk_kda(**call)


def test_chunk_kda_rejects_a_cuda_backward_below_head_dim_16(monkeypatch):
    """On CUDA (compiled Triton) a call that will need a backward at K or V < 16 stays with fla; the
    same call without gradients, and one at K = V = 16 with them, are ours."""
    monkeypatch.setattr(backend, "is_cuda_compiled", lambda: True)
    with ff.enable("chunk_kda", devices="cpu"):
        got = _verdict(_kda_call(K=8, V=16, requires_grad=True))
        assert got is not None and "a backward with K=8, V=16 on CUDA" in got
        assert "V=8 on CUDA" in _verdict(_kda_call(K=16, V=8, requires_grad=True))
        with torch.no_grad():
            assert _verdict(_kda_call(K=8, V=8, requires_grad=True)) is None
        assert _verdict(_kda_call(K=8, V=8, requires_grad=False)) is None
        assert _verdict(_kda_call(K=16, V=16, requires_grad=True)) is None
        assert _verdict(_gate_call(A_log=torch.zeros(2, requires_grad=True))) is None
    monkeypatch.setattr(backend, "is_cuda_compiled", lambda: False)
    with ff.enable("chunk_kda", devices="cpu"):
        assert _verdict(_kda_call(K=8, V=8, requires_grad=True)) is None


def test_chunk_kda_takes_what_it_supports():
    """The verifier does not refuse what our chunk_kda implements beyond the common call, and ours
    runs each of those calls: the lower-bound gate without A_log, state_v_first and
    transpose_state_layout, chunk sizes 16 and 32, disable_recompute, return_intermediate_states
    (under inference mode, as both ops require), beta logits, mixed dtypes (computed in float32 here:
    float16 with bfloat16), float16, numpy flags."""
    calls = [_gate_call(A_log=None, lower_bound=-5.0, safe_gate=True), _kda_call(state_v_first=True),
             _kda_call(transpose_state_layout=True), _kda_call(chunk_size=16), _kda_call(chunk_size=32),
             _kda_call(disable_recompute=True), _kda_call(return_intermediate_states=True),
             _kda_call(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True),
             _with(q=_kda_call()["q"].half(), v=_kda_call()["v"].bfloat16())(_kda_call()), _cast(torch.float16)(
                 _kda_call()), _kda_call(scale=0.5, max_num_seqs=3, output_final_state=np.bool_(True))]
    with ff.enable("chunk_kda", devices="cpu"):
        assert [_verdict(c) for c in calls] == [None] * len(calls)
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore", DeprecationWarning)  # transpose_state_layout's own warning
        for call in calls:
            assert our_ops.chunk_kda(**call)[0].shape == call["v"].shape
    with ff.enable("chunk_kda"):  # npu and cuda only
        assert _verdict(_kda_call()).startswith("cpu tensors: fla-ascend is enabled for ['cuda', 'npu']")


def test_chunk_kda_rejected_call_runs_fla(monkeypatch, caplog):
    """A refused chunk_kda call (A_log without use_gate_in_kernel: fla ignores it) reaches fla's own
    ChunkKDAFunction, not ours; fla logs the reason once for two calls, stats() counts both."""
    entry = spy(monkeypatch, our_ops, "chunk_kda")
    fla_apply = mock.Mock(return_value=("fla's o", None))
    monkeypatch.setattr(fla_kda_chunk.ChunkKDAFunction, "apply", fla_apply)
    registry = fb._function_registries[inspect.unwrap(fla_kda_chunk.chunk_kda)]
    monkeypatch.setattr(registry, "_logged", set())
    x = _kda_call()
    with ff.enable("chunk_kda", devices="cpu"), caplog.at_level(logging.INFO, logger="fla.backends"):
        for _ in range(2):
            o, _ = fla_kda.chunk_kda(**x, A_log=torch.zeros(2))
            assert o == "fla's o"
    assert fla_apply.call_count == 2 and entry.call_count == 0
    logged = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(logged) == 1 and "chunk_kda -> fla_ascend rejected: A_log / dt_bias without" in logged[0]
    (reason,) = ff.stats()["chunk_kda"]
    assert ff.stats()["chunk_kda"][reason] == 2 and reason.startswith("A_log / dt_bias without")


def test_short_convolution_reaches_fla_ascend(monkeypatch):
    """fla's ShortConvolution: a prefill with a cache and the final state (its forward and backward
    stages) and a decode step (its update stage) run our ops, matching direct calls."""
    conv_ref, update_ref = our_ops.causal_conv1d, our_ops.causal_conv1d_update
    conv_spy = spy(monkeypatch, our_ops, "causal_conv1d")
    update_spy = spy(monkeypatch, our_ops, "causal_conv1d_update")
    B, T, D, W = 2, 13, 24, 4
    conv = fla_modules.ShortConvolution(D, W, bias=True, activation="silu")
    x = torch.randn(B, T, D, requires_grad=True)
    cache = torch.randn(B, D, W, requires_grad=True)
    with ff.enable(["causal_conv1d", "causal_conv1d_update"], devices="cpu"):
        y, ht = conv(x, cache=cache, output_final_state=True)
        got = _grads([x, cache, conv.weight, conv.bias], (y, ht))
        step = torch.randn(B, 1, D)
        state = ht.detach().clone()
        with torch.no_grad():
            y_step, state_after = conv(step, cache=state, output_final_state=True)
    assert conv_spy.call_count == 2  # the forward stage, then the backward stage's recomputation
    assert update_spy.call_count == 1 and state_after is state
    assert ff.stats() == {fn: {"fla_ascend": 1} for fn in ("causal_conv1d_fwd", "causal_conv1d_bwd",
                                                           "causal_conv1d_update")}

    weight = conv.weight.squeeze(1)
    y_ref, ht_ref = conv_ref(x, weight, conv.bias, None, cache, True, "silu")
    want = _grads([x, cache, conv.weight, conv.bias], (y_ref, ht_ref))
    assert rel_rmse(y_ref, y) < TOL and rel_rmse(ht_ref, ht) < TOL
    for name, a, b in zip(("x", "cache", "weight", "bias"), want, got):
        assert rel_rmse(a, b) < TOL, name
    state_ref = ht.detach().clone()
    y_step_ref, _ = update_ref(step, state_ref, None, weight.detach(), conv.bias.detach(), "silu")
    assert rel_rmse(y_step_ref, y_step) < TOL and torch.equal(state_ref, state)


def test_norms_reach_fla_ascend(monkeypatch):
    """fla's l2norm (with output_dtype) and FusedRMSNormGated (plain, and with a residual and prenorm)
    run our norm kernels forward and backward, matching our ops."""
    stages = [spy(monkeypatch, our_l2, "l2norm_fwd"), spy(monkeypatch, our_l2, "l2norm_bwd"),
              spy(monkeypatch, our_rms, "rms_norm_gated_fwd"), spy(monkeypatch, our_rms, "rms_norm_gated_bwd")]
    x = torch.randn(3, 7, 40, requires_grad=True)
    gate = torch.randn(3, 7, 40, requires_grad=True)
    res = torch.randn(3, 7, 40, requires_grad=True)
    fla_norm = fla_modules.FusedRMSNormGated(40, eps=1e-5)
    our_norm = our_modules.FusedRMSNormGated(40, eps=1e-5)
    with torch.no_grad():
        fla_norm.weight.uniform_(0.5, 1.5)
        our_norm.weight.copy_(fla_norm.weight)
    leaves = [x, gate, res]

    with ff.enable(["l2norm", "rms_norm_gated"], devices="cpu"):
        outs = [fla_l2.l2norm(x, output_dtype=torch.float16), fla_norm(x, gate)]
        outs += list(fla_norm(x, gate, residual=res, prenorm=True))
        got = _grads(leaves + [fla_norm.weight], outs)
    assert [s.call_count for s in stages] == [1, 1, 2, 2]

    ref = [our_ops.l2norm(x, output_dtype=torch.float16), our_norm(x, gate)]
    ref += list(our_norm(x, gate, residual=res, prenorm=True))
    want = _grads(leaves + [our_norm.weight], ref)
    assert outs[0].dtype == torch.float16 and rel_rmse(ref[0].float(), outs[0].float()) < 1e-3
    for i, (a, b) in enumerate(zip(ref[1:], outs[1:])):
        assert a.dtype == b.dtype and rel_rmse(a, b) < TOL, i
    for name, a, b in zip(("x", "g", "residual", "weight"), want, got):
        assert rel_rmse(a, b) < 1e-3, name  # x's gradient passes the float16 l2norm output


def test_unsupported_argument_falls_through_to_fla_logged_once(monkeypatch, caplog):
    """A_log without use_gate_in_kernel (fla ignores it, ours refuses it) stays with fla's own
    chunk_gated_delta_rule; fla logs the reason once for two calls, stats() counts both."""
    entry = spy(monkeypatch, our_ops, "chunk_gated_delta_rule")
    fla_apply = mock.Mock(return_value=("fla's o", None))
    monkeypatch.setattr(fla_chunk.ChunkGatedDeltaRuleFunction, "apply", fla_apply)
    registry = fb._operation_registries["gated_delta_rule"]
    monkeypatch.setattr(registry, "_logged", set())  # fla logs once per process: start this test afresh
    q, k, v, g, beta, _ = _gdn_inputs(requires_grad=False)
    with ff.enable(devices="cpu"), caplog.at_level(logging.INFO, logger="fla.backends"):
        for _ in range(2):
            o, _ = fla_gdr.chunk_gated_delta_rule(q, k, v, g, beta, A_log=torch.zeros(4))
            assert o == "fla's o"
    assert fla_apply.call_count == 2 and entry.call_count == 0
    logged = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(logged) == 1 and "fla_ascend rejected: A_log / dt_bias without use_gate_in_kernel" in logged[0]
    assert ff.stats()["chunk_gated_delta_rule"] == {next(iter(ff.stats()["chunk_gated_delta_rule"])): 2}


def test_device_not_enabled_falls_through(monkeypatch):
    """The default devices (npu, cuda) leave CPU tensors to fla's own l2norm code."""
    fake = FakeKernel()
    monkeypatch.setattr(fla_l2, "l2norm_fwd_kernel", fake)
    ours = spy(monkeypatch, our_l2, "l2norm_fwd")
    with ff.enable("l2norm"):
        fla_l2.l2norm_fwd(torch.randn(4, 32))
    assert fake.calls == 1 and ours.call_count == 0
    (reason,) = ff.stats()["l2norm_fwd"]
    assert reason.startswith("cpu tensors: fla-ascend is enabled for ['cuda', 'npu']")


def _active(registry) -> list[str]:
    return [b.backend_type for b in registry._get_sorted_backends() if b.is_available() and b.is_enabled()]


def test_disable_restores_the_previous_dispatch(monkeypatch):
    """While enabled our backend comes first in fla's registries; after the block (and after
    disable()) the registries pick what they picked before, and fla's own code runs again."""
    ff.enable("l2norm", devices="cpu").__exit__(None, None, None)  # our backends are now registered
    op_registry = fb._operation_registries["gated_delta_rule"]
    fn_registry = fb._function_registries[inspect.unwrap(fla_l2.l2norm_fwd)]
    before = (_active(op_registry), _active(fn_registry))
    assert ff.BACKEND_TYPE not in before[0] + before[1]
    with ff.enable(devices="cpu"):
        assert _active(op_registry)[0] == _active(fn_registry)[0] == ff.BACKEND_TYPE
        assert ff.enabled() == {op: ("cpu",) for op in ff.OPS}
    assert (_active(op_registry), _active(fn_registry)) == before and ff.enabled() == {}
    h = ff.enable(devices="cpu")
    ff.disable()
    assert (_active(op_registry), _active(fn_registry)) == before
    h.__exit__(None, None, None)  # closed by disable(): no effect
    fake = FakeKernel()
    monkeypatch.setattr(fla_l2, "l2norm_fwd_kernel", fake)
    fla_l2.l2norm_fwd(torch.randn(4, 32))
    assert fake.calls == 1 and ff.stats() == {}


def test_enable_nests_and_counts(monkeypatch):
    """Handles count per op and device: an op stays routed until the last handle routing it closes;
    the devices of nested handles add up."""
    fake = FakeKernel()
    monkeypatch.setattr(fla_l2, "l2norm_fwd_kernel", fake)
    outer = ff.enable("l2norm", devices="cpu")
    with ff.enable(devices=["cpu"]):
        with ff.enable("l2norm", devices=("cuda", "cpu")):
            assert ff.enabled()["l2norm"] == ("cpu", "cuda")
        assert ff.enabled() == {op: ("cpu",) for op in ff.OPS}
    assert ff.enabled() == {"l2norm": ("cpu",)}
    fla_l2.l2norm_fwd(torch.randn(4, 32))
    assert fake.calls == 0 and ff.stats()["l2norm_fwd"] == {"fla_ascend": 1}
    with outer:
        pass
    assert ff.enabled() == {}
    outer.__exit__(None, None, None)  # a second exit changes nothing
    with ff.enable("l2norm", devices="cpu"):
        outer.__exit__(None, None, None)
        assert ff.enabled() == {"l2norm": ("cpu",)}
    fla_l2.l2norm_fwd(torch.randn(4, 32))
    assert fake.calls == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="does not dispatch fused_recurrent_gated_delta_rule"):
        ff.enable("fused_recurrent_gated_delta_rule")
    with pytest.raises(ValueError, match="does not dispatch fused_recurrent_kda"):
        ff.enable(["chunk_kda", "fused_recurrent_kda"])
    with pytest.raises(ValueError, match="unknown op 'gla'"):
        ff.enable(["l2norm", "gla"])
    with pytest.raises(ValueError, match="devices must be a non-empty subset"):
        ff.enable(devices=("xpu",))
    assert ff.enabled() == {}


def test_a_registry_other_than_0_6_0s_gives_a_clear_error(monkeypatch):
    """A release whose registry lacks 0.6.0's register, or whose routed stage takes other parameters,
    is refused naming both versions; a release that matches is used with a warning; no fla at all
    raises ImportError with the install command."""
    monkeypatch.setattr(fla, "__version__", "0.5.2")
    with monkeypatch.context() as m:
        m.delattr(fb, "register")
        with pytest.raises(RuntimeError, match=r"written for flash-linear-attention 0\.6\.0.*fla-core 0\.5\.2 "
                                               r"differs: fla\.backends lacks register"):
            ff.enable(devices="cpu")
    with monkeypatch.context() as m:
        m.setattr(fla_l2, "l2norm_fwd", lambda x, eps=1e-6: x)
        with pytest.raises(RuntimeError, match=r"fla-core 0\.5\.2 differs: fla\.modules\.norm\.l2norm\.l2norm_fwd "
                                               r"takes \['x', 'eps'\]"):
            ff.enable("l2norm", devices="cpu")
    with monkeypatch.context() as m:  # 0.5.x: a registry in fla.ops.backends, none in fla.backends
        find_spec = importlib.util.find_spec
        m.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fla.backends" else find_spec(name, *a))
        with pytest.raises(RuntimeError, match=r"fla-core 0\.5\.2 differs: it has no fla\.backends module"):
            ff.check_fla()
    with monkeypatch.context() as m:
        m.setattr(fb, "_DISPATCH_DISABLED", True)
        with pytest.raises(RuntimeError, match="FLA_DISABLE_BACKEND_DISPATCH=1"):
            ff.enable()
    monkeypatch.setattr(ff, "_warned_version", set())
    with pytest.warns(UserWarning, match=r"tested with flash-linear-attention 0\.6\.0; installed: fla-core 0\.5\.2"):
        ff.enable("l2norm", devices="cpu").__exit__(None, None, None)
    assert ff.enabled() == {}
    monkeypatch.setitem(sys.modules, "fla", None)
    with pytest.raises(ImportError, match=r"needs flash-linear-attention 0\.6\.0 .*pip install 'fla-core==0\.6\.0'"):
        ff.check_fla()


RUNNER = ROOT / "scripts" / "fla_tests_with_backend.py"
FAKE_GDN = '''
import pytest
import torch
from fla.modules.l2norm import l2norm
from fla.utils import device


def test_routed():
    x = torch.randn(4, 32, device=device)
    torch.testing.assert_close(l2norm(x), x / x.norm(dim=-1, keepdim=True))


def test_fails():
    assert 1 == 2, "planted failure"


def test_skipped():
    pytest.skip("planted skip")
'''


@pytest.mark.skipif(backend.triton_flavour() == "triton-ascend" and backend.device_type() == "cpu",
                    reason="flash-linear-attention 0.6.0 does not import under triton-ascend without an NPU")
def test_runner_script_summarises_a_run(tmp_path):
    """scripts/fla_tests_with_backend.py on two stand-in test files: the plugin enables the backend
    before collection (fla's l2norm reaches fla-ascend, on the CPU with --devices cpu) and the
    summary has the counts, the failure's first error line, the skip reason and the stats."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_gdn.py").write_text(FAKE_GDN)
    (tmp_path / "tests" / "test_conv.py").write_text("def test_ok():\n    pass\n")
    out = tmp_path / "out" / "summary.md"
    proc = subprocess.run([sys.executable, str(RUNNER), str(tmp_path), "--devices", "cpu", "--out", str(out),
                           "--", "-q"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["finished"] and data["exit_status"] == 1
    assert data["counts"] == {"passed": 2, "failed": 1, "error": 0, "skipped": 1, "xfailed": 0, "xpassed": 0}
    (failure,) = data["failures"]
    assert failure["test"] == "tests/test_gdn.py::test_fails" and "planted failure" in failure["first_line"]
    assert data["skips"] == [{"reason": "Skipped: planted skip", "count": 1}]
    assert data["stats"] == {"l2norm_fwd": {"fla_ascend": 1}}
    text = out.read_text()
    assert "passed 2, failed 1" in text and "| l2norm_fwd | 1 | - |" in text
