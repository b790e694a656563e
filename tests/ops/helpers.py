"""Input builders, the accuracy assertion and the NaN-fill fixture shared by the gated delta
rule tests (the forward and the backward tests).

Import from a test module in ``tests/ops`` as ``from helpers import ...`` (pytest puts the
test file's folder on ``sys.path``).
"""
from __future__ import annotations

import importlib
import math
import sys

import pytest
import torch
import torch.nn.functional as F

from fla_ascend.ops.utils import rel_rmse

__all__ = ["make_inputs", "assert_close", "bf16_input_movement", "bf16_limits", "FEW_FLOOR", "nan_empty",
           "NAN_FILLED_PACKAGES", "poison_for_process"]


def make_inputs(
    B: int,
    T: int,
    H: int,
    HV: int,
    K: int,
    V: int,
    dtype: torch.dtype,
    device,
    *,
    varlen: list[int] | None = None,
    h0: bool = True,
    gate_in_kernel: bool = False,
    dt_bias: bool = True,
    zero_gate_fraction: float = 0.0,
    requires_grad: bool = False,
    seed: int = 0,
) -> dict:
    """Random inputs for ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule``.

    Args:
        B, T, H, HV, K, V: sizes; with ``varlen`` B must be 1 and T must equal ``varlen[-1]``.
        dtype: dtype of ``q``, ``k``, ``v`` and ``beta``; ``g``, ``initial_state``, ``A_log``
            and ``dt_bias`` are float32 (as in Qwen3-Next, where the gate path runs in fp32).
        device: where the tensors live.
        varlen: ``cu_seqlens`` boundaries (a list, made an int32 tensor), or ``None``.
        h0: include a random ``initial_state`` ``[N, HV, K, V]`` float32.
        gate_in_kernel: ``g`` is the raw gate input (standard normal) and ``A_log`` (and
            ``dt_bias`` unless ``dt_bias=False``) are given; the dict carries
            ``use_gate_in_kernel=True``. Otherwise ``g`` is a log-space decay in about
            [-0.3, 0] (mild, so the state carries across chunks) and ``use_gate_in_kernel=False``.
        zero_gate_fraction: fraction of ``g`` entries set to exactly 0 (no decay at that token).
        requires_grad: make every float input a leaf that requires grad.
        seed: seeds a private generator (the global RNG is untouched).

    Returns:
        A dict keyed by the op's keyword names: ``q``, ``k`` ``[B, T, H, K]`` (``k`` unit-norm
        per head, as GatedDeltaNet feeds it), ``v`` ``[B, T, HV, V]``, ``g``, ``beta``
        ``[B, T, HV]`` (``beta`` in (0, 1)), ``initial_state``, ``cu_seqlens``, ``A_log``,
        ``dt_bias`` (each ``None`` when not used) and ``use_gate_in_kernel`` (bool). Pass it as
        ``op(**inputs, output_final_state=True)``.

    Raises:
        ValueError: ``varlen`` given with ``B != 1`` or ``T != varlen[-1]``.
    """
    if varlen is not None and (B != 1 or T != varlen[-1]):
        raise ValueError(f"varlen needs B == 1 and T == varlen[-1]={varlen[-1]}, got B={B}, T={T}")
    gen = torch.Generator().manual_seed(seed)
    N = B if varlen is None else len(varlen) - 1

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    q = randn(B, T, H, K)
    k = F.normalize(randn(B, T, H, K), dim=-1)
    v = randn(B, T, HV, V)
    beta = torch.sigmoid(randn(B, T, HV))
    if gate_in_kernel:
        g = randn(B, T, HV)
        A_log = torch.empty(HV).uniform_(-1.0, 1.0, generator=gen)
        bias = 0.5 * randn(HV) if dt_bias else None
    else:
        g = F.logsigmoid(randn(B, T, HV) + 4.0)  # mean about -0.03 per token
        A_log = bias = None
    if zero_gate_fraction > 0:
        g = torch.where(torch.rand(B, T, HV, generator=gen) < zero_gate_fraction, torch.zeros_like(g), g)
    state = randn(N, HV, K, V) if h0 else None
    out = dict(
        q=q.to(dtype), k=k.to(dtype), v=v.to(dtype), g=g, beta=beta.to(dtype), initial_state=state,
        A_log=A_log, dt_bias=bias,
    )
    for name, t in out.items():
        if t is not None:
            t = t.to(device)
            out[name] = t.requires_grad_() if requires_grad else t
    out["cu_seqlens"] = None if varlen is None else torch.tensor(varlen, dtype=torch.int32, device=device)
    out["use_gate_in_kernel"] = gate_in_kernel
    return out


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, ratio: float) -> float:
    """Assert ``rel_rmse(ref, out) <= ratio`` (``||ref - out||_2 / ||ref||_2``, NaN/Inf fail).

    Returns the measured ratio. The failure message names the output, the ratio, the limit,
    and counts non-finite entries (an unwritten NaN-filled region shows up there).

    Raises:
        AssertionError: shapes differ, non-finite values, or the ratio exceeds ``ratio``.
    """
    assert ref.shape == out.shape, f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    r = rel_rmse(ref, out)
    if not math.isfinite(r):
        bad_ref = int((~torch.isfinite(ref.detach().double())).sum())
        if bad_ref:
            raise AssertionError(f"{name}: the reference has {bad_ref} of {ref.numel()} entries NaN/Inf")
        bad = int((~torch.isfinite(out.detach().float())).sum())
        raise AssertionError(f"{name}: {bad} of {out.numel()} entries are NaN/Inf (unwritten or overflowed)")
    assert r <= ratio, f"{name}: rel-RMSE ratio {r:.3e} > {ratio:.1e}"
    return r


