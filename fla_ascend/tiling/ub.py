"""The Unified Buffer (UB) budget model and the tile-size picker used by NPU launch plans.

Model (docs/ascend-rules.md, R4)::

    charged = multibuffer x sum(bytes of buffered live tiles) + sum(bytes of unbuffered tiles)
              if that is at most chip.ub_bytes,
              else max(sum(bytes of all live tiles), chip.ub_bytes)
    fits   <=> charged <= chip.ub_bytes x margin

The second line follows bishengir-compile: it multi-buffers a kernel's loop buffers only when the
multi-buffered plan fits the UB; otherwise it retries (code motion off, then without
multi-buffering) and its plan fills at most the UB, which the model charges (docs/check.md).
So a kernel whose multi-buffered tiles do not fit is charged the whole UB: it fits only a
``margin`` of 1, and only when its tiles fit once.

- A *tile* is an on-chip buffer a kernel keeps live at its peak: a loaded block, an
  accumulator, an intermediate. Declare it as ``Tile(("BT", "BK"), "fp32")``; shape entries
  are ints or expressions over size names (``"BT + W - 1"``), evaluated for the candidate sizes.
- ``multibuffer`` (default 2): triton-ascend's automatic double buffering (on by default on
  A2/A3, ``NPUOptions.multibuffer``) charges tiles that are loaded inside a loop about twice.
  A tile declared ``buffered=False`` (an accumulator carried across iterations, a constant) is
  charged once.
- ``margin`` (default 0.85): the share of UB the tiles may use; the compiler needs the rest for
  temporaries of reductions, casts and masks that the model does not see.

The static check (``fla-ascend check``) compares :func:`predict` with the ``memref.alloc``
bytes of the lowered IR for every kernel (tests/check, test_ub_model_vs_ir).
"""
from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from fla_ascend.tiling.chips import ChipSpec, get_chip

__all__ = ["Tile", "UBEstimate", "DTYPE_BYTES", "dtype_bytes", "predict", "budget", "fits", "fit_tiles",
           "DEFAULT_MARGIN", "DEFAULT_MULTIBUFFER"]

DEFAULT_MARGIN = 0.85
DEFAULT_MULTIBUFFER = 2

DTYPE_BYTES = {
    "fp32": 4, "float32": 4, "f32": 4, "fp16": 2, "float16": 2, "f16": 2, "bf16": 2, "bfloat16": 2,
    "int8": 1, "i8": 1, "uint8": 1, "int16": 2, "i16": 2, "int32": 4, "i32": 4, "int64": 8, "i64": 8,
    "bool": 1, "i1": 1, "fp64": 8, "float64": 8, "f64": 8,
}


def dtype_bytes(dtype) -> int:
    """Bytes per element of ``dtype``: a name (``"bf16"``, ``"float32"``), a ``torch.dtype`` or a
    ``triton.language`` dtype.

    Raises:
        TypeError: ``dtype`` is not a known name or dtype object.
    """
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key in DTYPE_BYTES:
            return DTYPE_BYTES[key]
        raise TypeError(f"unknown dtype name {dtype!r}; known: {sorted(DTYPE_BYTES)}")
    itemsize = getattr(dtype, "itemsize", None)  # torch.dtype
    if isinstance(itemsize, int):
        return itemsize
    width = getattr(dtype, "primitive_bitwidth", None)  # triton.language.dtype
    if isinstance(width, int):
        return max(1, width // 8)
    raise TypeError(f"dtype must be a name, torch.dtype or tl.dtype, got {dtype!r}")


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.Name, ast.Constant, ast.Load, ast.Add, ast.Sub, ast.Mult,
                  ast.FloorDiv, ast.Mod, ast.UnaryOp, ast.USub, ast.Call)
