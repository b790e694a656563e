"""Context parallelism (``cp_context=``) on the CPU: ``torch.multiprocessing`` spawns 2 or 4 ranks on
the gloo backend under the Triton interpreter. Each rank runs its slice of a packed batch; the
parent reassembles ``o`` and every gradient and compares them with the single-process op on the
whole batch (relative RMSE, the op tests' limits). Each rank also runs its backward twice and
checks the two are bit-identical; the ranks' op modules allocate NaN-filled tensors (as under the
``nan_empty`` fixture), so a region left unwritten shows.

One spawn per test runs several cases (process start-up dominates at these sizes).
"""
from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fla_ascend.ops import causal_conv1d, chunk_gated_delta_rule
from fla_ascend.ops.cp import build_cp_context
from fla_ascend.ops.utils import rel_rmse

from helpers import make_inputs, poison_for_process

GDN_RATIO = {"o": 0.005, "q": 0.008, "k": 0.008, "v": 0.008, "g": 0.02, "beta": 0.02, "A_log": 0.02,
             "dt_bias": 0.02}
"""The op tests' limits (tests/ops/test_gated_delta_rule_bwd.py): 0.005 for o, 0.008 for dq/dk/dv,
0.02 for the gate gradients."""
CONV_RATIO = 0.005
PARAMS = ("A_log", "dt_bias", "weight", "bias")
"""Parameters: each rank's gradient is its share; the test sums them over ranks."""


def local_slice(x: torch.Tensor, rank: int, world: int, layout: str) -> torch.Tensor:
    """Rank ``rank``'s tokens of ``[1, T, ...]`` ``x``: part ``rank`` of ``world`` (contiguous) or parts
    ``rank`` and ``2 * world - 1 - rank`` of ``2 * world`` (zigzag)."""
    if layout == "contiguous":
        return x.chunk(world, dim=1)[rank]
    parts = x.chunk(2 * world, dim=1)
    return torch.cat([parts[rank], parts[2 * world - 1 - rank]], dim=1)


def assemble(pieces: list[torch.Tensor], world: int, layout: str) -> torch.Tensor:
    """Inverse of :func:`local_slice` over all ranks."""
    if layout == "contiguous":
        return torch.cat(pieces, dim=1)
    halves = [p.chunk(2, dim=1) for p in pieces]
    return torch.cat([h[0] for h in halves] + [h[1] for h in reversed(halves)], dim=1)


def _run(case: dict, inputs: dict, cp):
    """Forward and backward of one case on this process's tensors; returns ``(out, grads)``."""
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in inputs.items() if n in case["grads"]}
    args = {**inputs, **leaves}
    if case["op"] == "gdn":
        o, _ = chunk_gated_delta_rule(
            args["q"], args["k"], args["v"], args["g"], args["beta"], cu_seqlens=args.get("cu_seqlens"),
            use_qk_l2norm_in_kernel=case.get("l2norm", False), use_gate_in_kernel=case.get("gate", False),
            A_log=args.get("A_log"), dt_bias=args.get("dt_bias"), chunk_size=case["chunk_size"], cp_context=cp,
        )
    else:
        o, _ = causal_conv1d(args["x"], args["weight"], args.get("bias"), args.get("residual"),
                             activation=case.get("activation"), cu_seqlens=args.get("cu_seqlens"), cp_context=cp)
    o.backward(args["dout"])
    return o.detach(), {n: t.grad for n, t in leaves.items()}


def _worker(rank: int, world: int, store: str, cases: list[dict], results: str, misuse: bool) -> None:
    # a rank left alone in a collective fails the test in a minute instead of gloo's 30
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    poison_for_process()  # NaN-filled allocations in the op modules (the nan_empty fixture's)
    try:
        if misuse:
            torch.save(_misuse_errors(rank, world), f"{results}.errors.{rank}")
        out = []
        for case in cases:
            full = case["inputs"]
            cp = build_cp_context(full["cu_seqlens"], dist.group.WORLD, layout=case["layout"],
                                  conv1d_kernel_size=case.get("W"))
            local = {n: (t if n in PARAMS or n == "cu_seqlens" else local_slice(t, rank, world, case["layout"]))
                     for n, t in full.items()}
            local.pop("cu_seqlens")
            o, grads = _run(case, local, cp)
            again = _run(case, local, cp)[1] if case.get("rerun") else {}
            for n in again:
                if not torch.equal(grads[n], again[n]):
                    raise AssertionError(f"rank {rank}: d{n} differs between two identical backward runs")
            out.append((o, grads))
        torch.save(out, f"{results}.{rank}")
    finally:
        dist.destroy_process_group()