# --- bf16 limits from the reference's own conditioning ----------------------------------------

NOISE_DRAWS = 4
"""Perturbed reference runs behind :func:`bf16_input_movement`."""
FEW_ELEMENTS = 64
"""Outputs with fewer elements are a handful of sums; only they get a conditioning-based limit."""
MAX_RELAX = 3
"""The conditioning-based limit never exceeds this multiple of the issue's limit."""
FEW_FLOOR = 2 * 2.0 ** -8
"""The least limit of an output of fewer than :data:`FEW_ELEMENTS` elements: two bf16 roundings
at their worst (unit roundoff ``2^-8``), for the bf16 intermediates (``w``, ``u``, ``v'``) the
value is computed from, which the input perturbation of :func:`bf16_input_movement` does not
see. One element has no average to hide a rounding in: the final state of one 17-token
sequence at K = V = 1 measured 0.0051 on the H200 against 0.005, with a reference movement
below 0.0025."""


def bf16_input_movement(fn, x: dict, base: dict | None = None) -> dict:
    """How much each fp32 reference output moves when the bfloat16 inputs move by up to one rounding.

    ``fn(x)`` returns ``{name: tensor}``. It is re-run on copies of ``x`` whose bf16 tensors are
    upcast and scaled elementwise by ``1 + u * 2**-8`` (``u`` uniform in [-1, 1], fixed seeds: at
    most half a bf16 ulp); the largest relative RMSE of each output over :data:`NOISE_DRAWS`
    draws is kept. Outputs over many tokens move by about 0.002-0.004; one that is a handful of
    cancelling sums (``dA_log`` of a single head, ``dg`` of a single token, the output of a
    17-token, K = V = 1 sequence) moves by 0.006-0.14, more than any bf16 implementation can meet
    a relative limit of that size by (flash-linear-attention 0.6.0: dg 0.036 at B1 T1 HV1, ours
    0.035; H200, cases.md "Hopper findings").

    ``base``: ``fn(x)`` when the caller has it already.

    Returns:
        ``{name: movement}``.
    """
    base = fn(x) if base is None else base
    moved_most = dict.fromkeys(base, 0.0)
    for draw in range(NOISE_DRAWS):
        gen = torch.Generator().manual_seed(1000 + draw)
        xp = {}
        for k, t in x.items():
            if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16:
                u = torch.rand(t.shape, generator=gen).to(t.device) * 2 - 1
                t = t.detach().float() * (1 + u * 2.0**-8)
            xp[k] = t
        moved = fn(xp)
        for n in base:
            moved_most[n] = max(moved_most[n], float(rel_rmse(base[n], moved[n])))
    return moved_most