_FUNCS = {"max": max, "min": min, "cdiv": lambda a, b: -(-a // b),
          "next_pow2": lambda n: 1 << max(0, (n - 1).bit_length())}


def _eval_dim(expr, sizes: Mapping[str, int]) -> int:
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise TypeError(f"tile dimension must be an int or a str expression, got {expr!r}")
    if isinstance(expr, int):
        return expr
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"tile dimension {expr!r}: only + - * // %, ints, size names and "
                             f"max/min/cdiv/next_pow2 are allowed")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS):
            raise ValueError(f"tile dimension {expr!r}: unknown function")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS)
    missing = names - set(sizes)
    if missing:
        raise ValueError(f"tile dimension {expr!r} needs sizes {sorted(missing)}; given {sorted(sizes)}")
    value = eval(compile(tree, "<tile>", "eval"), {"__builtins__": {}}, {**_FUNCS, **sizes})  # noqa: S307 (checked AST)
    return int(value)


@dataclass(frozen=True)
class Tile:
    """A live on-chip tile: ``shape`` (ints or size expressions), element ``dtype``.

    Args:
        shape: e.g. ``("BT", "BK")`` or ``("BT + W - 1", "BD")``.
        dtype: element type name (``"fp32"``, ``"bf16"``...), ``torch.dtype`` or ``tl.dtype``;
            ``"in"`` means "the input dtype", resolved from ``sizes["in_bytes"]``.
        name: what it holds (for reports).
        buffered: False for tiles the multibuffer factor does not apply to (accumulators
            carried across loop iterations, loop-invariant tiles).
    """

    shape: tuple
    dtype: object = "fp32"
    name: str = ""
    buffered: bool = True

    def nbytes(self, sizes: Mapping[str, int]) -> int:
        """Bytes of this tile for the given sizes (ValueError on a missing size name)."""
        numel = math.prod(_eval_dim(d, sizes) for d in self.shape)
        if self.dtype == "in":
            if "in_bytes" not in sizes:
                raise ValueError(f"tile {self.name or self.shape} has dtype 'in' but sizes has no 'in_bytes'")
            return numel * int(sizes["in_bytes"])
        return numel * dtype_bytes(self.dtype)


TileSpec = Sequence[Tile] | Callable[[Mapping[str, int]], int]


@dataclass(frozen=True)
class UBEstimate:
    """Result of :func:`predict`: ``raw`` bytes of all live tiles (what ``memref.alloc`` sums in the
    lowered IR), ``charged`` bytes after the multibuffer factor, and the chip ``budget``."""

    raw: int
    charged: int
    budget: int

    @property
    def fits(self) -> bool:
        return self.charged <= self.budget


def _raw_and_charged(tiles: TileSpec, sizes: Mapping[str, int], multibuffer: int,
                     ub_bytes: int | None = None) -> tuple[int, int]:
    if callable(tiles):
        buf, once = int(tiles(sizes)), 0
    else:
        buf = sum(t.nbytes(sizes) for t in tiles if t.buffered)
        once = sum(t.nbytes(sizes) for t in tiles if not t.buffered)
    charged = buf * multibuffer + once
    if ub_bytes is not None and charged > ub_bytes:
        # bishengir-compile multi-buffers only when the multi-buffered plan fits the UB; otherwise it
        # retries (code motion off, then buffers planned once) and plans at most the whole UB
        # (docs/check.md, "The UB model against bishengir-compile's plan")
        charged = max(buf + once, ub_bytes)
    return buf + once, charged


def budget(chip: str | ChipSpec | None = None, margin: float = DEFAULT_MARGIN) -> int:
    """UB bytes the tiles of one kernel may use on ``chip``: ``floor(ub_bytes x margin)``.

    Raises:
        ValueError: ``margin`` not in ``(0, 1]``; unknown chip.
    """
    if not 0 < margin <= 1:
        raise ValueError(f"margin must be in (0, 1], got {margin}")
    return int(get_chip(chip).ub_bytes * margin)


