"""Read Ascend profiler output (torch_npu / MindSpore runs, folders of ranks, msprof app-mode
``PROF_*`` / ``mindstudio_profiler_output`` folders, single CSV files, msprof op) into pandas
DataFrames.

Nothing here needs an NPU, CANN, torch_npu or torch: only the standard library, NumPy and pandas.
The formats and their quirks are described in ``docs/profiling.md`` (facts taken from the public
torch_npu, msprof and msprof-analyze sources).

Normalised kernel table (:func:`read_kernel_details`), one row per device task (kernel launch):

=================  ==========  ============================================================
column             dtype       meaning (unit)
=================  ==========  ============================================================
``step``           Int64       ``Step Id`` (profiler schedule step); <NA> when not recorded
``device_id``      Int64       ``Device_id``; <NA> when the header has none
``model_id``       Int64       ``Model ID`` (4294967295 in eager mode)
``task_id``        Int64       ``Task ID``
``stream_id``      Int64       ``Stream ID``
``name``           string      kernel name (``Name``)
``type``           string      op type (``Type``)
``op_state``       string      ``OP State`` (``static`` / ``dynamic``), CANN >= 8.0
``core``           string      ``Accelerator Core`` (``AI_CORE``, ``AI_VECTOR_CORE``,
                               ``MIX_AIC``, ``MIX_AIV``, ``AI_CPU``, ``CUDA`` for our CUDA
                               collector, ...)
``start_us``       float64     ``Start Time(us)``, absolute epoch microseconds (float64:
                               resolution 0.25 us at 2025 epochs)
``start_ns``       Int64       the same start time in integer nanoseconds, exact (parsed from
                               the text, never through a float)
``duration_us``    float64     ``Duration(us)``
``wait_us``        float64     ``Wait Time(us)``: idle gap before the task on its stream
``block_dim``      Int64       ``Block Dim`` or ``Block Num`` (2026 header)
``mix_block_dim``  Int64       ``Mix Block Dim`` / ``Mix Block Num`` (vector blocks of a
                               ``MIX_AIC`` kernel)
``hf32_eligible``  string      ``HF32 Eligible``
``input_shapes``   string      ``Input Shapes`` without the literal quotes:
                               ``"81920,4096;8192,512"`` -> ``81920,4096;8192,512``
``input_dtypes``   string      ``Input Data Types``
``input_formats``  string      ``Input Formats``
``output_shapes``  string      ``Output Shapes`` (quotes removed)
``output_dtypes``  string      ``Output Data Types``
``output_formats`` string      ``Output Formats``
``context_id``     string      ``Context ID``
=================  ==========  ============================================================

PMU columns (``aic_mac_ratio``, ``aiv_vec_time(us)``, ``cube_utilization(%)``, the unprefixed
``mac_ratio`` of non-split chips, any metric group) keep their header names and become float64;
ratios are fractions 0-1 unless the name ends in ``(%)``. ``N/A`` and empty cells become NaN /
<NA>. Columns this module does not know are kept under their header name, as float64 when every
cell parses as a number, else as text.

Every reader raises :class:`ProfilingFormatError` (a ``ValueError``) naming the file, the line
(1-based, as an editor counts) and the column (1-based, plus the header name) of the first cell
it cannot read, and :class:`FileNotFoundError` naming the path when a file or directory is absent.
Readers that take ``issues`` (a list) skip a row whose field count differs from the header's
and append a :class:`RowIssue` (file, line, what is wrong) instead; :func:`load_run` does so
unless ``strict=True``. Each reader checks the kind of file from its header
(:func:`file_kind`): an ``op_summary`` passed as a step trace is an error naming both.
"""
from __future__ import annotations

import csv
import dataclasses
import glob
import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "ProfilingFormatError",
    "DeviceInfo",
    "Run",
    "MsprofOpRun",
    "KERNEL_COLUMNS",
    "RUN_DIR_SUFFIXES",
    "find_runs",
    "read_csv_table",
    "read_kernel_details",
    "read_op_statistic",
    "op_statistic_from_kernels",
    "read_operator_details",
    "read_step_trace",
    "read_device_info",
    "read_profiler_info",
    "read_msprof_op",
    "load_run",
    "load_runs",
    "resolve_input",
    "parse_shapes",
    "RowIssue",
    "FILE_KINDS",
    "file_kind",
    "csv_kind",
    "normalise_kernel_name",
    "read_task_time",
    "kernels_from_task_time",
    "read_communication",
    "read_trace_overlap",
    "empty_kernels",
    "layout_of",
    "msprof_files",
]

#: Directory-name endings of one profiler collection: torch_npu, MindSpore, our CUDA collector.
RUN_DIR_SUFFIXES = ("_ascend_pt", "_ascend_ms", "_cuda_pt")
OUTPUT_SUBDIR = "ASCEND_PROFILER_OUTPUT"

# kernel_details.csv header -> normalised name, dtype kind ("int", "float", "str", "shape", "time")
_KERNEL_MAP: dict[str, tuple[str, str]] = {
    "Step Id": ("step", "int"),
    "Device_id": ("device_id", "int"),
    "Device Id": ("device_id", "int"),
    "Model ID": ("model_id", "int"),
    "Task ID": ("task_id", "int"),
    "Stream ID": ("stream_id", "int"),
    "Name": ("name", "str"),
    "Type": ("type", "str"),
    "OP State": ("op_state", "str"),
    "Accelerator Core": ("core", "str"),
    "Start Time(us)": ("start_us", "time"),
    "Duration(us)": ("duration_us", "float"),
    "Wait Time(us)": ("wait_us", "float"),
    "Block Dim": ("block_dim", "int"),
    "Block Num": ("block_dim", "int"),
    "Mix Block Dim": ("mix_block_dim", "int"),
    "Mix Block Num": ("mix_block_dim", "int"),
    "HF32 Eligible": ("hf32_eligible", "str"),
    "Input Shapes": ("input_shapes", "shape"),
    "Input Data Types": ("input_dtypes", "str"),
    "Input Formats": ("input_formats", "str"),
    "Output Shapes": ("output_shapes", "shape"),
    "Output Data Types": ("output_dtypes", "str"),
    "Output Formats": ("output_formats", "str"),
    "Context ID": ("context_id", "str"),
    # msprof app-mode op_summary_*.csv names of the same columns
    "Op Name": ("name", "str"),
    "OP Type": ("type", "str"),
    "Task Type": ("core", "str"),
    "Task Start Time(us)": ("start_us", "time"),
    "Task Duration(us)": ("duration_us", "float"),
    "Task Wait Time(us)": ("wait_us", "float"),
}

