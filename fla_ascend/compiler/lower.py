"""Lower one kernel launch with triton-ascend 3.2.0's own front end (``ttir`` and ``ttadapter``
stages), without CANN and without an NPU.

This mirrors what ``triton.compile`` does in triton-ascend 3.2.0 (``triton/compiler/compiler.py``,
``compile``; ``triton/runtime/jit.py``, ``JITFunction.run``) up to the ``ttadapter`` stage and
stops before ``npubin``, the only stage that needs ``bishengir-compile`` from CANN:

1. the kernel's binder turns the launch keyword arguments into a signature (``*fp32``, ``i32``...)
   and constants (constexprs and ``None`` pointers), as a real launch does;
2. ``ASTSource.make_ir`` runs the code generator (Python AST -> Triton IR);
3. the ``ttir`` stage runs the common Triton passes;
4. the ``ttadapter`` stage runs ``triton-adapter-opt`` (Triton IR -> linalg/memref/hivm IR).

It needs real ``JITFunction`` objects: the process must not run the Triton interpreter
(``fla_ascend.check.worker`` is started with ``TRITON_INTERPRET`` unset and
``FLA_ASCEND_DEVICE=npu`` for that reason).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from fla_ascend.tiling.chips import ChipSpec

__all__ = ["Lowered", "lower", "require_compiler"]


@dataclass
class Lowered:
    """Result of :func:`lower`: ``ok``; the failing ``stage`` and compiler ``error`` otherwise;
    the ``ttadapter`` text (linalg IR); ``seconds`` spent; the ``signature`` and ``constants``
    the kernel was specialised with."""

    ok: bool
    stage: str = ""
    error: str = ""
    ttadapter: str = ""
    seconds: float = 0.0
    signature: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)


def require_compiler(command: str = "check") -> None:
    """Raise ``RuntimeError`` unless triton-ascend is installed and the interpreter is off; the
    message names ``fla-ascend <command>`` (``check`` or ``estimate``) as the command to run."""
    try:
        import importlib.metadata as md

        md.version("triton-ascend")
    except Exception as e:
        raise RuntimeError(f"`fla-ascend {command}` needs triton-ascend 3.2.0, which cannot share an environment "
                           "with upstream Triton: create its own with `bash scripts/setup_env.sh ascend` and run "
                           f"`.venv-ascend/bin/fla-ascend {command}`") from e
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("TRITON_INTERPRET=1: kernels are interpreted functions and cannot be lowered; "
                           f"run it through `fla-ascend {command}` (it starts a clean worker process)")


_CACHE: dict = {}


def _options(chip: ChipSpec, launch_options: dict) -> dict:
    opts = {"compile_on_910_95": chip.compile_on_910_95}
    if chip.compile_on_910_95:  # defaults that 3.2.0 derives from a module-level flag
        opts.update(multibuffer=False, enable_auto_bind_sub_block=False, enable_select_analysis=True)
    opts.update(launch_options)
    return opts


def _adapter(stage, module, metadata) -> str:
    """Run the ``ttadapter`` stage (``triton-adapter-opt`` on the module's text, in a subprocess;
    the module itself is not changed). A crash of that binary without a diagnostic (an LLVM stack
    dump) is run once more before it is reported: one such crash, of a launch that lowers on every
    other run, was seen in the CPU tier on a loaded machine (2026-12-01)."""
    try:
        return stage(module, metadata)
    except Exception as e:
        err = e.stderr.decode("utf-8", "replace") if getattr(e, "stderr", None) else str(e)
        lines = err.strip().splitlines()
        crashed = "error:" not in err and ("Stack dump" in err or (lines and lines[-1].lstrip().startswith("#")))
        if not crashed:
            raise
    return stage(module, metadata)


def lower(fn, kwargs: dict, chip: ChipSpec, launch_options: dict | None = None) -> Lowered:
    """Lower ``fn`` (a ``triton.runtime.jit.JITFunction``) as launched with ``kwargs``.

    Args:
        fn: the ``@triton.jit`` kernel (not an interpreted function).
        kwargs: the launch keyword arguments: tensors (only dtype and alignment are read), ints,
            floats, ``None`` and constexpr values.
        chip: target SoC; A2/A3 chips lower identically (only ``compile_on_910_95`` changes the
            passes), so results are cached per ``compile_on_910_95``.
        launch_options: Ascend compile options of the launch (``multibuffer``...).

    Returns:
        :class:`Lowered`; a compiler error is returned (``ok=False``), not raised.

    Raises:
        TypeError: ``fn`` is not a JITFunction (e.g. the interpreter is on).
    """
    from triton.runtime.jit import JITFunction

    if not isinstance(fn, JITFunction):
        raise TypeError(f"fn must be a triton JITFunction, got {type(fn).__name__} (is TRITON_INTERPRET=1?)")
    from triton._C.libtriton import ir
    from triton.backends.ascend.compiler import AscendBackend
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource

    t0 = time.perf_counter()
    target = GPUTarget("npu", chip.name, 0)
    backend = AscendBackend(target)
    if fn.binder is None:
        fn.create_binder(backend)
    opts_in = _options(chip, dict(launch_options or {}))
    try:
        bound_args, sig_and_spec, _cvals, _ncvals, excess = fn.binder(**kwargs)
    except TypeError as e:
        return Lowered(ok=False, stage="bind", error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
    sigkeys = [fn.params[i].name for i in fn.non_constexpr_indices]
    signature = {k: ("*i8" if v == "none" else v) for k, v in zip(sigkeys, sig_and_spec[: len(sigkeys)])}
    bound_vals = tuple(bound_args.values())
    attrs = backend.get_attrs_descriptor(fn.params, bound_vals)
    const_params = attrs.get_constants()
    constants = {p.name: v for v, p in zip(bound_vals, fn.params)
                 if p.is_constexpr or p.num in const_params or v is None}
    key = (fn.__module__, fn.__name__, tuple(sorted(signature.items())), repr(sorted(constants.items())),
           repr(sorted(opts_in.items())), repr(attrs.to_dict() if hasattr(attrs, "to_dict") else ""))
    if key in _CACHE:
        return _CACHE[key]
    options = backend.parse_options(opts_in)
    src = ASTSource(fn, signature, constants, attrs)
    stages: dict = {}
    backend.add_stages(stages, options)
    metadata = {"hash": f"fla-ascend-check-{abs(hash(key))}", "target": target, **options.__dict__}
    stage = "make_ir"
    try:
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = src.make_ir(options, backend.get_codegen_implementation(), backend.get_module_map(), context)
        stage = "ttir"
        module = stages["ttir"](module, metadata)
        stage = "ttadapter"
        text = _adapter(stages["ttadapter"], module, metadata)
    except Exception as e:  # compiler errors: report, do not raise
        err = e.stderr.decode("utf-8", "replace") if getattr(e, "stderr", None) else f"{type(e).__name__}: {e}"
        res = Lowered(ok=False, stage=stage, error=err.strip()[-4000:], seconds=time.perf_counter() - t0,
                      signature=signature, constants={k: repr(v) for k, v in constants.items()})
    else:
        res = Lowered(ok=True, ttadapter=text, seconds=time.perf_counter() - t0, signature=signature,
                      constants={k: repr(v) for k, v in constants.items()})
    _CACHE[key] = res
    return res
