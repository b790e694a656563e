"""A NaN or inf in an input propagates per position like the float32/float64 reference: it poisons
its own row (norms), the outputs that read it (conv: the next ``W - 1`` positions of that channel in
that sequence) or, for the chunked gated delta rule, its chunk and the rest of its sequence; it
never spreads into another row, channel, batch element or another sequence of a varlen
(``cu_seqlens``) batch.

Every case puts one bad value into otherwise clean inputs and states exactly which entries of each
output (and gradient) are non-finite, with ``torch.isfinite`` masks; every other entry must equal
the run on the clean inputs bit for bit (the entries of a poisoned norm row that stay finite, such
as ``x / inf = 0``, are checked against the reference's mask instead). Where the reference is
elementwise (norms, conv, the fused recurrent op), the op's mask must also equal the float64
reference's. The chunk op is coarser than the token-by-token reference by design: a bad token
poisons its whole chunk, including the tokens of that chunk before it, and nothing before the chunk.
"""
from __future__ import annotations

import functools
import math

import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops import (
    causal_conv1d,
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    l2norm,
    rms_norm_gated,
)
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule
from fla_ascend.ops.norm.reference import l2norm_ref, rms_norm_gated_ref

from helpers import make_inputs, nan_empty  # noqa: F401  (nan_empty is a fixture)

if not backend.is_interpreter():
    pytest.skip("CPU tier (float32 inputs, exact masks; the GPU tier runs bf16)", allow_module_level=True)

# The interpreter runs the kernels in numpy, which warns on every NaN/inf it computes with.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NAN, INF = math.nan, math.inf


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    return ~torch.isfinite(t.detach())


def _where(mask: torch.Tensor, limit: int = 12) -> str:
    idx = mask.nonzero().tolist()
    return f"{len(idx)} at {idx[:limit]}{' ...' if len(idx) > limit else ''}"


def check_confined(name: str, got: torch.Tensor, clean: torch.Tensor, expected_bad: torch.Tensor,
                   region: torch.Tensor | None = None) -> None:
    """Assert the non-finite entries of ``got`` are exactly ``expected_bad`` and every entry outside
    ``region`` (default: ``expected_bad``) equals ``clean`` exactly.

    ``region`` is the set of entries the bad value may change at all (a norm's row); entries inside
    it but outside ``expected_bad`` must be finite, and are otherwise free."""
    assert got.shape == clean.shape == expected_bad.shape, name
    region = expected_bad if region is None else region
    assert not (expected_bad & ~region).any(), f"{name}: bad test, expected_bad outside region"
    bad = _nonfinite(got)
    spread = bad & ~region
    assert not spread.any(), f"{name}: non-finite values spread outside their region: {_where(spread)}"
    missing = expected_bad & ~bad
    assert not missing.any(), f"{name}: entries expected non-finite are finite: {_where(missing)}"
    extra = bad & ~expected_bad
    assert not extra.any(), f"{name}: unexpected non-finite entries inside the region: {_where(extra)}"
    keep = ~region
    changed = keep & (got.detach() != clean.detach())
    assert not changed.any(), f"{name}: entries outside the region differ from the clean run: {_where(changed)}"


def check_like_reference(name: str, got: torch.Tensor, ref: torch.Tensor) -> None:
    """The op's non-finite mask equals the float64 reference's on the same inputs."""
    diff = _nonfinite(got) != _nonfinite(ref)
    assert not diff.any(), f"{name}: non-finite mask differs from the float64 reference: {_where(diff)}"


def _grads(fn, inputs: list, dy: torch.Tensor):
    """``fn(*leaves)`` -> ``(y, grads of (y * dy).sum() w.r.t. every input)``; inputs of ``None`` stay ``None``."""
    leaves = [t.detach().clone().requires_grad_() if t is not None else None for t in inputs]
    y = fn(*leaves)
    used = [t for t in leaves if t is not None]
    got = iter(torch.autograd.grad(y, used, dy))
    return y.detach(), [next(got) if t is not None else None for t in leaves]


# --- norms --------------------------------------------------------------------------------------

NORM_SHAPE = (3, 5, 32)  # 15 rows of D = 32
BAD_ROW, BAD_COL = (1, 2), 4


def _row_mask(shape=NORM_SHAPE):
    m = torch.zeros(shape, dtype=torch.bool)
    m[BAD_ROW] = True
    return m


