"""Whether a compiled kernel's UB plan leaves room: plan it again beside a reserved buffer.

bishengir-compile's UB planner (the HIVM ``PlanMemory`` pass) places each buffer at the strictest of
several levels that still fits. At the strict levels a buffer does not take the memory of one that a
different pipe (MTE2/MTE3 DMA, Vector) touched, which saves the synchronisation such a reuse needs; only
when a buffer does not fit does the planner fall back to lifetime-only reuse. So while UB is left over
the plan grows into it, and a plan that reaches 97% of UB need not mean the kernel needs 97%. (The spec
levels are visible in the public derivative of the pass, PTOAS's ``lib/PTO/Transforms/PTOPlanMemory.cpp``:
``SPEC_LEVEL_0`` lifetime only, higher levels add the pipe-conflict tests, ``ApplyFailStrategy`` steps
down a level on failure. Measured here, Ascend910B2, 2026-12-07: the gated delta rule's WY backward at
chunk 64, K = V = 128 plans 190976 B (97%) while its buffers occupy at most 124928 B at any one
point, by the compiler's own ``--enable-memory-display`` record.)

:func:`reserve_fits` measures the room instead of the plan. It compiles the kernel once more with
``--mlir-print-ir-before=hivm-plan-memory``, takes the module just before the vector side's memory
planning, checks that ``bishengir-opt --hivm-plan-memory`` reproduces the compile's planned UB from it,
adds one UB buffer of ``reserve_bytes`` live from the vector function's entry to its return, and plans
again. A plan found means the kernel fits in ``UB - reserve_bytes`` with the compiler's own planner,
which then gives up only some pipe-conflict avoidance (syncs, not correctness). The edited module is
only planned, never run. A2/A3 only (``bishengir-opt``); A5 plans stay as compiled.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fla_ascend.compiler.bishengir import (
    _key,
    _run,
    compile_argv,
    compiler_env,
    compiler_path,
    compiler_version,
    default_cache_dir,
    is_a5,
    parse_module,
    strip_mix_mode,
)

__all__ = ["ReserveResult", "reserve_fits", "insert_reservation", "reserve_size"]

RESERVE_FILE = "reserve.json"
PROBE_VERSION = "1"
"""Part of the probe's cache key: raise it when the probe's text edit or module choice changes."""
_DUMP_RE = re.compile(r"^// -----// IR Dump Before PlanMemory \(hivm-plan-memory\) .*$", re.M)
_GM_ARG_RE = re.compile(r"(%arg\d+): memref<\?x(f32|f16|bf16|i32|i64|i16|i8), #hivm\.address_space<gm>>")
_TO_TYPE = {"f32": "arith.sitofp", "f16": "arith.sitofp", "bf16": "arith.sitofp",
            "i64": "arith.extsi", "i16": "arith.trunci", "i8": "arith.trunci"}


def reserve_size(ub_bytes: int, share: float) -> int:
    """Bytes of a reservation of at least ``share`` of ``ub_bytes``, rounded up to 32 B (UB alignment)."""
    need = int(-(-ub_bytes * share // 1))
    return -(-need // 32) * 32


@dataclass
class ReserveResult:
    """Outcome of :func:`reserve_fits`.

    Attributes:
        fits: True: the kernel plans beside the reservation; False: the planner reports a UB
            overflow with it; None: not decided (``reason`` says why).
        reserve_bytes: the reserved buffer, bytes.
        replanned_ub: UB planned by ``bishengir-opt`` from the dumped module without the
            reservation (equals the compile's plan when the probe is trusted), bytes.
        reserved_ub: UB planned with the reservation (the reservation included), bytes; 0 unless ``fits``.
        reason: why ``fits`` is None, or the planner's overflow message when False.
        seconds: wall time of the probe.
        cached: read from the cache.
    """

    fits: bool | None
    reserve_bytes: int
    replanned_ub: int = 0
    reserved_ub: int = 0
    reason: str = ""
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def insert_reservation(module_text: str, func: str, nbytes: int) -> str:
    """``module_text`` with a UB buffer of ``nbytes`` (a multiple of 4) allocated at the entry of
    ``func`` and read just before its last ``return`` (the value stored to element 0 of the first
    global-memory argument, so that nothing removes it): the buffer is live through the function.

    Raises:
        ValueError: ``func`` is not in the module, has no global-memory argument of a numeric type,
            or ``nbytes`` is not a positive multiple of 4.
    """
    if nbytes <= 0 or nbytes % 4:
        raise ValueError(f"nbytes must be a positive multiple of 4, got {nbytes}")
    m = re.search(rf"func\.func @{re.escape(func)}\(", module_text)
    if m is None:
        raise ValueError(f"func: @{func} is not defined in the module")
    sig_end = module_text.index("\n", m.end())
    gm = _GM_ARG_RE.search(module_text, m.end(), sig_end)
    if gm is None:
        raise ValueError(f"func: @{func} has no global-memory argument of a numeric element type")
    arg, elem = gm.groups()
    ty = f"memref<{nbytes // 4}xi32, #hivm.address_space<ub>>"
    head = (f"\n    %reserve_c0 = arith.constant 0 : index\n    %reserve_c1 = arith.constant 1 : index"
            f"\n    %reserve = memref.alloc() {{alignment = 64 : i64}} : {ty}"
            f"\n    hivm.hir.varange offset[%reserve_c0] strides[%reserve_c1] outs(%reserve : {ty})")
    text = module_text[:sig_end] + head + module_text[sig_end:]
    start = text.index(m.group(0))
    nxt = text.find("func.func @", start + len(m.group(0)))
    end = len(text) if nxt < 0 else nxt
    ret = text.rfind("\n    return", start, end)
    if ret < 0:
        raise ValueError(f"func: @{func} has no return at function level")
    conv = f"\n    %reserve_w = {_TO_TYPE[elem]} %reserve_v : i32 to {elem}" if elem in _TO_TYPE else ""
    tail = (f"\n    %reserve_v = memref.load %reserve[%reserve_c0] : {ty}{conv}"
            f"\n    memref.store {'%reserve_w' if conv else '%reserve_v'}, {arg}[%reserve_c0] : "
            f"memref<?x{elem}, #hivm.address_space<gm>>")
    return text[:ret] + tail + text[ret:]


def _dumps(log: str) -> list[str]:
    """The module text printed before each ``hivm-plan-memory`` run (one per function planned)."""
    heads = list(_DUMP_RE.finditer(log))
    out = []
    for i, h in enumerate(heads):
        body = log[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(log)]
        close = body.rfind("\n}")  # the module's closing brace; later lines are location aliases or logs
        out.append(body[:close + 2] + "\n" if close >= 0 else body)
    return out


def _plan(opt: str, text: str, tmp: str, timeout_s: float) -> tuple[int | None, str, str]:
    """``(planned UB in bytes, planned module text, log)`` of ``text`` after ``bishengir-opt
    --hivm-plan-memory``; UB None when the planner failed, and the log ``"timeout"`` when it ran out of
    time."""
    src, dst = os.path.join(tmp, "plan.in.mlir"), os.path.join(tmp, "plan.out.mlir")
    Path(src).write_text(text)
    if os.path.exists(dst):
        os.remove(dst)
    rc, log, _cpu = _run([opt, src, "--hivm-plan-memory", "-o", dst], dict(os.environ), timeout_s)
    if rc is None:
        return None, "", "timeout"
    if rc != 0 or not os.path.isfile(dst):
        return None, "", log
    out = Path(dst).read_text()
    return parse_module(out).planned_bytes.get("ub", 0), out, log


def _vector_func(text: str) -> str | None:
    """The function of a dumped module whose UB is planned: the ``_mix_aiv`` half of a Cube + Vector
    kernel, else the kernel itself (the one function that is not an ``..._function`` helper)."""
    m = re.search(r"func\.func @(\w+_mix_aiv)\(", text)
    if m:
        return m.group(1)
    kernels = [f for f in re.findall(r"func\.func @(\w+)\(", text) if not f.endswith("_function")]
    return kernels[0] if len(kernels) == 1 else None


def _probe(text, chip, launch_options, binary, opt, reserve_bytes, planned_ub, timeout_s, tmp, res) -> bool:
    """The probe's steps (:func:`reserve_fits`), filling ``res``; whether the outcome may be cached
    (False after a timeout, which a longer limit might not repeat)."""
    src = os.path.join(tmp, "kernel.ttadapter.mlir")
    Path(src).write_text(text)
    argv = compile_argv(chip, launch_options, src, os.path.join(tmp, "kernel"), binary=binary)
    argv[3:3] = ["--mlir-print-ir-before=hivm-plan-memory", "--mlir-print-ir-module-scope", "--mlir-disable-threading"]
    rc, log, _cpu = _run(argv, compiler_env(), timeout_s)
    if rc != 0:
        res.reason = "timeout" if rc is None else f"the compile with the plan dump failed (rc {rc})"
        return rc is not None
    timed_out = False
    for module in _dumps(log):
        vector = _vector_func(module)
        if vector is None:
            continue
        ub, _out, plog = _plan(opt, module, tmp, timeout_s)
        timed_out |= plog == "timeout"
        if ub != planned_ub:
            continue
        res.replanned_ub = ub
        reserved, out, plog = _plan(opt, insert_reservation(module, vector, reserve_bytes), tmp, timeout_s)
        placed = f"memref<{reserve_bytes // 4}xi32, #hivm.address_space<ub>>" in out
        if reserved is not None and placed and reserved >= reserve_bytes:
            res.fits, res.reserved_ub = True, reserved
        elif reserved is not None:
            res.reason = "the planned module has no buffer of the reservation's size"
        elif "overflow" in plog:
            res.fits = False
            res.reason = next(ln.strip() for ln in plog.splitlines() if "overflow" in ln)[:300]
        else:
            res.reason = "the planner failed on the module with the reservation: " + plog.strip()[-300:]
            return plog != "timeout"
        return True
    res.reason = f"no module dumped before memory planning replans to the compiled {planned_ub} B"
    return not timed_out


def reserve_fits(ttadapter_text: str, chip: str, launch_options: dict | None, reserve_bytes: int, planned_ub: int,
                 timeout_s: float = 600.0, cache_dir: str | None = None, use_cache: bool = True) -> ReserveResult:
    """Whether the kernel's UB plan (``planned_ub`` bytes, from :func:`fla_ascend.compiler.bishengir.compile_module`
    with the same text, chip and options) still plans with ``reserve_bytes`` of UB taken away (see the
    module docstring).

    Returns:
        :class:`ReserveResult`; ``fits`` is None when the compiler is missing, the compile fails or
        times out, or no dumped module replans to ``planned_ub`` (the probe would not measure this plan).

    Raises:
        ValueError: an A5 chip, or ``reserve_bytes`` not a positive multiple of 4.
    """
    if is_a5(chip):
        raise ValueError(f"chip: the reservation probe runs on A2/A3 targets, got the A5 chip {chip}")
    if reserve_bytes <= 0 or reserve_bytes % 4:
        raise ValueError(f"reserve_bytes must be a positive multiple of 4, got {reserve_bytes}")
    t0 = time.perf_counter()
    binary = compiler_path(chip)
    if binary is None:
        return ReserveResult(None, reserve_bytes, reason="ascendnpu-ir is not installed")
    opt = os.path.join(os.path.dirname(binary), "bishengir-opt")
    text = strip_mix_mode(ttadapter_text)
    argv_opts = compile_argv(chip, launch_options, "IN", "OUT")[2:-2]
    key = _key(text, chip, argv_opts + [f"reserve={reserve_bytes}", f"planned={planned_ub}", f"probe={PROBE_VERSION}"],
               compiler_version(binary))
    entry = Path(cache_dir or default_cache_dir()) / key / RESERVE_FILE
    if use_cache and entry.is_file():
        try:
            res = ReserveResult(**json.loads(entry.read_text()))
            res.cached = True
            return res
        except (ValueError, TypeError):
            pass  # unreadable entry: probe again
    res = ReserveResult(None, reserve_bytes)
    try:
        with tempfile.TemporaryDirectory(prefix="fla-ascend-reserve-") as tmp:
            decided = _probe(text, chip, launch_options, binary, opt, reserve_bytes, planned_ub, timeout_s, tmp, res)
    except (OSError, ValueError) as e:  # a missing bishengir-opt, a module the edit cannot take
        res.fits, res.reason, decided = None, f"{type(e).__name__}: {e}", False
    res.seconds = round(time.perf_counter() - t0, 3)
    if decided:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(dir=entry.parent, prefix=".reserve-")
        with os.fdopen(fd, "w") as f:
            json.dump(res.to_dict(), f)
        os.replace(tmp_path, entry)
    return res