#: Columns every normalised kernel table has, in this order (PMU and unknown columns follow).
KERNEL_COLUMNS = [
    "step", "device_id", "model_id", "task_id", "stream_id", "name", "type", "op_state", "core",
    "start_us", "start_ns", "duration_us", "wait_us", "block_dim", "mix_block_dim",
    "hf32_eligible", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
    "output_dtypes", "output_formats", "context_id",
]
_KERNEL_KINDS = {v[0]: v[1] for v in _KERNEL_MAP.values()}
_KERNEL_KINDS["start_ns"] = "int"
# each required column, under its kernel_details or op_summary name
_REQUIRED_KERNEL_HEADERS = (("Name", "Op Name"), ("Accelerator Core", "Task Type"),
                            ("Duration(us)", "Task Duration(us)"))

_NA = {"", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-"}


class ProfilingFormatError(ValueError):
    """A profiler file that cannot be read. ``path``, ``line`` (1-based) and ``column`` (1-based,
    or ``None`` for a whole-line problem) locate the first bad cell."""

    def __init__(self, path, line: int | None, column: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.column = column
        where = self.path
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column}"
        super().__init__(f"{where}: {message}")


# --------------------------------------------------------------------------- low-level CSV


def _clean(cell: str) -> str:
    """Strip whitespace, the TAB torch_npu appends to times, and stray literal quotes."""
    return cell.strip().strip('"').strip()


@dataclasses.dataclass(frozen=True)
class RowIssue:
    """A malformed row that a lenient read skipped: ``path``, ``line`` (1-based), ``message``."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}, line {self.line}: {self.message}"


def read_csv_table(path, issues: list | None = None) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Read a profiler CSV.

    Args:
        path: file path (``str`` or ``Path``).
        issues: ``None`` (strict: a row whose field count differs from the header's raises), or
            a list: such a row is skipped and a :class:`RowIssue` (file, line, what is wrong)
            appended to it.

    Returns:
        ``(header, rows)``: the header cells (cleaned) and a list of ``(line_number, cells)``,
        where ``line_number`` is the 1-based physical line the row starts on.

    Raises:
        FileNotFoundError: the file does not exist.
        ProfilingFormatError: an unterminated quote (a truncated file), a row whose field count
            differs from the header's (naming the first missing or extra column), an empty file,
            or bytes that are not UTF-8.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"profiler file not found: {path}")
    rows: list[tuple[int, list[str]]] = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, strict=True)
            header = None
            start = 1
            while True:
                try:
                    cells = next(reader)
                except StopIteration:
                    break
                except csv.Error as e:
                    raise ProfilingFormatError(
                        path, reader.line_num, None,
                        f"malformed CSV ({e}); the file looks truncated or mis-quoted",
                    ) from None
                line = start
                start = reader.line_num + 1
                if not cells or all(not c.strip() for c in cells):
                    continue
                if header is None:
                    header = [_clean(c) for c in cells]
                    continue
                if len(cells) != len(header):
                    if len(cells) < len(header):
                        col = len(cells) + 1
                        msg = (f"expected {len(header)} fields as in the header, got {len(cells)}; "
                               f"column {col} ({header[col - 1]!r}) is missing (truncated row?)")
                    else:
                        col = len(header) + 1
                        msg = (f"expected {len(header)} fields as in the header, got {len(cells)}; "
                               f"column {col} has no header")
                    if issues is None:
                        raise ProfilingFormatError(path, line, col, msg)
                    issues.append(RowIssue(str(path), line, f"{msg}; row skipped"))
                    continue
                rows.append((line, cells))
    except UnicodeDecodeError as e:
        raise ProfilingFormatError(path, None, None, f"not UTF-8 text ({e})") from None
    if header is None:
        raise ProfilingFormatError(path, 1, None, "empty file: no header line")
    return header, rows


def _parse_float(cell: str, path, line: int, col: int, name: str) -> float:
    s = _clean(cell)
    if s in _NA:
        return math.nan
    try:
        return float(s)
    except ValueError:
        raise ProfilingFormatError(path, line, col, f"{name!r}: expected a number or N/A, got {cell!r}") from None


def _parse_int(cell: str, path, line: int, col: int, name: str):
    s = _clean(cell)
    if s in _NA:
        return pd.NA
    try:
        return int(s)
    except ValueError:
        try:
            v = float(s)
        except ValueError:
            v = math.nan
        if math.isfinite(v) and v == int(v):
            return int(v)
        raise ProfilingFormatError(path, line, col, f"{name!r}: expected an integer or N/A, got {cell!r}") from None


_TIME_RE = re.compile(r"^(\d+)(?:\.(\d*))?$")


def _parse_time_ns(cell: str, path, line: int, col: int, name: str):
    """Microseconds text (``1736413971558972.912``) -> exact integer nanoseconds."""
    s = _clean(cell)
    if s in _NA:
        return pd.NA
    m = _TIME_RE.match(s)
    if not m:
        try:
            return int(round(float(s) * 1000))
        except ValueError:
            raise ProfilingFormatError(path, line, col, f"{name!r}: expected a time in us, got {cell!r}") from None
    frac = (m.group(2) or "")[:3].ljust(3, "0")
    return int(m.group(1)) * 1000 + int(frac)


def _column_values(path, header, rows, idx, kind):
    name = header[idx]
    col = idx + 1
    if kind == "float":
        return np.array([_parse_float(c[idx], path, ln, col, name) for ln, c in rows], dtype=np.float64)
    if kind == "int":
        return pd.array([_parse_int(c[idx], path, ln, col, name) for ln, c in rows], dtype="Int64")
    if kind in ("str", "shape"):
        vals = []
        for _, c in rows:
            s = _clean(c[idx])
            vals.append(pd.NA if (s in ("N/A",) or (s == "" and kind == "str")) else s)
        return pd.array(vals, dtype="string")
    raise AssertionError(kind)


def _auto_column(path, header, rows, idx):
    """Unknown column: float64 when every non-N/A cell is a number, else text."""
    cells = [_clean(c[idx]) for _, c in rows]
    try:
        return np.array([math.nan if s in _NA else float(s) for s in cells], dtype=np.float64)
    except ValueError:
        return pd.array([pd.NA if s in _NA else s for s in cells], dtype="string")


def _pmu_column(name: str) -> bool:
    """PMU/metric columns: lower-case names such as ``aic_mac_ratio``, ``vec_ratio``,
    ``cube_utilization(%)``, ``aiv_ub_read_bw(GB/s)``; these must be numeric (or N/A)."""
    return bool(re.match(r"^[a-z][a-z0-9_]*(\([^)]*\))?$", name))


# --------------------------------------------------------------------------- shapes


def parse_shapes(text) -> tuple[tuple[int, ...], ...]:
    """Parse a profiler shape cell.

    Args:
        text: ``str`` such as ``"81920,4096;8192,512"`` (literal quotes allowed); ``;`` separates
            tensors, ``,`` dimensions; an empty tensor entry is a scalar (``()``). ``None``/NA or
            ``""`` give ``()`` (no tensors).

    Returns:
        A tuple of per-tensor shape tuples of ``int``.

    Raises:
        ValueError: a dimension that is not an integer (the message quotes the cell).
    """
    if text is None or text is pd.NA or (isinstance(text, float) and math.isnan(text)):
        return ()
    s = _clean(str(text))
    if s in ("", "N/A"):
        return ()
    out = []
    for part in s.split(";"):
        part = part.strip()
        if not part:
            out.append(())
            continue
        try:
            out.append(tuple(int(d) for d in part.split(",") if d.strip() != ""))
        except ValueError:
            raise ValueError(f"shape cell {text!r}: dimension {part!r} is not a list of integers") from None
    return tuple(out)


# --------------------------------------------------------------------------- directories


MSPROF_OUTPUT_SUBDIR = "mindstudio_profiler_output"
#: Files that make a directory holding them directly a run (tests and tools pass such folders).
_BARE_RUN_FILES = ("kernel_details.csv", "step_trace_time.csv", "trace_view.json")


def _is_run_dir(p: Path) -> bool:
    if not p.is_dir():
        return False
    if p.name.endswith(RUN_DIR_SUFFIXES) or (p / OUTPUT_SUBDIR).is_dir() or (p / MSPROF_OUTPUT_SUBDIR).is_dir():
        return True
    if p.name == MSPROF_OUTPUT_SUBDIR:
        return True
    return any((p / f).is_file() for f in _BARE_RUN_FILES)


def layout_of(run: Path) -> str:
    """``"msprof"`` for an msprof app-mode output (``PROF_*`` holding ``mindstudio_profiler_output``,
    or that folder itself), ``"framework"`` for a torch_npu / MindSpore run or a bare folder."""
    run = Path(run)
    return "msprof" if (run / MSPROF_OUTPUT_SUBDIR).is_dir() or run.name == MSPROF_OUTPUT_SUBDIR else "framework"


def _msprof_dir(run: Path) -> Path:
    return run if run.name == MSPROF_OUTPUT_SUBDIR else run / MSPROF_OUTPUT_SUBDIR


def msprof_files(run, prefix: str) -> list[Path]:
    """The ``<prefix>_*.csv`` files of an msprof output (``op_summary``, ``op_statistic``,
    ``task_time``), sorted by name (``op_summary_slice_0``, ``_1``... in order)."""
    return sorted(_msprof_dir(Path(run)).glob(f"{prefix}_*.csv"))


def find_runs(path) -> list[Path]:
    """Find profiler collection directories.

    Args:
        path: a ``*_ascend_pt`` / ``*_ascend_ms`` / ``*_cuda_pt`` directory, its
            ``ASCEND_PROFILER_OUTPUT`` subdirectory, or a parent directory holding such
            directories (searched up to three levels down, as ``tensorboard_trace_handler``
            writes one per worker and step group).

    Returns:
        Sorted list of run directories (``Path``), at least one.

    Raises:
        FileNotFoundError: ``path`` does not exist, or holds no run directory.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"profiler directory not found: {p}")
    if p.is_dir() and p.name == OUTPUT_SUBDIR:
        return [p.parent]
    if p.is_dir() and p.name == MSPROF_OUTPUT_SUBDIR and _is_run_dir(p.parent):
        return [p.parent]
    if _is_run_dir(p):
        return [p]
    found: list[Path] = []
    if p.is_dir():
        frontier = [p]
        for _ in range(3):
            nxt = []
            for d in frontier:
                for child in sorted(d.iterdir()):
                    if not child.is_dir():
                        continue
                    if _is_run_dir(child):
                        found.append(child)
                    else:
                        nxt.append(child)
            if found:
                break
            frontier = nxt
    if not found:
        raise FileNotFoundError(
            f"no profiler run under {p}: expected a directory ending in "
            f"{' / '.join(RUN_DIR_SUFFIXES)}, or holding {OUTPUT_SUBDIR}/, {MSPROF_OUTPUT_SUBDIR}/ "
            f"or one of {', '.join(_BARE_RUN_FILES)}, or a folder holding exactly one profiler file "
            f"({', '.join(_PROFILER_FILES)})")
    return sorted(found)


