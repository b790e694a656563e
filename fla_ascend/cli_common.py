"""What every ``fla-ascend`` sub-command and benchmark script shares: list options, output
paths, and the guard of the scripts that need a CUDA GPU."""
from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["split_list", "output_file", "output_dir", "require_cuda_gpu"]


def split_list(text: str | None) -> list[str] | None:
    """The items of a list option (``--ops``, ``--modes``, ``--providers``, ...).

    Items are separated by commas or semicolons, both accepted by every list option; blanks
    around items and empty items are dropped. ``None`` or ``""`` gives ``None`` (the option's
    default)."""
    if not text:
        return None
    return [s.strip() for s in re.split(r"[,;]", text) if s.strip()]


def output_file(path: str | Path, option: str) -> tuple[Path, Path | None]:
    """Check an output file path before any work is done, the same way for every command.

    - an existing folder is refused (a file path is expected);
    - a missing folder is created only when it lies under the current directory (``out/x.json``);
      anywhere else (``/nonexistent/x.json``) it is refused, so that a typo never creates
      folders elsewhere on the machine;
    - the file must be writable (opened for appending; a file the probe created is removed).

    Returns ``(path, created)``: ``created`` is the first folder this call made (for the
    command to print), or ``None``.

    Raises:
        ValueError: the path is a folder, or its missing folder lies outside the current
            directory; the message names ``option``.
        OSError: the file cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; expected a file path")
    parent = path.parent
    created = None
    if not parent.is_dir():
        cwd = Path.cwd().resolve()
        target = parent.resolve()
        if target != cwd and cwd not in target.parents:
            missing = next((p for p in [target, *target.parents][::-1] if not p.exists()), target)
            raise ValueError(
                f"{option} {path}: folder {missing} does not exist; create it first (folders are created "
                f"only under the current directory, {cwd})")
        created = next(p for p in [target, *target.parents][::-1] if not p.exists())
        parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    with open(path, "a"):
        pass
    if not existed:
        path.unlink()
    return path, created


def output_dir(path: str | Path, option: str) -> tuple[Path, Path | None]:
    """Make sure an output folder (``--out``, ``--workspace``, ``--dir``) can be used, before any
    work is done.

    An existing folder is used. A missing one is created when it lies under the current directory
    or when only the folder itself is missing (its parent exists: that is the folder asked for);
    a missing chain of folders elsewhere (``/nonexistent/out``) is refused. Returns ``(path,
    created)`` as :func:`output_file`.

    Raises:
        ValueError: the path is a file, or a chain of missing folders outside the current
            directory; the message names ``option``.
        OSError: the folder cannot be created.
    """
    path = Path(path)
    if path.is_dir():
        return path, None
    if path.exists():
        raise ValueError(f"{option} {path} is a file; expected a folder")
    cwd = Path.cwd().resolve()
    target = path.resolve()
    missing = next(p for p in [target, *target.parents][::-1] if not p.exists())
    if missing != target and target != cwd and cwd not in target.parents:
        raise ValueError(f"{option} {path}: folder {missing} does not exist; create it first (a missing chain of "
                         f"folders is created only under the current directory, {cwd})")
    path.mkdir(parents=True)
    return path, missing


def require_cuda_gpu(script: str) -> None:
    """Exit with status 2 and the message ``<script> needs a CUDA GPU ...`` when torch sees none
    (a GPU-only script on a CPU or NPU machine), instead of a torch traceback."""
    import torch

    if not torch.cuda.is_available():
        print(f"{script} needs a CUDA GPU (torch.cuda.is_available() is False here); nothing was run",
              file=sys.stderr)
        sys.exit(2)
