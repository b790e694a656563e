"""Every catalogued op at awkward sizes against its float32 reference: head and feature sizes that
are not powers of two (``K = V = 60`` and ``100``, and ``K = 60, V = 100``; ``D = 60, 100`` for the
conv) and ``T = 75``, a multiple of neither the chunk size 64 nor of 16 or 32, so every token tile
and every feature tile ends part-way.

Why: a non-power-of-two head size pads each tile (a 100-wide row sits in a 128-wide tile) and a
partial last chunk leaves rows past the sequence end inside the tile. Both must be masked on every
load and store. On Ascend a block-pointer load without ``boundary_check`` on such a tile reads the
next row's data instead of zeros (flash-linear-attention issue 1251); a missing mask on a pointer
load does the same on any backend. A full-tile test size (64, 128, T = 256) cannot see either.

The cases come from the catalogue (:func:`fla_ascend.ops.catalog.specs`), so an op added with a spec
is covered here without an edit:

- dense: ``B = 2``, ``T = 75``, ``H = 2`` (``H = 1``, ``HV = 2`` for an op with value heads),
  inputs drawn by :func:`fla_ascend.ops.spec.build_inputs` (optional inputs included, e.g. the
  initial state), forward under ``no_grad`` and, for an op with a backward, forward + backward:
  the gradient of every input that requires grad against autograd through the reference;
- varlen, for an op whose entry takes ``cu_seqlens``: one packed batch of lengths 30, 0 and 45
  (an empty sequence in the middle) against the reference run on each sequence alone (inputs with
  a ``T`` dimension sliced, per-sequence inputs such as the initial state taken by row): outputs,
  final states and gradients.

Limits are the spec's ``tolerance`` (relative RMSE, ``fwd`` for outputs, ``fwdbwd`` for
gradients); every ``torch.empty`` of the ops' packages is NaN-filled (``nan_empty``, extended to
each spec's own package), so a tile that leaves part of an output unwritten fails. Float32 only:
the interpreter's bf16 ``tl.dot`` is wrong.

What the specs do not say, given here per op (:data:`KNOBS`): ``causal_conv1d``'s reference in its
spec (the benchmark's gate) takes no states and no ``cu_seqlens`` and fails on an empty sequence,
and the spec has no initial-state input; ``causal_conv1d_update``'s outputs leave out the cache it
updates in place; ``rms_norm`` has no reference. :data:`NOT_COMPARED` lists the ops that cannot be
compared at all, with the reason.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys

import pytest
import torch

from fla_ascend.ops import catalog
from fla_ascend.ops.norm.reference import rms_norm_gated_ref
from fla_ascend.ops.spec import Input, OpSpec, build_inputs, outputs_of, resolve, shape_key

import helpers
from helpers import assert_close, nan_empty  # noqa: F401  (nan_empty is a fixture)

SIZES = ((60, 60), (100, 100), (60, 100))
"""Head sizes ``(K, V)``, not powers of two (tiles of 64 and 128); the conv's channel count ``D`` is
``K``. A pair that gives an op the same shape as an earlier one (``l2norm`` has no ``V``) is run once."""
T = 75
"""Tokens: not a multiple of 16, 32 or the chunk size 64."""
LENGTHS = (30, 0, 45)
"""Varlen sequence lengths (sum ``T``), an empty one among them."""
CONV_WIDTH = 4
DTYPE = torch.float32


def _rms_norm_ref(x, weight, bias=None, residual=None, eps=1e-5, prenorm=False, residual_in_fp32=False):
    """``rms_norm`` without residual: :func:`rms_norm_gated_ref` with no gate."""
    assert residual is None and not prenorm
    return rms_norm_gated_ref(x, None, weight, bias, eps)


KNOBS = {
    # The spec's reference (conv_gate_ref, the benchmark's gate) takes neither states nor cu_seqlens and
    # F.conv1d refuses an empty sequence; the op's own reference takes both. The spec has no
    # initial-state input and does not ask for the final state.
    "causal_conv1d": dict(reference="fla_ascend.ops.causal_conv1d.reference:causal_conv1d_ref",
                          inputs=(Input("initial_state", "B D W"),), call_kwargs={"output_final_state": True}),
    # the op returns the cache it updates in place (the reference: the new cache); the spec names y alone
    "causal_conv1d_update": dict(outputs=("y", "cache")),
    # rms_norm's spec has no reference
    "rms_norm": dict(reference=_rms_norm_ref),
}
"""What the specs cannot express, per op: another ``reference`` or ``outputs``, extra ``inputs`` or
``call_kwargs``."""

NOT_COMPARED = {
    "cp": "an internal primitive: its spec has neither inputs as data nor a reference",
}
"""Catalogued ops this module cannot run, and why."""

XFAIL: dict[str, str] = {}
"""Case id -> the measured failure (a kernel bug at that shape, left for the kernel's owner)."""


def _effective(spec: OpSpec) -> OpSpec:
    knob = KNOBS.get(spec.name, {})
    return dataclasses.replace(
        spec, reference=knob.get("reference", spec.reference), outputs=knob.get("outputs", spec.outputs),
        inputs=spec.inputs + tuple(knob.get("inputs", ())),
        call_kwargs={**spec.call_kwargs, **knob.get("call_kwargs", {})})


def _reference(spec: OpSpec):
    ref = spec.reference
    assert ref is not None, f"{spec.name} has no reference: add one to its spec (or a knob here)"
    return resolve(ref) if isinstance(ref, str) else ref


def _takes_cu_seqlens(spec: OpSpec) -> bool:
    return "cu_seqlens" in inspect.signature(resolve(spec.entry)).parameters


def _kind(inp: Input) -> str:
    """``token`` (has a ``T`` dimension), ``sequence`` (leading ``B``, no ``T``: one row per
    sequence, the initial state) or ``shared`` (weights)."""
    dims = inp.shape.split()
    return "token" if "T" in dims else "sequence" if dims[:1] == ["B"] else "shared"


def _shape(spec: OpSpec, size: tuple[int, int], varlen: bool) -> dict:
    K, V = size
    s = dict(B=1 if varlen else 2, T=T, H=2, K=K, V=V, D=K, W=CONV_WIDTH)
    if "HV" in spec.dims:
        s.update(H=1, HV=2)
    shape = spec.complete_shape(s)
    assert not isinstance(shape, str), shape
    return shape


def _cases():
    out = []
    for name, raw in catalog.specs().items():
        if name in NOT_COMPARED:
            continue
        spec = _effective(raw)
        layouts = ["dense"] + (["varlen"] if "T" in spec.dims and _takes_cu_seqlens(spec) else [])
        for layout in layouts:
            seen = set()
            for size in SIZES:
                shape = _shape(spec, size, layout == "varlen")
                if shape_key(shape) in seen:
                    continue
                seen.add(shape_key(shape))
                for mode in spec.modes:
                    cid = f"{name}-{layout}-{mode}-{shape_key(shape)}"
                    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[cid])] if cid in XFAIL else []
                    out.append(pytest.param(name, layout, mode, size, id=cid, marks=marks))
    return out


