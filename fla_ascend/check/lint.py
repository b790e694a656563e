"""Source lint for the triton-ascend traps of docs/ascend-rules.md (R7-R10) that the IR does not show.

Each rule works on the Python AST of a module (no import, no compiler) and yields
:class:`Finding` objects with the function name and line:

- ``launch_num_warps``: ``num_warps`` / ``num_stages`` passed straight to a kernel launch
  (``kernel[grid](..., num_warps=4)``); on Ascend they mean nothing, warn, and enter the compile
  cache key. Route them through ``backend.launch_options(...)``, which drops them on NPU.
- ``inplace_pointer_advance``: inside a task loop (``for ... in tl.range(tl.program_id(..), ...)``)
  a name defined before the loop is advanced in place (``p += s`` or ``p = p + s``); triton-ascend
  miscompiles pointers carried across task-loop iterations (R9).
- ``runtime_size_constexpr``: a run-time size (``T``, ``NT``, ``n_tasks``...) declared
  ``tl.constexpr``: the kernel recompiles for every new length (R10).
- ``dot_operand_reused``: the left operand of ``tl.dot`` is read again after the dot (later in
  the function, or in the next iteration of a loop around the dot); the Cube path may overwrite
  it in UB (R7).
- ``runtime_if_loads``: an ``if`` whose condition is not a constexpr (not an upper-case name)
  with ``tl.load`` in both branches; both paths' buffers stay live in UB (R8).
- ``block_ptr_unchecked``: a ``tl.load`` / ``tl.store`` of a block pointer (``tl.make_block_ptr``,
  or ``tl.advance`` of one) whose ``boundary_check`` leaves out a dimension the tile can run past.
  On Ascend such a load of a partial last tile silently reads the next row's data instead of
  zeros (flash-linear-attention issue 1251, triton-ascend issue 2261); a store writes past the
  tensor on every target. A dimension is known to fit only when its block size is the same
  expression as the tensor's size and its offset is the literal 0; every other one must be in a
  literal ``boundary_check`` tuple.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["Finding", "lint_source", "lint_file", "RUNTIME_SIZE_NAMES"]

RUNTIME_SIZE_NAMES = frozenset({"T", "NT", "TT", "N", "B", "M", "n_tasks", "n_programs", "seq_len", "total_tokens",
                                "num_tokens", "n_chunks", "L"})
"""Parameter names that are run-time sizes by this package's conventions."""


@dataclass
class Finding:
    """One finding: ``code`` (rule id), ``function`` it is in, ``line`` (1-based), ``message``,
    ``severity`` (``"error"`` fails the check unless allow-listed; ``"info"`` is reported only)."""

    code: str
    function: str
    line: int
    message: str
    severity: str = "error"
    file: str = ""


def _is_jit(dec: ast.expr) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(node, ast.Attribute) and node.attr in ("jit", "autotune")) or (
        isinstance(node, ast.Name) and node.id == "jit")


def _is_call(node, attr: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attr


def _is_dot(node) -> bool:
    """``tl.dot(...)`` or a call of a jit dot helper named ``*_dot`` (e.g. ``wy_dot``), whose
    left operand reaches ``tl.dot`` unchanged on the exact-precision path."""
    return _is_call(node, "dot") or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                                     and node.func.id.endswith("_dot"))


def _constexpr_params(fn: ast.FunctionDef) -> list[str]:
    out = []
    for a in fn.args.args + fn.args.kwonlyargs:
        if a.annotation is not None and "constexpr" in ast.unparse(a.annotation):
            out.append(a.arg)
    return out


def _names_loaded(node) -> list[ast.Name]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _stored(node) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


def _is_task_loop(loop: ast.For) -> bool:
    it = loop.iter
    return isinstance(it, ast.Call) \
        and (_is_call(it, "range") or (isinstance(it.func, ast.Name) and it.func.id == "range")) \
        and it.args and any(_is_call(n, "program_id") for n in ast.walk(it.args[0]))


