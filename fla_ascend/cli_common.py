"""What every ``fla-ascend`` sub-command and benchmark script shares: list options, output
paths, usage errors, and the guard of the scripts that need a CUDA GPU.

Output paths are checked before any work starts, the same way for every command
(:func:`check_outputs`): a file's folder exists (or is created under the current directory) and is
writable, a plot's suffix is a format matplotlib writes; a folder is usable and writable. A bad one
raises :class:`UsageError`, which ``fla-ascend`` prints on one line with exit status 2 (argparse's
status for usage errors; 1 is kept for a command's findings)."""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

__all__ = ["UsageError", "interpreter_path", "list_arg", "split_list", "output_file", "output_dir", "check_outputs",
           "plot_suffixes", "require_cuda_gpu"]


class UsageError(ValueError):
    """A command line that cannot work (a bad output path, an unknown name), found before any work.
    ``fla-ascend`` prints ``fla-ascend <command>: error: <message>`` and exits with status 2."""


def list_arg(text: str) -> list[str]:
    """argparse ``type`` of a list option: :func:`split_list`, but a given option that names
    nothing (``--ops ''``, ``--kernels ,``) is an error, not the option's default (it silently
    meant "all").

    Raises:
        argparse.ArgumentTypeError: no item in ``text``.
    """
    items = split_list(text)
    if not items:
        raise argparse.ArgumentTypeError(f"names nothing ({text!r}): give at least one item, or leave the option out "
                                         "for its default")
    return items


def split_list(text: str | None) -> list[str] | None:
    """The items of a list option (``--ops``, ``--modes``, ``--providers``, ...).

    Items are separated by commas or semicolons, both accepted by every list option; blanks
    around items and empty items are dropped. ``None`` or ``""`` gives ``None`` (the option's
    default)."""
    if not text:
        return None
    return [s.strip() for s in re.split(r"[,;]", text) if s.strip()]


def output_file(path: str | Path, option: str, suffixes: list[str] | tuple[str, ...] | None = None
                ) -> tuple[Path, Path | None]:
    """Check an output file path before any work is done, the same way for every command.

    - an existing folder is refused (a file path is expected);
    - with ``suffixes`` (``[".png", ".pdf", ...]``), the file's suffix must be one of them (case
      ignored);
    - a missing folder is created only when it lies under the current directory (``out/x.json``);
      anywhere else (``/nonexistent/x.json``) it is refused, so that a typo never creates
      folders elsewhere on the machine; a file where a folder should be is refused;
    - the file must be writable (opened for appending; a file the probe created is removed).

    Returns ``(path, created)``: ``created`` is the first folder this call made (for the
    command to print), or ``None``.

    Raises:
        ValueError: any of the above; the message names ``option``, the path and what is wrong.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; expected a file path")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise ValueError(f"{option} {path}: expected a file name ending in one of {', '.join(suffixes)}, got "
                         + (f"{path.suffix!r}" if path.suffix else "no suffix"))
    parent = path.parent
    created = None
    if not parent.is_dir():
        _refuse_file_in_chain(parent, option, path)
        cwd = Path.cwd().resolve()
        target = parent.resolve()
        if target != cwd and cwd not in target.parents:
            missing = next((p for p in [target, *target.parents][::-1] if not p.exists()), target)
            raise ValueError(
                f"{option} {path}: folder {missing} does not exist; create it first (folders are created "
                f"only under the current directory, {cwd})")
        created = next(p for p in [target, *target.parents][::-1] if not p.exists())
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"{option} {path}: cannot create folder {parent} ({e.strerror or e})") from e
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        what = "cannot write this file" if existed else f"cannot create a file in folder {parent}"
        raise ValueError(f"{option} {path}: {what} ({e.strerror or e})") from e
    if not existed:
        path.unlink()
    return path, created


def _refuse_file_in_chain(folder: Path, option: str, path: Path) -> None:
    """Raise ValueError when ``folder`` or one of its parents is an existing file (``x.txt/out.json``)."""
    for p in [folder, *folder.parents]:
        if p.exists() and not p.is_dir():
            raise ValueError(f"{option} {path}: {p} is a file, not a folder")


def output_dir(path: str | Path, option: str) -> tuple[Path, Path | None]:
    """Make sure an output folder (``--out``, ``--workspace``, ``--dir``, ``--cache-dir``) can be
    used, before any work is done.

    An existing folder is used when it is writable. A missing one is created when it lies under the
    current directory or when only the folder itself is missing (its parent exists: that is the
    folder asked for); a missing chain of folders elsewhere (``/nonexistent/out``) is refused.
    Returns ``(path, created)`` as :func:`output_file`.

    Raises:
        ValueError: the path is a file (or lies under one), a chain of missing folders outside the
            current directory, or a folder that cannot be created or written; the message names
            ``option``.
    """
    path = Path(path)
    if path.is_dir():
        try:
            tempfile.TemporaryFile(dir=path).close()
        except OSError as e:
            raise ValueError(f"{option} {path}: cannot write in this folder ({e.strerror or e})") from e
        return path, None
    if path.exists():
        raise ValueError(f"{option} {path} is a file; expected a folder")
    _refuse_file_in_chain(path.parent, option, path)
    cwd = Path.cwd().resolve()
    target = path.resolve()
    missing = next(p for p in [target, *target.parents][::-1] if not p.exists())
    if missing != target and target != cwd and cwd not in target.parents:
        raise ValueError(f"{option} {path}: folder {missing} does not exist; create it first (a missing chain of "
                         f"folders is created only under the current directory, {cwd})")
    try:
        path.mkdir(parents=True)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot create this folder ({e.strerror or e})") from e
    return path, missing


def plot_suffixes() -> list[str]:
    """The suffixes of the image formats matplotlib writes here (``.png``, ``.pdf``, ``.svg``, ...),
    as matplotlib itself lists them, sorted."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted("." + k.lower() for k in FigureCanvasBase.get_supported_filetypes())