@pytest.fixture(autouse=True)
def _nan_fill_every_op_package(monkeypatch):
    """``nan_empty`` fills the packages of helpers.NAN_FILLED_PACKAGES; add each spec's own package
    (the conv's is not in that list), so every catalogued op's outputs start as NaN."""
    packages = {s.entry.split(":")[0].rsplit(".", 1)[0] for s in catalog.specs().values()}
    monkeypatch.setattr(helpers, "NAN_FILLED_PACKAGES",
                        tuple(dict.fromkeys(helpers.NAN_FILLED_PACKAGES + tuple(sorted(packages)))))


def _inputs(spec: OpSpec, shape: dict, device, grad: bool, n_seq: int | None) -> dict:
    """The spec's inputs (optional ones included); with ``n_seq`` the per-sequence inputs get
    ``n_seq`` rows (the packed batch has ``B = 1``)."""
    optional = tuple(i.name for i in spec.inputs if i.optional)
    x = build_inputs(spec, shape, DTYPE, device, seed=0, optional=optional, grad=grad)
    if n_seq is not None:
        rows = build_inputs(spec, {**shape, "B": n_seq}, DTYPE, device, seed=1, optional=optional, grad=grad)
        x.update({i.name: rows[i.name] for i in spec.inputs if i.name in rows and _kind(i) == "sequence"})
    return x


def _float_copy(x: dict) -> dict:
    """Float32 leaves of the tensors (gradients where the op's input has one), other values as given."""
    return {k: (v.detach().float().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v)
            for k, v in x.items()}


def _ref_per_sequence(spec: OpSpec, ref, x: dict, bounds: list[int], packed: dict) -> dict:
    """The reference on each sequence alone, outputs joined like the packed op's: along ``T`` for
    per-token outputs (``[1, T, ...]``), along the sequence axis for per-sequence ones (``[N, ...]``)."""
    kinds = {i.name: _kind(i) for i in spec.inputs}
    n_seq = len(bounds) - 1
    parts = []
    for n in range(n_seq):
        bos, eos = bounds[n], bounds[n + 1]
        xn = {}
        for k, v in x.items():
            if k == "cu_seqlens":
                continue
            kind = kinds.get(k, "shared")
            xn[k] = v[:, bos:eos] if kind == "token" else v[n:n + 1] if kind == "sequence" else v
        parts.append(outputs_of(spec, ref(**xn)))
    joined = {}
    for name in parts[0]:
        dim = 0 if packed[name].shape[0] == n_seq else 1
        joined[name] = torch.cat([p[name] for p in parts], dim)
    return joined