def _pos(node) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def _lint_jit_function(fn: ast.FunctionDef, file: str) -> list[Finding]:
    out: list[Finding] = []
    cexpr = _constexpr_params(fn)
    for name in cexpr:
        if name in RUNTIME_SIZE_NAMES:
            out.append(Finding("runtime_size_constexpr", fn.name, fn.lineno,
                               f"run-time size {name!r} is tl.constexpr: one compile per value; make it a "
                               f"run-time argument listed in do_not_specialize", file=file))
    # in-place pointer advance inside a task loop
    for loop in [n for n in ast.walk(fn) if isinstance(n, ast.For) and _is_task_loop(n)]:
        before = {a.arg for a in fn.args.args} | {n.id for s in fn.body if _pos(s) < _pos(loop)
                                                    for n in ast.walk(s)
                                                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for n in ast.walk(loop):
            tgt = None
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                tgt = n.target.id
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and isinstance(n.value, ast.BinOp) and isinstance(n.value.left, ast.Name) \
                    and n.value.left.id == n.targets[0].id:
                tgt = n.targets[0].id
            if tgt and tgt in before and tgt not in cexpr:
                out.append(Finding("inplace_pointer_advance", fn.name, n.lineno,
                                   f"{tgt!r} is advanced in place across task-loop iterations; recompute it from "
                                   f"the task index in each iteration", file=file))
    # tl.dot left operand reused after the dot
    loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))]
    meta = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr in ("dtype", "shape")}
    for call in [n for n in ast.walk(fn) if _is_dot(n) and n.args and isinstance(n.args[0], ast.Name)]:
        a = call.args[0].id
        inside = {id(n) for n in ast.walk(call)}
        later_loads = sorted(_pos(n) for n in _names_loaded(fn) if n.id == a and _pos(n) > _pos(call)
                             and id(n) not in inside and id(n) not in meta)
        stores = sorted(_pos(n) for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == a
                        and isinstance(n.ctx, ast.Store) and _pos(n) > _pos(call))
        reused = bool(later_loads) and (not stores or later_loads[0] < stores[0])
        # the assignment holding the dot stores to its target after evaluating the call
        if reused and stores and later_loads[0][0] == call.lineno:
            reused = False
        in_loop = [lp for lp in loops if any(n is call for n in ast.walk(lp))]
        if not reused and in_loop and a not in _stored(in_loop[-1]):
            reused = True
        if reused:
            out.append(Finding("dot_operand_reused", fn.name, call.lineno,
                               f"left operand {a!r} of tl.dot is read again after the dot; the Cube path may "
                               f"overwrite it: reload it or dot on a copy, tiles.dot_operand({a}) ({a} + 0.0 where R7 "
                               f"applies)", file=file))
    # runtime if between two load paths
    for node in [n for n in ast.walk(fn) if isinstance(n, ast.If)]:
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        runtime = any(not (n.isupper() or n in cexpr) for n in names) or not names
        loads_body = any(_is_call(n, "load") for s in node.body for n in ast.walk(s))
        loads_else = any(_is_call(n, "load") for s in node.orelse for n in ast.walk(s))
        if runtime and names and loads_body and loads_else:
            out.append(Finding("runtime_if_loads", fn.name, node.lineno,
                               "a run-time `if` chooses between two load paths; both paths' buffers stay live in "
                               "UB: split them with a constexpr flag", file=file))
    out.extend(_lint_block_pointers(fn, file))
    return out


def _block_ptr_dims(call: ast.Call) -> list[int] | None:
    """Indices of the dimensions of ``tl.make_block_ptr(...)`` whose tile can run past the tensor,
    or ``None`` when the call's shape / offsets / block_shape are not literal tuples."""
    names = ("base", "shape", "strides", "offsets", "block_shape", "order")
    args = dict(zip(names, call.args))
    args.update({kw.arg: kw.value for kw in call.keywords if kw.arg in names})
    shape, offsets, block = args.get("shape"), args.get("offsets"), args.get("block_shape")
    if not all(isinstance(a, (ast.Tuple, ast.List)) for a in (shape, offsets, block)) \
            or not len(shape.elts) == len(offsets.elts) == len(block.elts):
        return None
    return [d for d, (n, o, b) in enumerate(zip(shape.elts, offsets.elts, block.elts))
            if not (ast.unparse(n) == ast.unparse(b) and isinstance(o, ast.Constant) and o.value == 0)]


