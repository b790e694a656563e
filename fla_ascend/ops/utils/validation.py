"""Input validation shared by the ops: every error names the argument, expected and actual value."""
from __future__ import annotations

import contextlib
import numbers
import reprlib
from collections.abc import Iterable, Iterator, Sequence

import torch

from fla_ascend import backend
from fla_ascend.ops.utils.index import prepare_chunk_indices

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

MAX_CONV_WIDTH = 16
"""Largest kernel width ``W`` of ``causal_conv1d`` (:data:`fla_ascend.ops.causal_conv1d.conv.MAX_W`
says why). Defined here, below the ops, because :func:`fla_ascend.ops.cp.build_cp_context` checks
its ``conv1d_kernel_size`` against it and the context-parallel primitives import no op."""


@contextlib.contextmanager
def op_errors(op: str) -> Iterator[None]:
    """Around an op's argument checks: a ``TypeError`` or ``ValueError`` raised inside is raised
    again, same type, with the message prefixed by the op's name (``"l2norm: eps must be ..."``)."""
    try:
        yield
    except (TypeError, ValueError) as e:
        raise type(e)(f"{op}: {e}") from None


def check_bool(name: str, value: object) -> bool:
    """A flag of an op, module or layer: a Python ``bool`` or a NumPy ``bool_``, returned as a
    Python ``bool``. Anything else (``"False"``, ``0``, ``None``, a tensor) is refused rather than
    taken by truthiness: a flag read from a text config as ``"False"`` would otherwise switch the
    feature on.

    Raises:
        TypeError: ``value`` is not a bool; the message names ``name`` and the type and value given.
    """
    if isinstance(value, bool) or _is_numpy_bool(value):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {type(value).__name__} {reprlib.repr(value)}")


def check_bools(op: str, **flags: object) -> list[bool]:
    """:func:`check_bool` for each keyword, in order, the message prefixed by ``op``.

    Raises:
        TypeError: ``"<op>: <name> must be a bool ..."`` for the first flag that is not one.
    """
    with op_errors(op):
        return [check_bool(name, value) for name, value in flags.items()]


def _is_numpy_bool(value: object) -> bool:
    """``numpy.bool_`` (``numpy.bool`` in NumPy 2), recognised without importing NumPy."""
    cls = type(value)
    return cls.__module__ == "numpy" and cls.__name__ in ("bool_", "bool")


def check_eps(eps: object) -> float:
    """``eps`` of a norm: a real number ``>= 0`` (Python or NumPy), returned as a float.

    Raises:
        TypeError: not a real number (a bool is refused too).
        ValueError: negative (or NaN).
    """
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a float, got {type(eps).__name__}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    return float(eps)