#: The single files a folder may hold instead of a run (see :func:`resolve_input`), for messages.
_PROFILER_FILES = ("kernel_details.csv", "op_summary_*.csv", "op_statistic_*.csv", "step_trace_time.csv",
                   "cluster_step_trace_time.csv", "task_time_*.csv", "operator_details.csv", "trace_view.json")


def _lone_profiler_file(folder: Path) -> Path | None:
    """The one profiler file directly inside ``folder`` (a CSV whose header :func:`file_kind`
    recognises, or ``trace_view.json``), or None when there are none or several."""
    found = []
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        if f.name == "trace_view.json":
            found.append(f)
        elif f.suffix.lower() == ".csv":
            try:
                if csv_kind(f) is not None:
                    found.append(f)
            except (OSError, ProfilingFormatError):
                continue
    return found[0] if len(found) == 1 else None


def resolve_input(path) -> Path:
    """What a user's ``path`` stands for: ``path`` itself, except for a folder that holds no
    profiler run but exactly one profiler file (a folder with only ``op_summary_1.csv``, a
    ``cluster_analysis_output`` with only ``cluster_step_trace_time.csv``): that file.

    Raises:
        FileNotFoundError: a folder with neither a run nor exactly one profiler file; the message
            names the run layouts and file kinds looked for."""
    p = Path(path)
    if not p.is_dir():
        return p
    try:
        find_runs(p)
    except FileNotFoundError:
        lone = _lone_profiler_file(p)
        if lone is None:
            raise
        return lone
    return p


def _one_run(path) -> Path:
    runs = find_runs(path)
    if len(runs) > 1:
        raise ValueError(
            f"path: {path} holds {len(runs)} profiler runs ({', '.join(r.name for r in runs)}); "
            "pass one of them")
    return runs[0]


def _output_file(path, filename: str) -> Path:
    p = Path(path)
    if p.is_file():
        return p
    run = _one_run(p)
    for cand in (run / OUTPUT_SUBDIR / filename, run / filename):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"{filename} not found in {run / OUTPUT_SUBDIR}")


# --------------------------------------------------------------------------- kernel_details