def _lint_block_pointers(fn: ast.FunctionDef, file: str) -> list[Finding]:
    out: list[Finding] = []
    # name -> dims that can run past (None: unknown), from `p = tl.make_block_ptr(...)` and
    # `p = tl.advance(q, ...)` with q a known block pointer
    pointers: dict[str, list[int] | None] = {}
    for n in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign)), key=_pos):
        if len(n.targets) != 1 or not isinstance(n.targets[0], ast.Name):
            continue
        v = n.value
        if _is_call(v, "make_block_ptr"):
            pointers[n.targets[0].id] = _block_ptr_dims(v)
        elif _is_call(v, "advance") and v.args and isinstance(v.args[0], ast.Name) and v.args[0].id in pointers:
            pointers[n.targets[0].id] = pointers[v.args[0].id]
    for call in [n for n in ast.walk(fn) if _is_call(n, "load") or _is_call(n, "store")]:
        if not call.args:
            continue
        ptr = call.args[0]
        if _is_call(ptr, "advance") and ptr.args and isinstance(ptr.args[0], ast.Name) \
                and ptr.args[0].id in pointers:
            dims, what = pointers[ptr.args[0].id], f"tl.advance({ptr.args[0].id}, ...)"
        elif _is_call(ptr, "make_block_ptr"):
            dims, what = _block_ptr_dims(ptr), "tl.make_block_ptr(...)"
        elif isinstance(ptr, ast.Name) and ptr.id in pointers:
            dims, what = pointers[ptr.id], repr(ptr.id)
        else:
            continue
        check = next((kw.value for kw in call.keywords if kw.arg == "boundary_check"), None)
        if check is None:
            checked: set[int] | None = set()
        elif isinstance(check, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in check.elts):
            checked = {e.value for e in check.elts}
        else:
            checked = None
        op = call.func.attr
        if dims is None or checked is None:
            out.append(Finding("block_ptr_unchecked", fn.name, call.lineno,
                               f"tl.{op} of block pointer {what}: its shape, offsets, block_shape or boundary_check "
                               f"is not a literal tuple, so no dimension can be shown to stay inside the tensor; "
                               f"write them as tuples and check every dimension a tile can run past", file=file))
            continue
        missing = [d for d in dims if d not in checked]
        if missing:
            out.append(Finding("block_ptr_unchecked", fn.name, call.lineno,
                               f"tl.{op} of block pointer {what} without boundary_check on dimension(s) "
                               f"{tuple(missing)}, where a partial last tile runs past the tensor (on Ascend the "
                               f"load reads the next row's data instead of zeros): add boundary_check="
                               f"{tuple(sorted(set(missing) | checked))}", file=file))
    return out


def _lint_launches(tree: ast.AST, file: str) -> list[Finding]:
    out = []
    parents = {}
    for p in ast.walk(tree):
        for c in ast.iter_child_nodes(p):
            parents[c] = p
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            for kw in node.keywords:
                if kw.arg in ("num_warps", "num_stages"):
                    fn = node
                    while fn in parents and not isinstance(fn, ast.FunctionDef):
                        fn = parents[fn]
                    out.append(Finding("launch_num_warps", getattr(fn, "name", "<module>"), node.lineno,
                                       f"{kw.arg} passed straight to a kernel launch; on NPU it is meaningless and "
                                       f"enters the compile cache key: use **backend.launch_options({kw.arg}=...)",
                                       file=file))
    return out


def lint_source(source: str, file: str = "<source>") -> list[Finding]:
    """All findings of ``source`` (Python text). Raises ``SyntaxError`` on invalid Python."""
    tree = ast.parse(source, filename=file)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            out.extend(_lint_jit_function(node, file))
    out.extend(_lint_launches(tree, file))
    return out


def lint_file(path: str) -> list[Finding]:
    """:func:`lint_source` on the file at ``path``."""
    with open(path, encoding="utf-8") as f:
        return lint_source(f.read(), file=path)
