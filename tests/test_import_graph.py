"""The package's imports point one way: no import cycle among fla_ascend's modules, nor among its
folders, and the kernel side never imports the workbench.

The graph is read from the source with ``ast`` (nothing is imported). Its nodes are the modules of
``fla_ascend/`` (a package is its ``__init__``). An edge ``A -> B`` is any import in ``A`` that
executes ``B``:

- ``import fla_ascend.x.y``, ``from fla_ascend.x import y`` (``y`` a module or a name in ``x``),
  relative imports, and ``importlib.import_module`` called with a literal module name;
- at module level *and* inside functions and methods. An in-function import that only dodges a
  cycle leaves the cycle in place (it just fails later, or in another import order), so it counts.
  Imports kept inside functions because the module they import needs an optional dependency
  (pandas, matplotlib, rich, torch_npu, triton-ascend's compiler) or is slow to import count too:
  that is a reason to import late, never to import in a circle. Third-party modules are not nodes.
- importing ``a.b.c`` first runs the packages ``a`` and ``a.b``: each is an edge too, except a
  package that contains the importer (it is already initialised when the importer runs).

Not edges: imports under ``if TYPE_CHECKING:`` (never executed; there are none today), names built
at run time (``fla-ascend``'s list of sub-command modules in ``cli.py``, the benchmark suite named on a
command line), and ``python -m`` worker processes (a new interpreter, not an import).

Allowed cycles: none. :data:`ALLOWED` would list an edge left out of the graph with the reason it
cannot be removed; it is empty, and a new entry needs a reason a reviewer accepts.

The folder graph collapses each module to its folder (``fla_ascend.ops.cp``), so that a subpackage
that imports another one which imports it back fails even when no two modules do
(``ops.causal_conv1d`` -> ``ops.cp`` -> ``ops.causal_conv1d`` was one). Modules directly in
``fla_ascend/`` (``backend``, ``cli``, ``console``, ...) stay their own nodes.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fla_ascend"

#: ``(importer, imported) -> reason`` of edges left out of the graph. Empty: no cycle is allowed.
ALLOWED: dict[tuple[str, str], str] = {}

#: The kernels: what ``pip install fla-ascend`` with torch and a Triton alone must import.
KERNEL_SIDE = ("fla_ascend.backend", "fla_ascend.ops", "fla_ascend.modules", "fla_ascend.layers",
               "fla_ascend.integrations", "fla_ascend.tiling")
#: The workbench: behind the ``lab`` extra (docs/design.md).
WORKBENCH = ("fla_ascend.check", "fla_ascend.profiling", "fla_ascend.bench", "fla_ascend.round",
             "fla_ascend.console", "fla_ascend.cli", "fla_ascend.cli_common", "fla_ascend.info_cli")


def modules(root: Path, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """``module name -> (file, is a package)`` of every ``.py`` file under ``root / package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, name: str, is_pkg: bool, package: str):
    """``(imported module name, line, in a function)`` of every import in ``tree`` (module ``name``)."""
    base = name if is_pkg else name.rpartition(".")[0]

    def walk(node, in_func):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), in_func)
                continue
            func = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, func
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = base.split(".")
                    parts = parts[:len(parts) - (child.level - 1)]
                    mod = ".".join(parts + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                yield mod, child.lineno, func
                for alias in child.names:
                    yield f"{mod}.{alias.name}", child.lineno, func  # kept only if it is a module
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                  and child.func.attr == "import_module" and child.args
                  and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str)):
                yield child.args[0].value, child.lineno, func
            yield from walk(child, func)

    for mod, line, func in walk(tree, False):
        if mod == package or mod.startswith(package + "."):
            yield mod, line, func


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """``importer -> {imported: ["line 12", "line 40 (in a function)", ...]}`` over ``package``'s
    modules, with the implicit imports of parent packages (see the module docstring)."""
    mods = modules(root, package)
    graph: dict[str, dict[str, list[str]]] = {m: {} for m in mods}
    for name, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        own = {name} | {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
        for mod, line, func in _imports(tree, name, is_pkg, package):
            if mod not in mods:
                continue  # a name imported from a module, not a module
            parts = mod.split(".")
            for target in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
                if target in own or target not in mods or (name, target) in ALLOWED:
                    continue
                where = f"line {line}" + (" (in a function)" if func else "")
                graph[name].setdefault(target, [])
                if where not in graph[name][target]:
                    graph[name][target].append(where)
    return graph


def folder_of(module: str, mods: dict[str, tuple[Path, bool]], package: str = PACKAGE) -> str:
    """The folder node of ``module``: its package (itself for a package), or the module itself when it
    lies directly in ``package``."""
    _, is_pkg = mods[module]
    if is_pkg or module.count(".") <= 1:
        return module
    return module.rpartition(".")[0]


def folder_graph(graph: dict[str, dict[str, list[str]]], mods, package: str = PACKAGE):
    """``graph`` collapsed to folders: ``folder -> {folder: ["a.b -> c.d line 3", ...]}``; an edge to
    a folder that contains the importer's is left out (that package is already initialised)."""
    out: dict[str, dict[str, list[str]]] = {}
    for a, targets in graph.items():
        fa = folder_of(a, mods, package)
        out.setdefault(fa, {})
        for b, where in targets.items():
            fb = folder_of(b, mods, package)
            if fa == fb or fa.startswith(fb + "."):
                continue
            out[fa].setdefault(fb, []).append(f"{a} -> {b} ({', '.join(where)})")
    return out


def cycles(graph: dict[str, dict]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan), as one cycle through it:
    ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:  # one cycle through the component, by breadth-first search back to its start
        start = min(comp)
        prev = {start: None}
        queue = [start]
        end = None
        while queue and end is None:
            v = queue.pop(0)
            for w in sorted(graph.get(v, ())):
                if w == start:
                    end = v
                    break
                if w in comp and w not in prev:
                    prev[w] = v
                    queue.append(w)
        path = [start]
        v = end
        while v is not None and v != start:
            path.insert(1, v)
            v = prev[v]
        out.append(path + [start])
    return out


def describe(cycle: list[str], graph: dict[str, dict[str, list[str]]]) -> str:
    return "\n  ".join(f"{a} -> {b}: {'; '.join(graph[a][b])}" for a, b in zip(cycle, cycle[1:]))


GRAPH = import_graph()
MODS = modules(ROOT)


def test_graph_sees_the_package():
    """The reader finds the modules and the edges it must (the test would pass vacuously otherwise)."""
    assert len(MODS) > 50
    assert "fla_ascend.ops.cp.context" in GRAPH["fla_ascend.ops.gated_delta_rule.chunk"]
    assert "fla_ascend.ops.cp" in GRAPH["fla_ascend.ops.gated_delta_rule.chunk"]  # the parent package runs first
    assert "fla_ascend.ops" not in GRAPH["fla_ascend.ops.gated_delta_rule.chunk"]  # its own ancestor
    assert any("in a function" in w for w in GRAPH["fla_ascend.profiling.cli"]["fla_ascend.bench.suite"])


def test_no_import_cycle_among_modules():
    found = cycles(GRAPH)
    assert not found, "import cycles (module-level and in-function imports alike):\n" + "\n".join(
        f"- {' -> '.join(c)}\n  {describe(c, GRAPH)}" for c in found)


def test_no_import_cycle_among_folders():
    folders = folder_graph(GRAPH, MODS)
    found = cycles(folders)
    assert not found, "folders that import each other:\n" + "\n".join(
        f"- {' -> '.join(c)}\n  {describe(c, folders)}" for c in found)


def _inside(module: str, roots) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def test_kernel_side_never_imports_the_workbench():
    """ops, modules, layers, integrations, tiling and backend install with torch and a Triton alone:
    none of them imports check, profiling, bench, round or the CLI, even inside a function."""
    bad = [f"{a} -> {b} ({', '.join(w)})" for a, targets in GRAPH.items() if _inside(a, KERNEL_SIDE)
           for b, w in targets.items() if _inside(b, WORKBENCH)]
    assert not bad, "kernel modules importing the workbench:\n" + "\n".join(bad)


@pytest.mark.parametrize("in_function", [False, True])
def test_a_cycle_is_found_and_named(tmp_path, in_function):
    """On a small package with a cycle through a sub-package, both graphs report it, with the lines."""
    pkg = tmp_path / "demo"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "b" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from demo.b.y import f\n")
    back = "def g():\n    from ..a import x\n" if in_function else "from demo.a import x\n"
    (pkg / "b" / "y.py").write_text("import os\n" + back + "\ndef f():\n    pass\n")
    (pkg / "b" / "z.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import demo.a.x\n")
    graph = import_graph(tmp_path, "demo")
    assert "demo.a.x" not in graph["demo.b.z"]  # TYPE_CHECKING imports are not edges
    found = cycles(graph)
    assert found == [["demo.a.x", "demo.b.y", "demo.a.x"]], found
    text = describe(found[0], graph)
    assert ("demo.b.y -> demo.a.x: line 3 (in a function)" if in_function else "demo.b.y -> demo.a.x: line 2") in text
    mods = modules(tmp_path, "demo")
    assert cycles(folder_graph(graph, mods, "demo")) == [["demo.a", "demo.b", "demo.a"]]