def read_kernel_details(path, issues: list | None = None) -> pd.DataFrame:
    """Read ``kernel_details.csv`` (torch_npu / MindSpore) or an msprof ``op_summary_*.csv`` into
    the normalised kernel table (see the module docstring).

    Args:
        path: the CSV file, a run directory, or a parent holding exactly one run.
        issues: ``None`` for a strict read, or a list that collects the malformed rows skipped
            (see :func:`read_csv_table`).

    Returns:
        DataFrame with every column of :data:`KERNEL_COLUMNS` (absent ones filled with NA) and
        the file's PMU/unknown columns after them. An empty file body gives zero rows. Where
        ``Type`` is N/A (Level0 collections), ``type`` is the kernel name normalised by
        :func:`normalise_kernel_name` and ``attrs["type_from_name"]`` is True.

    Raises:
        FileNotFoundError, ProfilingFormatError (file, line, column; also a file of another
        kind, naming both), ValueError (several runs).
    """
    f = _output_file(path, "kernel_details.csv")
    _check_kind(f, _header_of(f), "kernels")
    header, rows = read_csv_table(f, issues)
    data: dict[str, object] = {}
    extra: dict[str, object] = {}
    for idx, h in enumerate(header):
        if h in _KERNEL_MAP:
            norm, kind = _KERNEL_MAP[h]
            if kind == "time":
                ns = pd.array([_parse_time_ns(c[idx], f, ln, idx + 1, h) for ln, c in rows], dtype="Int64")
                data["start_ns"] = ns
                data["start_us"] = np.array(
                    [_parse_float(c[idx], f, ln, idx + 1, h) for ln, c in rows], dtype=np.float64)
            else:
                data[norm] = _column_values(f, header, rows, idx, kind)
        elif _pmu_column(h):
            extra[h] = _column_values(f, header, rows, idx, "float")
        else:
            extra[h] = _auto_column(f, header, rows, idx)
    n = len(rows)
    out = {}
    for col in KERNEL_COLUMNS:
        if col in data:
            out[col] = data[col]
        else:
            kind = _KERNEL_KINDS.get(col, "str")
            if kind in ("float", "time"):
                out[col] = np.full(n, np.nan)
            elif kind == "int":
                out[col] = pd.array([pd.NA] * n, dtype="Int64")
            else:
                out[col] = pd.array([pd.NA] * n, dtype="string")
    out.update(extra)
    df = pd.DataFrame(out)
    missing_type = df["type"].isna()
    df.attrs["type_from_name"] = bool(len(df)) and bool(missing_type.all())
    if missing_type.any():
        df.loc[missing_type, "type"] = df.loc[missing_type, "name"].map(
            lambda n: pd.NA if n is pd.NA else normalise_kernel_name(n))
    df.attrs["source"] = str(f)
    df.attrs["header"] = header
    return df


def normalise_kernel_name(name: str) -> str:
    """The op type hidden in a kernel name, for runs without a ``Type`` column (Level0).

    The last ``_``-separated part that is not a number, without a graph node index:
    ``trans_TransData_0`` -> ``TransData``, ``aclnnMm_MatMulCommon_MatMulV2`` -> ``MatMulV2``,
    ``ReduceSum7`` -> ``ReduceSum``, ``GatherV282`` -> ``GatherV2`` (a ``V<digit>`` version is
    kept), ``hcom_allReduce__586_0_1`` -> ``hcom_allReduce_`` (as the ``Type`` column spells
    HCCL tasks). A heuristic: on the corpus's Level1 runs it gives the ``Type`` of every kernel.
    """
    s = str(name).strip()
    if s.startswith("hcom_"):
        parts = [x for x in s[5:].split("_") if x]
        return f"hcom_{parts[0]}_" if parts else s
    parts = [x for x in s.split("_") if x]
    while len(parts) > 1 and parts[-1].isdigit():
        parts.pop()
    last = parts[-1] if parts else s
    m = re.match(r"^(.*V\d)\d*$", last)
    if m:
        return m.group(1)
    return re.sub(r"(?<=[A-Za-z])\d+$", "", last)


# --------------------------------------------------------------------------- file kinds

#: File kinds :func:`file_kind` tells apart, with the file names that usually hold them.
FILE_KINDS = {
    "kernels": "kernel_details.csv / op_summary_*.csv",
    "op_statistic": "op_statistic.csv / op_statistic_*.csv",
    "step_trace": "step_trace_time.csv",
    "cluster_step_trace": "cluster_step_trace_time.csv",
    "task_time": "task_time_*.csv",
    "operator_details": "operator_details.csv",
}


def file_kind(header) -> str | None:
    """Which profiler table a CSV header belongs to (a key of :data:`FILE_KINDS`), or ``None``."""
    h = set(header)
    if all(any(x in h for x in alts) for alts in _REQUIRED_KERNEL_HEADERS):
        return "kernels"
    if {"OP Type", "Core Type", "Count", "Total Time(us)"} <= h:
        return "op_statistic"
    if {"Computing", "Communication(Not Overlapped)", "Free"} <= h:
        return "cluster_step_trace" if {"Type", "Index"} <= h else "step_trace"
    if {"kernel_name", "task_time(us)"} <= h:
        return "task_time"
    if "Host Self Duration(us)" in h or "Device Self Duration(us)" in h:
        return "operator_details"
    return None


def _check_kind(f, header, *wanted) -> str:
    kind = file_kind(header)
    if kind not in wanted:
        what = f"a {FILE_KINDS[kind]} table" if kind else "no profiler table this package knows"
        if kind is None and "kernels" in wanted:
            lacks = [" / ".join(alts) for alts in _REQUIRED_KERNEL_HEADERS if not any(a in header for a in alts)]
            what += f"; it lacks {', '.join(repr(x) for x in lacks)}"
        raise ProfilingFormatError(
            f, 1, None, f"asked for {' or '.join(FILE_KINDS[w] for w in wanted)}, but its header is {what} "
                        f"(header: {', '.join(header[:8])}{', ...' if len(header) > 8 else ''})")
    return kind


def csv_kind(path) -> str | None:
    """:func:`file_kind` of a CSV file's header line.

    Raises:
        FileNotFoundError, ProfilingFormatError (not UTF-8, empty)."""
    return file_kind(_header_of(path))


def _header_of(path) -> list[str]:
    """The cleaned cells of a CSV file's first line (checked before the rows are read)."""
    f = Path(path)
    if not f.is_file():
        raise FileNotFoundError(f"profiler file not found: {f}")
    try:
        with open(f, newline="", encoding="utf-8-sig") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError as e:
        raise ProfilingFormatError(f, None, None, f"not UTF-8 text ({e})") from None
    if not first:
        raise ProfilingFormatError(f, 1, None, "empty file: no header line")
    return [_clean(c) for c in first]


