"""The correctness-gated benchmark suite: ops x shapes x modes x providers.

Each case, keyed by ``(op, shape, mode, provider)``:

1. build deterministic inputs (seeded CPU generator, moved to the device);
2. correctness gate: the provider's outputs (and, for ``fwdbwd``, its gradients) against the
   float32 PyTorch reference of the op, metric :func:`fla_ascend.ops.utils.rel_rmse`; the worst
   ratio must be <= the op's tolerance;
3. only when the gate passes: median time (:mod:`fla_ascend.bench.timing`), peak memory, and
   from the op's counted bytes / flops / tokens: GB/s, TFLOP/s, tokens/s.

A case that raises is recorded with its error and the suite goes on. The artifact is the dict
described in the benchmark contract (schema ``fla-ascend-bench/1``); see ``docs/bench.md``.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

from fla_ascend import backend
from fla_ascend.bench import cases as C
from fla_ascend.bench import timing
from fla_ascend.ops.utils import rel_rmse

__all__ = ["SCHEMA", "MODES", "PROVIDERS", "DTYPES", "run_suite", "write_json", "read_json", "parse_dtype",
           "plan_cases", "make_call", "resolve_case", "op_call"]

SCHEMA = "fla-ascend-bench/1"
MODES = ("fwd", "fwdbwd")
PROVIDERS = ("fla_ascend", "torch_ref", "fla")
DTYPES = {
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
}


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"``, ``"float32"``/``"fp32"`` or a
    ``torch.dtype``; ``None`` means bfloat16 on a GPU/NPU and float32 on CPU (the interpreter's
    bf16 ``tl.dot`` is wrong: README, "Tests"). Raises ValueError for anything else."""
    if dtype is None:
        return torch.float32 if backend.device_type() == "cpu" else torch.bfloat16
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPES.values():
            raise ValueError(f"dtype must be one of bfloat16, float16, float32; got {dtype}")
        return dtype
    if dtype.lower() not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    return DTYPES[dtype.lower()]


def fla_left_out() -> str | None:
    """Why the ``fla`` provider is not in the default provider list here, or ``None``: it must
    import, and its Triton kernels need a GPU (they do not run under the interpreter)."""
    if backend.device_type() == "cpu":
        return "flash-linear-attention needs a GPU (no Triton driver on CPU)"
    if not C.fla_available():
        return "flash-linear-attention does not import here"
    return None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _check_names(kind: str, given: list[str], known) -> None:
    bad = [x for x in given if x not in known]
    if bad:
        raise ValueError(f"{kind}: unknown {', '.join(map(repr, bad))}; expected any of {', '.join(known)}")


def plan_cases(ops, shapes, modes, full_size=False, quick=False):
    """Expand the selection into ``[(op, label, shape, mode)]`` and a list of notes on
    combinations left out (shape not applicable to the op, mode not supported).

    On CPU (no accelerator) shapes are clamped with :func:`cases.scale_for_cpu` unless
    ``full_size``; an explicitly given shape that is scaled gets a note saying from what to
    what (the default shapes are scaled silently: the table caption says so). ``shapes`` given as
    exactly ``anchors`` runs each op at its own anchor shapes (its spec's named shapes; other
    groups apply to every op whose dimensions they have). Raises ValueError as
    :func:`cases.parse_shapes`."""
    own_anchors = isinstance(shapes, str) and shapes.strip().lower() == "anchors"
    parsed = [] if own_anchors else C.parse_shapes(shapes)
    scale = backend.device_type() == "cpu" and not full_size
    plan, notes, seen = [], [], set()
    for op in ops:
        spec = C.OPS[op]
        names = spec.anchor_shapes if own_anchors else spec.default_shapes
        todo = parsed or [(n, dict(C.NAMED_SHAPES[n])) for n in names]
        for label, shape in todo:
            full = spec.complete_shape(shape)
            if isinstance(full, str):
                if parsed:
                    notes.append(full)
                continue
            run_shape = C.scale_for_cpu(full, quick) if scale else full
            if parsed and run_shape != full:
                notes.append(f"{op}: {C.shape_key(full)} is scaled for the CPU interpreter to "
                             f"{C.shape_key(run_shape)} (--full-size runs it as given)")
            for mode in modes:
                if mode not in spec.modes:
                    notes.append(f"{op} has no {mode} mode (supports {', '.join(spec.modes)})")
                    continue
                key = (op, C.shape_key(run_shape), mode)
                if key not in seen:
                    seen.add(key)
                    plan.append((op, label, run_shape, full, mode))
    return plan, sorted(set(notes))