def _check(want: dict, got: dict, limit: float, failures: list):
    """Every output (or gradient) within ``limit``; failures are collected, so one run names them all."""
    assert want.keys() == got.keys(), f"{sorted(got)} != reference {sorted(want)}"
    for name in want:
        try:
            assert_close(name, want[name].float(), got[name].float(), limit)
        except AssertionError as e:
            failures.append(str(e))


@pytest.mark.parametrize("op, layout, mode, size", _cases())
def test_edge_shape(op, layout, mode, size, device, nan_empty):
    spec = _effective(catalog.get(op))
    ref = _reference(spec)
    varlen = layout == "varlen"
    shape = _shape(spec, size, varlen)
    bounds = [0, *torch.tensor(LENGTHS).cumsum(0).tolist()] if varlen else None
    grad = mode == "fwdbwd"
    x = _inputs(spec, shape, device, grad, len(LENGTHS) if varlen else None)
    if varlen:
        x["cu_seqlens"] = torch.tensor(bounds, dtype=torch.int32, device=device)
    xr = _float_copy(x)  # before the call: an op may update an input in place (a decode cache)

    entry = resolve(spec.entry)
    if grad:
        out = outputs_of(spec, entry(**x))
    else:
        with torch.no_grad():
            out = outputs_of(spec, entry(**x))
    if varlen:
        want = _ref_per_sequence(spec, ref, xr, bounds, out)
    else:
        want = outputs_of(spec, ref(**xr))

    failures = []
    _check(want, out, spec.tolerance["fwd"], failures)
    if grad:
        gen = torch.Generator().manual_seed(2)
        cot = {n: torch.randn(o.shape, generator=gen).to(o.device) for n, o in out.items()}
        leaves = [k for k, v in x.items() if isinstance(v, torch.Tensor) and v.requires_grad]
        assert leaves, f"{op}: fwdbwd without an input that requires grad"

        def loss(o):
            return sum((o[n].float() * cot[n]).sum() for n in o)

        got = torch.autograd.grad(loss(out), [x[k] for k in leaves])
        exp = torch.autograd.grad(loss(want), [xr[k] for k in leaves], allow_unused=True)
        exp = [torch.zeros_like(xr[k]) if e is None else e for k, e in zip(leaves, exp)]
        _check({f"d{k}": e for k, e in zip(leaves, exp)}, {f"d{k}": g for k, g in zip(leaves, got)},
               spec.tolerance["fwdbwd"], failures)
    if failures:
        pytest.fail(f"{op} {layout} {mode} {shape_key(shape)}: " + "; ".join(failures))


def test_nan_fill_reaches_every_entry_module(nan_empty):
    """The NaN fill is not vacuous for any compared op: its entry module's ``torch.empty`` fills."""
    for name, spec in catalog.specs().items():
        if name in NOT_COMPARED:
            continue
        module = spec.entry.split(":")[0]
        assert module in nan_empty, f"{name}: {module} is not NaN-filled ({nan_empty})"
        assert sys.modules[module].torch.empty(2).isnan().all()


def test_not_compared_ops_are_catalogued_and_lack_what_is_needed():
    """:data:`NOT_COMPARED` names only catalogued ops that really lack a reference or inputs (once one
    gains both, it belongs in the cases above); :data:`KNOBS` and :data:`XFAIL` name catalogued ops."""
    ops = catalog.specs()
    for name in NOT_COMPARED:
        assert name in ops, f"{name} is not catalogued"
        assert ops[name].reference is None or not ops[name].inputs, f"{name} has a reference and inputs now"
    assert set(KNOBS) <= set(ops), set(KNOBS) - set(ops)
    ids = {p.id for p in _cases()}
    assert set(XFAIL) <= ids, set(XFAIL) - ids


def test_per_token_inputs_lead_with_batch_and_time():
    """The varlen split slices per-token inputs along their second axis: each input with a ``T``
    dimension must be ``B T ...``."""
    for name, spec in catalog.specs().items():
        if name in NOT_COMPARED:
            continue
        for inp in _effective(spec).inputs:
            dims = inp.shape.split()
            assert _kind(inp) != "token" or dims[:2] == ["B", "T"], (name, inp.name, inp.shape)

