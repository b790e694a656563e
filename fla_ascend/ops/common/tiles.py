"""Tile sizes and launch options of the chunk stages per backend: NPU tiles from the UB model
(docs/ascend-rules.md, R3-R4), a CUDA launch table with a shared-memory fallback, and the
smallest dot tile extent."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from fla_ascend import backend
from fla_ascend.tiling.sizes import next_pow2
from fla_ascend.tiling.ub import fit_tiles


def npu_tiles(tiles, chunk_size: int, x: torch.Tensor, candidates: dict, **fixed) -> dict | None:
    """Largest ``candidates`` whose declared live ``tiles`` fit the running chip's UB, or ``None``
    off an NPU (the caller then uses its CUDA / interpreter sizes).

    Args:
        tiles: the kernel's declared live tiles (:class:`fla_ascend.tiling.ub.Tile`).
        chunk_size: ``BT``; x: a tensor of the kernel's input dtype (gives ``in_bytes``).
        candidates: size name -> allowed values; fixed: other sizes (``BK``, ``BV``...).

    Returns:
        The chosen sizes (at the first of :data:`NPU_MARGINS` where any fits); with
        ``"multibuffer": False`` added when they fit only without the compiler's double buffering
        (pass it on as a launch option).

    Raises:
        ValueError: no candidate combination fits even without double buffering.
    """
    if backend.device_type() != "npu":
        return None
    fixed = {"BT": chunk_size, "in_bytes": x.element_size(), **fixed}
    for margin in NPU_MARGINS:
        try:
            return fit_tiles(tiles, candidates, fixed=fixed, margin=margin)
        except ValueError:
            pass
    # Without double buffering each tile is charged once: slower DMA overlap, but it fits
    # (e.g. the K = 256 state recurrences, whose whole-K tiles are live at once).
    return {**fit_tiles(tiles, candidates, fixed=fixed, multibuffer=1, margin=NPU_MARGINS[-1]), "multibuffer": False}


NPU_MARGINS = (0.9, 1.0)
"""Shares of the UB an NPU launch plan may fill, tried in turn: 90% leaves the 10% free that
``fla-ascend check`` asks for; where no tile size does (the ``BT = 64`` WY backward and
``chunk_bwd_dqkwg``, whose ``[BT, BT]`` buffers alone plan over 90%, though each still plans
beside a reserved 10% of the UB: the check's reservation probe), the whole UB. The ``BT = 64``
WY forward, whose one-launch inverse planned 99-100%, runs in three launches on an NPU instead
(``wy.NPU_SPLIT_INVERSE_CHUNKS``)."""


def _frozen(table: dict) -> Mapping[str, Mapping]:
    """``table`` read-only, its entries and their nested ``num_stages`` maps too."""
    return MappingProxyType({k: MappingProxyType({f: MappingProxyType(v) if isinstance(v, dict) else v
                                                  for f, v in e.items()}) for k, e in table.items()})


CUDA_LAUNCH: Mapping[str, Mapping] = _frozen({
    # stage: launch options and dot precision on CUDA (measured on the H200: see cases.md)
    "wy_fwd": {"num_warps": 4, "num_stages": 1, "precision": "tf32"},
    "wy_bwd": {"num_warps": 4, "num_stages": 2, "precision": "input"},
    # KDA's intra-chunk backward: tf32, not bf16 operands. Its dG sums to zero over a chunk in exact
    # arithmetic and dA_log / dt_bias sum it over a whole head; with bf16 operands the rounding of the
    # row and the column sides no longer cancels (bf16, T256 H2 K=V=128: dA_log 0.03-0.12 from the
    # float64 recurrence, flash-linear-attention 0.6.0, whose dots here are tf32: 0.002-0.013)
    # k_split: the tasks a sub-chunk's K blocks are shared over (each with its own dbeta part): at 2,
    # 1455 -> 1222 us a forward + backward step at B1 T4096 H32 K = V = 128 (H100, 2026-12-07)
    "kda_intra_bwd": {"num_warps": 4, "precision": "tf32", "block": 64, "diag_block": False,
                      "split_sides": False, "k_split": 2, "diag_dot_range": 32.0},
    # num_stages per largest head dim: K = 256 is no faster at 3 (forward 0.295 vs 0.266 ms at
    # B1 T8192 H4) and rarely fits there
    "fwd_h": {"num_warps": 4, "num_stages": {128: 3, 256: 2}, "bv": (64, 32)},
    "bwd_dh": {"num_warps": 4, "num_stages": {128: 3, 256: 2}, "bv": (64, 32)},
    "chunk_o": {"num_warps": 4, "num_stages": 3},
    # dq/dk/dw: 1 stage. Deeper pipelines are faster (2: 1.631 -> 1.475 ms at T32768) and give wrong
    # results on Hopper with Triton 3.6: at 3, dw at K = V = 256 (2026-11-29); at 2, dk 0.064-0.075
    # at K = V = 100, 0.050 in the fp16 Qwen3-Next varlen case, not deterministic at Qwen3-Next's
    # shape (GPU tier, 2026-11-30; cases.md)
    "dqkwg": {"num_warps": 4, "num_stages": 1},
    # the state recurrences with a decay per key channel (KDA): their own entries, as they decay the
    # state per row and read the pre-scaled k (and q) per value head
    "fwd_h_gk": {"num_warps": 4, "num_stages": {128: 3, 256: 2}, "bv": (64, 32)},
    "bwd_dh_gk": {"num_warps": 4, "num_stages": {128: 3, 256: 2}, "bv": (64, 32)},
    # KDA's stages (ops/kda): "block" is the widest K (and V) block of their tiles off an NPU; a form
    # flag set runs the stage's NPU form (docs/ascend-rules.md, R13) off an NPU too
    # diag_dot_range: a sub-chunk whose decay G_first - G_last stays below it in every channel takes
    # its diagonal block through the dots (exp(G_i - G_j) split at its first row, each factor within
    # exp(+-range)); the others, and every -inf gate (floored at -110), the exact column loop. At 32
    # (H100, B1 T4096 H32 K = V = 128, 2026-12-07): intra forward 368 -> 168 us, intra backward
    # 1219 -> 708 us a forward + backward step (cases.md, "chunk_kda")
    "kda_intra_fwd": {"num_warps": 4, "block": 64, "diag_block": False, "diag_dot_range": 32.0},
    # kda_wy_fwd: 495.4 -> 345.9 us a forward + backward step at B1 T4096 H32 K = V = 128 (H100,
    # benchmarks/tune_kda_stages.py, 2026-12-07)
    "kda_wy_fwd": {"num_warps": 2, "num_stages": 2, "block": 32, "reload_ai": False},
    # kda_wy_bwd: split_u off runs its CUDA form (Ai^T and the states loaded transposed, u's part in the
    # first K block's V loop); v_block, where given, the V block apart from "block". Neither is timed
    # on a GPU yet (benchmarks/tune_kda_stages.py has the knobs): the entry keeps the form timed before
    "kda_wy_bwd": {"num_warps": 4, "block": 64, "split_u": True},
    # kda_fwd_o at 2 stages: 114.4 -> 93.3 us a forward + backward step at B1 T4096 H32 K = V = 128
    # (H100, benchmarks/tune_kda_stages.py, 2026-12-07)
    "kda_fwd_o": {"num_warps": 4, "num_stages": 2, "block": 64, "one_acc": False},
    "kda_bwd_dav": {"num_warps": 4, "block": 64},
})
"""Per-stage CUDA choices: ``num_warps``, ``num_stages``, the ``input_precision`` of the
fp32 x fp32 dots of the WY stages, and the ``BV`` candidates of the state recurrences. A table,
not ``triton.autotune``: autotuning at import raises with triton-ascend and no NPU
(docs/ascend-rules.md, R3). Read-only; benchmarks override entries through the active target
(``Target.overrides["chunk_stages"]``, read by :func:`cuda_launch`).
The state recurrences' ``num_stages`` maps the largest ``dot_dim(K)`` it serves to the deepest
pipeline they take; where that does not fit the GPU's shared memory (wide heads, fp32 inputs)
:func:`launch_first_fitting` steps down."""



def cuda_launch(stage: str) -> Mapping:
    """The CUDA launch entry of ``stage``: :data:`CUDA_LAUNCH`'s, or the active target's override
    (``overrides["chunk_stages"][stage]``).

    Raises:
        KeyError: unknown stage (also one only an override names).
    """
    return backend.table("chunk_stages", CUDA_LAUNCH)[stage]


_FIRST_FIT: dict[tuple, tuple[list, int]] = {}

def launch_first_fitting(stage: str, key: tuple, candidates: Sequence, launch: Callable, what: str = ""):
    """Call ``launch(candidate)`` with the first of ``candidates`` whose kernel fits on chip.

    A deeper software pipeline (``num_stages``) or a wider tile can need more shared memory than
    the GPU has (227 KiB per SM on the H200: e.g. the reverse recurrence at K = 256, or at
    K = 128 with float32 inputs). Triton reports that as ``OutOfResources`` when it loads the
    compiled kernel, before anything runs, so the next candidate is tried. The index of the
    candidate that loaded is remembered per ``stage``, ``key`` (everything else the kernel's
    size depends on: device, dtypes, head dims) and candidate list, so later calls start there.
    A stage in the active target's ``strict_stages`` tries only its first candidate and neither
    reads nor writes the remembered index (a stage A/B times exactly the variant asked for).

    Args:
        stage: the stage's name (``"fwd_h"``); a stage A/B times one candidate alone with
            :func:`fla_ascend.bench.tuning.strict_stage`.
        key: hashable cache key.
        candidates: launch configurations, most preferred first (at least one).
        launch: runs the kernel with one candidate.
        what: the call's sizes in words, for the error message.

    Returns:
        The candidate that ran.

    Raises:
        ValueError: ``candidates`` is empty.
        RuntimeError: none of the candidates tried fits; it names the stage, the sizes, the
            candidates and the bytes needed against the device's, and chains Triton's error.
    """
    if not candidates:
        raise ValueError(f"{stage}: no launch candidates ({what or key})")
    strict = stage in backend.current().strict_stages
    if strict:
        candidates = list(candidates)[:1]
    cached = _FIRST_FIT.get((stage, key))  # (candidate list, index that loaded)
    start = cached[1] if cached and cached[0] == candidates else 0
    stop = len(candidates)
    for i in range(start, stop):
        try:
            launch(candidates[i])
        except OutOfResources as e:
            if i == stop - 1:
                raise RuntimeError(
                    f"{stage} ({what or key}): no launch configuration fits the device's on-chip memory; "
                    f"tried {list(candidates[start:stop])}, the last needs {e.required} B of {e.name}, "
                    f"the device has {e.limit} B") from e
            continue
        if not strict:
            _FIRST_FIT[(stage, key)] = (list(candidates), i)
        return candidates[i]


def stage_launch(stage: str, multibuffer: bool | None = None) -> dict:
    """Launch keyword arguments of a chunk stage for the current backend (filtered by
    :func:`fla_ascend.backend.launch_options`: CUDA gets ``num_warps``/``num_stages``, an NPU
    gets ``multibuffer``)."""
    opts = {k: v for k, v in cuda_launch(stage).items() if k in ("num_warps", "num_stages")}
    return backend.launch_options(**opts, multibuffer=multibuffer)


def stage_block(stage: str, D: int, npu: int, key: str = "block") -> int:
    """The K or V block (head dim ``D``) of a stage's tiles: ``npu`` on an NPU, elsewhere the
    ``key`` of the stage's :data:`CUDA_LAUNCH` entry (its ``block`` where it has no ``key``); at most
    ``dot_dim(D)``.

    Raises:
        KeyError: off an NPU, a stage without a ``block`` entry.
    """
    if backend.device_type() == "npu":
        return min(npu, dot_dim(D))
    entry = cuda_launch(stage)
    return min(entry.get(key, entry["block"]), dot_dim(D))


def stage_form(stage: str, flag: str) -> bool:
    """Whether a stage runs its NPU form ``flag`` (docs/ascend-rules.md, R13): always on an NPU,
    elsewhere as the ``flag`` of the stage's :data:`CUDA_LAUNCH` entry says.

    Raises:
        KeyError: off an NPU, a stage without that flag.
    """
    return backend.device_type() == "npu" or bool(cuda_launch(stage)[flag])


NPU_DIAG_DOT_RANGE = MappingProxyType({"kda_intra_fwd": 32.0, "kda_intra_bwd": 32.0})
"""``diag_dot_range`` of the KDA intra stages on an NPU (the CUDA one in their :data:`CUDA_LAUNCH`
entries); a stage missing here keeps the exact diagonal block on an NPU."""


def diag_dot_range(stage: str, dtype: torch.dtype) -> float:
    """The decay range below which a KDA intra stage takes a sub-chunk's diagonal block through its
    dots for inputs of ``dtype`` (0: never): :data:`NPU_DIAG_DOT_RANGE` on an NPU, elsewhere the
    ``diag_dot_range`` of the stage's :data:`CUDA_LAUNCH` entry; always 0 for float16, whose operands
    would overflow at ``exp(range)`` (65504 is ``exp(11.1)``)."""
    if dtype == torch.float16:
        return 0.0
    if backend.device_type() == "npu":
        return NPU_DIAG_DOT_RANGE.get(stage, 0.0)
    return float(cuda_launch(stage).get("diag_dot_range", 0.0))


def dot_precision(stage: str, dtype: torch.dtype) -> str:
    """``input_precision`` of a WY stage's fp32 x fp32 dots for inputs of ``dtype``.

    On CUDA the table's choice for bfloat16 inputs: ``tf32x3`` (three tf32 products, near-fp32
    error), ``tf32`` (one pass, a 10-bit mantissa: below the bf16 rounding of what the stages
    store) or ``input``: both operands are cast to bfloat16 and multiplied on the tensor cores
    with fp32 accumulation, as flash-linear-attention's WY stages do. float32 and float16 inputs
    always get ``tf32x3``: fp32 callers keep fp32 accuracy, fp16 has tf32's own 10-bit mantissa
    (one tf32 pass would be its whole error budget; the one-pass A/B ran bf16 only) and a cast
    fp32 gradient can exceed its 65504 under loss scaling. Elsewhere,
    and under the interpreter on any host, ``ieee`` (the Ascend cube and the interpreter
    multiply fp32 exactly). Kernels apply it through :func:`fla_ascend.ops.common.wy.wy_dot`.
    """
    if not backend.is_cuda_compiled():
        return "ieee"
    precision = cuda_launch(stage).get("precision", "ieee")
    if dtype != torch.bfloat16 and precision != "ieee":
        return "tf32x3"
    return precision


DOT_OPERAND_COPY = tl.constexpr(not backend.is_cuda_compiled())
"""Whether :func:`dot_operand` copies: everywhere but compiled CUDA (decided at import, with the
backend)."""


@triton.jit
def dot_operand(x):
    """``x`` as the left operand of a dot after which ``x`` is read again: a copy (``x + 0.0``)
    where the Ascend rule R7 needs one (the cube path may overwrite its left operand,
    docs/ascend-rules.md) and under the interpreter, ``x`` itself on CUDA, where the copy cost
    registers and serialised the output stage's wgmma (ptxas C7514; cases.md)."""
    if DOT_OPERAND_COPY:
        return x + 0.0
    else:
        return x


