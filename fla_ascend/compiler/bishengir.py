"""Compile one lowered kernel with Ascend's own compiler, ``bishengir-compile`` (PyPI ``ascendnpu-ir``),
and read the facts of the compiled plan.

triton-ascend 3.2.0's NPU pipeline is ttir -> ttadapter (linalg) -> ``bishengir-compile`` -> ``hivmc``
-> ``kernel.o``. :func:`fla_ascend.compiler.lower.lower` gives the ttadapter text; :func:`compile_module`
runs the next stage with the argv triton-ascend builds (``triton/backends/ascend/compiler.py``,
``linalg_to_bin_enable_npu_compile_A2_A3`` and ``..._910_95``):

- A2/A3 (``Ascend910B*``, ``Ascend910_93*``), binary ``bishengir-compile``::

      bishengir-compile kernel.ttadapter.mlir --target=<chip> --enable-auto-multi-buffer=<True|False>
          --enable-auto-bind-sub-block=<True|False> [launch options] --enable-hfusion-compile=true
          --enable-hivm-compile=true --enable-triton-kernel-compile=true -o <dir>/kernel

- A5 (``Ascend910_95*``, ``Ascend950*``), binary ``bishengir-compile-a5`` (triton-ascend calls it
  through a ``bishengir-compile`` link): the same without ``--enable-hivm-compile``; multi-buffer and
  sub-block binding default to False there (``NPUOptions``: ``not is_compile_on_910_95``).

``--save-temps=<dir>`` is added so the compiler writes the module it hands to CANN's code generator
``hivmc`` as ``<dir>/module.hivm.opt.mlir``. ``hivmc`` is not on PyPI; a stub ``hivmc`` /
``hivmc-a5`` that exits 0 is put first on ``PATH`` so that a compile whose whole MLIR pipeline
passes (memory planning of UB, L1 = ``cbuf`` and L0C = ``cc`` included) returns 0; without it every
compile fails at the end and the A5 binary reruns its pipeline five times. Not visible this way:
code generation, registers, L0A/L0B limits, binary size, link errors (docs/check.md).

Results are cached by the sha256 of (ttadapter text without source locations, chip, options, compiler
version; :func:`ir_fingerprint`) under
``cache_dir`` (default ``$FLA_ASCEND_COMPILE_CACHE`` or ``~/.cache/fla-ascend/compile``).

Usage::

    from fla_ascend.compiler.bishengir import compile_module
    res = compile_module(ttadapter_text, "Ascend910B2", {}, timeout_s=300)
    if res.ok:
        res.facts.core_type, res.facts.planned_bytes["ub"], res.facts.cross_core_syncs
    else:
        res.error_class, res.needed_bytes, res.available_bytes, res.message
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

__all__ = ["CompileResult", "ModuleFacts", "compile_module", "compiler_path", "compiler_version",
           "compiler_available", "compile_argv", "parse_module", "classify_error", "default_cache_dir",
           "is_a5", "ir_fingerprint", "ERROR_CLASSES", "CACHE_ENV", "SPACES"]

CACHE_ENV = "FLA_ASCEND_COMPILE_CACHE"
"""Environment variable that overrides the default cache directory."""

SPACES = {"ub": "ub", "cbuf": "l1", "cc": "l0c"}
"""The compiled module's address spaces -> the names this module reports (UB, L1, L0C)."""

ERROR_CLASSES = ("ub_overflow", "l1_overflow", "l0c_overflow", "crash", "timeout", "invalid_target",
                 "no_compiler", "other")
"""Values of :attr:`CompileResult.error_class` (``""`` when the compile passed)."""

MODULE_NAME = "module.hivm.opt.mlir"

# triton-ascend 3.2.0's optional NPUOptions -> bishengir-compile flags, in its order. A5 lacks the
# three marked A2/A3-only (``linalg_to_bin_enable_npu_compile_910_95`` does not pass them).
_OPTION_FLAGS = [
    ("enable_hivm_auto_cv_balance", "--enable-hivm-auto-cv-balance", True),
    ("sync_solver", "--enable-hivm-graph-sync-solver", False),
    ("unit_flag", "--enable-hivm-unit-flag-sync", True),
    ("inject_barrier_all", "--enable-hivm-inject-barrier-all-sync", True),
    ("inject_block_all", "--enable-hivm-inject-block-all-sync", False),
    ("limit_auto_multi_buffer_only_for_local_buffer", "--limit-auto-multi-buffer-only-for-local-buffer", True),
    ("set_workspace_multibuffer", "--set-workspace-multibuffer", True),
    ("tile_mix_vector_loop", "--tile-mix-vector-loop", True),
    ("tile_mix_cube_loop", "--tile-mix-cube-loop", True),
    ("limit_auto_multi_buffer_of_local_buffer", "--limit-auto-multi-buffer-of-local-buffer", True),
    ("disable_auto_inject_block_sync", "--disable-auto-inject-block-sync", False),
]
_KNOWN_OPTIONS = {"multibuffer", "enable_auto_bind_sub_block"} | {k for k, _, _ in _OPTION_FLAGS}


