"""Which source files make up an op, and snapshots of them.

An optimisation round changes the files that define an op and its kernels, nothing else: not
the benchmark harness, not the float32 reference the correctness gate compares with, not the
shared input-validation helpers. :func:`op_source_files` finds those files by reading the op's
entry module and following its ``fla_ascend.ops`` imports statically (``ast``, nothing is
executed), keeping only kernel-bearing modules:

- under ``fla_ascend/ops/``;
- not under ``fla_ascend/ops/utils/`` (validation, index preparation, the rel-RMSE metric);
- not a ``reference.py`` (the gate's reference must not move with the candidate);
- not an ``__init__.py`` (re-exports only; followed for the names imported through it).

Paths are POSIX strings relative to the repository root (``fla_ascend/ops/norm/l2norm.py``).
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import shutil
from pathlib import Path

PACKAGE = "fla_ascend"


def package_root() -> Path:
    """Directory that holds the ``fla_ascend`` package (the repository root in a checkout)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the fla_ascend package cannot be found on sys.path")
    return Path(list(spec.submodule_search_locations)[0]).resolve().parent


def _module_file(module: str, root: Path) -> Path | None:
    """File of ``module`` under ``root`` (``pkg/__init__.py`` for a package), else None."""
    base = root.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _is_kernel_file(rel: str) -> bool:
    parts = rel.split("/")
    return (
        rel.startswith(f"{PACKAGE}/ops/")
        and not rel.startswith(f"{PACKAGE}/ops/utils/")
        and parts[-1] not in ("reference.py", "__init__.py")
    )


def _imports(path: Path, module: str) -> list[tuple[str, list[str]]]:
    """``(absolute module, imported names)`` for each import statement of a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                mod = ".".join(pkg + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names]))
    return out


def _resolve(module: str, names: list[str], root: Path) -> list[str]:
    """Modules that ``from module import names`` reads its definitions from."""
    mods = []
    f = _module_file(module, root)
    if f is None:
        return mods
    if f.name != "__init__.py":
        return [module]
    for name in names or []:
        if _module_file(f"{module}.{name}", root) is not None:
            mods.append(f"{module}.{name}")
            continue
        # a name re-exported by the package's __init__: follow that one import
        for src_mod, src_names in _imports(f, module):
            if name in src_names and _module_file(src_mod, root) is not None:
                mods.extend(_resolve(src_mod, [name], root))
    return mods


def entry_module(op: str) -> str:
    """Module that defines the public op ``op``.

    Raises:
        ValueError: ``op`` is not an op of ``fla_ascend.ops`` (lists the known table).
    """
    if not isinstance(op, str) or not op:
        raise ValueError(f"op must be a non-empty string, got {op!r}")
    from fla_ascend.ops import catalog

    specs = catalog.specs()
    if op in specs:
        return specs[op].entry.split(":", 1)[0]
    import pkgutil

    ops_pkg = importlib.import_module(f"{PACKAGE}.ops")
    candidates = [ops_pkg.__name__] + [
        f"{ops_pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(ops_pkg.__path__) if m.ispkg
    ]
    for name in candidates:
        try:
            mod = importlib.import_module(name)
        except Exception:  # a sub-package still under construction must not hide the others
            continue
        obj = getattr(mod, op, None)
        if callable(obj) and getattr(obj, "__module__", "").startswith(f"{PACKAGE}.ops"):
            return obj.__module__
    raise ValueError(f"op {op!r} is not a public op of fla_ascend.ops; the catalogue's ops: {sorted(specs)}")


def op_source_files(op: str, root: Path | None = None) -> list[str]:
    """Kernel source files of ``op``: its entry module plus the ``fla_ascend.ops`` modules it
    imports, transitively (rules in the module docstring).

    Args:
        op: public op name (``"l2norm"``, ``"chunk_gated_delta_rule"``, ...).
        root: directory holding the ``fla_ascend`` package; default :func:`package_root`.

    Returns:
        Sorted POSIX paths relative to ``root``.

    Raises:
        ValueError: unknown op, or its entry module has no file under ``root``.
    """
    root = Path(root) if root is not None else package_root()
    start = entry_module(op)
    seen: set[str] = set()
    files: set[str] = set()
    todo = [start]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        f = _module_file(mod, root)
        if f is None:
            if mod == start:
                raise ValueError(f"entry module {mod} of op {op!r} has no file under {root}")
            continue
        rel = f.relative_to(root).as_posix()
        if mod != start and not _is_kernel_file(rel):
            continue
        files.add(rel)
        for imp, names in _imports(f, mod):
            if imp.startswith(f"{PACKAGE}.ops"):
                todo.extend(_resolve(imp, names, root))
    return sorted(files)


def check_snapshot_path(rel: str) -> str:
    """Validate a snapshot path: relative, inside the package, not the harness or a reference.

    Raises:
        ValueError: absolute, escaping (``..``), outside ``fla_ascend/``, a ``.py`` that is not,
            a file of ``fla_ascend/bench/`` or ``fla_ascend/round/``, or a ``reference.py``.
    """
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts:
        raise ValueError(f"source file must be a relative path inside the repository, got {rel!r}")
    rel = p.as_posix()
    if not rel.startswith(f"{PACKAGE}/") or p.suffix != ".py":
        raise ValueError(f"source file must be a .py file under {PACKAGE}/, got {rel!r}")
    if rel.startswith((f"{PACKAGE}/bench/", f"{PACKAGE}/round/")) or p.name == "reference.py":
        raise ValueError(
            f"{rel!r} is the benchmark harness, the round tool or a correctness reference; "
            "a round may not change it"
        )
    return rel


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def snapshot(files: list[str], src_root: Path, dest: Path) -> dict[str, str]:
    """Copy ``files`` (relative to ``src_root``) under ``dest``, keeping their relative paths.

    Returns:
        ``{relative path: sha256}`` of the copies.

    Raises:
        FileNotFoundError: a file is missing under ``src_root``.
    """
    hashes = {}
    for rel in files:
        src = Path(src_root) / rel
        if not src.is_file():
            raise FileNotFoundError(f"source file {rel} not found under {src_root}")
        out = Path(dest) / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)
        hashes[rel] = file_sha256(out)
    return hashes


def tree_hashes(files: list[str], root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` for ``files`` under ``root`` (missing files map to ``""``)."""
    return {rel: (file_sha256(Path(root) / rel) if (Path(root) / rel).is_file() else "") for rel in files}


def source_hash(hashes: dict[str, str]) -> str:
    """One hex SHA-256 over ``{path: sha256}`` (order-independent): identifies a snapshot."""
    h = hashlib.sha256()
    for rel in sorted(hashes):
        h.update(f"{rel}\0{hashes[rel]}\n".encode())
    return h.hexdigest()