def run_cp(cases: list[dict], world: int, tmp_path, misuse: bool = False) -> list:
    """Spawn ``world`` gloo ranks over ``cases``; returns per case ``(o, grads)`` reassembled, parameter
    gradients summed over ranks. With ``misuse`` the ranks first run :func:`_misuse_errors`, whose
    per-rank lists of failures are then under ``tmp_path / "res.errors.<rank>"``."""
    results = str(tmp_path / "res")
    mp.spawn(_worker, args=(world, str(tmp_path / "store"), cases, results, misuse), nprocs=world, join=True)
    per_rank = [torch.load(f"{results}.{r}") for r in range(world)]
    out = []
    for i, case in enumerate(cases):
        o = assemble([per_rank[r][i][0] for r in range(world)], world, case["layout"])
        grads = {}
        for n in case["grads"]:
            pieces = [per_rank[r][i][1][n] for r in range(world)]
            grads[n] = torch.stack(pieces).sum(0) if n in PARAMS else assemble(pieces, world, case["layout"])
        out.append((o, grads))
    return out


def gdn_case(T, cu, layout, *, H=2, HV=2, K=16, V=16, gate=False, l2norm=False, dtype=torch.float32,
             chunk_size=16, seed=0, rerun=False) -> dict:
    x = make_inputs(1, T, H, HV, K, V, dtype, "cpu", varlen=cu, h0=False, gate_in_kernel=gate, seed=seed)
    inputs = {n: x[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias") if x.get(n) is not None}
    inputs["cu_seqlens"] = torch.tensor(cu, dtype=torch.int32)
    inputs["dout"] = torch.randn(1, T, HV, V, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
    grads = [n for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias") if n in inputs]
    return dict(op="gdn", layout=layout, inputs=inputs, grads=grads, gate=gate, l2norm=l2norm,
                chunk_size=chunk_size, rerun=rerun)


def conv_case(T, cu, layout, W, *, D=8, activation="silu", residual=True, dtype=torch.float32, seed=0,
              rerun=False) -> dict:
    gen = torch.Generator().manual_seed(seed)
    inputs = dict(x=torch.randn(1, T, D, generator=gen).to(dtype), weight=torch.randn(D, W, generator=gen).to(dtype),
                  bias=torch.randn(D, generator=gen).to(dtype), cu_seqlens=torch.tensor(cu, dtype=torch.int32),
                  dout=torch.randn(1, T, D, generator=gen).to(dtype))
    if residual:
        inputs["residual"] = torch.randn(1, T, D, generator=gen).to(dtype)
    grads = [n for n in ("x", "weight", "bias", "residual") if n in inputs]
    return dict(op="conv", layout=layout, inputs=inputs, grads=grads, W=W, activation=activation, rerun=rerun)


def check(cases: list[dict], results: list) -> None:
    for case, (o, grads) in zip(cases, results):
        ref_o, ref_grads = _run(case, case["inputs"], None)
        what = f"{case['op']} {case['layout']} cu={case['inputs']['cu_seqlens'].tolist()}"
        limits = GDN_RATIO if case["op"] == "gdn" else {n: CONV_RATIO for n in ("o", *case["grads"])}
        for name, ref, got in [("o", ref_o, o)] + [(n, ref_grads[n], grads[n]) for n in case["grads"]]:
            assert not torch.isnan(got).any(), f"{what}: {name} has NaN"
            err = rel_rmse(ref.float(), got.float())
            assert err <= limits[name], f"{what}: {name} rel-RMSE {err:.2e} > {limits[name]}"


TWO_RANK_CASES = [
    gdn_case(64, [0, 5, 47, 64], "contiguous", H=1, HV=2, gate=True, l2norm=True, rerun=True),
    gdn_case(64, [0, 3, 45, 48, 64], "zigzag"),
    conv_case(64, [0, 5, 47, 64], "contiguous", W=4, rerun=True),
    conv_case(64, [0, 15, 16, 33, 64], "zigzag", W=2, residual=False, activation=None),
]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One 2-rank spawn for the numerical cases and the misuse checks (process start-up is most of a
    spawn's cost): ``(results, folder of the misuse reports)``."""
    tmp = tmp_path_factory.mktemp("cp2")
    return run_cp(TWO_RANK_CASES, 2, tmp, misuse=True), tmp


def test_cp_two_ranks(two_ranks):
    """2 ranks, both layouts: a sequence spanning both ranks (and both zigzag boundaries), sequences shorter
    than a part, a part holding only whole sequences; GVA, gates and l2norm in the kernel; conv W 2 and 4.
    The first GDN and conv cases also check that two backward runs are bit-identical."""
    check(TWO_RANK_CASES, two_ranks[0])


def test_cp_four_ranks(tmp_path):
    """4 ranks (kept small for CI): one sequence over three parts (the chain composes two links forward
    and backward) next to a short one; zigzag conv with parts of 2 tokens, shorter than W - 1 = 3."""
    cases = [
        gdn_case(32, [0, 5, 30, 32], "contiguous", K=16, V=16, H=1, HV=1),
        conv_case(16, [0, 1, 11, 16], "zigzag", W=4),
    ]
    check(cases, run_cp(cases, 4, tmp_path))


@pytest.mark.slow
def test_cp_four_ranks_more(tmp_path):
    """4 ranks, larger: a sequence over three parts, zigzag with boundaries on part edges and GVA with
    gates in the kernel, fp16, determinism of both ops."""
    cases = [
        gdn_case(96, [0, 10, 80, 96], "contiguous", rerun=True),
        gdn_case(96, [0, 24, 30, 96], "zigzag", H=2, HV=4, gate=True),
        gdn_case(128, [0, 7, 100, 128], "zigzag", dtype=torch.float16, l2norm=True),
        conv_case(96, [0, 10, 80, 96], "contiguous", W=4, rerun=True),
        conv_case(96, [0, 30, 96], "zigzag", W=2, dtype=torch.float16),
    ]
    check(cases, run_cp(cases, 4, tmp_path))


def _expect(errors: list, exc: type, text: str, fn) -> None:
    try:
        fn()
    except exc as e:
        if text not in str(e):
            errors.append(f"{exc.__name__} without {text!r}: {e}")
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append(f"expected {exc.__name__} ({text!r}), got {type(e).__name__}: {e}")
    else:
        errors.append(f"expected {exc.__name__} ({text!r}), nothing raised")


def _misuse_errors(rank: int, world: int) -> list[str]:
    """Run each misuse on this rank; returns what did not raise as expected."""
    group, errors = dist.group.WORLD, []
    cu = torch.tensor([0, 5, 16], dtype=torch.int32)
    _expect(errors, ValueError, "ranks [1] differ",
            lambda: build_cp_context(torch.tensor([0, 3 + rank, 16]), group))
    _expect(errors, ValueError, "ranks [1] differ",
            lambda: build_cp_context(torch.tensor([0, 16] if rank == 0 else [0, 8, 16]), group))
    _expect(errors, ValueError, "multiple of the number of parts (2",
            lambda: build_cp_context(torch.tensor([0, 15]), group))
    _expect(errors, ValueError, "multiple of the number of parts (4",
            lambda: build_cp_context(torch.tensor([0, 6]), group, layout="zigzag"))
    _expect(errors, ValueError, "layout must be one of",
            lambda: build_cp_context(cu, group, layout="ring"))
    _expect(errors, ValueError, "conv1d_kernel_size must be in",
            lambda: build_cp_context(cu, group, conv1d_kernel_size=0))
    cp = build_cp_context(cu, group, conv1d_kernel_size=4)
    x, w = torch.randn(1, 8, 4), torch.randn(4, 2)
    _expect(errors, ValueError, "kernel width W=2 differs from cp_context's conv1d_kernel_size=4",
            lambda: causal_conv1d(x, w, cp_context=cp))
    _expect(errors, ValueError, "conv1d_kernel_size=None",
            lambda: causal_conv1d(x, w, cp_context=build_cp_context(cu, group)))
    _expect(errors, ValueError, "must hold T=8",
            lambda: causal_conv1d(torch.randn(1, 16, 4), torch.randn(4, 4), cp_context=cp))
    _expect(errors, NotImplementedError, "initial_state",
            lambda: causal_conv1d(x, torch.randn(4, 4), initial_state=torch.zeros(2, 4, 4), cp_context=cp))
    _expect(errors, TypeError, "cp_context must be an FLACPContext",
            lambda: causal_conv1d(x, torch.randn(4, 4), cp_context={"group": group}))
    q = torch.randn(1, 8, 1, 16)
    g, beta = torch.zeros(1, 8, 1), torch.ones(1, 8, 1)
    _expect(errors, NotImplementedError, "output_final_state",
            lambda: chunk_gated_delta_rule(q, q, q, g, beta, output_final_state=True, cp_context=cp))
    # a context of a one-rank group for inputs sliced over the two ranks: the group size does not match
    solo = [dist.new_group([r]) for r in range(world)][rank]
    cp1 = build_cp_context(cu, solo)
    _expect(errors, ValueError, "must hold T=16 tokens (1 part(s) of 16",
            lambda: chunk_gated_delta_rule(q, q, q, g, beta, cp_context=cp1))
    return errors


def test_cp_wrong_context_raises(two_ranks):
    """Misuse raises a clear error on every rank (no rank left hanging in a collective)."""
    errors = {r: torch.load(two_ranks[1] / f"res.errors.{r}") for r in range(2)}
    assert errors == {0: [], 1: []}, errors