def bf16_limits(fn, x: dict, limits: dict) -> tuple[dict, dict]:
    """The reference outputs ``fn(x)`` and the bf16 GPU tier's limit for each.

    Every output keeps its limit from ``limits`` (the issue's), except outputs of fewer than
    :data:`FEW_ELEMENTS` elements: their limit is the largest of the test's, ``2 x`` their
    :func:`bf16_input_movement` (the op rounds stored intermediates to bf16 as well as reading
    bf16 inputs) and :data:`FEW_FLOOR`, capped at :data:`MAX_RELAX` times the test's limit. The
    perturbed runs happen only when such an output exists.

    Returns:
        ``(reference outputs, limits)``.
    """
    ref = fn(x)
    out = dict(limits)
    few = [n for n in ref if ref[n].numel() < FEW_ELEMENTS]
    if few:
        movement = bf16_input_movement(fn, x, ref)
        for n in few:
            out[n] = min(max(limits[n], 2 * movement[n], FEW_FLOOR), MAX_RELAX * limits[n])
    return ref, out


# --- NaN-filled allocations ------------------------------------------------------------------

NAN_FILLED_PACKAGES = ("fla_ascend.ops.common", "fla_ascend.ops.gated_delta_rule", "fla_ascend.ops.kda",
                       "fla_ascend.ops.norm", "fla_ascend.ops.cp")
"""Modules whose ``torch.empty`` / ``torch.empty_like`` the :func:`nan_empty` fixture fills."""


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_meta:
        return t
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(torch.iinfo(t.dtype).min)  # an index no kernel should ever read


class _PoisonedTorch:
    """Stands in for the ``torch`` module inside the op modules: ``empty`` / ``empty_like``
    return NaN-filled tensors (integers: their minimum), everything else is ``torch``'s."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def empty(*args, **kwargs):
        return _poison(torch.empty(*args, **kwargs))

    @staticmethod
    def empty_like(*args, **kwargs):
        return _poison(torch.empty_like(*args, **kwargs))


def poisoned_modules() -> list[str]:
    """Loaded modules under :data:`NAN_FILLED_PACKAGES` that use ``torch`` as a global."""
    import fla_ascend.ops  # noqa: F401  (loads everything the ops import)

    for pkg in NAN_FILLED_PACKAGES:
        try:
            importlib.import_module(pkg)
        except ImportError:
            pass
    return sorted(
        name for name, mod in list(sys.modules.items())
        if mod is not None and name.startswith(NAN_FILLED_PACKAGES) and getattr(mod, "torch", None) is torch
    )


def poison_for_process() -> None:
    """What :func:`nan_empty` does, for the rest of this process (a spawned rank has no fixtures)."""
    fake = _PoisonedTorch()
    for name in poisoned_modules():
        sys.modules[name].torch = fake


@pytest.fixture
def nan_empty(monkeypatch):
    """While the test runs, ``torch.empty`` / ``torch.empty_like`` called from the op modules
    return NaN-filled tensors, so an output region a kernel forgets to write fails the
    accuracy check. Yields the names of the patched modules."""
    names = poisoned_modules()
    fake = _PoisonedTorch()
    for name in names:
        monkeypatch.setattr(sys.modules[name], "torch", fake)
    yield names