# ----------------------------------------------------------------------------- results
@dataclass
class ModuleFacts:
    """What the compiled HIVM module (``module.hivm.opt.mlir``) says about the plan.

    Attributes:
        core_type: ``"AIV"`` (vector only), ``"AIC"`` (Cube only) or ``"MIX"``, from
            ``#hivm.module_core_type<...>``; ``"?"`` when absent.
        planned_bytes: per space (``ub``, ``l1``, ``l0c``): the highest ``offset + size`` over the
            module's ``hivm.hir.pointer_cast(<offset>)`` buffers, bytes; what the compiler's
            memory planning reserves on one core (a MIX kernel's UB is its vector side's).
        buffers: per space, the number of planned buffers (``pointer_cast`` ops).
        multibuffered: per space, buffers that alternate between two (or more) planned copies per
            loop iteration (an ``arith.select`` between two ``pointer_cast`` results).
        intra_core_syncs: static counts of ``set_flag``, ``wait_flag``, ``pipe_barrier`` (pipe
            synchronisation inside one core).
        cross_core_syncs: static counts of ``sync_block_set``, ``sync_block_wait`` (Cube <-> Vector
            hand-offs of a MIX kernel).
        dynamic_buffers: ``pointer_cast`` buffers whose offset or shape is not static (not counted
            in ``planned_bytes``).
        functions: names of the device functions (``<kernel>_mix_aic``/``_mix_aiv`` for MIX).
    """

    core_type: str = "?"
    planned_bytes: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    multibuffered: dict = field(default_factory=dict)
    intra_core_syncs: dict = field(default_factory=dict)
    cross_core_syncs: dict = field(default_factory=dict)
    dynamic_buffers: int = 0
    functions: list = field(default_factory=list)

    @property
    def n_intra_core_syncs(self) -> int:
        return sum(self.intra_core_syncs.values())

    @property
    def n_cross_core_syncs(self) -> int:
        return sum(self.cross_core_syncs.values())


@dataclass
class CompileResult:
    """Outcome of :func:`compile_module`.

    Attributes:
        ok: the compiler's whole MLIR pipeline passed (rc 0 with the stub ``hivmc``).
        chip: the ``--target`` name.
        error_class: one of :data:`ERROR_CLASSES`, ``""`` when ``ok``.
        message: the compiler's key error line (``ub overflow, requires ... bits``, the assertion,
            ``timeout after N s``...), ``""`` when ``ok``.
        space: for an overflow, ``"ub"``, ``"l1"`` or ``"l0c"``.
        needed_bytes, available_bytes: for an overflow, what the compiler asked for and had, bytes
            (the compiler prints bits).
        seconds: wall time of the compile (of the original compile for a cache hit).
        cpu_seconds: CPU time (user + system) of the compiler process; on a shared machine a steadier
            measure than ``seconds``.
        module_path: the compiled ``module.hivm.opt.mlir`` (in the cache), ``""`` when none was written.
        facts: :class:`ModuleFacts` of that module, None when none was written.
        returncode: the compiler's exit status (None on timeout).
        argv: the command line (the input and output paths as in a temporary directory).
        compiler_version: first line of ``--version``.
        key: the cache key (sha256 hex).
        cached: True when the result came from the cache.
        log: the compiler's stdout+stderr, last 20000 characters.
    """

    ok: bool
    chip: str
    error_class: str = ""
    message: str = ""
    space: str = ""
    needed_bytes: int | None = None
    available_bytes: int | None = None
    seconds: float = 0.0
    cpu_seconds: float | None = None
    module_path: str = ""
    facts: ModuleFacts | None = None
    returncode: int | None = None
    argv: list = field(default_factory=list)
    compiler_version: str = ""
    key: str = ""
    cached: bool = False
    log: str = ""

    @property
    def module_text(self) -> str:
        """The compiled HIVM module's text (``""`` when none was written)."""
        return Path(self.module_path).read_text() if self.module_path and os.path.exists(self.module_path) else ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> CompileResult:
        d = dict(d)
        if d.get("facts") is not None:
            d["facts"] = ModuleFacts(**d["facts"])
        return cls(**d)


