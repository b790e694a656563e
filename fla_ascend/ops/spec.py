"""What an op is, as data: the one description every tool reads (:mod:`fla_ascend.ops.catalog`).

Each op folder has a ``spec.py`` with ``SPECS``, a list of :class:`OpSpec`. An op spec says:

- the entry point, the float32 reference its correctness gate compares with, and
  flash-linear-attention's counterpart (``"module:function"``, imported only when used);
- its inputs as data (:class:`Input`: a shape expression over the op's dimensions, the dtype, how the
  values are drawn and transformed, whether it gets a gradient), the constant keyword arguments of
  the measured call, and the names of the outputs;
- the named shapes it is measured at (one key scheme for every tool: the names of
  :data:`fla_ascend.ops.catalog.NAMED_SHAPES`) and its small CI shape;
- per kernel (:class:`Kernel`): the core kind of its launch plan, the live tiles of the UB model
  (:class:`fla_ascend.tiling.ub.Tile`), the stage label the estimate prints, and the NPU check's
  scenarios (calls of the op at small sizes, representative and full matrices);
- the byte and flop counts of one call (for achieved GB/s and TFLOP/s), tolerances and the
  benchmark's provider rules.

Inputs are built by
:func:`build_inputs` and calls made by :func:`call`, so the benchmark, the NPU check, the
estimate, the IR capture and the tests all run the same call.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch
import torch.nn.functional as F

__all__ = ["Input", "Kernel", "OpSpec", "resolve", "build_inputs", "call", "outputs_of", "shape_dims",
           "backward_if_any", "element_size", "DIM_ORDER", "shape_key"]


DIM_ORDER = ("B", "T", "H", "HV", "K", "V", "D", "W")
"""Dimension names in key order. D is the conv channel count (GDN shapes use K and V)."""


def shape_key(shape: Mapping[str, int]) -> str:
    """Stable string key of a shape: dims in :data:`DIM_ORDER`, e.g. ``"B1-T4096-H16-HV32-K128-V128"``."""
    return "-".join(f"{d}{shape[d]}" for d in DIM_ORDER if d in shape)


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Input:
    """One tensor argument of an op.

    Attributes:
        name: the keyword the op takes it by.
        shape: dimension names and integers separated by spaces (``"B T H K"``, ``"D W"``); the
            names are the op's :attr:`OpSpec.dims` (``N`` is the number of sequences, ``B`` here).
        dtype: ``"in"`` (the case's dtype, e.g. bf16 on a device) or a torch dtype name
            (``"float32"``: the recurrent state is always fp32).
        draw: ``"randn"`` (standard normal) or ``"rand"`` (uniform on [0, 1)); values are drawn in
            float32 on the CPU from one seeded generator, in the order of the inputs.
        transform: a Python expression of ``x`` (the draw) and the shape's dimensions, with
            ``F`` (``torch.nn.functional``) and ``math`` in scope, e.g. ``"F.logsigmoid(x)"``,
            ``"(2 * x - 1) * W ** -0.5"``; ``None`` keeps the draw.
        grad: whether it gets a gradient in a forward + backward call.
        optional: an input only some calls pass (the estimate's ``initial_state``): left out
            unless asked for by name.
    """

    name: str
    shape: str
    dtype: str = "in"
    draw: str = "randn"
    transform: str | None = None
    grad: bool = True
    optional: bool = False


@dataclass(frozen=True)
class Kernel:
    """One ``@triton.jit`` kernel of an op.

    Attributes:
        name: the kernel's qualified name, ``"<module>.<function>"`` (the NPU check's key).
        kind: core kind of its launch plan: ``"cube"`` (it has ``tl.dot``) or ``"vector"``.
        tiles: the peak live tiles the UB model charges (shape names are the kernel's constexprs,
            ``"in"`` the input dtype); ``None`` only for a kernel the model cannot describe.
        stage: the stage label of the estimate's side-by-side rows (``"state h"``, ``"conv fwd"``).
        scenarios: name of the op spec's scenario set the NPU check launches it in (a key of
            :attr:`OpSpec.scenarios`).
        sizes: optional ``(constexprs) -> sizes`` mapping for the UB model (for a kernel whose
            tile shapes depend on a string constexpr).
        allow: findings of the NPU check accepted for this kernel, ``(finding code, config glob,
            reason)``; every entry says why.
        npu_only: launched only by NPU launch plans (a CUDA or interpreter launch plan computes the
            same result in other launches).
    """

    name: str
    kind: str
    tiles: list | None
    stage: str
    scenarios: str
    sizes: Callable | None = None
    allow: tuple[tuple[str, str, str], ...] = ()
    npu_only: bool = False

    @property
    def short_name(self) -> str:
        """The function name alone (``chunk_fwd_h_kernel``)."""
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class OpSpec:
    """One public op, or an internal primitive with kernels of its own (the context-parallel state
    chain), which names its function as the entry too.

    Attributes:
        name: the op's name (``--ops`` value of every command).
        entry: ``"module:function"`` of fla-ascend's function.
        reference: ``"module:function"``: the float32 reference of the correctness gate, called
            like :attr:`entry` with :attr:`call_kwargs` and returning the same outputs (``None``
            only for an op that is not benchmarked).
        fla: flash-linear-attention's counterpart (``"module:function"``), or ``None``.
        torch_ref: the timed PyTorch baseline (``"module:function"``), default the reference.
        dims: the shape dimensions the op needs, in key order.
        inputs: the tensor arguments (:class:`Input`).
        outputs: names of the outputs in the order the op returns them (a single tensor: one name).
        call_kwargs: constant keyword arguments of the measured call (``output_final_state=True``).
        estimate_kwargs: keyword arguments the NPU estimate adds to its call (optional inputs by
            name with ``True``; other values are passed as given).
        modes: ``"fwd"`` and, when it has a backward, ``"fwdbwd"``.
        shapes: the named shapes it is measured at; the first is its default.
        ci_shape: a small shape for CI runs of the estimate and the IR capture.
        shape_groups: groups of named shapes this op's folder defines (``{"conv-anchors": [...]}``).
        named_shapes: named shapes this op's folder defines (``{"conv-b4-t4096": {...}}``).
        kernels: every kernel of the op (:class:`Kernel`).
        scenarios: scenario sets of the NPU check, ``name -> (representative, full)``: each a dict
            ``config -> run()`` calling the op at small sizes (nothing runs: launches are captured).
        fla_stages: ``(regex on a kernel name, stage)`` for flash-linear-attention's kernels of this
            op in the estimate's rows, in order of precedence.
        bytes_moved: ``(shape, dtype, mode) -> int`` counted bytes of one call (model in its docstring).
        flops: ``(shape, mode) -> int`` counted floating-point operations of one call.
        tolerance: relative-RMSE gate per mode.
        torch_ref_max_tokens: the PyTorch baseline is skipped as a timed provider above this
            ``B * T`` (it runs token by token), ``None``: no limit.
        prepare: optional benchmark hook ``(provider, mode) -> dict`` run before a provider's cases
            (facts to record in the artifact's meta).
        benchmark: whether ``fla-ascend bench`` and the estimate run it (needs a reference, byte
            and flop counts); ``False`` for ops only the NPU check launches.
    """

    name: str
    entry: str
    reference: str | None
    dims: tuple[str, ...]
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    kernels: tuple[Kernel, ...]
    scenarios: Mapping[str, tuple[dict, dict]]
    shapes: tuple[str, ...]
    ci_shape: Mapping[str, int]
    fla: str | None = None
    torch_ref: str | None = None
    call_kwargs: Mapping = field(default_factory=dict)
    estimate_kwargs: Mapping = field(default_factory=dict)
    modes: tuple[str, ...] = ("fwd", "fwdbwd")
    shape_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    named_shapes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    fla_stages: tuple[tuple[str, str], ...] = ()
    bytes_moved: Callable | None = None
    flops: Callable | None = None
    tolerance: Mapping[str, float] = field(default_factory=lambda: {"fwd": 0.005, "fwdbwd": 0.01})
    torch_ref_max_tokens: int | None = None
    prepare: Callable | None = None
    benchmark: bool = True

    def __post_init__(self):
        for name in ("call_kwargs", "estimate_kwargs", "shape_groups", "named_shapes", "tolerance", "scenarios"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "ci_shape", _frozen(self.ci_shape))

    @property
    def grad_inputs(self) -> tuple[str, ...]:
        """Names of the required inputs that get gradients in ``fwdbwd``."""
        return tuple(i.name for i in self.inputs if i.grad and not i.optional) if "fwdbwd" in self.modes else ()

    def complete_shape(self, shape: Mapping[str, int]) -> dict[str, int] | str:
        """Fill defaulted dims (``HV = H``, ``V = K``, ``K = V = D``) and drop dims the op does not
        use; return the shape, or the reason it does not apply (a needed dim is missing)."""
        s = dict(shape)
        if "K" in self.dims and "D" in s and "K" not in s:
            s["K"] = s["V"] = s.pop("D")
        if "HV" in self.dims and "H" in s:
            s.setdefault("HV", s["H"])
        if "V" in self.dims and "K" in s:
            s.setdefault("V", s["K"])
        missing = [d for d in self.dims if d not in s]
        if missing:
            return f"shape {shape_key(shape)} lacks {', '.join(missing)} needed by {self.name}"
        return {d: s[d] for d in DIM_ORDER if d in self.dims}


def resolve(path: str) -> Callable:
    """The object ``"module:attr"`` names (imported now).

    Raises:
        ImportError, AttributeError: the module or the attribute does not exist.
        ValueError: ``path`` has no ``:``.
    """
    if ":" not in path:
        raise ValueError(f"expected 'module:attr', got {path!r}")
    module, attr = path.split(":", 1)
    return getattr(importlib.import_module(module), attr)


def shape_dims(expr: str, shape: Mapping[str, int]) -> tuple[int, ...]:
    """The sizes of a shape expression (``"B T H K"`` -> ``(1, 4096, 16, 128)``).

    Raises:
        KeyError: a dimension name the shape does not have.
    """
    return tuple(int(t) if t.isdigit() else int(shape[t]) for t in expr.split())


_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def build_inputs(spec: OpSpec, shape: Mapping[str, int], dtype: torch.dtype = torch.float32,
                 device: str | torch.device = "cpu", seed: int = 0, fill: str = "random",
                 optional: tuple[str, ...] = (), grad: bool = False) -> dict:
    """The keyword arguments of one call of ``spec``'s op at ``shape``.

    Args:
        spec: the op.
        shape: a completed shape (:meth:`OpSpec.complete_shape`).
        dtype: the dtype of ``"in"`` inputs.
        device: where the tensors are put.
        seed: the same seed gives the same values (drawn on the CPU in float32, in input order).
        fill: ``"random"`` (the inputs' draws and transforms), ``"zeros"`` or ``"empty"``
            (uninitialised): the last two for launch capture, where no kernel runs.
        optional: names of optional inputs to include.
        grad: whether tensors of inputs with ``grad`` require gradients.

    Returns:
        ``{name: tensor}`` plus :attr:`OpSpec.call_kwargs`.

    Raises:
        ValueError: an unknown ``fill`` or optional name.
    """
    if fill not in ("random", "zeros", "empty"):
        raise ValueError(f"fill must be 'random', 'zeros' or 'empty', got {fill!r}")
    unknown = set(optional) - {i.name for i in spec.inputs if i.optional}
    if unknown:
        raise ValueError(f"{spec.name}: no optional inputs {sorted(unknown)}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out: dict = {}
    for inp in spec.inputs:
        if inp.optional and inp.name not in optional:
            continue
        size = shape_dims(inp.shape, shape)
        dt = dtype if inp.dtype == "in" else _DTYPES[inp.dtype]
        if fill != "random":
            t = (torch.empty if fill == "empty" else torch.zeros)(size, dtype=dt, device=device)
        else:
            draw = torch.randn if inp.draw == "randn" else torch.rand
            x = draw(*size, generator=gen, dtype=torch.float32)
            if inp.transform:
                x = eval(inp.transform, {"F": F, "math": math, "torch": torch}, {"x": x, **shape})  # noqa: S307
            t = x.to(device=device, dtype=dt)
        if grad and inp.grad:
            t.requires_grad_(True)
        out[inp.name] = t
    out.update(spec.call_kwargs)
    return out


def outputs_of(spec: OpSpec, result) -> dict:
    """Name an op's return value by :attr:`OpSpec.outputs`; ``None`` outputs are left out."""
    values = result if isinstance(result, tuple) else (result,)
    return {n: v for n, v in zip(spec.outputs, values) if v is not None}


def call(spec: OpSpec, fn: Callable | str, inputs: Mapping) -> dict:
    """Call ``fn`` (or the ``"module:function"`` it names) with ``inputs`` by keyword; the outputs
    named by :func:`outputs_of`."""
    fn = resolve(fn) if isinstance(fn, str) else fn
    return outputs_of(spec, fn(**inputs))


def element_size(dtype: torch.dtype) -> int:
    """Bytes per element of ``dtype``."""
    return torch.empty((), dtype=dtype).element_size()


def backward_if_any(loss) -> None:
    """Run the backward pass of ``loss`` when it has one: a loss without grad, or an op without a
    backward (``NotImplementedError``), is left alone. For the NPU check's scenarios."""
    if not getattr(loss, "requires_grad", False):
        return
    try:
        loss.backward()
    except NotImplementedError:
        pass
