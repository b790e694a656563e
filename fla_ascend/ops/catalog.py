"""The op catalogue: every op folder's ``spec.py`` collected, and the named shapes they define.

An op folder under ``fla_ascend/ops/`` with a ``spec.py`` module holding ``SPECS`` (a list of
:class:`fla_ascend.ops.spec.OpSpec`) is found here; nothing else lists ops. The benchmark
(``fla-ascend bench``), the NPU check (``fla-ascend check``), the estimate, the IR capture, the
optimisation rounds and the tests read :func:`specs` and :func:`kernels`.

Named shapes are plain dicts of upper-case dimension names to ints; one key scheme serves every
command: the names of :func:`named_shapes` (``qwen3next``, ``gdn-t32k``, ``conv-b4-t4096``, ...) and
the groups of :func:`shape_groups` (``anchors``: every ``*-anchors`` group; ``all``: every group).
:func:`shape_key` writes a shape as a stable string (``B1-T4096-H16-HV32-K128-V128``).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil

from fla_ascend.ops.spec import DIM_ORDER, Kernel, OpSpec, shape_key

__all__ = ["DIM_ORDER", "DEFAULT_SHAPE", "specs", "get", "kernels", "listings", "named_shapes", "shape_groups",
           "shape_key", "spec_modules"]

DEFAULT_SHAPE = "qwen3next"
"""The shape ``default`` names: Qwen3-Next's GatedDeltaNet layer."""


def spec_modules() -> list[str]:
    """Names of the ``spec`` modules of the op folders (``fla_ascend.ops.<folder>.spec``) in catalogue
    order: by the module's ``ORDER`` (an int, default 100; the main ops first), then folder name."""
    ops = importlib.import_module("fla_ascend.ops")
    found = [f"fla_ascend.ops.{m.name}.spec" for m in pkgutil.iter_modules(ops.__path__)
             if m.ispkg and importlib.util.find_spec(f"fla_ascend.ops.{m.name}.spec") is not None]
    return sorted(found, key=lambda n: (getattr(importlib.import_module(n), "ORDER", 100), n))


@functools.cache
def _load() -> tuple[dict[str, OpSpec], dict[str, tuple[OpSpec, Kernel]], tuple[tuple[OpSpec, Kernel], ...]]:
    ops: dict[str, OpSpec] = {}
    kern: dict[str, tuple[OpSpec, Kernel]] = {}
    listed: list[tuple[OpSpec, Kernel]] = []
    for module in spec_modules():
        for spec in importlib.import_module(module).SPECS:
            if spec.name in ops:
                raise RuntimeError(f"op {spec.name!r} is specified twice ({module} and an earlier spec module)")
            ops[spec.name] = spec
            for k in spec.kernels:
                if k.name in kern and dataclasses.replace(kern[k.name][1], stage=k.stage) != k:
                    raise RuntimeError(f"kernel {k.name} is listed by {kern[k.name][0].name} and {spec.name} with "
                                       "different records (a shared kernel is listed with the same Kernel, its "
                                       "stage label aside)")
                if k.scenarios not in spec.scenarios:
                    raise RuntimeError(f"{spec.name}: kernel {k.name} names scenario set {k.scenarios!r}, "
                                       f"which the spec lacks (it has {sorted(spec.scenarios)})")
                kern.setdefault(k.name, (spec, k))
                listed.append((spec, k))
    return ops, kern, tuple(listed)


def specs() -> dict[str, OpSpec]:
    """Every op spec by name, in the order of the spec modules."""
    return dict(_load()[0])


def get(name: str) -> OpSpec:
    """The spec of op ``name``.

    Raises:
        ValueError: unknown op (the message lists the known ones).
    """
    ops = _load()[0]
    if name not in ops:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(ops)}")
    return ops[name]


def kernels() -> dict[str, tuple[OpSpec, Kernel]]:
    """Every kernel of every op: qualified kernel name -> ``(op spec, kernel spec)``. A kernel two ops
    share (the gated delta rule's fused recurrent kernel, which ``fused_recurrent_kda`` runs too) maps
    to the first op in catalogue order, its owner; :func:`listings` has every op's listing."""
    return dict(_load()[1])


def listings() -> list[tuple[OpSpec, Kernel]]:
    """Every ``(op spec, kernel spec)`` pair of the catalogue, in catalogue order: a kernel listed by
    several ops (with the same :class:`Kernel` record, its ``stage`` label aside) appears once per
    op, so the NPU check launches it in each op's scenarios."""
    return list(_load()[2])


@functools.cache
def _shapes() -> tuple[dict, dict]:
    names: dict[str, dict[str, int]] = {}
    groups: dict[str, list[str]] = {}
    for spec in _load()[0].values():
        for n, s in spec.named_shapes.items():
            if n in names and names[n] != dict(s):
                raise RuntimeError(f"named shape {n!r} is defined twice with different sizes")
            names[n] = dict(s)
        for g, members in spec.shape_groups.items():
            groups.setdefault(g, [m for m in members])
    names["default"] = dict(names[DEFAULT_SHAPE])
    for g, members in groups.items():
        for m in members:
            if m not in names:
                raise RuntimeError(f"shape group {g!r} names {m!r}, which no spec defines")
    groups["anchors"] = [m for g, ms in groups.items() if g.endswith("-anchors") for m in ms]
    groups["all"] = list(dict.fromkeys(m for g, ms in list(groups.items()) if g != "anchors" for m in ms))
    return names, groups


def named_shapes() -> dict[str, dict[str, int]]:
    """Every named shape (``default`` included) -> its dims."""
    return {n: dict(s) for n, s in _shapes()[0].items()}


def shape_groups() -> dict[str, list[str]]:
    """Every shape group -> its member names (``anchors`` and ``all`` included)."""
    return {g: list(m) for g, m in _shapes()[1].items()}
