"""Benchmark cases: named shapes, ``--shapes`` parsing and the benchmark's view of the op catalogue.

Every op spec of :mod:`fla_ascend.ops.catalog` with ``benchmark=True`` is one :class:`BenchOp` in
:data:`OPS`: its dimensions, deterministic inputs (:func:`fla_ascend.ops.spec.build_inputs`), the
float32 PyTorch reference its correctness gate compares with, the providers that compute it
(``fla_ascend``, ``torch_ref``, ``fla``), and the bytes and flops one call moves and does (for
achieved GB/s and TFLOP/s). Adding an op is adding its folder with a ``spec.py``.

Shapes are plain dicts of upper-case dimension names to ints (``{"B": 1, "T": 4096, ...}``);
:func:`shape_key` turns one into the stable string key used in the JSON artifact
(``"B1-T4096-H16-HV32-K128-V128"``).
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from fla_ascend.ops import catalog
from fla_ascend.ops import spec as S

__all__ = [
    "NAMED_SHAPES",
    "SHAPE_GROUPS",
    "DIM_ORDER",
    "OPS",
    "BenchOp",
    "parse_shapes",
    "shape_key",
    "scale_for_cpu",
    "fla_available",
    "fla_version",
]

DIM_ORDER = catalog.DIM_ORDER
shape_key = catalog.shape_key

NAMED_SHAPES: dict[str, dict[str, int]] = catalog.named_shapes()
"""Every named shape of the op specs (docs/bench.md, "Shapes"); keys are what ``--shapes`` accepts."""
SHAPE_GROUPS: dict[str, list[str]] = catalog.shape_groups()


SHAPE_KEY_RE = re.compile(r"[A-Za-z]+[0-9]+(?:-[A-Za-z]+[0-9]+)*")
"""A shape key as :func:`shape_key` writes it (``B1-T4096-H16-HV32-K128-V128``)."""


def _is_shape_key(item: str) -> bool:
    """Whether ``item`` is meant as a shape key as :func:`shape_key` writes it (``B1-T4096``;
    ``B1-T96-Q2`` too, refused then for its dimension ``Q``). One part is a key only when it is a
    dimension of :data:`DIM_ORDER` (``T64``): ``qwen4`` is an unknown name, not a dimension ``QWEN``."""
    if not SHAPE_KEY_RE.fullmatch(item) or item.lower() in NAMED_SHAPES:
        return False
    return "-" in item or re.match(r"[A-Za-z]+", item).group(0).upper() in DIM_ORDER


def _parse_free_form(text: str) -> dict[str, int]:
    shape: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(
                f"--shapes: {part!r} in {text!r} is not NAME=INT; expected e.g. 'B=1,T=4096,H=16,HV=32,K=128,V=128'"
            )
        name, value = (s.strip() for s in part.split("=", 1))
        name = name.upper()
        if name not in DIM_ORDER:
            raise ValueError(f"--shapes: unknown dimension {name!r} in {text!r}; "
                             f"expected one of {', '.join(DIM_ORDER)}")
        if name in shape:
            raise ValueError(f"--shapes: dimension {name!r} given twice in {text!r}")
        if not re.fullmatch(r"[0-9]+", value):
            raise ValueError(f"--shapes: {name}={value!r} in {text!r} is not a positive integer")
        if int(value) < 1:
            raise ValueError(f"--shapes: {name}={value} in {text!r} must be >= 1")
        shape[name] = int(value)
    if "H" in shape and "HV" in shape and shape["HV"] % shape["H"]:
        raise ValueError(f"--shapes: HV={shape['HV']} in {text!r} must be a multiple of H={shape['H']} (GVA groups)")
    if not shape:
        raise ValueError(f"--shapes: empty shape {text!r}")
    return shape


def split_shapes(text: str) -> list[str]:
    """Split ``--shapes`` text into items: ``;`` and ``,`` both separate names and keys (the
    convention of every list option); consecutive ``DIM=N`` parts form one free-form shape, so
    ``qwen3next,B=1,T=64,H=2`` is two items and two free-form shapes need a ``;`` between them."""
    items: list[str] = []
    for part in text.split(";"):
        free: list[str] = []
        for token in (t.strip() for t in part.split(",")):
            if not token:
                continue
            if "=" in token or (free and token.upper() in DIM_ORDER):
                free.append(token)  # a bare dimension after DIM=N parts: the parser says what is missing
                continue
            if free:
                items.append(",".join(free))
                free = []
            items.append(token)
        if free:
            items.append(",".join(free))
    return items


def parse_shapes(spec: str | list[str] | None) -> list[tuple[str, dict[str, int]]]:
    """Parse ``--shapes``.

    Args:
        spec: ``None`` (each op's defaults; returns ``[]``), or names / free-form shapes / shape
            keys (``B1-T4096-H16-HV32-K128-V128``, as the result tables print them) separated
            by ``;`` or ``,`` (see :func:`split_shapes`) or given as a list. A name is a key of
            :data:`NAMED_SHAPES` or a group of :data:`SHAPE_GROUPS` (``anchors``, ``gdn-anchors``,
            ``decode-anchors``, ``conv-anchors``, ``fla-defaults``, ``all``); free form is
            ``B=1,T=4096,H=16,HV=32,K=128,V=128`` (dims from :data:`DIM_ORDER`; ``HV`` defaults to
            ``H``, ``V`` to ``K``, and ``D`` alone means ``K = V = D`` for the gated delta rule ops).

    Returns:
        ``[(label, shape), ...]`` in the given order, duplicates removed; ``label`` is the name
        or the free-form text.

    Raises:
        ValueError: unknown name (the message lists the known ones), malformed ``NAME=INT``,
            unknown dimension, non-positive or non-integer value, duplicated dimension.
    """
    if spec is None:
        return []
    items = spec if isinstance(spec, list) else split_shapes(spec)
    out: list[tuple[str, dict[str, int]]] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            parsed = [(item, _parse_free_form(item))]
        elif _is_shape_key(item):
            # a shape key as the tables print it (B1-T4096-H16-HV32-K128-V128)
            dims = re.findall(r"([A-Za-z]+)([0-9]+)", item)
            parsed = [(item, _parse_free_form(",".join(f"{d}={v}" for d, v in dims)))]
        elif item.lower() in SHAPE_GROUPS:
            parsed = [(n, dict(NAMED_SHAPES[n])) for n in SHAPE_GROUPS[item.lower()]]
        elif item.lower() in NAMED_SHAPES:
            parsed = [(item.lower(), dict(NAMED_SHAPES[item.lower()]))]
        else:
            raise ValueError(
                f"--shapes: unknown named shape {item!r}; known names: {', '.join(NAMED_SHAPES)}; "
                f"groups: {', '.join(SHAPE_GROUPS)}; or a shape key like B1-T4096-H16-HV32-K128-V128, or free "
                f"form like 'B=1,T=4096,H=16,HV=32,K=128,V=128'"
            )
        for label, shape in parsed:
            k = shape_key(shape)
            if k not in seen:
                seen.add(k)
                out.append((label, shape))
    if not out:
        raise ValueError(f"--shapes: no shape in {spec!r}")
    return out


# CPU (Triton interpreter) caps: every dimension is clamped so the default run finishes in
# seconds on two cores. Ratios H : HV are kept (HV stays a multiple of H).
_CPU_CAPS = dict(B=4, T=96, H=2, K=32, V=32, D=64, W=4)
_CPU_CAPS_QUICK = dict(B=2, T=64, H=1, K=32, V=32, D=32, W=4)


def scale_for_cpu(shape: dict[str, int], quick: bool = False) -> dict[str, int]:
    """Clamp a shape for the Triton interpreter (never enlarges a dimension).

    ``B``, ``T``, ``H``, ``K``, ``V``, ``D`` are capped (``quick`` caps harder; ``T`` 96 keeps a
    partial chunk); ``HV`` becomes ``H_new * min(HV // H, 2)`` so grouped value attention stays
    exercised (``2 * H cap`` when the shape has no ``H``). Returns a new dict.
    """
    caps = _CPU_CAPS_QUICK if quick else _CPU_CAPS
    out = {d: min(n, caps[d]) if d in caps else n for d, n in shape.items()}
    if "H" in shape and "HV" in shape:
        group = max(1, shape["HV"] // shape["H"])
        out["HV"] = out["H"] * min(group, 2)
    elif "HV" in shape:  # ops on value heads only (the output norm)
        out["HV"] = min(shape["HV"], 2 * caps["H"])
    return out


# ----------------------------------------------------------------------------- providers


def fla_available() -> bool:
    """True when flash-linear-attention (``import fla``) imports in this process."""
    try:
        importlib.import_module("fla")
        return True
    except Exception:
        return False


def fla_version() -> str | None:
    """Installed flash-linear-attention version (distribution ``fla-core`` or
    ``flash-linear-attention``), or ``None`` when it does not import."""
    if not fla_available():
        return None
    import importlib.metadata as md

    for dist in ("fla-core", "flash-linear-attention"):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            pass
    return getattr(importlib.import_module("fla"), "__version__", "unknown")


def _importable(path: str) -> str | None:
    """``None`` when ``module:name`` imports, else the reason."""
    try:
        S.resolve(path)
        return None
    except Exception as e:  # ImportError, AttributeError, a broken kernel module
        first = str(e).splitlines()[0] if str(e) else ""
        return f"{path.replace(':', '.')} does not import here ({type(e).__name__}: {first})"


def _provider(spec: S.OpSpec, path: str):
    def run(**kw):
        return S.call(spec, path, kw)

    run.__name__ = path.replace(":", ".")
    return run


def _torch_ref_limit(max_tokens: int | None):
    def limit(shape):
        if max_tokens is None:
            return None
        n = shape["B"] * shape["T"]
        if n > max_tokens:
            return f"PyTorch reference runs token by token: skipped above B*T = {max_tokens} (here {n})"
        return None

    return limit


@dataclass
class BenchOp:
    """One benchmarked op: the benchmark's view of an :class:`fla_ascend.ops.spec.OpSpec`.

    Attributes:
        name: the op name (``--ops`` value and JSON ``op``).
        spec: the op spec it is built from.
        dims: shape dimensions the op needs; a shape without them does not apply to the op.
        default_shapes: shape names run when ``--shapes`` is not given.
        anchor_shapes: shape names ``--shapes anchors`` runs it at (its spec's named shapes).
        modes: modes the op supports (``"fwd"``, ``"fwdbwd"``).
        grad_inputs: names of the inputs that get gradients in ``fwdbwd``.
        providers: ``{provider: (**inputs) -> dict[name, tensor]}``; each is resolved lazily,
            so a provider whose package is missing fails only its own cases.
        torch_ref_limit: ``(shape) -> str | None``: why the PyTorch baseline is skipped as a
            timed provider at this shape (too slow), or ``None``.
        tolerance: relative-RMSE gate per mode.
        prepare: optional hook ``(provider, mode) -> dict`` run before a provider's cases;
            returns facts to record in ``meta`` (e.g. a guard it had to bypass).
    """

    name: str
    spec: S.OpSpec
    dims: tuple[str, ...]
    default_shapes: tuple[str, ...]
    anchor_shapes: tuple[str, ...]
    modes: tuple[str, ...]
    grad_inputs: tuple[str, ...]
    providers: dict[str, Callable]
    tolerance: dict[str, float]
    torch_ref_limit: Callable = lambda shape: None
    prepare: Callable | None = None

    def make_inputs(self, shape, dtype, device, seed) -> dict:
        """Keyword arguments of one call (tensors and the spec's constant arguments); the same seed
        gives the same inputs."""
        return S.build_inputs(self.spec, shape, dtype, device, seed)

    def reference(self, **inputs) -> dict:
        """The float32 gate reference's outputs by name (differentiable)."""
        return S.call(self.spec, self.spec.reference, inputs)

    def bytes_moved(self, shape, dtype, mode) -> int:
        """Counted bytes of one call (the model is the spec's docstring)."""
        return self.spec.bytes_moved(shape, dtype, mode)

    def flops(self, shape, mode) -> int:
        """Counted floating-point operations of one call."""
        return self.spec.flops(shape, mode)

    def tokens(self, shape) -> int:
        """Tokens per call (``B * T``)."""
        return shape["B"] * shape.get("T", 1)

    def available(self, provider: str) -> str | None:
        """Why ``provider`` cannot run this op at all here, or ``None``."""
        if provider == "fla_ascend":
            return _importable(self.spec.entry)
        if provider == "fla":
            if self.spec.fla is None:
                return "flash-linear-attention has no such op"
            if not fla_available():
                return "flash-linear-attention does not import here"
            return _importable(self.spec.fla)
        return None

    def complete_shape(self, shape: dict[str, int]) -> dict[str, int] | str:
        """As :meth:`fla_ascend.ops.spec.OpSpec.complete_shape`."""
        return self.spec.complete_shape(shape)


def _no_fla(**kw):
    raise RuntimeError("flash-linear-attention has no such op")


def bench_op(spec: S.OpSpec) -> BenchOp:
    """The benchmark's view of ``spec``."""
    providers = {"fla_ascend": _provider(spec, spec.entry),
                 "torch_ref": _provider(spec, spec.torch_ref or spec.reference)}
    # named for every op, so the default provider list applies to all; available() says why it cannot run
    providers["fla"] = _provider(spec, spec.fla) if spec.fla is not None else _no_fla
    return BenchOp(name=spec.name, spec=spec, dims=spec.dims, default_shapes=spec.shapes[:1],
                   anchor_shapes=spec.shapes, modes=spec.modes,
                   grad_inputs=spec.grad_inputs, providers=providers, tolerance=dict(spec.tolerance),
                   torch_ref_limit=_torch_ref_limit(spec.torch_ref_max_tokens), prepare=spec.prepare)


OPS: dict[str, BenchOp] = {name: bench_op(s) for name, s in catalog.specs().items() if s.benchmark}
"""The benchmarked ops by name, in catalogue order."""