# --------------------------------------------------------------------------- generic tables


def _snake(name: str) -> str:
    s = name.strip()
    s = s.replace("(us)", "_us").replace("(%)", "_pct").replace("(ms)", "_ms")
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").lower()
    return s


def _generic_table(f: Path, numeric: Iterable[str] = (), issues: list | None = None, kinds=()) -> pd.DataFrame:
    """Read a CSV: headers to snake_case (``Total Time(us)`` -> ``total_time_us``); columns in
    ``numeric`` (raw header names) must parse; others are numeric when every cell parses.
    ``kinds``: the :func:`file_kind` values accepted (any when empty)."""
    if kinds:
        _check_kind(f, _header_of(f), *kinds)
    header, rows = read_csv_table(f, issues)
    numeric = set(numeric)
    cols = {}
    for idx, h in enumerate(header):
        key = _snake(h) or f"column_{idx + 1}"
        if h in numeric:
            cols[key] = _column_values(f, header, rows, idx, "float")
        else:
            cols[key] = _auto_column(f, header, rows, idx)
    df = pd.DataFrame(cols)
    df.attrs["source"] = str(f)
    return df


_OPSTAT_COLUMNS = ["device_id", "op_type", "core", "count", "total_us", "min_us", "avg_us", "max_us", "ratio_pct"]