def _err(e: BaseException) -> str:
    lines = [s for s in str(e).strip().splitlines() if s.strip()]
    msg = f"{type(e).__name__}: {lines[0] if lines else ''}"
    return msg[:500]


def _free():
    if backend.device_type() == "cuda":
        torch.cuda.empty_cache()
    elif backend.device_type() == "npu":
        torch.npu.empty_cache()


def _leaves(inputs, names, dtype=None):
    """Fresh copies of ``inputs``; those in ``names`` become leaves requiring grad."""
    out = {}
    for k, x in inputs.items():
        if isinstance(x, torch.Tensor):
            y = x.detach().clone()
            if dtype is not None and y.is_floating_point():
                y = y.to(dtype)
            if k in names:
                y.requires_grad_(True)
            out[k] = y
        else:
            out[k] = x
    return out


def _cotangents(ref_out: dict, seed: int) -> dict:
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    return {k: torch.randn(v.shape, generator=gen, dtype=torch.float32).to(v.device)
            for k, v in sorted(ref_out.items()) if v is not None}


def _run_fwdbwd(fn, leaves, cots, grad_names, cast_cache=None):
    """One forward and backward; ``cast_cache`` (a dict kept across timed calls) holds the
    cotangents cast to each output's dtype, so the cast is not timed with the op."""
    out = {k: v for k, v in fn(**leaves).items() if v is not None}
    keys = [k for k in sorted(out) if k in cots]
    cast_cache = {} if cast_cache is None else cast_cache
    for k in keys:
        if k not in cast_cache or cast_cache[k].dtype != out[k].dtype:
            cast_cache[k] = cots[k].to(out[k].dtype)
    torch.autograd.backward([out[k] for k in keys], [cast_cache[k] for k in keys])
    grads = {f"d{n}": leaves[n].grad for n in grad_names}
    return out, grads


def _reference(spec, inputs, mode, cots_seed):
    """fp32 reference outputs (and gradients for fwdbwd) of one (op, shape)."""
    names = spec.grad_inputs if mode == "fwdbwd" else ()
    ref_in = _leaves(inputs, names, dtype=torch.float32)
    if mode == "fwd":
        with torch.no_grad():
            return {k: v for k, v in spec.reference(**ref_in).items() if v is not None}, None
    out = {k: v for k, v in spec.reference(**ref_in).items() if v is not None}
    cots = _cotangents(out, cots_seed)
    keys = sorted(out)
    torch.autograd.backward([out[k] for k in keys], [cots[k] for k in keys])
    grads = {f"d{n}": ref_in[n].grad for n in names}
    return {k: v.detach() for k, v in {**out, **grads}.items()}, cots


def _gate(spec, fn, inputs, mode, ref, cots):
    """Worst-case relative RMSE of every output (and gradient) of ``fn`` against ``ref``."""
    if mode == "fwd":
        with torch.no_grad():
            got = {k: v for k, v in fn(**_leaves(inputs, ())).items() if v is not None}
    else:
        out, grads = _run_fwdbwd(fn, _leaves(inputs, spec.grad_inputs), cots, spec.grad_inputs)
        got = {**out, **grads}
    ratios = {}
    for name, r in ref.items():
        if got.get(name) is None:
            raise RuntimeError(f"provider returned no {name!r} (reference has it)")
        ratios[name] = rel_rmse(r, got[name])
    return ratios


def _row(op, label, shape, full, mode, provider, dtype):
    return {
        "op": op, "shape": C.shape_key(shape), "shape_args": dict(shape), "shape_name": label,
        "scaled_from": None if shape == full else C.shape_key(full),
        "mode": mode, "provider": provider, "dtype": _dtype_name(dtype),
        "correct": None, "rel_rmse": {}, "tolerance": None,
        "ms": None, "peak_mem_mb": None, "tokens_per_s": None, "gbps": None, "tflops": None,
        "bytes": None, "flops": None, "tokens": None, "speedup": {},
        "skipped": None, "error": None,
    }


def _add_speedups(results):
    """``speedup[other] = other.ms / this.ms`` between timed providers of the same case."""
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["op"], r["shape"], r["mode"], r["dtype"]), []).append(r)
    for rows in groups.values():
        for r in rows:
            r["speedup"] = {
                o["provider"]: o["ms"] / r["ms"]
                for o in rows if o is not r and o["ms"] and r["ms"]
            }


