"""Collect a profile of device work: ``torch_npu.profiler`` on an Ascend NPU, ``torch.profiler``
on CUDA. Both write a run directory that :mod:`fla_ascend.profiling.readers` reads, so the same
analysis runs on either.

torch is imported when a collection starts, torch_npu only when collecting on an NPU (importing
it needs CANN). On a machine with neither device, collection raises :class:`NoDeviceError`.

NPU defaults (docs/profiling.md; torch_npu's public API): CPU + NPU activities, ``Level1``,
``PipeUtilization`` metrics, Text export, ``data_simplification=True``, a
``schedule(wait, warmup, active, repeat)`` driven by ``step()``, output through
``tensorboard_trace_handler(out_dir, worker_name)``.

CUDA: ``torch.profiler`` with CPU + CUDA activities and the same schedule; when the active
steps finish, the Chrome trace is written to
``<out_dir>/<worker>_<pid>_<YYYYmmddHHMMSSfff>_cuda_pt/ASCEND_PROFILER_OUTPUT/trace_view.json``
and its GPU kernels to ``kernel_details.csv`` beside it, in kernel_details' header names:
``Accelerator Core`` is ``CUDA``, ``Block Dim`` the grid size (product of the three grid
dimensions), ``Type`` the kernel name, ``Input Shapes`` those of the innermost torch op that
launched it (with ``record_shapes``), ``Wait Time(us)`` the idle gap since the previous kernel
ended on the same stream.
"""
from __future__ import annotations

import contextlib
import datetime
import importlib.util
import json
import os
from pathlib import Path

__all__ = ["NoDeviceError", "Session", "detect_device", "profile", "profile_op", "kernels_from_chrome_trace",
           "write_kernel_details", "LEVELS", "AIC_METRICS"]

LEVELS = ("Level_none", "Level0", "Level1", "Level2")
AIC_METRICS = ("AiCoreNone", "PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0", "MemoryUB",
               "ResourceConflictRatio", "L2Cache", "MemoryAccess")
CUDA_HEADER = ["Step Id", "Device_id", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)",
               "Duration(us)", "Wait Time(us)", "Block Dim", "Input Shapes", "Torch Op"]


class NoDeviceError(RuntimeError):
    """No NPU (torch_npu with a visible device) and no CUDA device to profile on."""


def detect_device() -> str:
    """Return ``"npu"`` when torch_npu imports and sees a device, else ``"cuda"`` when
    ``torch.cuda.is_available()``.

    Raises:
        NoDeviceError: neither is present (the message says what was looked for).
    """
    import torch

    npu_note = "torch_npu is not installed"
    if importlib.util.find_spec("torch_npu") is not None:
        try:
            import torch_npu  # noqa: F401  (needs CANN)

            if torch.npu.is_available():
                return "npu"
            npu_note = "torch_npu sees no NPU"
        except Exception as e:  # ImportError/OSError/RuntimeError without CANN
            npu_note = f"torch_npu failed to import ({type(e).__name__}: {e})"
    if torch.cuda.is_available():
        return "cuda"
    raise NoDeviceError(
        f"no device to profile: {npu_note}, and torch.cuda.is_available() is False. Profiling "
        "collects device kernels; run on an Ascend NPU (torch_npu + CANN) or a CUDA GPU. Reading "
        "and analysing existing profiler output (`fla-ascend profile analyze DIR`) works anywhere.")


class Session:
    """Handle yielded by :func:`profile`: call :meth:`step` once per iteration; after the
    ``with`` block ``output_dir`` is the run directory written (``None`` if the schedule never
    reached its active steps) and ``device`` is ``"npu"`` or ``"cuda"``."""

    def __init__(self, prof, device: str):
        self._prof = prof
        self.device = device
        self.output_dir: Path | None = None
        self.steps = 0

    def step(self) -> None:
        """Advance the profiler schedule by one step (``prof.step()``)."""
        self._prof.step()
        self.steps += 1


def _check_schedule(wait, warmup, active, repeat):
    for name, v, lo in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1), ("repeat", repeat, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name}: expected an int >= {lo}, got {v!r}")


def _stamp() -> str:
    now = datetime.datetime.now()
    return now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"


