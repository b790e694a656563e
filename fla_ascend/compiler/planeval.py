"""Count what a compiled HIVM module does, through its loop nests, for one launch.

Input: the module that ``bishengir-compile`` hands to ``hivmc`` (``module.hivm.opt.mlir`` from
``--save-temps``; see docs/check.md). In it every on-chip operation is a call
to a library function whose operands are memrefs with an address space (``gm``, ``ub``, ``cbuf``,
``cc``): ``load_gm_to_ubuf_*`` / ``nd2nz_*`` move global memory in (MTE2), ``store_ubuf_to_gm_*``
/ ``fixpipe_*`` move it out (MTE3 / fixpipe), ``mma_tile_<in>_to_<out>`` is a Cube matmul with its
``m, k, n`` as operands, and every other call on UB operands is a vector instruction. Cross-core
hand-offs are ``hivm.hir.sync_block_wait`` / ``sync_block_set``. A MIX kernel has one function per
core type (``*_mix_aic`` on the Cube core, ``*_mix_aiv`` on each of the two Vector cores of an
AI core); an AIV or AIC kernel has one.

:func:`parse` reads the module once; :func:`evaluate` walks one device function for one block
(and sub-block) with the launch's scalar arguments and grid bound to the function's arguments,
evaluating the scalar SSA (``arith``, ``affine``, ``index_cast``...) so that loop bounds, tail
sizes (``affine.min``) and dynamic subview sizes take their real values. Loops of at most
``EXACT_TRIPS`` iterations are walked iteration by iteration; longer ones are walked at their
first and last iteration (tails) and at the middle one, which stands for the other ``trips - 2``
(exact for bodies whose counts are constant apart from the ends; within a few percent for counts
linear in the induction variable, such as triangular loops). A value that cannot be evaluated (a scalar loaded
from memory, e.g. ``cu_seqlens``) makes a dependent loop bound unresolved: that loop is counted
once and named in :attr:`Counts.unresolved`.

Nothing here imports triton or torch; it reads text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Counts", "Function", "Module", "parse", "evaluate", "EXACT_TRIPS", "ELEM_BYTES"]

EXACT_TRIPS = 3
"""Loops with at most this many iterations are walked exactly; longer ones are sampled."""

ELEM_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
              "index": 8}
_NAME_DTYPE = {"bfloat16_t": "bf16", "half": "f16", "float": "f32", "int8_t": "i8", "int32_t": "i32"}
# vector instructions that take several passes per 256 B (labelled assumption, see estimate.py)
_SLOW_VECTOR = ("vexp", "vln", "vlog", "vsqrt", "vrsqrt", "vdiv", "vrec", "vpow", "vtanh", "vsin", "vcos")


@dataclass
class Counts:
    """What one core does in one launch (or a sum over cores).

    Bytes are global-memory bytes; ``mte2_bytes`` GM -> UB/L1, ``mte3_bytes`` UB/L0C -> GM;
    ``ws_bytes`` the part of both on the kernel's workspace (the Cube<->Vector hand-off buffer of a
    MIX kernel, small and reused: it stays in L2 rather than HBM);
    ``macs`` Cube multiply-accumulates by input dtype; ``vector_bytes`` the bytes the vector
    unit passes over (elements x element size of the widest operand), ``vector_slow_bytes`` the
    part in transcendental/divide instructions; ``scalar_ops`` executed scalar operations,
    ``scalar_loop_iters`` iterations of loops with no vector or DMA call inside (scalar code such as
    a gather or an integer compare fallback), ``scalar_gm`` scalar loads/stores on GM;
    ``syncs`` cross-core waits (``sync_block_wait``), ``sync_sets`` their signals,
    ``flags`` intra-core pipe waits and barriers; ``mmas`` Cube matmul calls (``mma_tile_*``),
    ``dmas`` DMA calls (GM <-> UB/L1 moves and fixpipe stores); ``calls`` by library function
    (instances x trips).
    """

    mte2_bytes: float = 0.0
    mte3_bytes: float = 0.0
    ws_bytes: float = 0.0
    macs: dict = field(default_factory=dict)
    vector_bytes: float = 0.0
    vector_slow_bytes: float = 0.0
    vector_instrs: float = 0.0
    scalar_ops: float = 0.0
    scalar_loop_iters: float = 0.0
    scalar_gm: float = 0.0
    syncs: float = 0.0
    sync_sets: float = 0.0
    flags: float = 0.0
    mmas: float = 0.0
    dmas: float = 0.0
    calls: dict = field(default_factory=dict)
    unresolved: list = field(default_factory=list)

    _SCALARS = ("mte2_bytes", "mte3_bytes", "ws_bytes", "vector_bytes", "vector_slow_bytes", "vector_instrs",
                "scalar_ops", "scalar_loop_iters", "scalar_gm", "syncs", "sync_sets", "flags", "mmas", "dmas")

    def add(self, other: Counts, scale: float = 1.0) -> None:
        """``self += scale * other`` (unresolved notes are merged, not scaled)."""
        for k in self._SCALARS:
            setattr(self, k, getattr(self, k) + scale * getattr(other, k))
        for d_self, d_other in ((self.macs, other.macs), (self.calls, other.calls)):
            for k, v in d_other.items():
                d_self[k] = d_self.get(k, 0.0) + scale * v
        for u in other.unresolved:
            if u not in self.unresolved:
                self.unresolved.append(u)

    def scaled(self, scale: float) -> Counts:
        out = Counts()
        out.add(self, scale)
        return out

    @property
    def gm_bytes(self) -> float:
        return self.mte2_bytes + self.mte3_bytes

    @property
    def hbm_bytes(self) -> float:
        return self.mte2_bytes + self.mte3_bytes - self.ws_bytes

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self._SCALARS}
        d["macs"] = dict(self.macs)
        d["unresolved"] = list(self.unresolved)
        return d


# ----------------------------------------------------------------------------- parsing
@dataclass
class Op:
    name: str                      # "scf.for", "arith.addi", "func.call", ...
    results: list                  # result SSA names
    text: str                      # the op's line
    regions: list = field(default_factory=list)   # list of list[Op]
    line: int = 0


@dataclass
class Function:
    """One device function: ``core`` is ``"AIC"``, ``"AIV"`` or ``"?"``; ``args`` its SSA names
    and types in order; ``body`` its ops."""

    name: str
    core: str
    args: list
    body: list
    attrs: str = ""

    def kernel_args(self) -> list:
        """The arguments that come from the launch (those without an ``hacc.arg_type``)."""
        return [(n, t, a) for n, t, a in self.args if "hacc.arg_type" not in a]


@dataclass
class Module:
    """A parsed compiled module: its affine maps and its device functions."""

    maps: dict
    functions: list
    core_type: str = "?"

    def device_functions(self) -> list:
        return [f for f in self.functions if "function_kind<DEVICE>" in f.attrs]


_RES = re.compile(r"^\s*((?:%[\w.#:-]+(?:\s*,\s*%[\w.#:-]+)*)\s*=\s*)?([\w.]+)")
_MAPDEF = re.compile(r"^(#map\d*)\s*=\s*affine_map<(.*)>\s*$")


def _split_results(s: str) -> list:
    out = []
    for part in s.split(","):
        part = part.strip()
        if ":" in part:  # %x:2
            name, n = part.split(":")
            out += [f"{name}#{i}" for i in range(int(n))]
        else:
            out.append(part)
    return out


def _parse_args(sig: str) -> list:
    """``(%arg0: i64 {attrs}, %arg1: memref<...> {..}, ...)`` -> [(name, type, attrs)]."""
    out, depth, cur = [], 0, ""
    for ch in sig:
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    res = []
    for a in out:
        a = a.strip()
        m = re.match(r"(%\w+)\s*:\s*(.*)$", a)
        if not m:
            continue
        rest = m.group(2)
        brace = rest.find(" {")
        typ, attrs = (rest[:brace], rest[brace:]) if brace >= 0 else (rest, "")
        res.append((m.group(1), typ.strip(), attrs))
    return res


def _func_sig(line: str) -> tuple[str, list, str]:
    name = re.search(r"func\.func\s+(?:private\s+)?@([\w$.-]+)", line).group(1)
    start = line.index("(", line.index("@"))
    depth = 0
    for i in range(start, len(line)):
        if line[i] == "(":
            depth += 1
        elif line[i] == ")":
            depth -= 1
            if depth == 0:
                break
    return name, _parse_args(line[start + 1:i]), line[i + 1:]


def parse(text: str) -> Module:
    """Parse a compiled module's text (``module.hivm.opt.mlir``). Raises ValueError on text
    without a ``module``."""
    if "module" not in text:
        raise ValueError("not an MLIR module (no 'module' in the text)")
    maps, functions = {}, []
    lines = text.splitlines()
    stack: list = []          # open region lists
    current_fn = None
    core_type = "?"
    m = re.search(r"hivm\.module_core_type\s*=\s*#hivm\.module_core_type<(\w+)>", text)
    if m:
        core_type = m.group(1)
    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        md = _MAPDEF.match(line)
        if md:
            maps[md.group(1)] = md.group(2)
            continue
        if line.startswith("func.func"):
            name, args, tail = _func_sig(line)
            if not line.endswith("{"):
                continue  # declaration
            fn = Function(name, "?", args, [], tail)
            mc = re.search(r"hivm\.func_core_type<(\w+)>", tail)
            if mc:
                fn.core = mc.group(1)
            functions.append(fn)
            current_fn = fn
            stack = [fn.body]
            continue
        if current_fn is None:
            continue
        if line.startswith("}"):
            closing = line
            if stack:
                stack.pop()
            if not stack:
                current_fn = None
                continue
            if re.match(r"^\}\s*else\s*\{", closing):
                parent_op = stack[-1][-1]
                region: list = []
                parent_op.regions.append(region)
                stack.append(region)
            continue
        mr = _RES.match(line)
        if not mr:
            continue
        results = _split_results(mr.group(1).rstrip().rstrip("=").strip()) if mr.group(1) else []
        name = {"call": "func.call", "return": "func.return"}.get(mr.group(2), mr.group(2))  # short forms
        op = Op(name, results, line, [], no)
        stack[-1].append(op)
        if line.endswith("{"):
            region = []
            op.regions.append(region)
            stack.append(region)
    return Module(maps, functions, core_type)


# ----------------------------------------------------------------------------- types
_MEMREF = re.compile(r"memref<([^,>]*?)x?(i1|i8|i16|i32|i64|f16|bf16|f32|f64|index)\b(.*)")


def _parse_memref(t: str):
    """``memref<64x?x16xbf16, ..., #hivm.address_space<ub>>`` -> (dims, dtype, space)."""
    i = t.find("memref<")
    if i < 0:
        return None
    m = _MEMREF.match(t[i:])
    if not m:
        return None
    dims_s, dt, rest = m.group(1), m.group(2), m.group(3)
    dims = [] if not dims_s else [None if d == "?" else int(d) for d in dims_s.rstrip("x").split("x") if d]
    ms = re.search(r"address_space<(\w+)>", rest.split("memref<")[0])
    return dims, dt, (ms.group(1) if ms else "gm")


