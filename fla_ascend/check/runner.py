"""Run the check: discover kernels, capture their launches from the real launchers, lower each
one for a chip, read the IR, apply the rules, and decide the exit status.

Runs only in a worker process started by :func:`fla_ascend.check.cli.run` (kernels must be
compiled ``JITFunction`` objects, not interpreted ones). In that process the backend layer
believes it targets an NPU (``FLA_ASCEND_DEVICE=npu``); :func:`fla_ascend.compiler.capture.capture`
makes the chip's target (``capture_target``: its core counts and UB, CPU tensors) the active one and records launches
instead of running them, so the launch plan, tile sizes and options are exactly what the launcher
computes on that chip.
"""
from __future__ import annotations

import fnmatch
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from fla_ascend.check import lint
from fla_ascend.compiler import irscan
from fla_ascend.compiler.bishengir import ir_fingerprint
from fla_ascend.compiler.capture import Launch, capture
from fla_ascend.compiler.lower import lower
from fla_ascend.tiling import ub
from fla_ascend.tiling.chips import ChipSpec
from fla_ascend.tiling.grid import MAX_GRID

__all__ = ["Case", "discover_kernels", "check_cases", "CaseResult",
           "COMPILE_OPTIONS", "select_cases"]

COMPILE_OPTIONS = ("multibuffer", "unit_flag", "enable_auto_bind_sub_block", "tile_mix_vector_loop",
                   "tile_mix_cube_loop", "limit_auto_multi_buffer_of_local_buffer", "enable_hivm_auto_cv_balance")
"""Launch keyword arguments that are Ascend compile options (passed to lowering and bishengir-compile)."""


@dataclass
class Case:
    """One launch scenario of one kernel, as the registry lists it.

    Attributes:
        kernel: ``"<module>.<name>"`` of the ``@triton.jit`` kernel.
        config: short label (``"K128-BT64"``, ``"varlen"``).
        kind: the core kind its launch plan should use: ``"cube"`` (has ``tl.dot``) or ``"vector"``.
        run: calls the op's launcher on small CPU tensors (launches are captured, not run); or
            returns ``(grid, kwargs)`` for a direct launch (test kernels).
        tiles: the kernel's declared live tiles for the UB model (``ub.Tile`` list), or None.
        sizes: optional ``constexprs -> sizes`` for ``tiles`` (default: the constexprs plus
            ``in_bytes``, the element size of the first floating tensor argument).
        op: the public op whose launcher the scenario calls (``"l2norm"``), for
            ``fla-ascend check --ops``; ``None`` when the registry names none.
    """

    kernel: str
    config: str
    kind: str
    run: Callable
    tiles: object = None
    sizes: Callable | None = None
    op: str | None = None


def select_cases(cases: list[Case], kernels: list[str] | None = None, ops: list[str] | None = None,
                 unregistered: list[str] = ()) -> list[Case]:
    """The cases of the kernels and ops named (``fla-ascend check --kernels`` / ``--ops``).

    Args:
        cases: the registry's cases.
        kernels: kernel names: the short name (``l2norm_fwd_kernel``), the full
            ``<module>.<name>``, or a glob over short names (``chunk_*_kernel``); ``None``: no
            kernel named.
        ops: op names as the registry gives them (:attr:`Case.op`); ``None``: no op named.
        unregistered: full names of kernels found in the package without registry entry: a name
            among them is refused with that reason instead of "unknown".

    Returns:
        Every case when neither ``kernels`` nor ``ops`` is given; else the cases whose kernel is
        named or whose op is named (the union), in registry order.

    Raises:
        ValueError: a kernel or op name matches nothing; the message lists the known names.
    """
    if not kernels and not ops:
        return list(cases)
    short = {c.kernel.rsplit(".", 1)[-1]: c.kernel for c in cases}
    known_ops = sorted({c.op for c in cases if c.op})
    chosen: set[str] = set()
    for name in kernels or []:
        hits = {short[k] for k in short if fnmatch.fnmatchcase(k, name)} | {c.kernel for c in cases if c.kernel == name}
        if not hits:
            stray = [k for k in unregistered if k == name or k.rsplit(".", 1)[-1] == name]
            if stray:
                raise ValueError(f"--kernels: {name!r} ({stray[0]}) has no registry entry, so nothing checks it; "
                                 "add a Kernel to its op's spec (fla_ascend/ops/<op>/spec.py)")
            raise ValueError(f"--kernels: unknown kernel {name!r}; known kernels: {', '.join(sorted(short))}")
        chosen |= hits
    for name in ops or []:
        if name not in known_ops:
            raise ValueError(f"--ops: unknown op {name!r}; "
                             f"known ops: {', '.join(known_ops) or '(the registry names none)'}")
        chosen |= {c.kernel for c in cases if c.op == name}
    return [c for c in cases if c.kernel in chosen]


