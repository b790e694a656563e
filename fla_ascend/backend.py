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
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass

import torch

__all__ = [
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
_check_numpy(INTERPRET)


def device_type() -> str:
    """``"npu"``, ``"cuda"`` or ``"cpu"``: where kernels of this process run."""
    return DEVICE_TYPE


def device() -> torch.device:
    """The ``torch.device`` tensors must live on for the kernels (current index)."""
    if DEVICE_TYPE == "npu":
        return torch.device("npu", torch.npu.current_device())
    if DEVICE_TYPE == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def is_interpreter() -> bool:
    """True when kernels run under the Triton interpreter (CPU tier)."""
    return INTERPRET


def is_cuda_compiled() -> bool:
    """True when kernels are compiled for a CUDA GPU (device ``"cuda"``, not the interpreter):
    where the CUDA-only choices (launch plans, tiles, dot precision, Hopper rules) apply."""
    return device_type() == "cuda" and not is_interpreter()


def triton_flavour() -> str:
    """``"triton-ascend"`` or ``"triton"``: which distribution provides the ``triton`` module."""
    return TRITON_FLAVOUR


@functools.cache
def num_cores(kind: str = "vector") -> int:
    """Physical cores a task-loop kernel spreads over.

    Args:
        kind: ``"cube"`` for kernels with ``tl.dot`` (Ascend AI cores), ``"vector"`` for
            vector-only kernels (Ascend vector cores). On CUDA both are the SM count.

    Returns:
        NPU: ``num_aicore`` or ``num_vectorcore`` from triton-ascend's device properties;
        CUDA: ``multi_processor_count``; CPU (interpreter): 4, a small number so the task
        loop runs several iterations per program as it does on an NPU.

    Raises:
        ValueError: ``kind`` is not ``"cube"`` or ``"vector"``.
    """
    if kind not in ("cube", "vector"):
        raise ValueError(f"kind must be 'cube' or 'vector', got {kind!r}")
    if DEVICE_TYPE == "npu":
        import triton

        props = triton.runtime.driver.active.utils.get_device_properties(torch.npu.current_device())
        return int(props["num_aicore" if kind == "cube" else "num_vectorcore"])
    if DEVICE_TYPE == "cuda":
        return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    return 4


# Ascend compile options understood by triton-ascend 3.2.0; an option a version does not
# know raises KeyError there, so only these pass (docs/ascend-rules.md, R2).
_NPU_OPTIONS = frozenset({"multibuffer", "unit_flag", "enable_auto_bind_sub_block", "tile_mix_vector_loop"})
_CUDA_OPTIONS = frozenset({"num_warps", "num_stages"})


def launch_options(**options) -> dict:
    """Filter launch keyword arguments to those the current backend accepts.

    ``num_warps`` / ``num_stages`` reach only CUDA launches (on Ascend they mean nothing, warn,
    and enter the compile cache key); Ascend compile options reach only NPU launches; the
    interpreter gets none. A ``None`` value is dropped.

    Raises:
        ValueError: an option name that no backend knows (a typo would otherwise vanish).
    """
    unknown = set(options) - _NPU_OPTIONS - _CUDA_OPTIONS
    if unknown:
        raise ValueError(f"unknown launch options {sorted(unknown)}; known: {sorted(_NPU_OPTIONS | _CUDA_OPTIONS)}")
    if INTERPRET:
        return {}
    allowed = _NPU_OPTIONS if DEVICE_TYPE == "npu" else _CUDA_OPTIONS if DEVICE_TYPE == "cuda" else frozenset()
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
    """Everything this module decided, for ``fla-ascend info`` and benchmark records."""
    if DEVICE_TYPE == "cuda":
        name = torch.cuda.get_device_name()
    elif DEVICE_TYPE == "npu":
        name = torch.npu.get_device_name()
    else:
        name = "cpu (Triton interpreter)"
    return Backend(
        device_type=DEVICE_TYPE,
        triton_flavour=TRITON_FLAVOUR,
        triton_version=_flavour_version(TRITON_FLAVOUR),
        interpreter=INTERPRET,
        cube_cores=num_cores("cube"),
        vector_cores=num_cores("vector"),
        device_name=name,
        torch_version=torch.__version__,
    )