def a5_target() -> bool:
    """Whether the active target is an A5 NPU (``Ascend910_9599``: triton-ascend lowers with
    ``compile_on_910_95``)."""
    if backend.device_type() != "npu":
        return False
    from fla_ascend.tiling.chips import get_chip

    return get_chip().compile_on_910_95


def f32_dot_chain(*sizes: int) -> bool:
    """Whether a dot whose operand is another dot's float32 result keeps that operand in float32
    (casting the other operand up) instead of casting it down to the input dtype: on an A5 target
    (``Ascend910_9599``) when one of the launch's ``sizes`` (the chunk size, the V block) is 16,
    where bishengir-compile-a5 aborts on the cast-down chain (``PatternMatch.cpp:135``;
    tests/compiler/compiler_repros/dot_result_cast_dot.py). Everywhere else ``False``: the product
    runs in the input dtype as timed."""
    return 16 in sizes and a5_target()


@triton.jit
def dot_chained(a, b, F32_CHAIN: tl.constexpr):
    """``a @ b`` where one operand is float32 (another dot's result) and the other is in the input
    dtype: the float32 one cast to the other's dtype, or with ``F32_CHAIN`` (:func:`f32_dot_chain`)
    the other cast to float32 (a float32 left operand then passed as :func:`dot_operand`, a copy
    where R7 applies). Either way the caller may read ``a`` and ``b`` again."""
    if F32_CHAIN:
        if a.dtype == tl.float32:
            r = tl.dot(dot_operand(a), b.to(tl.float32))
        else:
            r = tl.dot(a.to(tl.float32), b)
    else:
        if a.dtype == tl.float32:
            r = tl.dot(a.to(b.dtype), b)
        else:
            r = tl.dot(a, b.to(a.dtype))
    return r


A5_MIN_DOT_DIM = 32
"""Smallest :func:`dot_dim` on an A5 target (``Ascend910_9599``): bishengir-compile-a5 aborts
(``PatternMatch.cpp:135``) on the 16-wide K blocks of ``K = 16`` in ``chunk_bwd_dh``, ``kda_fwd_o``
and ``kda_intra_fwd`` also with float32 dot chains; with K and V tiles of at least 32 (the padding
masked) the full matrix compiles
(``fla-ascend check --full --no-default-chips --chip Ascend910_9599``, 2026-12-07: 96 aborts at
``K = 16`` -> 0)."""


def dot_dim(n: int) -> int:
    """Tile extent for a head dim ``n`` that enters ``tl.dot``: the next power of two, at least
    16 (the smallest dot operand Triton accepts), at least :data:`A5_MIN_DOT_DIM` on an A5 target;
    masks cover the padding."""
    return max(A5_MIN_DOT_DIM if a5_target() else 16, next_pow2(n))