def read_op_statistic(path, kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """Read ``op_statistic.csv``, or build the same table from kernel_details when it is absent
    (Level0 collections do not write it).

    Args:
        path: a run directory (or parent with one run) or the CSV file itself.
        kernels: an already-read kernel table to build from when the file is absent.

    Returns:
        DataFrame with columns ``device_id`` (Int64, NA when absent), ``op_type``, ``core``
        (string), ``count`` (Int64), ``total_us``, ``min_us``, ``avg_us``, ``max_us`` (float64, us),
        ``ratio_pct`` (float64, percent of the total), sorted by ``total_us`` descending.
        ``attrs["built_from_kernels"]`` says which path was taken.

    Raises:
        FileNotFoundError (neither op_statistic.csv nor kernel_details.csv), ProfilingFormatError.
    """
    try:
        f = _output_file(path, "op_statistic.csv")
    except FileNotFoundError:
        k = kernels if kernels is not None else read_kernel_details(path)
        df = op_statistic_from_kernels(k)
        df.attrs["built_from_kernels"] = True
        return df
    raw = {"OP Type": "op_type", "Core Type": "core", "Count": "count", "Total Time(us)": "total_us",
           "Min Time(us)": "min_us", "Avg Time(us)": "avg_us", "Max Time(us)": "max_us",
           "Ratio(%)": "ratio_pct", "Device_id": "device_id", "Device Id": "device_id"}
    header, rows = read_csv_table(f)
    _check_kind(f, header, "op_statistic")
    cols = {}
    for idx, h in enumerate(header):
        if h not in raw:
            continue
        norm = raw[h]
        kind = {"op_type": "str", "core": "str", "count": "int", "device_id": "int"}.get(norm, "float")
        cols[norm] = _column_values(f, header, rows, idx, kind)
    df = pd.DataFrame(cols)
    for c in _OPSTAT_COLUMNS:
        if c not in df:
            df[c] = pd.array([pd.NA] * len(df), dtype="Int64") if c == "device_id" else np.nan
    df = df[_OPSTAT_COLUMNS].sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    df.attrs["source"] = str(f)
    df.attrs["built_from_kernels"] = False
    return df


def op_statistic_from_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Build the ``op_statistic`` table (see :func:`read_op_statistic`) from a kernel table,
    keyed by (``type``, ``core``); NaN durations are skipped. Empty input gives zero rows."""
    k = kernels.copy()
    k["op_type"] = k["type"].fillna(k["name"])
    k = k[k["duration_us"].notna()]
    if k.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in _OPSTAT_COLUMNS})
    g = k.groupby(["op_type", "core"], dropna=False, sort=False)["duration_us"]
    df = g.agg(count="count", total_us="sum", min_us="min", avg_us="mean", max_us="max").reset_index()
    total = df["total_us"].sum()
    df["ratio_pct"] = df["total_us"] / total * 100 if total > 0 else 0.0
    df["count"] = df["count"].astype("Int64")
    devs = k["device_id"].dropna().unique()
    df["device_id"] = pd.array([int(devs[0]) if len(devs) == 1 else pd.NA] * len(df), dtype="Int64")
    df["op_type"] = df["op_type"].astype("string")
    df["core"] = df["core"].astype("string")
    return df[_OPSTAT_COLUMNS].sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def read_operator_details(path) -> pd.DataFrame:
    """Read ``operator_details.csv`` (one row per torch op on the host).

    Headers become snake_case with units kept as suffixes (``Host Self Duration(us)`` ->
    ``host_self_duration_us``, microseconds); numeric columns become float64, text stays text.

    Raises:
        FileNotFoundError, ProfilingFormatError.
    """
    return _generic_table(_output_file(path, "operator_details.csv"))


def read_step_trace(path, issues: list | None = None) -> pd.DataFrame:
    """Read ``step_trace_time.csv`` (per-step totals) or msprof-analyze's
    ``cluster_step_trace_time.csv`` (one row per rank / stage).

    Headers become snake_case: ``step``, ``computing``, ``communication_not_overlapped``,
    ``overlapped``, ``communication``, ``free``, ``stage`` (the step's wall time), ``bubble``,
    ``preparing`` (newer torch_npu), ``device_id`` (newer torch_npu), and for the cluster file
    ``type`` (``rank`` / ``stage``) and ``index``. All times are microseconds, float64.
    ``computing + communication_not_overlapped + free = stage``.

    Raises:
        FileNotFoundError, ProfilingFormatError (also when the file is another kind of table,
        naming both).
    """
    return _generic_table(_output_file(path, "step_trace_time.csv"), issues=issues,
                          kinds=("step_trace", "cluster_step_trace"))


def read_task_time(path, issues: list | None = None) -> pd.DataFrame:
    """Read an msprof ``task_time_*.csv`` (one row per device task, kernels and runtime tasks).

    Returns:
        DataFrame: ``device_id``, ``kernel_name``, ``kernel_type``, ``stream_id``, ``task_id``,
        ``task_time_us``, ``task_start_us``, ``task_stop_us`` (microseconds, float64; the TAB
        msprof appends to the times is stripped).

    Raises:
        FileNotFoundError, ProfilingFormatError (also for another kind of table).
    """
    return _generic_table(Path(path), issues=issues, kinds=("task_time",))


def kernels_from_task_time(tasks: pd.DataFrame) -> pd.DataFrame:
    """A normalised kernel table from msprof ``task_time`` rows that name a kernel (``kernel_name``
    not N/A): ``name``, ``type`` (normalised name), ``core`` (``kernel_type``), ``start_us``,
    ``duration_us`` (``task_time_us``), ``stream_id``, ``task_id``; the other columns NA."""
    t = tasks[tasks["kernel_name"].notna()] if "kernel_name" in tasks else tasks.iloc[0:0]
    n = len(t)
    out = {}
    for col in KERNEL_COLUMNS:
        kind = _KERNEL_KINDS.get(col, "str")
        out[col] = (np.full(n, np.nan) if kind in ("float", "time")
                    else pd.array([pd.NA] * n, dtype="Int64") if kind == "int"
                    else pd.array([pd.NA] * n, dtype="string"))
    names = t["kernel_name"].astype("string") if n else pd.array([], dtype="string")
    out["name"] = pd.array(list(names), dtype="string")
    out["type"] = pd.array([normalise_kernel_name(x) for x in names], dtype="string")
    out["core"] = pd.array(list(t["kernel_type"].astype("string")), dtype="string") if n else out["core"]
    out["duration_us"] = t["task_time_us"].to_numpy(dtype=np.float64) if n else out["duration_us"]
    out["start_us"] = t["task_start_us"].to_numpy(dtype=np.float64) if n else out["start_us"]
    for c in ("stream_id", "task_id", "device_id"):
        if n and c in t:
            out[c] = pd.array([pd.NA if pd.isna(v) else int(v) for v in t[c]], dtype="Int64")
    df = pd.DataFrame(out)
    df.attrs["source"] = tasks.attrs.get("source", "")
    df.attrs["type_from_name"] = True
    return df


def read_communication(path) -> pd.DataFrame:
    """Read ``communication.json`` (per step, per collective / p2p operation).

    Returns:
        DataFrame, one row per operation: ``step`` (``step50`` -> 50, NA when not a number),
        ``group`` (``collective`` / ``p2p``), ``op`` (the HCCL op name, e.g.
        ``hcom_allReduce__586_0_1@...``), ``op_type`` (``allReduce``, ``send``...: the name
        without its ``hcom_`` prefix and indices), ``elapse_ms``, ``transit_ms``, ``wait_ms``,
        ``sync_ms``, ``idle_ms`` (milliseconds, as the file has them), ``size_mb`` (transit size
        summed over the links, MB; 0 when the file gives none), ``bandwidth_gbs`` (``size_mb /
        link transit time``, GB/s, over the links that moved data; NaN when none did),
        ``links`` (the links that moved data, e.g. ``HCCS``). Operations named
        ``Total Op Info`` (the file's own sums) are left out.

    Raises:
        FileNotFoundError, ProfilingFormatError (malformed JSON).
    """
    f = _output_file(path, "communication.json")
    try:
        with open(f, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as e:
        raise ProfilingFormatError(f, e.lineno, e.colno, f"malformed JSON: {e.msg}") from None
    rows = []
    for step_key, groups in (data or {}).items():
        m = re.search(r"(\d+)$", str(step_key))
        step = int(m.group(1)) if m else pd.NA
        for group, ops in (groups or {}).items():
            for op, info in (ops or {}).items():
                if op.startswith("Total Op Info") or not isinstance(info, dict):
                    continue
                t = info.get("Communication Time Info", {}) or {}
                bw = info.get("Communication Bandwidth Info", {}) or {}
                size = 0.0
                link_time = 0.0
                links = []
                for link, d in bw.items():
                    if link == "SDMA" or not isinstance(d, dict):
                        continue  # SDMA repeats the HCCS/PCIE/SIO traffic it carries
                    mb = float(d.get("Transit Size(MB)") or 0)
                    if mb > 0:
                        size += mb
                        link_time += float(d.get("Transit Time(ms)") or 0)
                        links.append(link)
                name = op.split("@")[0]
                mt = re.match(r"^hcom_([A-Za-z]+)", name)
                rows.append({
                    "step": step, "group": group, "op": op, "op_type": mt.group(1) if mt else name,
                    "elapse_ms": float(t.get("Elapse Time(ms)", math.nan)),
                    "transit_ms": float(t.get("Transit Time(ms)", math.nan)),
                    "wait_ms": float(t.get("Wait Time(ms)", math.nan)),
                    "sync_ms": float(t.get("Synchronization Time(ms)", math.nan)),
                    "idle_ms": float(t.get("Idle Time(ms)", math.nan)),
                    "size_mb": size,
                    "bandwidth_gbs": size / link_time if link_time > 0 else math.nan,
                    "links": "+".join(links),
                })
    cols = ["step", "group", "op", "op_type", "elapse_ms", "transit_ms", "wait_ms", "sync_ms", "idle_ms",
            "size_mb", "bandwidth_gbs", "links"]
    df = pd.DataFrame(rows, columns=cols)
    df["step"] = df["step"].astype("Int64")
    df.attrs["source"] = str(f)
    return df


_OVERLAP_NAMES = {"Computing": "computing", "Communication(Not Overlapped)": "communication_not_overlapped",
                  "Communication": "communication", "Free": "free"}


def read_trace_overlap(path) -> dict | None:
    """Step split from the ``Overlap Analysis`` rows of a chrome trace (``trace_view.json``).

    Args:
        path: the JSON file, or a run directory holding ``ASCEND_PROFILER_OUTPUT/trace_view.json``.

    Returns:
        ``{"computing": us, "communication_not_overlapped": us, "communication": us, "free": us,
        "stage": us}`` (sums of the events' durations, microseconds; ``stage`` = first start to
        last end of those events), or ``None`` when the trace has no ``Overlap Analysis``
        process.

    Raises:
        FileNotFoundError, ProfilingFormatError (malformed JSON).
    """
    f = _output_file(path, "trace_view.json")
    try:
        with open(f, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as e:
        raise ProfilingFormatError(f, e.lineno, e.colno, f"malformed JSON: {e.msg}") from None
    events = data if isinstance(data, list) else (data or {}).get("traceEvents", [])
    pids = {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "M"
            and e.get("name") == "process_name" and (e.get("args") or {}).get("name") == "Overlap Analysis"}
    if not pids:
        return None
    out = {v: 0.0 for v in _OVERLAP_NAMES.values()}
    lo, hi = math.inf, -math.inf
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("pid") in pids and e.get("name") in _OVERLAP_NAMES:
            ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
            out[_OVERLAP_NAMES[e["name"]]] += dur
            lo, hi = min(lo, ts), max(hi, ts + dur)
    out["stage"] = hi - lo if hi > lo else 0.0
    return out


# --------------------------------------------------------------------------- device / config


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Device facts from ``PROF_*/device_*/info.json.*`` (``DeviceInfo[0]``).

    ``ai_core_num``: cube (AI) cores; ``aiv_num``: vector cores; ``aic_frequency_mhz``: AI core
    clock in MHz (the file stores a string); ``device_id``; ``raw``: the whole DeviceInfo dict.
    """

    ai_core_num: int | None
    aiv_num: int | None
    aic_frequency_mhz: float | None
    device_id: int | None
    raw: dict


def _to_num(v, typ):
    try:
        return typ(float(v)) if typ is int else float(v)
    except (TypeError, ValueError):
        return None


def read_device_info(path) -> DeviceInfo | None:
    """Read core counts and clock from ``<run>/PROF_*/device_*/info.json.*``.

    Args:
        path: a run directory (or parent with one run).

    Returns:
        :class:`DeviceInfo`, or ``None`` when the run has no such file (e.g. CUDA runs).

    Raises:
        ProfilingFormatError: the JSON is malformed (with line and column) or lacks
            ``DeviceInfo``.
    """
    run = _one_run(path)
    files = sorted(glob.glob(str(run / "PROF_*" / "device_*" / "info.json.*")))
    files += sorted(glob.glob(str(run / "device_*" / "info.json.*")))
    if not files:
        return None
    f = files[0]
    try:
        with open(f, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as e:
        raise ProfilingFormatError(f, e.lineno, e.colno, f"malformed JSON: {e.msg}") from None
    infos = data.get("DeviceInfo") if isinstance(data, dict) else None
    if not infos or not isinstance(infos, list) or not isinstance(infos[0], dict):
        raise ProfilingFormatError(f, None, None, "no DeviceInfo list in the JSON")
    d = infos[0]
    return DeviceInfo(
        ai_core_num=_to_num(d.get("ai_core_num"), int),
        aiv_num=_to_num(d.get("aiv_num"), int),
        aic_frequency_mhz=_to_num(d.get("aic_frequency"), float),
        device_id=_to_num(d.get("id", data.get("devices")), int),
        raw=d,
    )


def read_profiler_info(path) -> dict:
    """Read ``profiler_info.json`` / ``profiler_info_<rank>.json`` (the collection config:
    level, metric group, export type). Returns ``{}`` when absent.

    Raises:
        ProfilingFormatError: malformed JSON (line and column).
    """
    run = _one_run(path)
    files = sorted(run.glob("profiler_info*.json"))
    if not files:
        return {}
    try:
        with open(files[0], encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise ProfilingFormatError(files[0], e.lineno, e.colno, f"malformed JSON: {e.msg}") from None


# --------------------------------------------------------------------------- msprof op


@dataclasses.dataclass
class MsprofOpRun:
    """One ``msprof op`` output directory.

    ``path``: the directory holding ``OpBasicInfo.csv``; ``basic``: its first row as a dict
    (``op_name``, ``op_type``, ``task_duration_us``, ``block_dim``, ``mix_block_dim``,
    ``device_id``, ``pid``, ``current_freq``, ``rated_freq``; MHz for the frequencies);
    ``metrics``: metric-group name (file stem, e.g. ``PipeUtilization``) -> DataFrame with one row
    per ``(block_id, sub_block_id)`` and the file's columns under their header names (times us,
    ratios 0-1, bandwidths GB/s).
    """

    path: Path
    basic: dict
    metrics: dict[str, pd.DataFrame]


def read_msprof_op(path) -> MsprofOpRun:
    """Read an ``msprof op`` output directory (``OPPROF_*``), or a parent of one.

    Raises:
        FileNotFoundError: no ``OpBasicInfo.csv`` below ``path``.
        ProfilingFormatError: a malformed CSV, or a metric file without ``block_id``.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"msprof op directory not found: {p}")
    hits = [p / "OpBasicInfo.csv"] if (p / "OpBasicInfo.csv").is_file() else sorted(p.rglob("OpBasicInfo.csv"))
    if not hits:
        raise FileNotFoundError(f"no OpBasicInfo.csv under {p} (not an msprof op output directory)")
    d = hits[0].parent
    bt = _generic_table(hits[0])
    if bt.empty:
        raise ProfilingFormatError(hits[0], 2, None, "OpBasicInfo.csv has a header but no row")
    basic = {k: (None if (isinstance(v, float) and math.isnan(v)) or v is pd.NA else v)
             for k, v in bt.iloc[0].to_dict().items()}
    metrics = {}
    for f in sorted(d.glob("*.csv")):
        if f.name == "OpBasicInfo.csv":
            continue
        header, rows = read_csv_table(f)
        if "block_id" not in header:
            continue  # not a per-block metric file
        cols = {}
        for idx, h in enumerate(header):
            if h == "sub_block_id":
                cols[h] = pd.array([_clean(c[idx]) for _, c in rows], dtype="string")
            elif h == "block_id":
                cols[h] = _column_values(f, header, rows, idx, "int")
            else:
                cols[h] = _column_values(f, header, rows, idx, "float") if _pmu_column(h) \
                    else _auto_column(f, header, rows, idx)
        df = pd.DataFrame(cols)
        df.attrs["source"] = str(f)
        metrics[f.stem] = df
    return MsprofOpRun(path=d, basic=basic, metrics=metrics)


# --------------------------------------------------------------------------- whole run


@dataclasses.dataclass
class Run:
    """Everything read from one collection (one rank), or from one CSV / JSON file.

    ``kernels`` is the normalised kernel table (zero rows when the run has none, e.g. a rank
    whose export kept only its step trace); ``op_statistic`` is read or built from the kernels;
    other tables absent from the run are ``None``. ``layout``: ``"framework"`` (torch_npu /
    MindSpore), ``"msprof"`` (app mode) or ``"file"`` (one file given). ``rank``: from
    ``profiler_info*.json`` (``rank_id``), else a ``rank<N>`` / ``rank_<N>`` in the directory
    name, else the one ``Device_id`` of an msprof output, else ``None``.
    ``communication``: :func:`read_communication`; ``overlap``: :func:`read_trace_overlap`;
    ``task_time``: :func:`read_task_time`; ``issues``: the :class:`RowIssue` of every malformed
    row skipped (empty with ``strict=True``, which raises instead)."""

    path: Path
    kernels: pd.DataFrame
    op_statistic: pd.DataFrame
    operator_details: pd.DataFrame | None
    step_trace: pd.DataFrame | None
    device: DeviceInfo | None
    profiler_info: dict
    layout: str = "framework"
    rank: int | None = None
    communication: pd.DataFrame | None = None
    overlap: dict | None = None
    task_time: pd.DataFrame | None = None
    issues: list = dataclasses.field(default_factory=list)


def empty_kernels() -> pd.DataFrame:
    """A normalised kernel table with zero rows."""
    return pd.DataFrame({c: (pd.Series(dtype="float64") if _KERNEL_KINDS.get(c) in ("float", "time")
                             else pd.Series(dtype="Int64") if _KERNEL_KINDS.get(c) == "int"
                             else pd.Series(dtype="string")) for c in KERNEL_COLUMNS})


def _rank_of(run: Path, info: dict) -> int | None:
    v = info.get("rank_id") if isinstance(info, dict) else None
    try:
        if v is not None and int(v) >= 0:
            return int(v)
    except (TypeError, ValueError):
        pass
    m = re.search(r"rank[_-]?(\d+)", run.name, flags=re.IGNORECASE)
    return int(m.group(1)) if m else None


def _load_file(f: Path, issues: list | None) -> Run:
    """One CSV (kernel_details / op_summary, op_statistic, step trace, task_time) or a
    trace_view.json, as a :class:`Run` with the tables that file gives."""
    kernels, opstat, step, tasks, overlap = None, None, None, None, None
    if f.suffix.lower() == ".json":
        overlap = read_trace_overlap(f)
        if overlap is None:
            raise ProfilingFormatError(f, None, None, "no 'Overlap Analysis' process in this trace: nothing to analyse")
    else:
        kind = csv_kind(f)
        if kind == "kernels":
            kernels = read_kernel_details(f, issues)
        elif kind == "op_statistic":
            opstat = read_op_statistic(f)
        elif kind in ("step_trace", "cluster_step_trace"):
            step = read_step_trace(f, issues)
        elif kind == "task_time":
            tasks = read_task_time(f, issues)
            kernels = kernels_from_task_time(tasks)
        else:
            raise ProfilingFormatError(
                f, 1, None, f"not a profiler table this package reads (one of: {', '.join(FILE_KINDS.values())})")
    kernels = kernels if kernels is not None else empty_kernels()
    if opstat is None:
        opstat = op_statistic_from_kernels(kernels)
        opstat.attrs["built_from_kernels"] = True
    return Run(path=f, kernels=kernels, op_statistic=opstat, operator_details=None, step_trace=step, device=None,
               profiler_info={}, layout="file", rank=None, overlap=overlap, task_time=tasks,
               issues=list(issues or []))


def _load_msprof(run: Path, issues: list | None) -> Run:
    d = _msprof_dir(run)
    parts = [read_kernel_details(f, issues) for f in msprof_files(run, "op_summary")]
    tasks = [read_task_time(f, issues) for f in msprof_files(run, "task_time")]
    task_time = pd.concat(tasks, ignore_index=True) if tasks else None
    if parts:
        kernels = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        kernels.attrs.update(parts[0].attrs)
    elif task_time is not None:
        kernels = kernels_from_task_time(task_time)
    else:
        raise FileNotFoundError(f"no op_summary_*.csv or task_time_*.csv in {d}")
    stats = msprof_files(run, "op_statistic")
    if stats:
        opstat = pd.concat([read_op_statistic(f) for f in stats], ignore_index=True)
        opstat.attrs["built_from_kernels"] = False
    else:
        opstat = op_statistic_from_kernels(kernels)
        opstat.attrs["built_from_kernels"] = True
    dev = kernels["device_id"].dropna().unique()
    return Run(path=run, kernels=kernels, op_statistic=opstat, operator_details=None, step_trace=None,
               device=read_device_info(run), profiler_info={}, layout="msprof",
               rank=int(dev[0]) if len(dev) == 1 else None, task_time=task_time, issues=list(issues or []))


def load_run(path, strict: bool = False) -> Run:
    """Read one run: a ``*_ascend_pt`` / ``*_ascend_ms`` / ``*_cuda_pt`` directory (or a folder
    holding ``ASCEND_PROFILER_OUTPUT`` or the bare files), an msprof ``PROF_*`` /
    ``mindstudio_profiler_output`` folder, a parent holding exactly one of these, a folder holding
    only one profiler file (:func:`resolve_input`), or one file
    (``kernel_details.csv``, ``op_summary_*.csv``, ``op_statistic*.csv``, ``step_trace_time.csv``,
    ``cluster_step_trace_time.csv``, ``task_time_*.csv``, ``trace_view.json``).

    Args:
        path: as above.
        strict: raise :class:`ProfilingFormatError` on the first malformed row; by default such
            rows are skipped and listed in ``Run.issues``.

    Raises:
        FileNotFoundError (no run; a run with neither kernels nor a step trace nor a trace),
        ValueError (several runs: use :func:`load_runs`), ProfilingFormatError (file, line,
        column).
    """
    issues: list | None = None if strict else []
    p = resolve_input(path)
    if p.is_file():
        return _load_file(p, issues)
    run = _one_run(path)
    if layout_of(run) == "msprof":
        return _load_msprof(run, issues)

    def optional(fn, *a):
        try:
            return fn(run, *a)
        except FileNotFoundError:
            return None

    kernels = optional(read_kernel_details, issues)
    step = optional(read_step_trace, issues)
    overlap = optional(read_trace_overlap)
    comm = optional(read_communication)
    if kernels is None and step is None and overlap is None:
        raise FileNotFoundError(f"{run}: neither kernel_details.csv nor step_trace_time.csv nor a trace_view.json "
                                f"with an Overlap Analysis")
    if kernels is None:
        kernels = empty_kernels()
    info = read_profiler_info(run)
    return Run(
        path=run,
        kernels=kernels,
        op_statistic=read_op_statistic(run, kernels=kernels),
        operator_details=optional(read_operator_details),
        step_trace=step,
        device=read_device_info(run),
        profiler_info=info,
        layout="framework",
        rank=_rank_of(run, info),
        communication=comm,
        overlap=overlap,
        issues=list(issues or []),
    )


def load_runs(path, strict: bool = False) -> list[Run]:
    """Every run under ``path`` (one per rank for a parent folder of ranks; see
    :func:`find_runs`), or the one run / file ``path`` is, read by :func:`load_run`, in rank
    order (directory order where ranks are unknown)."""
    p = resolve_input(path)
    if p.is_file():
        return [load_run(p, strict)]
    runs = [load_run(r, strict) for r in find_runs(p)]
    return sorted(runs, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, str(r.path)))


def _ensure_dir(path) -> Path:
    p = Path(path)
    os.makedirs(p, exist_ok=True)
    return p
