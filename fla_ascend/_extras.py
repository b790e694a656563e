"""The optional dependencies of the workbench, and the error that names them.

The kernels (``ops``, ``modules``, ``layers``, ``integrations``, ``tiling``, ``backend``) need torch
and a Triton only. The workbench (``check`` and the estimate, ``profiling``, ``bench``, ``round``,
the console and the ``fla-ascend`` command) also needs :data:`LAB`, which the ``lab`` extra
installs: ``pip install "fla-ascend[lab]"``. Each workbench package calls :func:`require` when it is
imported, so a missing package is an ``ImportError`` that says which package and which extra,
raised before any of the workbench's own imports fails somewhere inside it. This module imports
nothing but the standard library.
"""
from __future__ import annotations

import importlib.util

__all__ = ["LAB", "MissingExtraError", "missing", "require", "install_hint"]

LAB = ("numpy", "pandas", "matplotlib", "rich")
"""Import names of the ``lab`` extra's packages (pyproject.toml lists them with their versions)."""


class MissingExtraError(ImportError):
    """A workbench module's optional dependency is not installed; the message names the module, the
    missing packages and the extra that installs them. ``name`` is the first missing package."""


def install_hint(extra: str = "lab") -> str:
    """``pip install "fla-ascend[lab]" (from a clone: pip install ".[lab]")``."""
    return f'pip install "fla-ascend[{extra}]" (from a clone: pip install ".[{extra}]")'


def missing(*modules: str) -> list[str]:
    """The names in ``modules`` that cannot be imported here (not installed, or set to ``None`` in
    ``sys.modules``, which makes ``import`` refuse them). Nothing is imported."""
    out = []
    for name in modules:
        try:
            absent = importlib.util.find_spec(name) is None
        except (ImportError, ValueError):  # a parent package missing, or a module without a spec
            absent = True
        if absent:
            out.append(name)
    return out


def require(owner: str, *modules: str, extra: str = "lab") -> None:
    """Raise :class:`MissingExtraError` unless every one of ``modules`` can be imported.

    Args:
        owner: the module that needs them, for the message (``"fla_ascend.profiling"``).
        modules: import names (default: none; the workbench packages pass what they use of :data:`LAB`).
        extra: the extra of fla-ascend that installs them.

    Raises:
        MissingExtraError: ``fla_ascend.profiling needs pandas: pip install "fla-ascend[lab]" (from a
            clone: pip install ".[lab]")``.
    """
    gone = missing(*modules)
    if gone:
        raise MissingExtraError(f"{owner} needs {', '.join(gone)}: {install_hint(extra)}", name=gone[0])
