"""The NPU check's cases, read from the op catalogue (:mod:`fla_ascend.ops.catalog`).

Every kernel of every op spec (``fla_ascend/ops/<op>/spec.py``: core kind, declared live tiles, the
scenario set it is launched in) becomes one :class:`~fla_ascend.check.runner.Case` per scenario (a
kernel two ops list, :func:`fla_ascend.ops.catalog.listings`, per scenario of each). A
*scenario* calls a public op (forward, and backward where the op has one) on small CPU tensors with
one configuration; under :func:`fla_ascend.compiler.capture.capture` nothing runs, every kernel launch is
recorded with the exact grid, sizes and options the op's launcher computes for the chip.

A ``*_kernel`` under ``fla_ascend.ops`` that no spec lists fails the check ("kernel without registry
entry"): add a :class:`~fla_ascend.ops.spec.Kernel` to its op's spec.

``ALLOW`` is the allow-list, ``(kernel glob, finding code, config glob, reason)``, from the kernels'
``allow`` entries: every entry says why the finding is acceptable.
"""
from __future__ import annotations

from fla_ascend.check.runner import Case
from fla_ascend.ops import catalog

__all__ = ["CASES", "FULL_CASES", "ALLOW"]


def _cases(full: bool = False) -> list[Case]:
    out = []
    for spec, k in catalog.listings():
        representative, matrix = spec.scenarios[k.scenarios]
        for cfg, run in (matrix if full else representative).items():
            out.append(Case(kernel=k.name, config=cfg, kind=k.kind, run=run, tiles=k.tiles, sizes=k.sizes,
                            op=spec.name))
    return out


CASES: list[Case] = _cases()
"""The representative launches (CI): per kernel every tile plan its launcher picks at the common shapes, each
head dim once, each chunk size, and each flag once."""

FULL_CASES: list[Case] = _cases(full=True)
"""The full launch matrix (``fla-ascend check --full``)."""

ALLOW: list[tuple[str, str, str, str]] = [
    (k.short_name, code, config, reason) for _, k in catalog.kernels().values() for code, config, reason in k.allow
]