def discover_kernels(package: str = "fla_ascend.ops") -> tuple[dict, list]:
    """All ``@triton.jit`` kernels named ``*_kernel`` defined in ``package`` and its submodules.

    Returns:
        ``({"<module>.<name>": JITFunction}, [(module, error message) for modules that failed to import])``.
    """
    from triton.runtime.jit import JITFunction

    kernels, errors = {}, []
    try:
        pkg = importlib.import_module(package)
    except Exception as e:
        return {}, [(package, f"{type(e).__name__}: {e}")]
    mods = [package] + [m.name for m in pkgutil.walk_packages(pkg.__path__, package + ".")]
    for name in mods:
        try:
            mod = importlib.import_module(name)
        except Exception as e:
            errors.append((name, f"{type(e).__name__}: {e}"))
            continue
        for attr, obj in vars(mod).items():
            if isinstance(obj, JITFunction) and attr.endswith("_kernel") and obj.fn.__module__ == name:
                kernels[f"{name}.{attr}"] = obj
    return kernels, errors


@dataclass
class CaseResult:
    """Everything reported for one kernel launch (one specialisation) and chip.

    Lowering fields: ``lowered``, ``stage``/``error`` of a failed lowering, ``mix_mode``,
    ``ttadapter_sha256`` (of the lowered text without source locations: ``compile.ir_fingerprint``),
    ``options`` (the launch's compile options).
    Compile fields (filled by :mod:`fla_ascend.check.compiled`; ``compiled`` is None when the
    compiler was not run): ``core_type``, ``planned`` (bytes per space ``ub``/``l1``/``l0c``),
    ``share`` (of the chip's capacity), ``multibuffered``, ``intra_core_syncs``,
    ``cross_core_syncs``, ``compile_seconds`` (wall) and ``compile_cpu_seconds``, ``compile_error_class``
    and ``compile_message``.
    ``model_bytes`` is the UB model's charged bytes (:func:`fla_ascend.tiling.ub.predict`) and
    ``model_vs_plan`` its ratio to the planned UB. ``ub_reserve``: on A2/A3, for a plan above the UB
    headroom, the reservation probe's outcome (:class:`fla_ascend.compiler.reserve.ReserveResult`).
    ``configs`` lists every scenario that gave this
    same specialisation (merged rows).
    """

    kernel: str
    config: str
    chip: str
    lowered: bool = False
    stage: str = ""
    error: str = ""
    seconds: float = 0.0
    kind: str = ""
    launcher_kind: str | None = None
    mix_mode: str = "?"
    grid: int = 0
    cores: int = 0
    multibuffer: int = 2
    ub_bytes: int = 0
    options: dict = field(default_factory=dict)
    ttadapter_sha256: str = ""
    model_bytes: int | None = None
    matmuls: int = 0
    compiled: bool | None = None
    compile_error_class: str = ""
    compile_message: str = ""
    compile_needed_bytes: int | None = None
    compile_available_bytes: int | None = None
    compile_seconds: float | None = None
    compile_cpu_seconds: float | None = None
    compile_cached: bool = False
    core_type: str = ""
    planned: dict = field(default_factory=dict)
    share: dict = field(default_factory=dict)
    multibuffered: dict = field(default_factory=dict)
    intra_core_syncs: int | None = None
    cross_core_syncs: int | None = None
    module_path: str = ""
    model_vs_plan: float | None = None
    ub_reserve: dict = field(default_factory=dict)
    configs: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    ttadapter: str = field(default="", repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("ttadapter")
        return d


def _finding(code, message, severity="error", where=""):
    return {"code": code, "message": message, "severity": severity, "where": where}


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for key in ("error:", "Error", "Assertion", "LLVM ERROR"):
        for ln in lines:
            if key in ln and not ln.startswith("#"):
                return ln[:300]
    if any("Stack dump" in ln for ln in lines):
        return "the adapter (triton-adapter-opt) crashed; see the JSON report for the stack dump"
    return lines[-1][:300] if lines else ""


def _sizes_for(case: Case, launch: Launch) -> dict:
    import torch

    sizes = {k: int(v) for k, v in launch.kwargs.items()
             if isinstance(v, (int, bool)) and not isinstance(v, torch.Tensor)}
    for v in launch.kwargs.values():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            sizes["in_bytes"] = v.element_size()
            break
    if not case.sizes:
        return sizes
    # case.sizes also sees the string constexprs (AI_MODE...) and returns int sizes
    return case.sizes({**sizes, **{k: v for k, v in launch.kwargs.items() if isinstance(v, str)}})


def _evaluate(case: Case, launch: Launch, chip: ChipSpec) -> CaseResult:
    name = case.kernel.rsplit(".", 1)[-1]
    r = CaseResult(kernel=case.kernel, config=case.config, chip=chip.name, kind=case.kind,
                   launcher_kind=launch.kind, ub_bytes=chip.ub_bytes)
    r.grid = 1
    for g in launch.grid:
        r.grid *= int(g)
    r.cores = chip.cores(case.kind)
    opts = {k: v for k, v in launch.options.items() if k in COMPILE_OPTIONS}
    r.options = dict(opts)
    r.configs = [case.config]
    for k in ("num_warps", "num_stages"):
        if k in launch.options:
            r.findings.append(_finding("launch_num_warps", f"{k}={launch.options[k]} reached the NPU launch"))
    low = lower(launch.fn, launch.kwargs, chip, opts)
    r.lowered, r.stage, r.error, r.seconds = low.ok, low.stage, low.error, low.seconds
    if not low.ok:
        r.findings.append(_finding("lowering_failed", f"stage {low.stage}: {_first_error(low.error)}"))
        return r
    r.ttadapter = low.ttadapter
    r.ttadapter_sha256 = ir_fingerprint(low.ttadapter)
    facts = irscan.scan(low.ttadapter, name)
    r.mix_mode, r.matmuls = facts.mix_mode, facts.matmuls
    mb_on = opts.get("multibuffer", chip.default_multibuffer)
    r.multibuffer = 2 if mb_on else 1
    expected = {"cube": ("aic", "mix"), "vector": ("aiv",)}[case.kind]
    if facts.mix_mode not in expected:
        r.findings.append(_finding("mix_mode_mismatch", f"IR mix_mode={facts.mix_mode} but the registry says "
                                   f"{case.kind} (expects {'/'.join(expected)})"))
    if launch.kind is None:
        r.findings.append(_finding("no_task_plan", "the launcher did not size its grid with tiling.task_plan"))
    elif launch.kind != case.kind:
        r.findings.append(_finding("kind_mismatch", f"launcher asked task_plan for {launch.kind!r} cores, the "
                                   f"kernel is {case.kind!r}"))
    if facts.dynamic_allocs:
        r.findings.append(_finding("dynamic_alloc", f"{facts.dynamic_allocs} allocation(s) of non-static size "
                                   "(not counted)", "info"))
    for w in facts.discrete_loops:
        r.findings.append(_finding("gather_loop", "scalar gather/scatter loop (DiscreteMemAccess)", where=w))
    for s in {(x.arg, x.sizes, x.strides, x.where): x for x in facts.strided}.values():
        r.findings.append(_finding("strided_dma",
                                   f"DMA on {s.arg} with innermost stride {s.strides.split(',')[-1].strip()} "
                                   f"(sizes [{s.sizes}], strides [{s.strides}])", where=s.where))
    if facts.int_compares:
        r.findings.append(_finding("vector_int_compare", f"{len(facts.int_compares)} integer compare(s) on vectors "
                                   f"(scalar fallback on A2/A3)", "info",
                                   ", ".join(sorted(set(facts.int_compares))[:4])))
    if facts.i64_adds:
        r.findings.append(_finding("vector_i64_add", f"{len(facts.i64_adds)} int64 add(s) on vectors", "info",
                                   ", ".join(sorted(set(facts.i64_adds))[:4])))
    if r.grid > MAX_GRID:
        r.findings.append(_finding("grid_too_large", f"grid {r.grid} > {MAX_GRID}"))
    if r.grid > r.cores:
        r.findings.append(_finding("grid_over_cores", f"grid {r.grid} > {r.cores} {case.kind} cores: extra rounds"))
    if case.tiles is not None:
        try:
            est = ub.predict(case.tiles, _sizes_for(case, launch), chip, multibuffer=r.multibuffer, margin=1.0)
            r.model_bytes = est.charged  # compared with the compiler's planned UB (fla_ascend.check.compiled)
        except (ValueError, TypeError) as e:
            r.findings.append(_finding("tile_model_error", str(e)))
    return r


def _dedupe(launches: list[Launch], fn) -> list[Launch]:
    out, seen = [], set()
    for la in launches:
        if la.fn is not fn:
            continue
        key = repr(sorted((k, (tuple(v.shape), str(v.dtype)) if hasattr(v, "shape") else v)
                          for k, v in la.kwargs.items()))
        if key not in seen:
            seen.add(key)
            out.append(la)
    return out


def check_cases(cases: list[Case], chip: ChipSpec, kernels: dict | None = None) -> list[CaseResult]:
    """Capture, lower and evaluate every case for ``chip``.

    Args:
        cases: registry cases.
        chip: target SoC.
        kernels: ``{"<module>.<name>": JITFunction}``; when None, each case's kernel is imported.

    Returns:
        One :class:`CaseResult` per captured launch of the case's kernel (a case whose run
        launches nothing of its kernel gives a result with a ``not_launched`` finding).
    """
    results = []
    for case in cases:
        mod, name = case.kernel.rsplit(".", 1)
        fn = (kernels or {}).get(case.kernel) or getattr(importlib.import_module(mod), name)
        try:
            with capture(chip) as launches:
                ret = case.run()
        except Exception as e:  # the launcher itself failed: report it
            r = CaseResult(kernel=case.kernel, config=case.config, chip=chip.name, kind=case.kind)
            r.findings.append(_finding("launcher_failed", f"{type(e).__name__}: {e}"))
            results.append(r)
            continue
        if isinstance(ret, tuple) and len(ret) == 2 and isinstance(ret[1], dict):
            grid, kw = ret
            params = {p.name for p in fn.params}
            launches.append(Launch(fn, tuple(grid), {k: v for k, v in kw.items() if k in params},
                                   {k: v for k, v in kw.items() if k not in params}, case.kind))
        mine = _dedupe(launches, fn)
        if not mine:
            r = CaseResult(kernel=case.kernel, config=case.config, chip=chip.name, kind=case.kind)
            r.findings.append(_finding("not_launched", "the case's run() launched nothing of this kernel"))
            results.append(r)
        for i, la in enumerate(mine):
            r = _evaluate(case, la, chip)
            if len(mine) > 1:
                r.config = f"{case.config}#{i}"
            results.append(r)
    return results


def lint_modules(kernels: dict) -> list[dict]:
    """Source-lint every module that defines a kernel in ``kernels``; returns finding dicts."""
    out = []
    files = sorted({inspect.getsourcefile(fn.fn) for fn in kernels.values()})
    for f in files:
        for fd in lint.lint_file(f):
            d = asdict(fd)
            d["file"] = f.split("/fla_ascend/")[-1] if "/fla_ascend/" in f else f
            out.append(d)
    return out


def apply_allowlist(results: list[CaseResult], lint_findings: list[dict], allow: list) -> None:
    """Mark findings matched by ``allow`` entries (``(kernel_glob, code, config_glob, reason)``) as
    accepted (``accepted`` = the reason). Lint findings match on their function name."""
    for r in results:
        for f in r.findings:
            for kglob, code, cglob, reason in allow:
                if code == f["code"] and fnmatch.fnmatch(r.kernel.rsplit(".", 1)[-1], kglob) and \
                        fnmatch.fnmatch(r.config, cglob):
                    f["accepted"] = reason
    for f in lint_findings:
        for kglob, code, _cglob, reason in allow:
            if code == f["code"] and fnmatch.fnmatch(f["function"], kglob):
                f["accepted"] = reason


def failures(results: list[CaseResult], lint_findings: list[dict], missing: list[str],
             import_errors: list) -> list[str]:
    """Lines explaining why the check fails (empty: it passes)."""
    out = [f"import failed: {m}: {e}" for m, e in import_errors]
    out += [f"kernel without registry entry: {k}" for k in missing]
    for r in results:
        for f in r.findings:
            if f["severity"] == "error" and not f.get("accepted"):
                out.append(f"{r.kernel.rsplit('.', 1)[-1]} [{r.config}] {r.chip}: {f['code']}: {f['message']}")
    for f in lint_findings:
        if f["severity"] == "error" and not f.get("accepted"):
            out.append(f"{f['file']}:{f['line']} {f['function']}: {f['code']}: {f['message']}")
    return out