def check_tensor(
    name: str,
    x: object,
    shape: Sequence[int | None] | None = None,
    dtypes: Iterable[torch.dtype] = FLOAT_DTYPES,
) -> torch.Tensor:
    """Check that ``x`` is a tensor of an allowed dtype and, where given, shape.

    Args:
        name: argument name used in the message.
        shape: expected shape; ``None`` entries match any size.
        dtypes: allowed dtypes.

    Raises:
        TypeError: ``x`` is not a tensor, or has another dtype.
        ValueError: on the meta device (no data to read), wrong number of dimensions or a
            mismatched size.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    check_has_data(name, x)
    dtypes = tuple(dtypes)
    if x.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype in {[str(d) for d in dtypes]}, got {x.dtype}")
    if shape is not None:
        if x.dim() != len(shape):
            raise ValueError(f"{name} must have {len(shape)} dims {_fmt(shape)}, got shape {tuple(x.shape)}")
        for want, got in zip(shape, x.shape):
            if want is not None and want != got:
                raise ValueError(f"{name} must have shape {_fmt(shape)}, got {tuple(x.shape)}")
    return x


def check_has_data(name: str, x: torch.Tensor) -> None:
    """Raise ``ValueError`` naming ``name`` when ``x`` is on the meta device (shape only, no data)."""
    if x.is_meta:
        raise ValueError(f"{name} must hold data (the kernels read it), got a tensor on the meta device "
                         f"(shape {tuple(x.shape)}); materialise the module or inputs first, e.g. "
                         "module.to_empty(device=...) and load the weights")


def _fmt(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """Raise ``ValueError`` when the given (non-None) tensors are on different devices, or on a
    device of another type than the one the active target's tensors live on
    (:attr:`fla_ascend.backend.Target.tensor_device`, :func:`fla_ascend.backend.device`): CPU
    tensors on a GPU machine reached Triton and failed there. For an interpreted target
    (:attr:`fla_ascend.backend.Target.interpret`) kernels read host memory: any device passes that check."""
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {k: v.device for k, v in present.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{k} on {d}" for k, d in devices.items())
        raise ValueError(f"all tensors must be on one device; got {listing}")
    target = backend.current()
    want = target.tensor_device
    if want == "cpu" or target.interpret:
        return  # kernels read host memory (the interpreter), or the target's tensors are on the host
    for name, dev in devices.items():
        if dev.type != want:
            raise ValueError(f"{name} must be on the device the kernels run on, {want} (fla_ascend.backend.device()); "
                             f"got a tensor on {dev}")


def check_cu_seqlens(cu_seqlens: object, B: int, T: int) -> torch.Tensor:
    """Validate varlen boundaries: 1-D integer, starts at 0, non-decreasing, ends at ``T``, ``B == 1``.

    Empty sequences (repeated boundaries) are allowed. This reads ``cu_seqlens`` on the host
    (one device-to-host copy per call).

    Returns:
        ``cu_seqlens`` as given.

    Raises:
        TypeError: not a tensor or not an integer dtype.
        ValueError: ``B != 1``, not 1-D, fewer than 2 entries, on the meta device, first entry
            not 0, decreasing, or last entry not ``T``.
    """
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(f"cu_seqlens must be a torch.Tensor, got {type(cu_seqlens).__name__}")
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens must have an integer dtype (int32 or int64), got {cu_seqlens.dtype}")
    if B != 1:
        raise ValueError(f"with cu_seqlens the batch size B must be 1 (sequences packed along T), got B={B}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(f"cu_seqlens must be 1-D with N+1 >= 2 entries, got shape {tuple(cu_seqlens.shape)}")
    if cu_seqlens.is_meta:
        raise ValueError("cu_seqlens must hold values (its boundaries are read on the host), got a tensor on the "
                         "meta device")
    host = cu_seqlens.detach().cpu()
    if int(host[0]) != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {int(host[0])}")
    diffs = host[1:] - host[:-1]
    if bool((diffs < 0).any()):
        i = int(torch.nonzero(diffs < 0)[0])
        raise ValueError(
            f"cu_seqlens must be non-decreasing, got cu_seqlens[{i}]={int(host[i])} > "
            f"cu_seqlens[{i + 1}]={int(host[i + 1])}"
        )
    if int(host[-1]) != T:
        raise ValueError(f"cu_seqlens must end at T={T} (the packed length), got {int(host[-1])}")
    return cu_seqlens


def check_varlen(
    cu_seqlens: object, cu_seqlens_cpu: object, chunk_indices: object, B: int, T: int,
    chunk_size: int | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Validate flash-linear-attention's varlen arguments without a device-to-host copy where it can.

    - ``cu_seqlens`` alone: :func:`check_cu_seqlens` (reads its values on the host: one copy).
    - with ``cu_seqlens_cpu`` (a host copy of the same boundaries): that copy is validated and,
      when ``cu_seqlens`` is on the CPU too, compared with it value by value; on an accelerator
      ``cu_seqlens`` is only checked for dtype and length (its values are not read).
    - with ``chunk_indices`` (``[NT, 2]`` int rows ``(i_n, i_t)``, as built by
      :func:`fla_ascend.ops.utils.prepare_chunk_indices` for the op's ``chunk_size``): checked for
      shape and dtype always. Where the boundaries are known on the host (``cu_seqlens_cpu`` given,
      or ``cu_seqlens`` on the CPU) the row count is compared with the chunk list built from them,
      and when ``chunk_indices`` is on the CPU too, every row. On an accelerator without
      ``cu_seqlens_cpu`` neither ``cu_seqlens``' values nor ``chunk_indices``' rows are read (that
      would be a device-to-host synchronisation): both are trusted to describe the same batch, and
      rows out of range make the kernels read out of bounds.

    Args:
        chunk_size: tokens per chunk that ``chunk_indices`` must describe; ``None`` skips the
            comparison with the boundaries.

    Returns:
        ``(cu_seqlens, cu_seqlens_cpu, chunk_indices)`` as given.

    Raises:
        TypeError: a non-tensor or a non-integer tensor.
        ValueError: ``cu_seqlens_cpu`` or ``chunk_indices`` without ``cu_seqlens``; ``cu_seqlens_cpu``
            not on the CPU, of another length or (``cu_seqlens`` on the CPU) other values;
            ``chunk_indices`` not ``[NT, 2]``, on another device, or not the chunk list of the
            boundaries (where checked, see above); plus :func:`check_cu_seqlens`' errors.
    """
    if cu_seqlens is None:
        for name, t in (("cu_seqlens_cpu", cu_seqlens_cpu), ("chunk_indices", chunk_indices)):
            if t is not None:
                raise ValueError(f"{name} describes a packed (varlen) batch and needs cu_seqlens; got cu_seqlens=None")
        return None, None, None
    if cu_seqlens_cpu is None and chunk_indices is None:
        return check_cu_seqlens(cu_seqlens, B, T), None, None
    if not isinstance(cu_seqlens, torch.Tensor):
        raise TypeError(f"cu_seqlens must be a torch.Tensor, got {type(cu_seqlens).__name__}")
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens must have an integer dtype (int32 or int64), got {cu_seqlens.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(f"cu_seqlens must be 1-D with N+1 >= 2 entries, got shape {tuple(cu_seqlens.shape)}")
    if B != 1:
        raise ValueError(f"with cu_seqlens the batch size B must be 1 (sequences packed along T), got B={B}")
    host = None  # the boundaries on the host, where known without a device-to-host copy
    if on_host(cu_seqlens):
        host = check_cu_seqlens(cu_seqlens, B, T)
    if cu_seqlens_cpu is not None:
        check_cu_seqlens(cu_seqlens_cpu, B, T)
        if cu_seqlens_cpu.device.type != "cpu":
            raise ValueError(f"cu_seqlens_cpu must be on the CPU, got a tensor on {cu_seqlens_cpu.device}")
        if cu_seqlens_cpu.numel() != cu_seqlens.numel():
            raise ValueError(f"cu_seqlens_cpu must have cu_seqlens' length {cu_seqlens.numel()}, "
                             f"got {cu_seqlens_cpu.numel()}")
        if host is not None and not torch.equal(host.long(), cu_seqlens_cpu.long()):
            raise ValueError(f"cu_seqlens_cpu must hold the same boundaries as cu_seqlens; got cu_seqlens="
                             f"{host.tolist()} and cu_seqlens_cpu={cu_seqlens_cpu.tolist()}")
        host = cu_seqlens_cpu
    if chunk_indices is not None:
        if not isinstance(chunk_indices, torch.Tensor):
            raise TypeError(f"chunk_indices must be a torch.Tensor, got {type(chunk_indices).__name__}")
        if chunk_indices.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"chunk_indices must have an integer dtype (int32 or int64), got {chunk_indices.dtype}")
        if chunk_indices.dim() != 2 or chunk_indices.shape[1] != 2:
            raise ValueError(f"chunk_indices must have shape [NT, 2], got {tuple(chunk_indices.shape)}")
        if chunk_indices.device != cu_seqlens.device:
            raise ValueError(f"chunk_indices must be on cu_seqlens' device {cu_seqlens.device}, "
                             f"got {chunk_indices.device}")
        if chunk_size is not None and host is not None:
            _check_chunk_indices(chunk_indices, host, chunk_size)
    return cu_seqlens, cu_seqlens_cpu, chunk_indices


def on_host(t: torch.Tensor) -> bool:
    """Whether ``t``'s values can be read without a device-to-host copy (it is on the CPU)."""
    return t.device.type == "cpu"


def _check_chunk_indices(chunk_indices: torch.Tensor, host: torch.Tensor, chunk_size: int) -> None:
    """``chunk_indices`` against the chunk list of the host boundaries ``host``: the row count
    always, every row when ``chunk_indices`` is on the CPU (no device-to-host copy either way)."""
    want = prepare_chunk_indices(host, chunk_size)
    if chunk_indices.shape[0] != want.shape[0]:
        raise ValueError(f"chunk_indices must have one row per {chunk_size}-token chunk of cu_seqlens "
                         f"({want.shape[0]} rows), got {chunk_indices.shape[0]} rows")
    if on_host(chunk_indices):
        bad = (chunk_indices.long() != want.long()).any(1)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise ValueError(f"chunk_indices must list the {chunk_size}-token chunks of cu_seqlens as rows "
                             f"(sequence, chunk); row {i} should be {want[i].tolist()}, "
                             f"got {chunk_indices[i].tolist()}")