@dataclass
class Mem:
    dims: list      # ints (None where unknown)
    dtype: str
    space: str
    ws: bool = False  # derived from the kernel's workspace argument (Cube<->Vector hand-off buffer)
    data: object = None   # known contents of the kernel argument it views (a flat sequence), or None
    off: object = None    # element offset of this view into ``data`` (int), when known
    strides: object = None  # element strides of this view (list of ints), when known

    @property
    def numel(self):
        n = 1
        for d in self.dims:
            if d is None:
                return None
            n *= d
        return n

    @property
    def esize(self) -> int:
        return ELEM_BYTES.get(self.dtype, 4)


# ----------------------------------------------------------------------------- affine maps
def _affine_eval(expr: str, env: dict):
    """Evaluate one affine expression (``s0 + (s2 - s3) floordiv s4 * 32``, ``d0 mod 2``)."""
    toks = re.findall(r"\d+|[a-z]\d+|floordiv|ceildiv|mod|[-+*()]", expr)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def atom():
        t = take()
        if t == "(":
            v = add()
            take()
            return v
        if t == "-":
            v = atom()
            return None if v is None else -v
        if t.isdigit():
            return int(t)
        return env.get(t)

    def mul():
        v = atom()
        while peek() in ("*", "floordiv", "ceildiv", "mod"):
            o = take()
            w = atom()
            if v is None or w is None:
                v = None
            elif o == "*":
                v = v * w
            elif w == 0:
                v = None
            elif o == "floordiv":
                v = v // w
            elif o == "ceildiv":
                v = -((-v) // w)
            else:
                v = v % w
        return v

    def add():
        v = mul()
        while peek() in ("+", "-"):
            o = take()
            w = mul()
            v = None if v is None or w is None else (v + w if o == "+" else v - w)
        return v

    return add()


def _apply_map(map_text: str, dims: list, syms: list) -> list:
    """``(d0)[s0, s1] -> (e1, e2)`` applied to values; returns the result list."""
    m = re.match(r"\s*\(([^)]*)\)\s*(?:\[([^\]]*)\])?\s*->\s*\((.*)\)\s*$", map_text)
    if not m:
        return [None]
    dnames = [x.strip() for x in m.group(1).split(",") if x.strip()]
    snames = [x.strip() for x in (m.group(2) or "").split(",") if x.strip()]
    env = dict(zip(dnames, dims))
    env.update(zip(snames, syms))
    exprs, depth, cur = [], 0, ""
    for ch in m.group(3):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            exprs.append(cur)
            cur = ""
        else:
            cur += ch
    exprs.append(cur)
    return [_affine_eval(e, env) for e in exprs]


# ----------------------------------------------------------------------------- evaluation
_OPERAND = re.compile(r"%[\w.#-]+")
_INT_BIN = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.divsi": lambda a, b: int(a / b) if b else None, "arith.divui": lambda a, b: a // b if b else None,
    "arith.remsi": lambda a, b: int(__import__("math").fmod(a, b)) if b else None,
    "arith.remui": lambda a, b: a % b if b else None,
    "arith.ceildivsi": lambda a, b: -((-a) // b) if b else None,
    "arith.ceildivui": lambda a, b: -((-a) // b) if b else None,
    "arith.floordivsi": lambda a, b: a // b if b else None,
    "arith.minsi": min, "arith.maxsi": max, "arith.minui": min, "arith.maxui": max,
    "arith.andi": lambda a, b: int(a) & int(b), "arith.ori": lambda a, b: int(a) | int(b),
    "arith.xori": lambda a, b: int(a) ^ int(b), "arith.shli": lambda a, b: int(a) << int(b),
    "arith.shrsi": lambda a, b: int(a) >> int(b), "arith.shrui": lambda a, b: int(a) >> int(b),
    "arith.addf": lambda a, b: a + b, "arith.subf": lambda a, b: a - b, "arith.mulf": lambda a, b: a * b,
    "arith.divf": lambda a, b: a / b if b else None, "arith.maximumf": max, "arith.minimumf": min,
    "arith.maxnumf": max, "arith.minnumf": min,
}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b,
        "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b, "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b,
        "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b, "oeq": lambda a, b: a == b,
        "olt": lambda a, b: a < b, "ogt": lambda a, b: a > b, "ole": lambda a, b: a <= b, "oge": lambda a, b: a >= b,
        "one": lambda a, b: a != b}
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci", "arith.sitofp",
          "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.extf", "arith.truncf", "arith.bitcast")