# ----------------------------------------------------------------------------- compiler lookup
def is_a5(chip: str) -> bool:
    """True for A5 target names (``Ascend910_95*``, ``Ascend950*``), which ``bishengir-compile-a5`` takes."""
    c = chip.strip().lower()
    return c.startswith("ascend910_95") or c.startswith("ascend950")


def compiler_path(chip: str) -> str | None:
    """Path of the compiler binary for ``chip`` from the installed ``ascendnpuir`` package
    (``bishengir-compile``, or ``bishengir-compile-a5`` for A5), or None when not installed."""
    spec = importlib.util.find_spec("ascendnpuir")
    if spec is None or not spec.submodule_search_locations:
        return None
    name = "bishengir-compile-a5" if is_a5(chip) else "bishengir-compile"
    for loc in spec.submodule_search_locations:
        p = os.path.join(loc, "bin", name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def compiler_available(chip: str = "Ascend910B2") -> bool:
    """True when :func:`compiler_path` finds the binary for ``chip``."""
    return compiler_path(chip) is not None


@cache
def compiler_version(path: str) -> str:
    """First line of ``<path> --version`` (part of the cache key)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


_STUB_DIR: str | None = None


def _stub_dir() -> str:
    """A temporary directory holding ``hivmc`` and ``hivmc-a5`` that exit 0 (removed at exit)."""
    global _STUB_DIR
    if _STUB_DIR is None or not os.path.isdir(_STUB_DIR):
        d = tempfile.mkdtemp(prefix="fla-ascend-hivmc-")
        for name in ("hivmc", "hivmc-a5"):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write("#!/bin/sh\n"
                        "# stand-in for CANN's hivmc (not on PyPI): the module it gets is already planned\n"
                        "exit 0\n")
            os.chmod(p, 0o755)
        atexit.register(shutil.rmtree, d, True)
        _STUB_DIR = d
    return _STUB_DIR


def default_cache_dir() -> str:
    """``$FLA_ASCEND_COMPILE_CACHE``, else ``~/.cache/fla-ascend/compile``."""
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "fla-ascend", "compile")


def compile_argv(chip: str, launch_options: dict | None, input_path: str, output_base: str,
                 save_temps: str | None = None, binary: str = "bishengir-compile") -> list[str]:
    """The command line triton-ascend 3.2.0 runs for ``chip`` and ``launch_options``.

    Args:
        chip: target name (``Ascend910B2``, ``Ascend910_9599``...).
        launch_options: the launch's NPU compile options by their ``NPUOptions`` names
            (``multibuffer``, ``enable_auto_bind_sub_block``, ``unit_flag``, ``tile_mix_vector_loop``...);
            ``None`` values are left out as triton-ascend does.
        input_path, output_base: the ttadapter file and the ``-o`` base name.
        save_temps: directory for ``--save-temps`` (None: not passed).
        binary: argv[0].

    Raises:
        ValueError: an option triton-ascend does not pass to the compiler (named in the message),
            or one A5 does not take.
    """
    opts = dict(launch_options or {})
    unknown = sorted(set(opts) - _KNOWN_OPTIONS)
    if unknown:
        raise ValueError(f"launch_options: {unknown} are not compiler options triton-ascend 3.2.0 passes "
                         f"to bishengir-compile; known: {sorted(_KNOWN_OPTIONS)}")
    a5 = is_a5(chip)
    argv = [binary, input_path, f"--target={chip}"]
    for name in ("multibuffer", "enable_auto_bind_sub_block"):
        v = opts.get(name, not a5)  # NPUOptions defaults: not is_compile_on_910_95
        if v is not None:
            flag = "--enable-auto-multi-buffer" if name == "multibuffer" else "--enable-auto-bind-sub-block"
            argv.append(f"{flag}={v}")
    for name, flag, on_a5 in _OPTION_FLAGS:
        if opts.get(name) is None:
            continue
        if a5 and not on_a5:
            raise ValueError(f"launch_options: {name!r} is an A2/A3 option; triton-ascend does not pass it for "
                             f"the A5 chip {chip}")
        argv.append(f"{flag}={opts[name]}")
    argv += ["--enable-hfusion-compile=true"]
    if not a5:
        argv += ["--enable-hivm-compile=true"]
    argv += ["--enable-triton-kernel-compile=true"]
    if save_temps:
        argv.append(f"--save-temps={save_temps}")
    argv += ["-o", output_base]
    return argv


# ----------------------------------------------------------------------------- parsing
_CORE_RE = re.compile(r"#hivm\.module_core_type<(\w+)>")
_CONST_RE = re.compile(r"(%[\w.$-]+)\s*=\s*(?:arith\.constant\s+(-?\d+)\s*:\s*(?:i64|i32|index)"
                       r"|llvm\.mlir\.constant\((-?\d+)\s*:\s*(?:i64|i32)\))")
_PCAST_RE = re.compile(r"(%[\w.$-]+)\s*=\s*hivm\.hir\.pointer_cast\(([^)]*)\)[^:]*:\s*memref<([^>]*?)"
                       r"(?:,[^#]*)?#hivm\.address_space<(\w+)>>")
_SELECT_RE = re.compile(r"arith\.select\s+%[\w.$-]+\s*,\s*(%[\w.$-]+)\s*,\s*(%[\w.$-]+)\s*:\s*memref<")
_FUNC_RE = re.compile(r"func\.func\s+@(\w+)\(")
_INTRA = ("set_flag", "wait_flag", "pipe_barrier")
_OP_RE = re.compile(r"hivm\.hir\.(\w+)")


def _elem_bits(t: str) -> int | None:
    if t == "index":
        return 64
    m = re.search(r"(\d+)", t)
    return int(m.group(1)) if m and t[0] in "fibu" else None


def _memref_bytes(spec: str) -> int | None:
    parts = spec.strip().split("x")
    dims, dtype = parts[:-1], parts[-1].strip()
    bits = _elem_bits(dtype)
    if bits is None or any(not d.strip().isdigit() for d in dims):
        return None
    n = math.prod(int(d) for d in dims) if dims else 1
    return (n * bits + 7) // 8


def parse_module(text: str) -> ModuleFacts:
    """Read :class:`ModuleFacts` from a compiled HIVM module (``module.hivm.opt.mlir``).

    Offsets of ``pointer_cast`` are SSA constants (``%c4096_i64 = arith.constant 4096 : i64``);
    a buffer's size is its static memref shape x element bits / 8 (``i1`` counts one bit).
    """
    facts = ModuleFacts()
    m = _CORE_RE.search(text)
    facts.core_type = m.group(1) if m else "?"
    facts.functions = [f for f in _FUNC_RE.findall(text)
                       if not f.endswith("_function")
                       and not re.search(rf"func\.func\s+private\s+@{re.escape(f)}\(", text)]
    # SSA names are scoped per function (A5 modules name constants %4, %6...): parse each apart
    for body in re.split(r"\n\s*func\.func\s", text):
        consts = {name: int(a or b) for name, a, b in _CONST_RE.findall(body)}
        ptr_space: dict[str, str] = {}
        for name, offs, spec, space in _PCAST_RE.findall(body):
            sp = SPACES.get(space, space)
            ptr_space[name] = sp
            facts.buffers[sp] = facts.buffers.get(sp, 0) + 1
            size = _memref_bytes(spec)
            vals = [consts.get(o.strip()) for o in offs.split(",") if o.strip()]
            if size is None or not vals or any(v is None for v in vals):
                facts.dynamic_buffers += 1
                continue
            facts.planned_bytes[sp] = max(facts.planned_bytes.get(sp, 0), max(vals) + size)
        for a, b in _SELECT_RE.findall(body):
            if a in ptr_space and b in ptr_space:
                sp = ptr_space[a]
                facts.multibuffered[sp] = facts.multibuffered.get(sp, 0) + 1
    for op in _OP_RE.findall(text):
        if op in _INTRA:
            facts.intra_core_syncs[op] = facts.intra_core_syncs.get(op, 0) + 1
        elif op.startswith("sync_block"):
            facts.cross_core_syncs[op] = facts.cross_core_syncs.get(op, 0) + 1
    return facts


_OVERFLOW_RE = re.compile(r"(\w+) overflow, requires (\d+) bits while (\d+) bits available")
_SPACE_NAMES = {"ub": "ub", "cbuf": "l1", "l1": "l1", "cc": "l0c", "l0c": "l0c"}
_CRASH_MARKERS = ("Assertion", "LLVM ERROR", "Stack dump", "PLEASE submit a bug report", "Segmentation fault",
                  "Aborted", "terminate called")


def classify_error(log: str, returncode: int | None) -> tuple[str, str, str, int | None, int | None]:
    """Classify a failed compile from its output.

    Returns:
        ``(error_class, message, space, needed_bytes, available_bytes)``: an overflow gives
        ``"<space>_overflow"`` with the bytes (the compiler prints bits); an assertion, abort or
        signal ``"crash"``; an unknown ``--target`` ``"invalid_target"``; else ``"other"`` with the
        first ``error:`` line.
    """
    m = _OVERFLOW_RE.search(log)
    if m:
        sp = _SPACE_NAMES.get(m.group(1).lower(), m.group(1).lower())
        line = next((ln.strip() for ln in log.splitlines() if m.group(0) in ln), m.group(0))
        msg = line[line.find(m.group(1)):] if m.group(1) in line else line
        return f"{sp}_overflow" if sp in ("ub", "l1", "l0c") else "other", msg[:400], sp, \
            int(m.group(2)) // 8, int(m.group(3)) // 8
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    if "Cannot find option named" in log:
        return "invalid_target", next(ln for ln in lines if "Cannot find option named" in ln)[:400], "", None, None
    crash = (returncode is not None and returncode < 0) or any(k in log for k in _CRASH_MARKERS)
    if crash:
        for key in ("Assertion", "LLVM ERROR", "terminate called", "error:"):
            for ln in lines:
                if key in ln:
                    return "crash", ln[:400], "", None, None
        return "crash", f"compiler died (rc {returncode})", "", None, None
    for ln in lines:
        if "error:" in ln and "Failed to run BiSheng" not in ln:
            return "other", ln[ln.find("error:"):][:400], "", None, None
    return "other", (lines[-1][:400] if lines else f"rc {returncode}, no output"), "", None, None


# ----------------------------------------------------------------------------- compile
_LOC_DEF_RE = re.compile(r"^#loc\d*\s*=.*$\n?", re.M)
_LOC_REF_RE = re.compile(r"\s*loc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


def ir_fingerprint(text: str) -> str:
    """sha256 of an MLIR text without its source locations (``#locN = loc(...)`` lines and ``loc(...)``
    annotations). The same kernel lowered twice gives the same fingerprint, whatever the checkout's
    path and the location numbering (which varies between processes with line info on)."""
    stripped = _LOC_REF_RE.sub("", _LOC_DEF_RE.sub("", text))
    return hashlib.sha256(stripped.encode("utf-8")).hexdigest()


def _key(text: str, chip: str, argv_opts: list[str], version: str) -> str:
    blob = json.dumps({"ttadapter": ir_fingerprint(text), "chip": chip, "options": argv_opts, "compiler": version},
                      sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _run(argv: list[str], env: dict, timeout_s: float) -> tuple[int | None, str, float]:
    """Run ``argv`` in its own process group; on timeout kill the group.

    Returns:
        ``(rc or None on timeout, stdout+stderr, CPU seconds of the process)``; the CPU time comes from
        ``wait4`` (user + system), so it does not count time spent waiting for a busy machine's cores.
    """
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    rc = None
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _pid, status, usage = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    p.returncode = rc if rc is not None else -signal.SIGKILL  # reaped here: keep Popen from waiting again
    reader.join()
    p.stdout.close()
    return rc, b"".join(chunks).decode("utf-8", "replace"), usage.ru_utime + usage.ru_stime


def strip_mix_mode(ttadapter_text: str) -> str:
    """The ttadapter text without its ``mix_mode`` attribute, as triton-ascend hands it to the compiler."""
    return re.sub(r', mix_mode\s*=\s*"[^"]*"', "", ttadapter_text)


def compiler_env() -> dict:
    """The environment of a ``bishengir-compile`` run: this one with the stub ``hivmc`` first on ``PATH``."""
    env = dict(os.environ)
    env["PATH"] = _stub_dir() + os.pathsep + env.get("PATH", "")
    return env


def compile_module(ttadapter_text: str, chip, launch_options: dict | None = None, timeout_s: float = 600.0,
                   cache_dir: str | None = None, use_cache: bool = True) -> CompileResult:
    """Compile one kernel's ttadapter module with ``bishengir-compile`` for ``chip``.

    Args:
        ttadapter_text: the ``ttadapter`` stage's text (:attr:`fla_ascend.compiler.lower.Lowered.ttadapter`);
            its ``mix_mode`` attribute is removed first, as triton-ascend does.
        chip: target name or :class:`fla_ascend.tiling.chips.ChipSpec` (its ``name``); A5 names go to
            ``bishengir-compile-a5``.
        launch_options: the launch's NPU compile options (see :func:`compile_argv`).
        timeout_s: wall-clock limit; a compile running longer is killed and reported as ``timeout``.
        cache_dir: cache directory (default :func:`default_cache_dir`). Each entry is a directory named
            by the key holding ``result.json`` and the module.
        use_cache: False: compile even when an entry exists (the entry is then replaced).

    Returns:
        :class:`CompileResult`; a compiler failure is a result (``ok=False``), not an exception.
        Without ``ascendnpu-ir`` installed: ``ok=False, error_class="no_compiler"``.

    Raises:
        TypeError: ``ttadapter_text`` is not a str.
        ValueError: empty text, ``timeout_s <= 0``, or a launch option :func:`compile_argv` rejects.
    """
    if not isinstance(ttadapter_text, str):
        raise TypeError(f"ttadapter_text must be a str, got {type(ttadapter_text).__name__}")
    if not ttadapter_text.strip():
        raise ValueError("ttadapter_text is empty")
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    chip_name = getattr(chip, "name", chip)
    if not isinstance(chip_name, str):
        raise TypeError(f"chip must be a name or ChipSpec, got {type(chip).__name__}")
    binary = compiler_path(chip_name)
    argv_opts = compile_argv(chip_name, launch_options, "IN", "OUT")[2:-2]
    if binary is None:
        return CompileResult(ok=False, chip=chip_name, error_class="no_compiler",
                             message="ascendnpu-ir is not installed (pip install ascendnpu-ir, or the npu-check extra)",
                             argv=argv_opts)
    version = compiler_version(binary)
    text = strip_mix_mode(ttadapter_text)
    key = _key(text, chip_name, argv_opts, version)
    cdir = Path(cache_dir or default_cache_dir())
    entry = cdir / key
    if use_cache and (entry / "result.json").is_file():
        try:
            res = CompileResult.from_dict(json.loads((entry / "result.json").read_text()))
            if res.error_class != "timeout" or timeout_s <= (res.seconds or 0):
                res.cached = True
                res.module_path = str(entry / MODULE_NAME) if (entry / MODULE_NAME).is_file() else ""
                return res
        except (ValueError, TypeError, KeyError):
            pass  # unreadable entry: compile again
    with tempfile.TemporaryDirectory(prefix="fla-ascend-compile-") as tmp:
        src = os.path.join(tmp, "kernel.ttadapter.mlir")
        Path(src).write_text(text)
        temps = os.path.join(tmp, "temps")
        os.makedirs(temps)
        argv = compile_argv(chip_name, launch_options, src, os.path.join(tmp, "kernel"), save_temps=temps,
                            binary=binary)
        t0 = time.perf_counter()
        rc, log, cpu = _run(argv, compiler_env(), timeout_s)
        seconds = time.perf_counter() - t0
        res = CompileResult(ok=rc == 0, chip=chip_name, seconds=seconds, cpu_seconds=cpu, returncode=rc,
                            argv=[os.path.basename(binary)] + [a.replace(tmp, "<tmp>") for a in argv[1:]],
                            compiler_version=version, key=key, log=log[-20000:])
        if rc is None:
            res.error_class, res.message = "timeout", f"timeout after {timeout_s:g} s"
        elif rc != 0:
            res.error_class, res.message, res.space, res.needed_bytes, res.available_bytes = classify_error(log, rc)
        mod = os.path.join(temps, MODULE_NAME)
        has_module = os.path.isfile(mod)
        if has_module:
            res.facts = parse_module(Path(mod).read_text())
        # write the entry atomically (parallel workers may compile the same key)
        cdir.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=cdir))
        if has_module:
            shutil.copyfile(mod, stage / MODULE_NAME)
        (stage / "result.json").write_text(json.dumps(res.to_dict(), indent=1, default=str))
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.replace(stage, entry)
        except OSError:  # another process won the race: keep its entry
            shutil.rmtree(stage, ignore_errors=True)
        res.module_path = str(entry / MODULE_NAME) if (entry / MODULE_NAME).is_file() else ""
        return res
