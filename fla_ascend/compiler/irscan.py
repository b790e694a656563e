"""Read the facts the check reports out of triton-ascend's ``ttadapter`` IR (linalg/memref/hivm).

What is recognised (triton-ascend 3.2.0):

- ``mix_mode = "aiv" | "aic" | "mix"`` on the kernel's ``func.func``: the units it runs on;
- ``memref.alloc() : memref<64x128xbf16>``: on-chip buffers; their byte sum is the IR's
  allocation *before* the compiler's multibuffer doubling and buffer reuse;
- ``DiscreteMemAccess`` / ``ExtractedLoadOrStore`` attributes: scalar gather/scatter loops;
- ``memref.reinterpret_cast %argN ... sizes: [..] strides: [.., s]`` with innermost size > 1 and
  ``s != 1`` (static or dynamic): a strided DMA on a kernel argument in global memory;
- ``arith.cmpi`` on integer tensors and ``arith.addi`` on i64 tensors: vector integer ops that
  A2/A3 vector units lack (they fall back to scalar code);
- ``linalg.matmul`` / ``linalg.batch_matmul``: Cube dots.

Source lines come from ``loc(...)`` annotations when the IR was printed with debug info
(``TRITON_DISABLE_LINE_INFO=0``, which the check's worker sets).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = ["IRFacts", "Alloc", "StridedAccess", "scan", "ELEM_BYTES"]

ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8}

_MIX = re.compile(r'mix_mode\s*=\s*"(\w+)"')
_ALLOC = re.compile(r"memref\.alloc\([^)]*\)(?:\s*\{[^}]*\})?\s*:\s*memref<([^>]*)>")
_RECAST = re.compile(r"memref\.reinterpret_cast\s+%(arg\d+)\s+to\s+offset:\s*\[[^\]]*\],\s*sizes:\s*\[([^\]]*)\],"
                     r"\s*strides:\s*\[([^\]]*)\]")
_LOCREF = re.compile(r"loc\((#loc\d*)\)\s*$")
_LOCDEF = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILELOC = re.compile(r'^"([^"]+)":(\d+):(\d+)$')
_CALLSITE = re.compile(r"^callsite\((#loc\d*)\s+at\s+(#loc\d*)\)$")
_INT_TENSOR_CMP = re.compile(r"arith\.cmpi\b.*:\s*tensor<[^>]*x(i32|i64)>")
_I64_TENSOR_ADD = re.compile(r"arith\.addi\b.*:\s*tensor<[^>]*xi64>")


@dataclass
class Alloc:
    shape: tuple
    dtype: str
    nbytes: int
    where: str = ""


@dataclass
class StridedAccess:
    arg: str
    sizes: str
    strides: str
    where: str = ""


@dataclass
class IRFacts:
    """Facts of one lowered kernel. ``alloc_bytes`` is the sum of static ``memref.alloc`` sizes;
    ``dynamic_allocs`` counts allocations whose size is not static (not summed)."""

    mix_mode: str = "?"
    allocs: list = field(default_factory=list)
    alloc_bytes: int = 0
    dynamic_allocs: int = 0
    discrete_loops: list = field(default_factory=list)
    strided: list = field(default_factory=list)
    int_compares: list = field(default_factory=list)
    i64_adds: list = field(default_factory=list)
    matmuls: int = 0


def _resolve_locs(text: str) -> dict:
    defs = {}
    for line in text.splitlines():
        m = _LOCDEF.match(line.strip())
        if m:
            defs[m.group(1)] = m.group(2)

    def resolve(ref: str, depth: int = 0) -> str:
        body = defs.get(ref, "")
        if depth > 20 or not body:
            return ""
        m = _FILELOC.match(body)
        if m:
            return f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
        m = _CALLSITE.match(body)
        if m:
            return resolve(m.group(1), depth + 1)
        return ""

    return {k: resolve(k) for k in defs}


def _parse_memref_type(t: str) -> tuple[tuple, str]:
    parts = t.split(",")[0].strip().split("x")
    dtype = parts[-1]
    dims = tuple(parts[:-1])
    return dims, dtype


def _innermost_strided(sizes: str, strides: str) -> bool:
    sz = [s.strip() for s in sizes.split(",") if s.strip()]
    st = [s.strip() for s in strides.split(",") if s.strip()]
    if not sz or not st:
        return False
    last_size, last_stride = sz[-1], st[-1]
    if last_size == "1":
        return False
    return last_stride != "1"


def scan(text: str, kernel_name: str | None = None) -> IRFacts:
    """Scan ``ttadapter`` text and return :class:`IRFacts`.

    Args:
        text: the IR printed by the ``ttadapter`` stage.
        kernel_name: the public ``func.func`` whose ``mix_mode`` is read (default: the first
            non-private function).
    """
    facts = IRFacts()
    locs = _resolve_locs(text)
    for line in text.splitlines():
        s = line.strip()
        ref = _LOCREF.search(s)
        where = locs.get(ref.group(1), "") if ref else ""
        if s.startswith("func.func") and "private" not in s.split("@")[0]:
            name = s.split("@", 1)[1].split("(", 1)[0]
            m = _MIX.search(s)
            if m and (kernel_name is None or name == kernel_name) and facts.mix_mode == "?":
                facts.mix_mode = m.group(1)
            continue
        m = _ALLOC.search(s)
        if m:
            dims, dtype = _parse_memref_type(m.group(1))
            if any(not d.isdigit() for d in dims) or dtype not in ELEM_BYTES:
                facts.dynamic_allocs += 1
                continue
            nbytes = math.prod(int(d) for d in dims) * ELEM_BYTES[dtype]
            facts.allocs.append(Alloc(tuple(int(d) for d in dims), dtype, nbytes, where))
            facts.alloc_bytes += nbytes
            continue
        if "DiscreteMemAccess" in s or "ExtractedLoadOrStore" in s:
            facts.discrete_loops.append(where or s[:120])
        m = _RECAST.search(s)
        if m and _innermost_strided(m.group(2), m.group(3)):
            facts.strided.append(StridedAccess(m.group(1), m.group(2), m.group(3), where))
        if _INT_TENSOR_CMP.search(s):
            facts.int_compares.append(where or s[:120])
        if _I64_TENSOR_ADD.search(s):
            facts.i64_adds.append(where or s[:120])
        if "linalg.matmul" in s or "linalg.batch_matmul" in s:
            facts.matmuls += 1
    return facts