def check_outputs(files: list[tuple[str, str | Path | None, list[str] | tuple[str, ...] | None]] = (),
                  folders: list[tuple[str, str | Path | None]] = (), log=None) -> None:
    """Check every output path of a command before it starts work: ``files`` as ``(option, path,
    suffixes)`` (:func:`output_file`; ``suffixes`` ``None`` for any), ``folders`` as ``(option,
    path)`` (:func:`output_dir`). A ``None`` or empty path (the option not given) is skipped.
    ``log(text)`` is told of each folder created.

    Raises:
        UsageError: the first path that cannot be used, or two options naming the same path; the
            message names the option.
    """
    given = [(option, Path(path).resolve()) for option, path, *_ in [*files, *folders] if path]
    for i, (option, path) in enumerate(given):
        for other, path2 in given[:i]:
            if path == path2:
                raise UsageError(f"{other} and {option} name the same path, {path}; give each its own")
    done = []
    for option, path, suffixes in files:
        if path:
            done.append((option, _checked(output_file, path, option, suffixes)))
    for option, path in folders:
        if path:
            done.append((option, _checked(output_dir, path, option)))
    for option, created in done:
        if created and log is not None:
            log(f"created folder {created} for {option}")


def _checked(fn, *args):
    try:
        return fn(*args)[1]
    except ValueError as e:
        raise UsageError(str(e)) from None


def require_cuda_gpu(script: str) -> None:
    """Exit with status 2 and the message ``<script> needs a CUDA GPU ...`` when torch sees none
    (a GPU-only script on a CPU or NPU machine), instead of a torch traceback."""
    import torch

    if not torch.cuda.is_available():
        print(f"{script} needs a CUDA GPU (torch.cuda.is_available() is False here); nothing was run",
              file=sys.stderr)
        sys.exit(2)


def interpreter_path(value: str) -> str:
    """``--python``: a path (it has a separator) is made absolute, because the subprocesses run in
    other folders; a bare name (``python3``) is left for ``PATH``."""
    return os.path.abspath(value) if os.sep in value or (os.altsep and os.altsep in value) else value
