"""Where kernels run and how they are launched.

This module is imported before any kernel is defined (``fla_ascend/__init__.py`` imports it
first). On a machine with no accelerator it turns on the Triton interpreter
(``TRITON_INTERPRET=1``) *before* ``triton`` is imported, because ``@triton.jit`` decides at
decoration time whether it builds a compiled or an interpreted function.

It is the one place that decides:

- the device: ``"npu"`` (torch_npu importable and an NPU present), else ``"cuda"``, else ``"cpu"``;
- the Triton flavour: ``"triton-ascend"`` or ``"triton"`` (both install the ``triton`` module);
- whether kernels run under the interpreter;
- core counts (NPU: ``num_aicore`` / ``num_vectorcore``; CUDA: SM count);
- which launch options a backend gets (:func:`launch_options`): ``num_warps`` / ``num_stages``
  only on CUDA, Ascend compile options only on an NPU, nothing under the interpreter.

Only the interpreter switch is process-wide. Everything launch plans read (device kind, Ascend
chip, core counts, the device tensors live on, launch-table overrides, the CUDA grid limit) is a
:class:`Target` value: :func:`current` returns the active one (a ``contextvars.ContextVar``; by
default the one detected for this process, :func:`default_target`), and :func:`use` activates
another for a block (the NPU check, A/B and tuning scripts)::

    with backend.use(backend.current().replace(overrides={"chunk_stages": {"wy_fwd": {...}}})):
        ...
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

__all__ = [
    "Target",
    "current",
    "use",
    "default_target",
    "table",
    "OVERRIDE_TABLES",
    "Backend",
    "info",
    "device",
    "device_type",
    "is_interpreter",
    "is_cuda_compiled",
    "triton_flavour",
    "num_cores",
    "launch_options",
]


def _npu_present() -> bool:
    if importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)

        return bool(torch.npu.is_available() and torch.npu.device_count() > 0)
    except Exception:  # torch_npu without CANN raises at import
        return False


def _detect_device_type() -> str:
    forced = os.environ.get("FLA_ASCEND_DEVICE")
    if forced:
        if forced not in ("npu", "cuda", "cpu"):
            raise ValueError(f"FLA_ASCEND_DEVICE must be one of npu, cuda, cpu; got {forced!r}")
        return forced
    if _npu_present():
        return "npu"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def _detect_flavour() -> str:
    try:
        importlib.metadata.version("triton-ascend")
        return "triton-ascend"
    except importlib.metadata.PackageNotFoundError:
        return "triton"


def _flavour_version(flavour: str) -> str:
    try:
        return importlib.metadata.version(flavour)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _check_triton() -> None:
    """A clear ``ImportError`` when there is no ``triton`` module: fla-ascend's dependencies cannot
    name one (pip has no "Triton or triton-ascend", and both install the ``triton`` module), so
    it comes from an extra."""
    if importlib.util.find_spec("triton") is None:
        raise ImportError(
            "fla_ascend's kernels need Triton: pip install \"fla-ascend[triton]\" (upstream Triton: NVIDIA GPUs "
            "and the CPU interpreter) or \"fla-ascend[npu]\" (Ascend NPUs: triton-ascend); from a clone: "
            "pip install \".[triton]\" or \".[npu]\"")


def _check_numpy(interpret: bool) -> None:
    """A clear ``ImportError`` for the interpreter without NumPy: Triton's interpreter imports it
    and Triton does not declare it."""
    if interpret and importlib.util.find_spec("numpy") is None:
        raise ImportError(
            "fla_ascend's kernels run on the Triton interpreter here (no GPU or NPU), which needs NumPy, "
            "a package Triton does not declare: pip install numpy (the triton extra installs it)")


DEVICE_TYPE: str = _detect_device_type()
"""The device this process found (or ``FLA_ASCEND_DEVICE`` forced): the default target's
``device_type``. Read-only: launch plans read :func:`current`, not this."""
TRITON_FLAVOUR: str = _detect_flavour()
_check_triton()
if DEVICE_TYPE == "cpu" and os.environ.get("TRITON_INTERPRET", "0") != "1":
    # Must happen before the first `import triton` anywhere in the process: Triton sets up its
    # interpreter when it is imported, so a later switch leaves kernels half-interpreted.
    if "triton" in sys.modules:
        raise ImportError(
            "fla_ascend found no GPU or NPU and must run its kernels on the Triton interpreter, but "
            "triton was imported before fla_ascend without TRITON_INTERPRET=1; import fla_ascend "
            "first or set TRITON_INTERPRET=1 in the environment"
        )
    os.environ["TRITON_INTERPRET"] = "1"
INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"
"""Whether ``@triton.jit`` builds interpreted functions in this process (process-wide: decided
before triton is imported)."""
_check_numpy(INTERPRET)

_DEVICE_TYPES = ("npu", "cuda", "cpu")
_EMPTY: Mapping = MappingProxyType({})

OVERRIDE_TABLES = frozenset({"chunk_stages", "causal_conv1d", "fused_recurrent_gated_delta_rule", "l2norm",
                             "rms_norm_gated", "gva_group_sum"})
"""Names of the launch tables a :class:`Target` may override: ``chunk_stages``
(:data:`fla_ascend.ops.common.tiles.CUDA_LAUNCH`, stage -> entry), ``causal_conv1d``
(``conv.CUDA_TILES``), ``fused_recurrent_gated_delta_rule`` (``fused_recurrent.CUDA_TILES``),
``l2norm`` and ``rms_norm_gated`` (their modules' ``CUDA_TILES``), ``gva_group_sum``
(:data:`fla_ascend.ops.common.gva.TILES`)."""


def _freeze(overrides: Mapping) -> Mapping:
    """``overrides`` as a read-only mapping of read-only mappings (checked against :data:`OVERRIDE_TABLES`)."""
    if not isinstance(overrides, Mapping):
        raise TypeError(f"overrides must be a mapping of table name -> entries, got {type(overrides).__name__}")
    unknown = sorted(set(overrides) - OVERRIDE_TABLES)
    if unknown:
        raise ValueError(f"unknown launch tables {unknown} in overrides; known: {sorted(OVERRIDE_TABLES)}")
    frozen = {}
    for name, entries in overrides.items():
        if not isinstance(entries, Mapping):
            raise TypeError(f"overrides[{name!r}] must be a mapping of entry -> value, got {type(entries).__name__}")
        frozen[name] = MappingProxyType({k: MappingProxyType(dict(v)) if isinstance(v, Mapping) else v
                                         for k, v in entries.items()})
    return MappingProxyType(frozen)


@dataclass(frozen=True)
class Target:
    """What launch plans and launch options are computed for: a value, active through :func:`use`.

    Attributes:
        device_type: ``"npu"``, ``"cuda"`` or ``"cpu"``: which backend's plans and options apply.
        interpret: plans and options as for interpreted kernels (no launch options, the NPU-style
            task loop). The default target has the process's ``TRITON_INTERPRET``; ``False`` while
            the process interprets emulates a compiled target's plans (kernels still interpreted).
        chip: the Ascend SoC (:class:`fla_ascend.tiling.chips.ChipSpec`) the UB model plans for, or
            ``None``: the chip the environment names (the NPU's device name on an NPU target, else
            ``TRITON_ASCEND_ARCH``; :func:`fla_ascend.tiling.chips.environment_chip`), else
            :data:`fla_ascend.tiling.chips.DEFAULT_CHIP`.
        cube_cores, vector_cores: cores a task-loop kernel spreads over (``None``: asked from the
            device on first use and cached; on the CPU 4).
        tensor_device: the torch device type tensors live on (``""``: ``device_type``); the NPU check
            plans for an NPU while its launches get CPU tensors.
        overrides: launch table name (:data:`OVERRIDE_TABLES`) -> entries that replace the table's
            (read-only; given dicts are copied and frozen).
        cuda_max_grid_x: largest 1-D CUDA grid before the task loop is switched on.
        strict_stages: chunk stages whose launches try only their first candidate
            (:func:`fla_ascend.ops.common.tiles.launch_first_fitting`; stage A/Bs).
        on_cores: called with the core kind (``"cube"``/``"vector"``) each time a launch plan asks
            :func:`num_cores` (a recording hook; not compared).

    Raises:
        ValueError: unknown ``device_type``, unknown override table, core counts below 1.
        TypeError: ``overrides`` not a mapping of mappings.
    """

    device_type: str
    interpret: bool = False
    chip: Any = None
    cube_cores: int | None = None
    vector_cores: int | None = None
    tensor_device: str = ""
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    cuda_max_grid_x: int = 2**31 - 1
    strict_stages: frozenset = frozenset()
    on_cores: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.device_type not in _DEVICE_TYPES:
            raise ValueError(f"device_type must be one of {', '.join(_DEVICE_TYPES)}; got {self.device_type!r}")
        for name in ("cube_cores", "vector_cores"):
            n = getattr(self, name)
            if n is not None and (not isinstance(n, int) or n < 1):
                raise ValueError(f"{name} must be a positive int or None, got {n!r}")
        if not self.tensor_device:
            object.__setattr__(self, "tensor_device", self.device_type)
        object.__setattr__(self, "overrides", _freeze(self.overrides))
        object.__setattr__(self, "strict_stages", frozenset(self.strict_stages))

    def replace(self, **changes) -> Target:
        """A copy with ``changes`` (:func:`dataclasses.replace`; the same checks apply)."""
        return dataclasses.replace(self, **changes)

    def cores(self, kind: str) -> int:
        """Core count for ``kind`` (``"cube"`` or ``"vector"``), without calling :attr:`on_cores`.

        Raises:
            ValueError: ``kind`` is neither.
        """
        if kind == "cube":
            n = self.cube_cores
        elif kind == "vector":
            n = self.vector_cores
        else:
            raise ValueError(f"kind must be 'cube' or 'vector', got {kind!r}")
        return n if n is not None else _device_cores(self.device_type, kind)


@functools.cache
def _device_cores(device_type: str, kind: str) -> int:
    if device_type == "npu":
        import triton

        props = triton.runtime.driver.active.utils.get_device_properties(torch.npu.current_device())
        return int(props["num_aicore" if kind == "cube" else "num_vectorcore"])
    if device_type == "cuda":
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    return 4


@functools.cache
def default_target() -> Target:
    """The target detected for this process (once, on first use): :data:`DEVICE_TYPE`,
    :data:`INTERPRET`, core counts asked from the device, and no chip of its own: the UB model then
    plans for the chip the environment names (:func:`fla_ascend.tiling.chips.get_chip`)."""
    return Target(device_type=DEVICE_TYPE, interpret=INTERPRET)


_CURRENT: contextvars.ContextVar[Target | None] = contextvars.ContextVar("fla_ascend_target", default=None)


def current() -> Target:
    """The active :class:`Target`: the innermost :func:`use` of this thread / asyncio task, else
    :func:`default_target`."""
    t = _CURRENT.get()
    return t if t is not None else default_target()


@contextlib.contextmanager
def use(target: Target) -> Iterator[Target]:
    """Make ``target`` the active target while the block runs (nestable; the previous one is
    restored on exit, also when the block raises). Context-local: other threads and asyncio tasks
    keep theirs.

    Raises:
        TypeError: ``target`` is not a :class:`Target`.
    """
    if not isinstance(target, Target):
        raise TypeError(f"use() takes a Target, got {type(target).__name__}")
    token = _CURRENT.set(target)
    try:
        yield target
    finally:
        _CURRENT.reset(token)


def table(name: str, base: Mapping) -> Mapping:
    """Launch table ``name`` (one of :data:`OVERRIDE_TABLES`) with the active target's overrides
    merged over ``base`` (``base`` itself when there are none).

    Raises:
        KeyError: an override entry that ``base`` does not have (a typo would otherwise vanish).
    """
    over = current().overrides.get(name)
    if not over:
        return base
    unknown = sorted(set(over) - set(base))
    if unknown:
        raise KeyError(f"overrides[{name!r}]: unknown entries {unknown}; known: {sorted(base)}")
    return MappingProxyType({**base, **over})


def device_type() -> str:
    """``"npu"``, ``"cuda"`` or ``"cpu"``: the backend the active target's launch plans are for."""
    return current().device_type


def device() -> torch.device:
    """The ``torch.device`` tensors must live on for the kernels (current index): the active
    target's :attr:`Target.tensor_device`."""
    kind = current().tensor_device
    if kind == "npu":
        return torch.device("npu", torch.npu.current_device())
    if kind == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(kind)


def is_interpreter() -> bool:
    """True when kernels run under the Triton interpreter in this process (process-wide)."""
    return INTERPRET


def is_cuda_compiled() -> bool:
    """True when the active target's plans are for kernels compiled for a CUDA GPU (device
    ``"cuda"``, not interpreted): where the CUDA-only choices (launch plans, tiles, dot precision,
    Hopper rules) apply."""
    t = current()
    return t.device_type == "cuda" and not t.interpret


def triton_flavour() -> str:
    """``"triton-ascend"`` or ``"triton"``: which distribution provides the ``triton`` module."""
    return TRITON_FLAVOUR


def num_cores(kind: str = "vector") -> int:
    """Physical cores a task-loop kernel spreads over, on the active target.

    Args:
        kind: ``"cube"`` for kernels with ``tl.dot`` (Ascend AI cores), ``"vector"`` for
            vector-only kernels (Ascend vector cores). On CUDA both are the SM count.

    Returns:
        The target's count; detected ones are NPU: ``num_aicore`` or ``num_vectorcore`` from
        triton-ascend's device properties; CUDA: ``multi_processor_count``; CPU (interpreter): 4,
        a small number so the task loop runs several iterations per program as it does on an NPU.
        The target's :attr:`Target.on_cores` hook, if any, is called with ``kind`` first.

    Raises:
        ValueError: ``kind`` is not ``"cube"`` or ``"vector"``.
    """
    t = current()
    n = t.cores(kind)
    if t.on_cores is not None:
        t.on_cores(kind)
    return n


# Ascend compile options understood by triton-ascend 3.2.0; an option a version does not
# know raises KeyError there, so only these pass (docs/ascend-rules.md, R2).
_NPU_OPTIONS = frozenset({"multibuffer", "unit_flag", "enable_auto_bind_sub_block", "tile_mix_vector_loop"})
_CUDA_OPTIONS = frozenset({"num_warps", "num_stages"})


def launch_options(**options) -> dict:
    """Filter launch keyword arguments to those the active target's backend accepts.

    ``num_warps`` / ``num_stages`` reach only CUDA launches (on Ascend they mean nothing, warn,
    and enter the compile cache key); Ascend compile options reach only NPU launches; the
    interpreter gets none. A ``None`` value is dropped.

    Raises:
        ValueError: an option name that no backend knows (a typo would otherwise vanish).
    """
    unknown = set(options) - _NPU_OPTIONS - _CUDA_OPTIONS
    if unknown:
        raise ValueError(f"unknown launch options {sorted(unknown)}; known: {sorted(_NPU_OPTIONS | _CUDA_OPTIONS)}")
    t = current()
    if t.interpret:
        return {}
    allowed = _NPU_OPTIONS if t.device_type == "npu" else _CUDA_OPTIONS if t.device_type == "cuda" else frozenset()
    return {k: v for k, v in options.items() if k in allowed and v is not None}


@dataclass(frozen=True)
class Backend:
    device_type: str
    triton_flavour: str
    triton_version: str
    interpreter: bool
    cube_cores: int
    vector_cores: int
    device_name: str
    torch_version: str


def info() -> Backend:
    """The active target as ``fla-ascend info`` and benchmark records show it (its device name is
    the process's device where the target's device type is the one detected)."""
    t = current()
    if t.device_type != DEVICE_TYPE:
        name = f"{t.chip.name if t.chip is not None else t.device_type} (emulated target)"
    elif t.device_type == "cuda":
        name = torch.cuda.get_device_name()
    elif t.device_type == "npu":
        name = torch.npu.get_device_name()
    else:
        name = "cpu (Triton interpreter)"
    return Backend(
        device_type=t.device_type,
        triton_flavour=TRITON_FLAVOUR,
        triton_version=_flavour_version(TRITON_FLAVOUR),
        interpreter=t.interpret,
        cube_cores=t.cores("cube"),
        vector_cores=t.cores("vector"),
        device_name=name,
        torch_version=torch.__version__,
    )