_SCALAR_FREE = ("arith.constant", "memref.cast", "memref.collapse_shape", "memref.expand_shape", "memref.subview",
                "memref.reinterpret_cast", "memref.view", "hivm.hir.pointer_cast", "scf.yield", "func.return",
                "memref.extract_strided_metadata")


def _bracket_groups(s: str) -> list:
    """Top-level ``[...]`` groups of ``s`` in order."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "[":
            if depth == 0:
                cur = ""
            else:
                cur += ch
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                out.append(cur)
            else:
                cur += ch
        elif depth > 0:
            cur += ch
    return out


class _Walker:
    def __init__(self, module: Module, env: dict, block: int, sub_block: int, n_blocks: int):
        self.maps = module.maps
        self.env = env
        self.block, self.sub_block, self.n_blocks = block, sub_block, n_blocks

    # -- values
    def val(self, name: str):
        if name in self.env:
            return self.env[name]
        m = re.match(r"^%c(-?\d+)(?:_i\d+)?(?:_\d+)?$", name)  # an unseen constant name: %c64, %c-1_i64
        if m:
            return int(m.group(1))
        return None

    def _ints(self, names):
        return [self.val(n) for n in names]

    def _int_or_val(self, x: str):
        return int(x) if re.fullmatch(r"-?\d+", x) else self.val(x)

    def _known_load(self, mem, idx: list):
        """The value a scalar load reads when the launch gave the memory's contents (``evaluate``'s
        ``memory``) and the address resolves; else ``None``."""
        if not isinstance(mem, Mem) or mem.data is None or not isinstance(mem.off, int):
            return None
        vals = [self.val(i) for i in idx]
        strides = mem.strides or [1] * len(vals)
        if any(not isinstance(v, int) for v in vals) or len(strides) != len(vals) or \
                any(not isinstance(x, int) for x in strides):
            return None
        flat = mem.off + sum(v * st for v, st in zip(vals, strides))
        return mem.data[flat] if 0 <= flat < len(mem.data) else None

    def _map_apply(self, op: Op):
        t = op.text
        m = re.search(r"(#map\d*)", t)
        if m:
            mt = self.maps.get(m.group(1), "")
            after = t[m.end():]
        else:
            mi = re.search(r"affine_map<(.*?)>\s*(?=\()", t)
            if not mi:
                return [None]
            mt, after = mi.group(1), t[mi.end():]
        md = re.match(r"\s*\(([^)]*)\)(?:\[([^\]]*)\])?", after)
        dims = self._ints(_OPERAND.findall(md.group(1))) if md else []
        syms = self._ints(_OPERAND.findall(md.group(2) or "")) if md else []
        return _apply_map(mt, dims, syms)

    def _result_type(self, t: str) -> str:
        for sep in (" into ", " to ", " : "):
            if sep in t:
                return t.rsplit(sep, 1)[-1]
        return t

    def _mem_from_type(self, t: str):
        p = _parse_memref(t)
        return Mem(*p) if p else None

    def _inherit(self, dst, ops_: list) -> None:
        src = self.val(ops_[0]) if ops_ else None
        if dst is not None and isinstance(src, Mem) and src.ws:
            dst.ws = True

    # -- one op
    def step(self, op: Op, c: Counts) -> None:
        n, t, env = op.name, op.text, self.env
        r = op.results[0] if op.results else None
        if n == "arith.constant":
            m = re.search(r"arith\.constant\s+(true|false|-?[\d.]+(?:e[-+]?\d+)?)", t)
            if m:
                s = m.group(1)
                env[r] = 1 if s == "true" else 0 if s == "false" else (float(s) if ("." in s or "e" in s) else int(s))
            return
        if n not in _SCALAR_FREE and not n.startswith("hivm.") and n != "func.call":
            c.scalar_ops += 1
        ops_ = _OPERAND.findall(t.split("=", 1)[1] if r else t)
        if n in _INT_BIN:
            a, b = self._ints(ops_[:2])
            try:
                env[r] = None if a is None or b is None else _INT_BIN[n](a, b)
            except (TypeError, ValueError, ZeroDivisionError):
                env[r] = None
        elif n in _CASTS:
            v = self.val(ops_[0])
            if v is not None and n in ("arith.fptosi", "arith.fptoui"):
                v = int(v)
            if v is not None and " to i1" in t:
                v = int(bool(v))
            env[r] = v
        elif n in ("arith.cmpi", "arith.cmpf"):
            pred = re.search(r"arith\.cmp[if]\s+(\w+)", t).group(1)
            a, b = self._ints(ops_[:2])
            env[r] = None if a is None or b is None or pred not in _CMP else int(_CMP[pred](a, b))
        elif n == "arith.select":
            cnd, a, b = ops_[:3]
            cv = self.val(cnd)
            va, vb = self.val(a), self.val(b)
            env[r] = (va if cv else vb) if cv is not None else (va if isinstance(va, Mem) else None)
        elif n in ("affine.apply", "affine.min", "affine.max"):
            vals = self._map_apply(op)
            if any(v is None for v in vals):
                env[r] = None
            else:
                env[r] = vals[0] if n == "affine.apply" else (min(vals) if n == "affine.min" else max(vals))
        elif n == "hivm.hir.get_block_idx":
            env[r] = self.block
        elif n == "hivm.hir.get_sub_block_idx":
            env[r] = self.sub_block
        elif n == "hivm.hir.get_block_num":
            env[r] = self.n_blocks
        elif n == "hivm.hir.sync_block_wait":
            c.syncs += 1
        elif n == "hivm.hir.sync_block_set":
            c.sync_sets += 1
        elif n in ("hivm.hir.wait_flag", "hivm.hir.pipe_barrier"):
            c.flags += 1
        elif n in ("hivm.hir.pointer_cast", "memref.view", "memref.alloc", "memref.alloca"):
            env[r] = self._mem_from_type(self._result_type(t))
            src = self.val(ops_[0]) if n == "memref.view" and ops_ else None
            if env[r] is not None and isinstance(src, Mem) and src.ws:
                env[r].ws = True
        elif n == "memref.cast":
            src = self.val(ops_[0])
            dst = self._mem_from_type(self._result_type(t))
            env[r] = Mem(src.dims, src.dtype, dst.space if dst else src.space, src.ws) if isinstance(src, Mem) else dst
        elif n == "memref.subview":
            dst = self._mem_from_type(self._result_type(t))
            groups = _bracket_groups(t.split(" : ")[0])
            if dst is not None and len(groups) >= 3:
                sizes = [int(x) if re.fullmatch(r"-?\d+", x.strip()) else self.val(x.strip())
                         for x in groups[-2].split(",") if x.strip()]
                if len(sizes) != len(dst.dims):  # rank-reducing: drop static unit dims
                    sizes = [s for s in sizes if s != 1] or [1]
                    sizes = sizes[-len(dst.dims):] if len(sizes) > len(dst.dims) else sizes
                dst = Mem(sizes, dst.dtype, dst.space)
            self._inherit(dst, ops_)
            env[r] = dst
        elif n == "memref.reinterpret_cast":
            dst = self._mem_from_type(self._result_type(t))
            m = re.search(r"sizes:\s*\[([^\]]*)\]", t)
            if dst is not None and m:
                dst = Mem([int(x) if re.fullmatch(r"-?\d+", x.strip()) else self.val(x.strip())
                           for x in m.group(1).split(",") if x.strip()], dst.dtype, dst.space)
            self._inherit(dst, ops_)
            src = self.val(ops_[0]) if ops_ else None
            if dst is not None and isinstance(src, Mem) and src.data is not None:
                mo, ms = re.search(r"offset:\s*\[([^\]]*)\]", t), re.search(r"strides:\s*\[([^\]]*)\]", t)
                ints = [self._int_or_val(x.strip()) for x in (mo.group(1).split(",") if mo else [])]
                dst.data, dst.off = src.data, (ints[0] if len(ints) == 1 else None)
                dst.strides = [self._int_or_val(x.strip()) for x in ms.group(1).split(",") if x.strip()] if ms else None
            env[r] = dst
        elif n in ("memref.collapse_shape", "memref.expand_shape"):
            src = self.val(ops_[0])
            dst = self._mem_from_type(self._result_type(t))
            if dst is not None and dst.numel is None and isinstance(src, Mem) and src.numel is not None:
                dst = Mem([src.numel], dst.dtype, dst.space)
            self._inherit(dst, ops_)
            env[r] = dst
        elif n in ("memref.load", "memref.store"):
            m = ops_[0] if n == "memref.load" else ops_[1]
            mem = self.val(m)
            if isinstance(mem, Mem) and mem.space == "gm":
                c.scalar_gm += 1
                if n == "memref.load":
                    c.mte2_bytes += mem.esize
                else:
                    c.mte3_bytes += mem.esize
            if r:
                env[r] = self._known_load(mem, ops_[1:]) if n == "memref.load" else None
        elif n == "func.call":
            self.call(op, ops_, c)
        elif r:
            for x in op.results:
                env[x] = None

    def call(self, op: Op, ops_: list, c: Counts) -> None:
        callee = re.search(r"@([\w$.-]+)", op.text).group(1)
        c.calls[callee] = c.calls.get(callee, 0.0) + 1
        args = [self.val(a) for a in ops_]
        mems = [a for a in args if isinstance(a, Mem)]
        if callee.startswith("mma_tile"):
            c.mmas += 1
            m = re.match(r"mma_tile_(\w+?)_to_", callee)
            dt = _NAME_DTYPE.get(m.group(1), m.group(1)) if m else "?"
            scal = [a for a in args if not isinstance(a, Mem)]
            # operands: A, B, init flag, m, k, n, C, ...
            dims = scal[1:4] if len(scal) >= 4 else []
            if len(dims) == 3 and all(isinstance(x, int) and x >= 0 for x in dims):
                c.macs[dt] = c.macs.get(dt, 0.0) + dims[0] * dims[1] * dims[2]
            else:
                c.macs[dt] = c.macs.get(dt, 0.0)
                note = f"{callee}: m/k/n not resolved"
                if note not in c.unresolved:
                    c.unresolved.append(note)
            return
        if not mems:
            return
        spaces = [x.space for x in mems]
        first = mems[0]

        def nbytes(x: Mem) -> float:
            if x.numel is None:
                note = f"{callee}: dynamic operand size not resolved"
                if note not in c.unresolved:
                    c.unresolved.append(note)
                return 0.0
            return float(x.numel * x.esize)

        if first.space == "gm" and any(s != "gm" for s in spaces[1:]):
            c.dmas += 1
            b = nbytes(first)
            c.mte2_bytes += b
            c.ws_bytes += b if first.ws else 0.0
        elif first.space != "gm" and "gm" in spaces[1:]:
            c.dmas += 1
            dst = next(x for x in mems[1:] if x.space == "gm")
            b = nbytes(dst) if callee.startswith("fixpipe") else nbytes(first)
            c.mte3_bytes += b
            c.ws_bytes += b if dst.ws else 0.0
        elif all(s == "ub" for s in spaces):
            widest = max(mems, key=lambda x: (x.numel or 0) * x.esize)
            b = nbytes(widest)
            c.vector_bytes += b
            c.vector_instrs += 1
            if callee.startswith(_SLOW_VECTOR):
                c.vector_slow_bytes += b

    # -- regions
    def block_ops(self, ops: list, c: Counts) -> None:
        for op in ops:
            if op.name == "scf.for":
                self.for_op(op, c)
            elif op.name == "scf.if":
                self.if_op(op, c)
            elif op.name == "scf.while":
                note = f"line {op.line}: scf.while counted once"
                if note not in c.unresolved:
                    c.unresolved.append(note)
                for reg in op.regions:
                    self.block_ops(reg, c)
                for x in op.results:
                    self.env[x] = None
            else:
                self.step(op, c)

    def if_op(self, op: Op, c: Counts) -> None:
        cond = self.val(_OPERAND.findall(op.text.split("scf.if", 1)[1])[0])
        if cond is None:
            taken = None if "unlikely_condition" in op.text else 0
        else:
            taken = 0 if cond else 1
        if taken is not None and taken < len(op.regions):
            self.block_ops(op.regions[taken], c)
        self._bind_results(op)

    def _bind_results(self, op: Op) -> None:
        m = re.search(r"->\s*\((.*)\)", op.text)
        types = re.findall(r"memref<[^>]*(?:<[^>]*>[^>]*)*>|\bi\d+\b|\bindex\b|\bf\d+\b", m.group(1)) if m else []
        for i, x in enumerate(op.results):
            t = types[i] if i < len(types) else ""
            self.env[x] = self._mem_from_type(t) if t.startswith("memref") else None

    def for_op(self, op: Op, c: Counts) -> None:
        m = re.search(r"scf\.for\s+(%[\w.-]+)\s*=\s*(%[\w.#-]+|-?\d+)\s+to\s+"
                      r"(%[\w.#-]+|-?\d+)\s+step\s+(%[\w.#-]+|-?\d+)",
                      op.text)
        iv, lo, hi, st = m.group(1), *[int(x) if re.fullmatch(r"-?\d+", x) else self.val(x) for x in m.groups()[1:]]
        inits = []
        mi = re.search(r"iter_args\((.*?)\)\s*->", op.text)
        if mi:
            for pair in mi.group(1).split(","):
                if "=" in pair:
                    a, b = pair.split("=")
                    inits.append((a.strip(), self.val(b.strip())))
        body = op.regions[0] if op.regions else []
        scalar_loop = not _has_call(body)
        if lo is None or hi is None or not st:
            which = [nm for nm, v in (("lower", lo), ("upper", hi), ("step", st)) if v is None or v == 0]
            note = f"line {op.line}: loop {'/'.join(which)} bound not resolved (counted once)"
            if note not in c.unresolved:
                c.unresolved.append(note)
            trips, samples = 1, [(lo if lo is not None else 0, 1)]
        else:
            trips = max(0, -((lo - hi) // st)) if st > 0 else 0
            if trips <= EXACT_TRIPS:
                samples = [(lo + i * st, 1) for i in range(trips)]
            else:  # first and last exactly (tails), the middle one for the rest
                samples = [(lo, 1), (lo + ((trips - 1) // 2) * st, trips - 2), (lo + (trips - 1) * st, 1)]
        if trips:
            for ivv, weight in samples:
                acc = Counts()
                self.env[iv] = ivv
                for a, v in inits:
                    self.env[a] = v
                self.block_ops(body, acc)
                c.add(acc, weight)
            if scalar_loop:
                c.scalar_loop_iters += trips
        self._bind_results(op)


def _has_call(ops: list) -> bool:
    for op in ops:
        if op.name == "func.call" or op.name.startswith("hivm.hir.sync_block"):
            return True
        if any(_has_call(r) for r in op.regions):
            return True
    return False


def evaluate(module: Module, fn: Function, scalars: list, grid: tuple, block: int, sub_block: int = 0,
             memory: dict | None = None) -> Counts:
    """Counts of ``fn`` for one block (and Vector sub-block) of a launch.

    Args:
        module: from :func:`parse`.
        fn: one of ``module.device_functions()``.
        scalars: values of the function's launch arguments in order (pointers as ``None``),
            without the three grid sizes, which come from ``grid``.
        grid: the launch grid (1 to 3 sizes).
        block: the block index (``get_block_idx``), ``0 <= block < prod(grid)``.
        sub_block: the Vector sub-block (0 or 1) of a MIX kernel's AIV function.
        memory: ``{argument position: flat sequence of values}``: contents of small integer tensors
            of the launch (``cu_seqlens``, chunk indices), positions counted as in ``scalars``. A
            scalar load from one of them (``memref.load`` through a ``reinterpret_cast`` of the
            argument) then takes its value, so that the sequence bounds of a varlen kernel resolve.
            ``None``: every load from memory is unknown, as before.

    Raises:
        ValueError: ``scalars`` and the function's arguments do not match in number.
    """
    kargs = fn.kernel_args()
    g = list(grid) + [1] * (3 - len(grid))
    if len(kargs) != len(scalars) + 3:
        raise ValueError(f"{fn.name} takes {len(kargs)} launch arguments (kernel arguments + 3 grid sizes), "
                         f"got {len(scalars)} + 3")
    env = {}
    memory = memory or {}
    for i, ((name, typ, _a), v) in enumerate(zip(kargs, list(scalars) + g)):
        env[name] = (Mem([None], _parse_memref(typ)[1], "gm", data=memory.get(i), off=0 if i in memory else None)
                     if typ.startswith("memref") else v)
    for name, _typ, attrs in fn.args:
        if "arg_type<workspace>" in attrs:
            env[name] = Mem([None], "i8", "gm", ws=True)
    n_blocks = g[0] * g[1] * g[2]
    c = Counts()
    _Walker(module, env, block, sub_block, n_blocks).block_ops(fn.body, c)
    return c