def _elem_mask(shape=NORM_SHAPE):
    m = torch.zeros(shape, dtype=torch.bool)
    m[BAD_ROW + (BAD_COL,)] = True
    return m


@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_l2norm_bad_value_stays_in_its_row(value, nan_empty):
    """``y`` and ``dx`` non-finite only in the bad row: ``y`` the whole row for NaN (the norm is
    NaN), only the bad entry for +-inf (``inf / inf``; the rest of the row is ``x / inf = 0``);
    ``dx`` the whole row in both cases."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(NORM_SHAPE, generator=gen)
    dy = torch.randn(NORM_SHAPE, generator=gen)
    y0, (dx0,) = _grads(l2norm, [x], dy)
    xb = x.clone()
    xb[BAD_ROW + (BAD_COL,)] = value
    y, (dx,) = _grads(l2norm, [xb], dy)
    yr, (dxr,) = _grads(l2norm_ref, [xb.double()], dy.double())
    row = _row_mask()
    check_confined("y", y, y0, row if math.isnan(value) else _elem_mask(), region=row)
    check_confined("dx", dx, dx0, row)
    check_like_reference("y", y, yr)
    check_like_reference("dx", dx, dxr)


@pytest.mark.parametrize("value", [NAN, INF], ids=["nan", "inf"])
@pytest.mark.parametrize("where", ["x", "g"])
def test_rms_norm_gated_bad_value_stays_in_its_row(where, value, nan_empty):
    """Gated RMSNorm (swish gate, weight and bias), forward and backward, a bad value in one row of
    ``x`` or of the gate ``g``:

    * ``y``: the whole row for NaN in ``x``; only the bad entry for inf in ``x`` (the rest of the
      row is ``0 * weight + bias``) and for a bad gate (the gate is elementwise);
    * ``dx``: the whole row (every entry of the row reads the row's norm);
    * ``dg``: the whole row for NaN in ``x``, else only the bad entry;
    * ``dweight`` / ``dbias`` (sums over all rows): the columns the bad row makes non-finite, no
      more: every column for NaN in ``x`` (``dbias`` none), the bad column otherwise (``dbias``
      only for a bad gate).
    """
    gen = torch.Generator().manual_seed(1)
    D = NORM_SHAPE[-1]
    x = torch.randn(NORM_SHAPE, generator=gen)
    g = torch.randn(NORM_SHAPE, generator=gen)
    w = 1 + 0.1 * torch.randn(D, generator=gen)
    b = 0.1 * torch.randn(D, generator=gen)
    dy = torch.randn(NORM_SHAPE, generator=gen)

    def op(*a):
        return rms_norm_gated(*a, activation="swish", eps=1e-5)

    def ref(*a):
        return rms_norm_gated_ref(*a, eps=1e-5, activation="swish")

    y0, clean = _grads(op, [x, g, w, b], dy)
    bad_in = [x.clone(), g.clone(), w, b]
    bad_in[0 if where == "x" else 1][BAD_ROW + (BAD_COL,)] = value
    y, got = _grads(op, bad_in, dy)
    yr, want = _grads(ref, [t.double() for t in bad_in], dy.double())

    row, elem = _row_mask(), _elem_mask()
    whole_row = where == "x" and math.isnan(value)
    col = torch.zeros(D, dtype=torch.bool)
    col[BAD_COL] = True
    everything = torch.ones(D, dtype=torch.bool)
    check_confined("y", y, y0, row if whole_row else elem, region=row)
    check_confined("dx", got[0], clean[0], row)
    check_confined("dg", got[1], clean[1], row if whole_row else elem, region=row)
    # dweight / dbias sum over every row: their finite entries change with the bad row, so only
    # the mask is pinned.
    assert torch.equal(_nonfinite(got[2]), everything if whole_row else col), _where(_nonfinite(got[2]))
    assert torch.equal(_nonfinite(got[3]), col if where == "g" else ~everything), _where(_nonfinite(got[3]))
    check_like_reference("y", y, yr)
    for n, a, r in zip(("dx", "dg", "dweight", "dbias"), got, want):
        check_like_reference(n, a, r)


# --- causal conv1d ------------------------------------------------------------------------------

CONV_W, CONV_D, BAD_D = 4, 8, 3
CONV_CU = [0, 7, 30, 40]


def _conv_case(varlen: bool, seed: int = 2):
    gen = torch.Generator().manual_seed(seed)
    B, T = (1, CONV_CU[-1]) if varlen else (2, 20)
    x = torch.randn(B, T, CONV_D, generator=gen)
    w = torch.randn(CONV_D, CONV_W, generator=gen) / CONV_W**0.5
    b = torch.randn(CONV_D, generator=gen)
    dy = torch.randn(B, T, CONV_D, generator=gen)
    cu = torch.tensor(CONV_CU, dtype=torch.int32) if varlen else None
    segs = ([(0, CONV_CU[i], CONV_CU[i + 1]) for i in range(len(CONV_CU) - 1)] if varlen
            else [(i, 0, T) for i in range(B)])
    return x, w, b, dy, cu, segs


@pytest.mark.parametrize("activation", ["silu", None], ids=["silu", "identity"])
@pytest.mark.parametrize("value", [NAN, INF], ids=["nan", "inf"])
@pytest.mark.parametrize("varlen,t0", [(False, 5), (True, 5), (True, 28)],
                         ids=["batch-t5", "varlen-seq0-t5", "varlen-seq1-t28"])
def test_causal_conv1d_bad_token_reaches_only_its_window(varlen, t0, value, activation):
    """``x[b=0, t0, d=3]`` bad (``W = 4``): ``y`` non-finite exactly at ``b = 0, d = 3``,
    ``t0 .. t0 + W - 1`` cut at the end of ``t0``'s sequence (varlen: ``t0 = 5`` is in ``[0, 7)``,
    so 7 and 8 of the next sequence stay clean; ``t0 = 28`` is in ``[7, 30)``); the final state of
    that sequence only at ``d = 3`` and the column holding ``t0`` (when ``t0`` is among its last ``W``
    tokens). Backward: with silu, ``dx`` at ``d = 3``, ``t0 - W + 1 .. t0 + W - 1`` cut at the
    sequence bounds (``dy`` through ``silu'`` of the poisoned pre-activations); with no activation
    ``dx`` is all finite (it reads only ``dy`` and the weight); ``dweight`` row 3 (every tap with
    silu, the taps that read ``t0`` without) and ``dbias[3]`` with silu only."""
    x, w, b, dy, cu, segs = _conv_case(varlen)
    B, T, D = x.shape
    W = CONV_W
    N = len(segs)
    gen = torch.Generator().manual_seed(9)
    dht = torch.randn(N, D, W, generator=gen)

    def run(conv, xi, wi, bi):
        leaves = [t.detach().clone().requires_grad_() for t in (xi, wi, bi)]
        y, ht = conv(*leaves, None, None, True, activation, cu_seqlens=cu)
        grads = torch.autograd.grad([y, ht], leaves, [dy.to(y.dtype), dht.to(ht.dtype)])
        return [y.detach(), ht.detach(), *grads]

    clean = run(causal_conv1d, x, w, b)
    xb = x.clone()
    xb[0, t0, BAD_D] = value
    got = run(causal_conv1d, xb, w, b)
    want = run(causal_conv1d_ref, xb.double(), w.double(), b.double())

    n, (_, bos, eos) = next((i, s) for i, s in enumerate(segs) if s[0] == 0 and s[1] <= t0 < s[2])
    y_bad = torch.zeros(B, T, D, dtype=torch.bool)
    y_bad[0, t0:min(t0 + W, eos), BAD_D] = True
    ht_bad = torch.zeros(N, D, W, dtype=torch.bool)
    if t0 >= eos - W:
        ht_bad[n, BAD_D, W - 1 - (eos - 1 - t0)] = True
    dx_bad = torch.zeros(B, T, D, dtype=torch.bool)
    dw_bad = torch.zeros(D, W, dtype=torch.bool)
    db_bad = torch.zeros(D, dtype=torch.bool)
    if activation == "silu":
        dx_bad[0, max(bos, t0 - W + 1):min(eos, t0 + W), BAD_D] = True
        dw_bad[BAD_D] = True
        db_bad[BAD_D] = True
    else:  # dweight[d, w] reads x[s - W + 1 + w] for outputs s of the sequence: x[t0] for s = t0 + W - 1 - w < eos
        for tap in range(W):
            if t0 + W - 1 - tap < eos:
                dw_bad[BAD_D, tap] = True
    # the gradients of weight and bias are sums over every token: only their masks are pinned
    check_confined("y", got[0], clean[0], y_bad)
    check_confined("final_state", got[1], clean[1], ht_bad)
    check_confined("dx", got[2], clean[2], dx_bad)
    assert torch.equal(_nonfinite(got[3]), dw_bad), f"dweight non-finite {_where(_nonfinite(got[3]))}"
    assert torch.equal(_nonfinite(got[4]), db_bad), f"dbias non-finite {_where(_nonfinite(got[4]))}"
    for name, a, r in zip(("y", "final_state", "dx", "dweight", "dbias"), got, want):
        check_like_reference(name, a, r)


# --- gated delta rule ---------------------------------------------------------------------------

H, HV, K, V = 1, 2, 16, 16
CHUNK = 16
GDR_CU = [0, 7, 50, 64]
"""Sequence 1 is ``[7, 50)``: chunks ``[7, 23)``, ``[23, 39)``, ``[39, 50)``."""
BAD_HEAD, BAD_COLUMN, BAD_KEY = 0, 3, 5

GDR_CASES = [
    pytest.param("v", NAN, id="v-nan"), pytest.param("v", INF, id="v-inf"),
    pytest.param("k", NAN, id="k-nan"), pytest.param("k", INF, id="k-inf"),
    pytest.param("g", NAN, id="g-nan"), pytest.param("g", INF, id="g-inf"),
    pytest.param("beta", NAN, id="beta-nan"), pytest.param("q", NAN, id="q-nan"),
    pytest.param("initial_state", NAN, id="h0-nan"),
]


def _gdr_inputs(B=1, T=GDR_CU[-1], varlen=GDR_CU):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, "cpu", varlen=varlen, seed=1)
    x.pop("use_gate_in_kernel")
    return x


def _poison_gdr(x: dict, name: str, value: float, b: int, t0: int, n: int):
    """Put ``value`` into input ``name`` at batch ``b`` / token ``t0`` (``initial_state``: sequence
    ``n``). Returns the ``[HV, V]`` lanes of the output and of the final state it reaches: ``v``:
    its head and column (the delta rule is separable in the value columns); ``g`` / ``beta``: every
    column of its head; ``k``, ``q``: every head sharing the key head (here all), ``q`` not the state;
    ``initial_state``: the column of its head."""
    lanes = torch.zeros(HV, V, dtype=torch.bool)
    if name == "v":
        x["v"][b, t0, BAD_HEAD, BAD_COLUMN] = value
        lanes[BAD_HEAD, BAD_COLUMN] = True
    elif name in ("g", "beta"):
        x[name][b, t0, BAD_HEAD] = value
        lanes[BAD_HEAD] = True
    elif name in ("k", "q"):
        x[name][b, t0, 0, BAD_KEY] = value
        lanes[:] = True
    else:
        x["initial_state"][n, BAD_HEAD, BAD_KEY, BAD_COLUMN] = value
        lanes[BAD_HEAD, BAD_COLUMN] = True
    state_lanes = torch.zeros_like(lanes) if name == "q" else lanes
    return lanes, state_lanes


def _expected(shape_o, N, name, b, t0, n, bos, eos, first, lanes, state_lanes):
    """Masks of ``o`` ``[B, T, HV, V]`` and ``final_state`` ``[N, HV, K, V]``: tokens ``first ..
    eos - 1`` of batch ``b`` (only ``t0`` for ``q``, the whole sequence for ``initial_state``)."""
    o_bad = torch.zeros(shape_o, dtype=torch.bool)
    if name == "q":
        o_bad[b, t0] = lanes
    else:
        o_bad[b, (bos if name == "initial_state" else first):eos] = lanes
    h_bad = torch.zeros(N, HV, K, V, dtype=torch.bool)
    h_bad[n] = state_lanes[:, None, :]
    return o_bad, h_bad


@functools.cache
def _clean(op_name: str, B: int):
    x = _gdr_inputs() if B == 1 else _gdr_inputs(B=B, T=40, varlen=None)
    op, kw = _OPS[op_name]
    return op(**x, output_final_state=True, **kw)


_OPS = {"chunk": (chunk_gated_delta_rule, dict(chunk_size=CHUNK)), "fused": (fused_recurrent_gated_delta_rule, {})}


def _ref(x):
    x64 = {n: (t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t) for n, t in x.items()}
    return naive_recurrent_gated_delta_rule(**x64, output_final_state=True)


@pytest.mark.parametrize("t0", [30, 49], ids=["t30-chunk23", "t49-last-token"])
@pytest.mark.parametrize("name,value", GDR_CASES)
def test_chunk_varlen_bad_token_poisons_its_chunk_and_the_rest_of_its_sequence(name, value, t0, nan_empty):
    """``cu_seqlens = [0, 7, 50, 64]``, chunk 16, a bad value at token ``t0`` of sequence 1: the
    output is non-finite exactly from the start of ``t0``'s chunk (23 for ``t0 = 30``, 39 for
    ``t0 = 49``) to the end of sequence 1, in the lanes the input reaches; a bad ``q`` only its own
    token; a bad initial state the whole sequence. Sequences 0 and 2 (outputs and final states),
    the tokens of sequence 1 before the chunk and every other lane equal the clean run exactly."""
    x = _gdr_inputs()
    n, bos, eos = 1, GDR_CU[1], GDR_CU[2]
    lanes, state_lanes = _poison_gdr(x, name, value, 0, t0, n)
    first = bos + (t0 - bos) // CHUNK * CHUNK
    o, ht = chunk_gated_delta_rule(**x, output_final_state=True, chunk_size=CHUNK)
    o0, ht0 = _clean("chunk", 1)
    o_bad, h_bad = _expected(o.shape, len(GDR_CU) - 1, name, 0, t0, n, bos, eos, first, lanes, state_lanes)
    check_confined("o", o, o0, o_bad)
    check_confined("final_state", ht, ht0, h_bad)


@pytest.mark.parametrize("t0", [30, 49], ids=["t30", "t49-last-token"])
@pytest.mark.parametrize("name,value", GDR_CASES)
def test_fused_recurrent_varlen_bad_token_poisons_the_rest_of_its_sequence(name, value, t0, nan_empty):
    """The same inputs through ``fused_recurrent_gated_delta_rule`` (keyword arguments): non-finite
    exactly from ``t0`` itself to the end of sequence 1 (as the float64 token-by-token reference),
    everything else equal to the clean run."""
    x = _gdr_inputs()
    n, bos, eos = 1, GDR_CU[1], GDR_CU[2]
    lanes, state_lanes = _poison_gdr(x, name, value, 0, t0, n)
    o, ht = fused_recurrent_gated_delta_rule(
        q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], initial_state=x["initial_state"],
        output_final_state=True, cu_seqlens=x["cu_seqlens"])
    o0, ht0 = _clean("fused", 1)
    o_bad, h_bad = _expected(o.shape, len(GDR_CU) - 1, name, 0, t0, n, bos, eos, t0, lanes, state_lanes)
    check_confined("o", o, o0, o_bad)
    check_confined("final_state", ht, ht0, h_bad)
    ref_o, ref_h = _ref(x)
    check_like_reference("o", o, ref_o)
    check_like_reference("final_state", ht, ref_h)


@pytest.mark.parametrize("op_name", ["chunk", "fused"])
@pytest.mark.parametrize("name,value", [pytest.param("v", NAN, id="v-nan"), pytest.param("k", NAN, id="k-nan"),
                                        pytest.param("g", NAN, id="g-nan")])
def test_batch_bad_token_stays_in_its_batch_element(op_name, name, value, nan_empty):
    """``B = 2``, ``T = 40`` (no ``cu_seqlens``), a NaN at batch 0, token 20: batch 1's output and
    final state equal the clean run; batch 0 is non-finite exactly from token 16 (chunk op: the
    chunk start) or 20 (fused recurrent) to its end, in the lanes the input reaches."""
    B, T, t0 = 2, 40, 20
    x = _gdr_inputs(B=B, T=T, varlen=None)
    lanes, state_lanes = _poison_gdr(x, name, value, 0, t0, 0)
    op, kw = _OPS[op_name]
    o, ht = op(**x, output_final_state=True, **kw)
    o0, ht0 = _clean(op_name, B)
    first = t0 // CHUNK * CHUNK if op_name == "chunk" else t0
    o_bad, h_bad = _expected(o.shape, B, name, 0, t0, 0, 0, T, first, lanes, state_lanes)
    check_confined("o", o, o0, o_bad)
    check_confined("final_state", ht, ht0, h_bad)
    assert torch.equal(o[1], o0[1]) and torch.equal(ht[1], ht0[1])