def predict(tiles: TileSpec, sizes: Mapping[str, int], chip: str | ChipSpec | None = None,
            multibuffer: int = DEFAULT_MULTIBUFFER, margin: float = DEFAULT_MARGIN) -> UBEstimate:
    """Predicted on-chip bytes of a kernel whose live tiles are ``tiles``, for ``sizes``.

    Args:
        tiles: a list of :class:`Tile`, or a callable ``sizes -> raw bytes`` (all charged
            ``multibuffer`` times).
        sizes: values of the size names the tile shapes use (``{"BT": 64, "BK": 128}``).
        chip: SoC name or spec (default: detected, else ``Ascend910B2``).
        multibuffer: factor for buffered tiles (>= 1); 1 when the launch sets ``multibuffer=False``.
        margin: share of UB allowed, in ``(0, 1]``.

    Returns:
        :class:`UBEstimate` with ``raw``, ``charged`` bytes and the ``budget``.

    Raises:
        ValueError: a size name missing, ``multibuffer < 1``, bad margin, unknown chip.
    """
    if not isinstance(multibuffer, int) or multibuffer < 1:
        raise ValueError(f"multibuffer must be an int >= 1, got {multibuffer!r}")
    raw, charged = _raw_and_charged(tiles, sizes, multibuffer, get_chip(chip).ub_bytes)
    return UBEstimate(raw=raw, charged=charged, budget=budget(chip, margin))


def fits(tiles: TileSpec, sizes: Mapping[str, int], chip: str | ChipSpec | None = None,
         multibuffer: int = DEFAULT_MULTIBUFFER, margin: float = DEFAULT_MARGIN) -> bool:
    """True when :func:`predict` says the tiles fit the chip's UB budget."""
    return predict(tiles, sizes, chip, multibuffer, margin).fits


def fit_tiles(tiles: TileSpec, candidates: Mapping[str, Iterable[int]], fixed: Mapping[str, int] | None = None,
              chip: str | ChipSpec | None = None, multibuffer: int = DEFAULT_MULTIBUFFER,
              margin: float = DEFAULT_MARGIN) -> dict[str, int]:
    """Pick the largest tile sizes that fit the UB budget.

    Among all combinations of ``candidates`` (together with the ``fixed`` sizes, such as
    ``K``, ``V`` or ``in_bytes``), returns the one whose charged bytes fit
    ``chip.ub_bytes x margin`` and whose product of chosen sizes is largest; ties go to the
    combination that is larger in the first-listed candidate name.

    Example::

        tiles = [Tile(("BT", "BK"), "in", "k"), Tile(("BK", "BV"), "fp32", "h", buffered=False)]
        fit_tiles(tiles, {"BV": [128, 64, 32]}, fixed={"BT": 64, "BK": 128, "in_bytes": 2})
        # -> {"BV": 128} on Ascend910B2 (16 KiB x 2 + 64 KiB = 96 KiB <= 163 KiB)

    Args:
        tiles: list of :class:`Tile` or a callable ``sizes -> raw bytes``.
        candidates: size name -> allowed values (non-empty, positive ints).
        fixed: sizes that are not chosen here.
        chip, multibuffer, margin: as in :func:`predict`.

    Returns:
        ``{name: chosen value}`` for the names in ``candidates`` only.

    Raises:
        ValueError: empty or non-positive candidates, a name both fixed and a candidate, or no
            combination fits (the message gives the smallest combination's bytes and the budget).
    """
    fixed = dict(fixed or {})
    if not candidates:
        raise ValueError("candidates must name at least one size")
    names = list(candidates)
    values = []
    for n in names:
        vals = sorted({int(v) for v in candidates[n]}, reverse=True)
        if not vals or vals[-1] <= 0:
            raise ValueError(f"candidates[{n!r}] must be non-empty positive ints, got {list(candidates[n])}")
        if n in fixed:
            raise ValueError(f"size {n!r} is both fixed and a candidate")
        values.append(vals)
    limit = budget(chip, margin)
    ub_bytes = get_chip(chip).ub_bytes
    best, best_key, smallest = None, None, None
    for combo in itertools.product(*values):
        sizes = {**fixed, **dict(zip(names, combo))}
        raw, charged = _raw_and_charged(tiles, sizes, multibuffer, ub_bytes)
        if smallest is None or charged < smallest[0]:
            smallest = (charged, dict(zip(names, combo)))
        if charged > limit:
            continue
        key = (math.prod(combo), combo)
        if best_key is None or key > best_key:
            best, best_key = dict(zip(names, combo)), key
    if best is None:
        raise ValueError(f"no tile sizes fit the UB budget of {get_chip(chip).name}: the smallest candidate "
                         f"{smallest[1]} needs {smallest[0]} bytes (multibuffer={multibuffer}) but the budget is "
                         f"{limit} bytes ({margin:.0%} of {get_chip(chip).ub_bytes})")
    return best
