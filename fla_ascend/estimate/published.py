"""Published hardware timings of the fastest Ascend code known for the GDN ops: data only.

These are measurements someone else made on real Ascend chips and published, **not estimates**.
``fla-ascend estimate`` shows them beside its estimate of our kernels at the shapes they were measured
at (:func:`shapes_for`, ``--shape published``), labelled as published measurements, never mixed into
the estimated totals.

- torch_npu's fused ``npu_chunk_gated_delta_rule`` (CANN ops-transformer's AscendC kernel), which
  vllm-ascend uses for the GDN prefill, against vllm-ascend's Triton chain it replaces: vllm-ascend
  PR 12647 (https://github.com/vllm-project/vllm-ascend/pull/12647), one Qwen3.5-35B-A3B prefill
  sequence.
- MegaGDN's hand-written PTO-ISA kernels (https://github.com/huawei-csl/megagdn-pto), per stage and
  fused into one megakernel, on a 910B2, 16 sequences of 8192 tokens
  (``outputs/data/kernel_bench_L8192.json``; its Triton baseline is in the calibration,
  :mod:`fla_ascend.estimate.calibration`).

Every entry: the source URL, the chip, the shape (the catalogue's dimension names: ``H`` key heads,
``HV`` value heads; packed sequences as ``N`` x ``L`` where the source packs them), the dtype, the
scope (``kernel``: a device-side time of the kernels; ``op``: a whole call, host included), the figure
and its unit.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Published", "PUBLISHED", "shapes_for", "at_shape", "matches"]


@dataclass(frozen=True)
class Published:
    """One published timing.

    Attributes:
        code: whose code ran (``"torch_npu npu_chunk_gated_delta_rule"``, ``"MegaGDN PTO-ISA"``...).
        op: the catalogue op it does the work of.
        part: the part of ``op`` timed: ``"forward"`` (the whole forward) or a stage, in the source's
            name (``cumsum``, ``kkt``, ``solve_tril``, ``wy_fast``, ``chunk_h``, ``chunk_o``).
        ours: regex on our stage labels (``fla-ascend estimate``'s rows, ``"fwd: state h"``) the part
            compares with; ``"total fwd"`` for the whole forward.
        shape: the catalogue op's sizes (``B``, ``T``, ``H``, ``HV``, ``K``, ``V``) our estimate runs at
            (packed sequences of equal length as ``B`` sequences of ``T`` tokens).
        packed: ``(N, L)`` when the source packed ``N`` sequences of ``L`` tokens into one (varlen),
            else ``None``.
        value, unit: the figure (``"us"``).
        scope: ``"kernel"`` or ``"op"``.
        dtype: the inputs' dtype as the source states or uses it.
        chip: the chip, as the source states it.
        date: when it was measured or published.
        source: the URL.
        role: ``"fastest known"`` (the code to beat) or ``"baseline"`` (what the source compared it with).
        note: the source's conditions, briefly.
    """

    code: str
    op: str
    part: str
    ours: str
    shape: dict
    value: float
    unit: str
    scope: str
    dtype: str
    chip: str
    date: str
    source: str
    packed: tuple | None = None
    role: str = "fastest known"
    note: str = ""


_PR12647 = "https://github.com/vllm-project/vllm-ascend/pull/12647"
_MEGAGDN = "https://github.com/huawei-csl/megagdn-pto/blob/main/outputs/data/kernel_bench_L8192.json"
_GDN = "chunk_gated_delta_rule"
_QWEN35_PREFILL = dict(B=1, T=11274, H=16, HV=32, K=128, V=128)

# MegaGDN kernel_bench_L8192.json, PTO-ISA kernels at chunk 128 (fp16 inputs, g fp32), milliseconds, and
# the megakernel (all six stages in one launch)
_PTO_MS = {
    16: dict(cumsum=0.16177, kkt=2.17686, solve_tril=7.42085, wy_fast=3.51306, chunk_h=5.06985, chunk_o=5.53044,
             forward=27.73833),
    32: dict(cumsum=0.17607, kkt=4.66908, solve_tril=15.90830, wy_fast=6.58681, chunk_h=10.23510, chunk_o=10.88913,
             forward=54.25697),
    48: dict(cumsum=0.20557, kkt=6.79462, solve_tril=23.88633, wy_fast=10.43830, chunk_h=14.15625, chunk_o=15.58907,
             forward=81.76922),
    64: dict(cumsum=0.14796, kkt=9.04798, solve_tril=29.78790, wy_fast=13.08619, chunk_h=20.37392, chunk_o=22.53173,
             forward=106.05273),
}
_OURS = {"cumsum": r"fwd: .*cumsum", "kkt": r"fwd: WY", "solve_tril": r"fwd: WY", "wy_fast": r"fwd: WY",
         "chunk_h": r"fwd: state h", "chunk_o": r"fwd: output o", "forward": "total fwd"}


def _megagdn() -> list:
    out = []
    for hv, parts in _PTO_MS.items():
        for part, ms in parts.items():
            out.append(Published(
                code="MegaGDN PTO-ISA megakernel" if part == "forward" else "MegaGDN PTO-ISA", op=_GDN, part=part,
                ours=_OURS[part], shape=dict(B=16, T=8192, H=16, HV=hv, K=128, V=128), packed=(16, 8192),
                value=round(ms * 1000, 1), unit="us", scope="kernel", dtype="fp16 (g fp32)", chip="Ascend910B2",
                date="2026-05-02", source=_MEGAGDN,
                note="chunk 128; event-timed launch with buffers allocated outside the timed region"
                     + ("; all six stages fused in one launch" if part == "forward" else "")))
    return out


PUBLISHED = [
    Published(code="torch_npu npu_chunk_gated_delta_rule", op=_GDN, part="forward", ours="total fwd",
              shape=_QWEN35_PREFILL, value=4964.0, unit="us", scope="op", dtype="not stated (the model's bf16)",
              chip="not stated", date="2026-07-22", source=_PR12647,
              note="Qwen3.5-35B-A3B prefill, N=1 seqlen=11274 nk=16 nv=32 dk=dv=128, the GDN chunk call; the "
                   "chip is not named (the default path is A2/A3; the PR adds a build step for A5)"),
    Published(code="vllm-ascend Triton chunk_gated_delta_rule", op=_GDN, part="forward", ours="total fwd",
              shape=_QWEN35_PREFILL, value=5890.0, unit="us", scope="op", dtype="not stated (the model's bf16)",
              chip="not stated", date="2026-07-22", source=_PR12647, role="baseline",
              note="the Triton chain the fused op replaces (vllm-ascend's kernels at the PR, vLLM v0.26.0), same call"),
] + _megagdn()
"""Every published timing, in source order."""


def matches(entry: Published, op: str, sizes: dict) -> bool:
    """Whether ``entry`` was measured for ``op`` at ``sizes`` (every size it names equal)."""
    return entry.op == op and all(sizes.get(k) == v for k, v in entry.shape.items())


def at_shape(op: str, sizes: dict) -> list:
    """The :data:`PUBLISHED` entries measured for ``op`` at ``sizes``."""
    return [e for e in PUBLISHED if matches(e, op, sizes)]


def shapes_for(op: str) -> list:
    """``[(name, shape)]``: the distinct shapes ``op`` has published timings at, named after their
    source (``pr12647-t11274``, ``megagdn-n16-l8192-hv32``)."""
    out: dict = {}
    for e in PUBLISHED:
        if e.op != op:
            continue
        key = tuple(sorted(e.shape.items()))
        if key in out:
            continue
        if e.source == _PR12647:
            name = f"pr12647-t{e.shape['T']}"
        else:
            name = f"megagdn-n{e.packed[0]}-l{e.packed[1]}-hv{e.shape['HV']}"
        out[key] = (name, dict(e.shape))
    return list(out.values())