@contextlib.contextmanager
def profile(out_dir, *, wait: int = 0, warmup: int = 1, active: int = 5, repeat: int = 1,
            level: str = "Level1", aic_metrics: str = "PipeUtilization", record_shapes: bool = True,
            with_stack: bool = False, profile_memory: bool = False, worker_name: str | None = None,
            device: str | None = None):
    """Profile the device work done inside the ``with`` block.

    Args:
        out_dir: directory the run directory is written under (created).
        wait, warmup, active, repeat: profiler schedule, in steps (``Session.step()`` calls);
            ``active`` and ``repeat`` >= 1.
        level: NPU profiler level, one of :data:`LEVELS` (Level0 drops PMU metrics and
            op_statistic.csv).
        aic_metrics: NPU PMU metric group, one of :data:`AIC_METRICS` (one per run).
        record_shapes, with_stack, profile_memory: passed to the profiler.
        worker_name: prefix of the run directory name (default ``fla_ascend``).
        device: ``"npu"`` or ``"cuda"``; default :func:`detect_device`.

    Yields:
        :class:`Session`.

    Raises:
        ValueError: a bad schedule, level, metric group or device name.
        NoDeviceError: no NPU or CUDA device.
    """
    _check_schedule(wait, warmup, active, repeat)
    if level not in LEVELS:
        raise ValueError(f"level: expected one of {LEVELS}, got {level!r}")
    if aic_metrics not in AIC_METRICS:
        raise ValueError(f"aic_metrics: expected one of {AIC_METRICS}, got {aic_metrics!r}")
    if device is None:
        device = detect_device()
    if device not in ("npu", "cuda"):
        raise ValueError(f"device: expected 'npu' or 'cuda', got {device!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    worker = worker_name or "fla_ascend"
    before = {p.name for p in out.iterdir()}
    if device == "npu":
        import torch_npu

        tp = torch_npu.profiler
        cfg = tp._ExperimentalConfig(
            profiler_level=getattr(tp.ProfilerLevel, level), aic_metrics=getattr(tp.AiCMetrics, aic_metrics),
            export_type=tp.ExportType.Text, data_simplification=True, l2_cache=False)
        prof = tp.profile(
            activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU],
            schedule=tp.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=0),
            on_trace_ready=tp.tensorboard_trace_handler(str(out), worker_name=worker),
            record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
            experimental_config=cfg)
    else:
        import torch

        def handler(p):
            run = out / f"{worker}_{os.getpid()}_{_stamp()}_cuda_pt"
            sub = run / "ASCEND_PROFILER_OUTPUT"
            sub.mkdir(parents=True, exist_ok=True)
            trace = sub / "trace_view.json"
            p.export_chrome_trace(str(trace))
            write_kernel_details(kernels_from_chrome_trace(trace), sub / "kernel_details.csv")
            (run / "profiler_info.json").write_text(json.dumps({
                "collector": "torch.profiler", "device": "cuda",
                "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
                "schedule": {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}}))

        tprof = torch.profiler
        prof = tprof.profile(
            activities=[tprof.ProfilerActivity.CPU, tprof.ProfilerActivity.CUDA],
            schedule=tprof.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
            on_trace_ready=handler, record_shapes=record_shapes, profile_memory=profile_memory,
            with_stack=with_stack)
    session = Session(prof, device)
    with prof:
        yield session
    new = sorted(p for p in out.iterdir() if p.name not in before and p.is_dir()
                 and p.name.endswith(("_ascend_pt", "_cuda_pt")))
    session.output_dir = new[-1] if new else None