def run_suite(
    ops: list[str] | None = None,
    shapes: list[str] | str | None = None,
    modes: list[str] | None = None,
    providers: list[str] | None = None,
    dtype: str | torch.dtype | None = None,
    quick: bool = False,
    progress: bool = True,
    *,
    full_size: bool = False,
    seed: int = 0,
    command: list[str] | None = None,
    measure_peaks: bool = True,
    console=None,
    on_case=None,
    only=None,
) -> dict[str, Any]:
    """Run the benchmark suite and return the artifact dict (schema ``fla-ascend-bench/1``).

    Args:
        ops: op names from :data:`cases.OPS`; ``None``: all registered ops whose fla_ascend
            function imports (the others are named in ``notes``).
        shapes: ``--shapes`` text or list (see :func:`cases.parse_shapes`); ``None``: each op's
            default shapes (Qwen3-Next's layer for the chunked op, decode B64 for the recurrent op).
        modes: subset of ``("fwd", "fwdbwd")``; ``None``: ``["fwd"]``.
        providers: subset of ``("fla_ascend", "torch_ref", "fla")`` or any provider an op
            registers; ``None``: all three (``fla`` only on a GPU and when ``import fla`` works).
        dtype: input dtype name; ``None``: bf16 on GPU/NPU, fp32 on CPU.
        quick: shorter timing budgets and, on CPU, smaller shapes.
        progress: show a progress bar and one line per case on stderr.
        full_size: on CPU, do not scale shapes down.
        seed: input seed (same seed, same inputs).
        command: recorded as ``meta.command`` (default ``sys.argv``).
        measure_peaks: measure copy bandwidth and bf16 matmul peak (GPU/NPU only).
        console: a ``rich.console.Console`` for progress output (default: stderr).
        on_case: called after every case with the artifact so far (``meta["complete"]`` is
            ``False``, speedups filled for the cases done), so that a caller can save partial
            results of a run that may be stopped (a device time limit).
        only: ``None``, or the ``(op, shape key, mode)`` triples to run out of the planned cases
            (the others are left out silently): how :mod:`fla_ascend.bench.isolated` runs a part
            of one op's cases in a fresh process.

    Returns:
        ``{"schema", "meta", "results", "notes"}``; each result row has the contract's fields
        plus ``shape_name``, ``scaled_from``, ``bytes``, ``flops``, ``tokens``, ``speedup``
        (``{other provider: other ms / this ms}``) and ``skipped`` (reason, or ``None``).
        ``correct`` is ``None`` only for skipped rows.

    Raises:
        ValueError: unknown op, mode, provider or dtype; bad ``shapes`` text.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fla_ascend.console import make_console

    pre_notes = []
    if ops:
        ops = list(ops)
        _check_names("ops", ops, list(C.OPS))
    else:
        ops = []
        for name, spec in C.OPS.items():
            why = spec.available("fla_ascend")
            if why is None:
                ops.append(name)
            else:
                pre_notes.append(f"op {name} left out: {why}")
    modes = list(modes) if modes else ["fwd"]
    _check_names("modes", modes, MODES)
    known_providers = sorted({p for op in ops for p in C.OPS[op].providers})
    explicit_providers = providers is not None
    providers = list(providers) if providers else list(PROVIDERS)
    _check_names("providers", providers, known_providers)
    tdtype = parse_dtype(dtype)
    plan, notes = plan_cases(ops, shapes, modes, full_size=full_size, quick=quick)
    if only is not None:
        keep = {tuple(k) for k in only}
        plan = [c for c in plan if (c[0], C.shape_key(c[2]), c[4]) in keep]
    notes = pre_notes + notes
    if not explicit_providers and "fla" in providers:
        why = fla_left_out()
        if why:
            providers.remove("fla")
            notes.append(f"provider fla left out: {why}")
    if backend.device_type() == "cpu" and tdtype == torch.bfloat16:
        notes.append("bfloat16 under the Triton interpreter: tl.dot on bf16 is wrong there, gates may fail")

    timer = timing.make_timer(quick)
    info = backend.info()
    console = console or make_console(stderr=True)
    meta: dict[str, Any] = {
        "device": info.device_type, "device_name": info.device_name,
        "triton_flavour": info.triton_flavour, "triton_version": info.triton_version,
        "torch_version": info.torch_version, "fla_version": C.fla_version(),
        "timing_method": timer.method, "warmup_ms": timer.warmup_ms, "rep_ms": timer.rep_ms,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": list(sys.argv if command is None else command),
        "copy_bandwidth_gbps": None, "matmul_tflops": None,
        "dtype": _dtype_name(tdtype), "providers": providers, "modes": modes, "ops": ops,
        "interpreter": info.interpreter, "cpu_scaled": backend.device_type() == "cpu" and not full_size,
        "seed": seed, "complete": False,
    }
    results: list[dict] = []
    n_cases = len(plan) * len(providers)
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=not progress,
    ) as bar:
        task = bar.add_task("bench", total=n_cases + (1 if measure_peaks else 0))
        if measure_peaks:
            bar.update(task, description="machine peaks (copy bandwidth, bf16 matmul)")
            try:
                meta["copy_bandwidth_gbps"] = timing.copy_bandwidth_gbps(timer)
                meta["matmul_tflops"] = timing.matmul_tflops(timer)
            except Exception as e:  # a failed peak measurement must not stop the suite
                notes.append(f"machine peaks not measured: {_err(e)}")
            _free()
            bar.advance(task)
        for op, label, shape, full, mode in plan:
            spec = C.OPS[op]
            rows = [_row(op, label, shape, full, mode, p, tdtype) for p in providers]
            try:
                inputs = spec.make_inputs(shape, tdtype, backend.device(), seed)
                ref, cots = _reference(spec, inputs, mode, seed)
            except Exception as e:
                for r in rows:
                    r.update(correct=False, error=f"inputs/reference failed: {_err(e)}")
                results.extend(rows)
                bar.advance(task, len(rows))
                _free()
                continue
            for r in rows:
                bar.update(task, description=f"{op} {r['shape']} {mode} {r['provider']}")
                _run_case(spec, r, inputs, ref, cots, timer, meta)
                if progress:
                    bar.console.print(_case_line(r), soft_wrap=True)  # one line per case, also in a log file
                results.append(r)
                bar.advance(task)
                if on_case is not None:
                    _add_speedups(results)
                    on_case({"schema": SCHEMA, "meta": meta, "results": results, "notes": notes})
            del inputs, ref, cots
            _free()
    _add_speedups(results)
    meta["complete"] = True
    return {"schema": SCHEMA, "meta": meta, "results": results, "notes": notes}


def _run_case(spec, r, inputs, ref, cots, timer, meta):
    provider, mode, shape = r["provider"], r["mode"], r["shape_args"]
    fn = spec.providers.get(provider)
    reason = "op has no such provider" if fn is None else spec.available(provider)
    if reason is None and provider == "torch_ref":
        reason = spec.torch_ref_limit(shape)
    if reason:
        r["skipped"] = reason
        return
    r["tolerance"] = spec.tolerance[mode]
    try:
        if spec.prepare is not None:
            meta.update(spec.prepare(provider, mode))
        r["rel_rmse"] = _gate(spec, fn, inputs, mode, ref, cots)
        worst = max(r["rel_rmse"].values())
        r["correct"] = bool(worst <= r["tolerance"])
        if not r["correct"]:
            return
        call, grads = make_call(spec, fn, inputs, mode, cots)
        r["peak_mem_mb"] = timing.measure_peak_memory_mb(call)
        ms = timer(call, grad_to_none=grads)
        r["ms"] = ms
        r["bytes"] = int(spec.bytes_moved(shape, inputs_dtype(inputs), mode))
        r["flops"] = int(spec.flops(shape, mode))
        r["tokens"] = int(spec.tokens(shape))
        s = ms * 1e-3
        r["tokens_per_s"] = r["tokens"] / s
        r["gbps"] = r["bytes"] / s / 1e9
        r["tflops"] = r["flops"] / s / 1e12
    except Exception as e:
        r["correct"] = False
        r["error"] = _err(e)
        if os.environ.get("FLA_ASCEND_BENCH_TRACEBACK"):
            traceback.print_exc()
        _free()


def make_call(spec, fn, inputs: dict, mode: str, cots: dict | None):
    """The zero-argument callable that is timed (and profiled): one forward of provider ``fn``
    under ``no_grad`` for ``fwd``; for ``fwdbwd`` one forward and the backward of every output
    against the cotangents ``cots`` (gradients of ``spec.grad_inputs`` reset before each call).
    Runs on fresh copies of ``inputs``.

    Returns:
        ``(call, grad leaves or None)``; the leaves are what a timer resets between calls.
    """
    if mode == "fwd":
        call_in = _leaves(inputs, ())

        def call():
            with torch.no_grad():
                return fn(**call_in)

        return call, None
    leaves = _leaves(inputs, spec.grad_inputs)
    cast_cache: dict = {}

    def call():
        for n in spec.grad_inputs:
            leaves[n].grad = None
        return _run_fwdbwd(fn, leaves, cots, spec.grad_inputs, cast_cache)

    return call, [leaves[n] for n in spec.grad_inputs]


def resolve_case(op: str, shape: str | dict | None = None, mode: str = "fwd", provider: str = "fla_ascend") -> dict:
    """Check one ``(op, shape, mode, provider)`` selection without touching a device and return
    the op's full shape (see :func:`op_call` for the arguments).

    Raises:
        ValueError: unknown op, provider or mode; a bad or inapplicable shape; a provider that
            cannot run here (the message says why).
    """
    _check_names("op", [op], list(C.OPS))
    spec = C.OPS[op]
    if mode not in spec.modes:
        raise ValueError(f"mode: {op} has no {mode!r} mode (it has {', '.join(spec.modes)}; fwdbwd is --backward "
                         "in fla-ascend profile op)")
    _check_names("provider", [provider], list(spec.providers))
    base = dict(C.NAMED_SHAPES[spec.default_shapes[0]])
    if shape is None:
        full = base
    elif isinstance(shape, dict):
        full = dict(shape)
    else:
        parsed = C.parse_shapes(shape)
        if len(parsed) != 1:
            raise ValueError(f"shape: expected one shape, got {len(parsed)} from {shape!r}")
        label, full = parsed[0]
        if label not in C.NAMED_SHAPES:  # free form: overlay on the op's default shape
            full = {**base, **full}
    full = spec.complete_shape(full)
    if isinstance(full, str):
        raise ValueError(f"shape: {full}")
    why = spec.available(provider)
    if why:
        raise ValueError(f"provider {provider}: {why}")
    return full


def op_call(op: str, shape: str | dict | None = None, mode: str = "fwd", provider: str = "fla_ascend",
            dtype: str | torch.dtype | None = None, seed: int = 0):
    """One op of :data:`cases.OPS` ready to run, for profilers and ad-hoc timing: the suite's
    inputs, provider and call (:func:`make_call`) without the correctness gate or the timer.

    Args:
        op: op name (``fla-ascend bench --list``).
        shape: a named shape (``gdn-t32k``), a free-form one (``B=1,T=4096,H=16,HV=32``), a
            dict, or ``None`` for the op's first default shape. Free-form text may give only some
            dims: the rest come from the op's first default shape (``T=1024`` is Qwen3-Next's
            layer at T = 1024).
        mode: ``fwd`` or ``fwdbwd`` (cotangents: seeded normal, shaped like one forward's outputs).
        provider: ``fla_ascend``, ``torch_ref``, ``fla`` or another provider the op registers.
        dtype: as :func:`parse_dtype`.
        seed: input seed.

    Returns:
        ``(call, shape dict)``; the inputs live on :func:`fla_ascend.backend.device`.

    Raises:
        ValueError: as :func:`resolve_case`, and a bad ``dtype``.
    """
    full = resolve_case(op, shape, mode, provider)
    spec = C.OPS[op]
    tdtype = parse_dtype(dtype)
    if spec.prepare is not None:
        spec.prepare(provider, mode)
    fn = spec.providers[provider]
    inputs = spec.make_inputs(full, tdtype, backend.device(), seed)
    cots = None
    if mode == "fwdbwd":
        with torch.no_grad():
            out = {k: v for k, v in fn(**_leaves(inputs, ())).items() if v is not None}
        cots = _cotangents(out, seed)
    return make_call(spec, fn, inputs, mode, cots)[0], full


def inputs_dtype(inputs: dict) -> torch.dtype:
    """dtype of the first floating tensor input that is not float32, else float32."""
    for x in inputs.values():
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float32:
            return x.dtype
    return torch.float32


def _case_line(r: dict) -> str:
    head = f"{r['op']} {r['shape']} {r['mode']} {r['provider']}:"
    if r["skipped"]:
        return f"[dim]{head} skipped ({r['skipped']})[/dim]"
    ratio = max(r["rel_rmse"].values()) if r["rel_rmse"] else None
    gate = f"gate rel-RMSE {ratio:.2e} (tol {r['tolerance']})" if ratio is not None else "gate not run"
    if r["error"]:
        return f"[red]{head} ERROR {gate}: {r['error']}[/red]"
    if not r["correct"]:
        return f"[red]{head} FAIL {gate}, not timed[/red]"
    return f"{head} PASS {gate}, {r['ms']:.3f} ms"


def write_json(artifact: dict, path: str | Path) -> Path:
    """Write the artifact as indented JSON (parent folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(artifact, indent=2, default=str) + "\n")
    return path


def read_json(path: str | Path) -> dict:
    """Read an artifact written by :func:`write_json`.

    Raises:
        ValueError: the file is not a ``fla-ascend-bench/1`` artifact.
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} artifact "
                         f"(schema={data.get('schema') if isinstance(data, dict) else None!r})")
    return data