def profile_op(fn, *args, wait: int = 0, warmup: int = 2, active: int = 5, out_dir=None, kwargs=None,
               **profile_kwargs) -> Path:
    """Run ``fn(*args, **kwargs)`` for ``wait + warmup + active`` steps under :func:`profile`,
    synchronising the device before each ``step()``, and return the run directory.

    Args:
        fn: the callable to profile (e.g. an op with its inputs bound).
        args, kwargs: its arguments.
        wait, warmup, active: schedule in steps (one call per step).
        out_dir: where to write (default ``./profile_<timestamp>``).
        profile_kwargs: passed to :func:`profile` (``level``, ``aic_metrics``, ``device``, ...).

    Returns:
        ``Path`` of the run directory (``*_ascend_pt`` or ``*_cuda_pt``).

    Raises:
        TypeError: ``fn`` not callable. NoDeviceError, ValueError: see :func:`profile`.
        RuntimeError: the profiler wrote no run directory.
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    _check_schedule(wait, warmup, active, 1)
    kwargs = kwargs or {}
    out_dir = out_dir or f"profile_{_stamp()}"
    device = profile_kwargs.pop("device", None) or detect_device()
    import torch

    sync = torch.npu.synchronize if device == "npu" else torch.cuda.synchronize
    with profile(out_dir, wait=wait, warmup=warmup, active=active, repeat=1, device=device, **profile_kwargs) as s:
        for _ in range(wait + warmup + active):
            fn(*args, **kwargs)
            sync()
            s.step()
    if s.output_dir is None:
        raise RuntimeError(f"the profiler wrote no run directory under {out_dir}")
    return s.output_dir


# --------------------------------------------------------------------------- CUDA trace -> table


def _dims_to_shapes(dims) -> str:
    if not isinstance(dims, list):
        return ""
    parts = []
    for d in dims:
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            parts.append(",".join(str(x) for x in d))
        else:
            parts.append("")
    return ";".join(parts)


def kernels_from_chrome_trace(trace) -> list[dict]:
    """Extract GPU kernels from a ``torch.profiler`` Chrome trace as kernel_details rows.

    Args:
        trace: a path to the JSON, or the loaded dict (``{"traceEvents": [...]}``).

    Returns:
        list of dicts keyed by :data:`CUDA_HEADER` names (values as text), in start order.
        Kernels are events with ``ph == "X"`` and ``cat == "kernel"``; the step is the
        ``ProfilerStep#N`` whose span holds the kernel's launch (matched by ``correlation``),
        empty when none does.

    Raises:
        ValueError: the JSON has no ``traceEvents`` list, or (path) is not valid JSON (with
            file, line and column).
    """
    if isinstance(trace, (str, Path)):
        try:
            with open(trace, encoding="utf-8") as f:
                data = json.load(f)
        except json.JSONDecodeError as e:
            from .readers import ProfilingFormatError

            raise ProfilingFormatError(trace, e.lineno, e.colno, f"malformed JSON: {e.msg}") from None
    else:
        data = trace
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise ValueError("trace: expected a Chrome trace dict with a 'traceEvents' list")
    xs = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    kernels = [e for e in xs if str(e.get("cat", "")).lower() == "kernel"]
    steps = []
    ops = []
    launches = {}
    for e in xs:
        name = str(e.get("name", ""))
        cat = str(e.get("cat", "")).lower()
        if name.startswith("ProfilerStep#"):
            try:
                steps.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), int(name.split("#")[1])))
            except (KeyError, ValueError):
                pass
        elif cat == "cpu_op":
            ops.append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
    rows = []
    last_end: dict = {}
    for e in sorted(kernels, key=lambda e: float(e.get("ts", 0))):
        args = e.get("args", {}) or {}
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        launch = launches.get(args.get("correlation"))
        step, op_name, shapes = "", "", ""
        if launch is not None:
            lt = float(launch.get("ts", 0))
            for s0, s1, n in steps:
                if s0 <= lt <= s1:
                    step = str(n)
                    break
            best = None
            for o in ops:
                o0 = float(o.get("ts", 0))
                o1 = o0 + float(o.get("dur", 0))
                if o.get("tid") == launch.get("tid") and o0 <= lt <= o1:
                    if best is None or float(o.get("dur", 0)) < float(best.get("dur", 0)):
                        best = o
            if best is not None:
                op_name = str(best.get("name", ""))
                shapes = _dims_to_shapes((best.get("args") or {}).get("Input Dims"))
        stream = args.get("stream", "")
        grid = args.get("grid")
        block_dim = ""
        if isinstance(grid, list) and grid and all(isinstance(g, int) for g in grid):
            block_dim = 1
            for g in grid:
                block_dim *= g
        prev = last_end.get(stream)
        wait = max(0.0, ts - prev) if prev is not None else 0.0
        last_end[stream] = max(prev or 0.0, ts + dur)
        name = str(e.get("name", ""))
        rows.append({"Step Id": step, "Device_id": str(args.get("device", "")), "Stream ID": str(stream),
                     "Name": name, "Type": name, "Accelerator Core": "CUDA", "Start Time(us)": f"{ts:.3f}",
                     "Duration(us)": f"{dur:.3f}", "Wait Time(us)": f"{wait:.3f}", "Block Dim": str(block_dim),
                     "Input Shapes": shapes, "Torch Op": op_name})
    return rows


def write_kernel_details(rows: list[dict], path) -> Path:
    """Write rows from :func:`kernels_from_chrome_trace` as a kernel_details.csv (header
    :data:`CUDA_HEADER`). Returns the path."""
    import csv

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CUDA_HEADER)
        for r in rows:
            w.writerow([r.get(h, "") for h in CUDA_HEADER])
    return path
