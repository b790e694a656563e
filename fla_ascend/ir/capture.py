"""IR capture of an op's kernels at every compilation stage, and listing / diffing of captures.

``capture`` works in two subprocesses (both ``python -m fla_ascend.ir.capture``):

1. **trace**: the op runs once on small example inputs under the Triton interpreter
   (``FLA_ASCEND_DEVICE=cpu``); every kernel launch is recorded: the kernel's module and name,
   each argument's type (tensor dtype and 16-byte alignment, int / float / bool value) and the
   ``tl.constexpr`` values. Inputs are the op spec's (:mod:`fla_ascend.ops.catalog`: its first
   named shape scaled down for the CPU, or the shape given).
2. **compile**: with the interpreter off, each distinct launch is compiled with
   ``triton.compile(ASTSource(...), target=GPUTarget(...))`` and Triton's own dump
   (``TRITON_KERNEL_DUMP=1``, ``TRITON_ALWAYS_COMPILE=1``) keeps every stage it reached.
   The JIT's specialisation is replicated from the traced values: pointers 16-byte aligned and
   integers divisible by 16 get ``tt.divisibility=16``, integers equal to 1 become constants,
   except parameters in ``do_not_specialize``.

Targets (checked on this CPU machine, 2026-11-29):

- ``npu`` needs triton-ascend (3.2.0): stages ``ttir`` and ``ttadapter`` are produced without
  CANN; the binary stage stops with ``ASCEND_HOME_PATH is not set``, recorded as ``stopped``.
- ``cuda`` needs upstream Triton (3.9.0 checked): ``ttir``, ``ttgir``, ``llir``, ``ptx`` and
  ``cubin`` (Triton's bundled ptxas) all compile without a GPU; binary stages are listed in
  the manifest but not kept. Each kernel's ``resources`` (:func:`cuda_resources`: registers,
  spills, shared memory, ptxas performance warnings) come from the same offline compile.

Each Triton flavour owns the ``triton`` module, so the target decides which Python runs the
capture (``python=``: an interpreter whose environment has the target's Triton).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fla_ascend.round.sources import PACKAGE, package_root

SCHEMA = "fla-ascend-ir/1"
STAGE_ORDER = ("ttir", "ttadapter", "ttgir", "llir", "ptx", "cubin", "sass", "npubin")
TARGETS = {"npu": ("triton-ascend", "Ascend910B2"), "cuda": ("triton", "90")}


class IRCaptureError(RuntimeError):
    """Capture failed (wrong Triton for the target, op failed to run, nothing compiled)."""


# ---------------------------------------------------------------------------- trace (child)
def _describe(value, constexpr: bool) -> dict:
    import torch

    if constexpr:
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"kind": "constexpr", "value": value}
        raise IRCaptureError(f"constexpr value of type {type(value).__name__} cannot be recorded")
    if isinstance(value, torch.Tensor):
        name = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                torch.int32: "i32", torch.int64: "i64", torch.int16: "i16", torch.int8: "i8",
                torch.uint8: "u8", torch.bool: "i1"}.get(value.dtype)
        if name is None:
            raise IRCaptureError(f"tensor dtype {value.dtype} has no Triton pointer type here")
        return {"kind": "tensor", "type": f"*{name}", "aligned": value.data_ptr() % 16 == 0}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "int", "value": value}
    if isinstance(value, float):
        return {"kind": "float", "value": value}
    raise IRCaptureError(f"argument of type {type(value).__name__} cannot be recorded")


def _trace(req: dict) -> dict:
    import inspect

    import fla_ascend.backend  # noqa: F401  (first: it switches the interpreter on before triton loads)

    from triton.runtime.interpreter import InterpretedFunction

    launches: dict[str, dict] = {}
    orig = InterpretedFunction.__getitem__

    def getitem(self, grid):
        run = orig(self, grid)

        def call(*args, **kwargs):
            sig = inspect.signature(self.fn)
            names = list(sig.parameters)
            options = {k: v for k, v in kwargs.items() if k not in names}
            kwargs = {k: v for k, v in kwargs.items() if k in names}
            bound = sig.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            params = []
            for name, p in sig.parameters.items():
                is_c = "constexpr" in str(p.annotation)
                params.append({"name": name, **_describe(bound.arguments.get(name), is_c)})
            rec = {"module": self.fn.__module__, "name": self.fn.__name__, "params": params,
                   "options": {k: v for k, v in options.items() if isinstance(v, (bool, int, float, str))}}
            key = hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:10]
            launches.setdefault(key, rec | {"id": f"{self.fn.__name__}-{key}"})
            return run(*args, **kwargs)

        return call

    InterpretedFunction.__getitem__ = getitem
    from fla_ascend import backend

    target = backend.current()
    if req.get("emulate"):
        # Launch plans and launch options as on the target (its device kind, core counts, compiled
        # kernels' options), while the kernels still run under the interpreter on CPU tensors.
        cube, vector = req["cores"]
        target = target.replace(device_type=req["target"], interpret=False, cube_cores=cube, vector_cores=vector,
                                tensor_device="cpu")
    with backend.use(target):
        return _trace_op(req, launches)


def _trace_op(req: dict, launches: dict) -> dict:
    """Run ``req``'s op (forward, or forward and backward) under the active target; ``launches``
    fills through :func:`_trace`'s recording hook."""
    import torch

    dtype = getattr(torch, req["dtype"])
    device = torch.device("cpu")
    op = req["op"]
    from fla_ascend.bench import cases
    from fla_ascend.ops import catalog
    from fla_ascend.ops.spec import build_inputs
    from fla_ascend.ops.spec import call as call_op

    if op not in known_ops():
        raise IRCaptureError(f"op {op!r} is not in the op catalogue {known_ops()}")
    spec = catalog.get(op)
    if req.get("shape"):  # as given: the interpreter runs it, so keep T small
        _, shape = cases.parse_shapes([req["shape"]])[0]
        shape = spec.complete_shape(shape)
    else:
        shape = cases.scale_for_cpu(spec.complete_shape(catalog.named_shapes()[spec.shapes[0]]), quick=True)
    if isinstance(shape, str):
        raise IRCaptureError(shape)
    inputs = build_inputs(spec, shape, dtype, device, 0, grad=req["mode"] == "fwdbwd")
    call = lambda: call_op(spec, spec.entry, inputs)  # noqa: E731
    out = call()
    if req["mode"] == "fwdbwd":
        outs = out.values() if isinstance(out, dict) else (out if isinstance(out, (tuple, list)) else [out])
        loss = sum(o.float().sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
        loss.backward()
    return {"launches": list(launches.values())}


# ---------------------------------------------------------------------------- compile (child)
def _compile(req: dict) -> dict:
    import importlib
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = req["target"]
    if target == "npu":
        tgt = GPUTarget("npu", req["arch"], 0)
    else:
        tgt = GPUTarget("cuda", int(req["arch"]), 32)
    new_api = "constexprs" in inspect.signature(ASTSource.__init__).parameters
    dump = Path(os.environ["TRITON_DUMP_DIR"])
    out = Path(req["out"])
    kernels = []
    for rec in req["launches"]:
        kernel = getattr(importlib.import_module(rec["module"]), rec["name"])
        dns = set()
        for p in getattr(kernel, "params", []):
            if getattr(p, "do_not_specialize", False):
                dns.add(p.name)
        signature, constants, attrs_new, fake_vals = {}, {}, {}, []
        for i, p in enumerate(rec["params"]):
            n, kind = p["name"], p["kind"]
            if kind == "constexpr" or kind == "none":
                constants[n] = p.get("value")
                signature[n] = "constexpr"
                fake_vals.append(p.get("value"))
                continue
            if kind == "tensor":
                signature[n] = p["type"]
                if p["aligned"]:
                    attrs_new[(i,)] = [["tt.divisibility", 16]]
                fake_vals.append(_FakePtr(p["aligned"]))
            elif kind == "int":
                v = p["value"]
                if v == 1 and n not in dns:
                    constants[n], signature[n] = 1, "constexpr"
                else:
                    signature[n] = "i32" if -(2**31) <= v < 2**31 else "i64"
                    if v % 16 == 0 and n not in dns:
                        attrs_new[(i,)] = [["tt.divisibility", 16]]
                fake_vals.append(v)
            elif kind == "bool":
                signature[n] = "i1"
                fake_vals.append(p["value"])
            elif kind == "float":
                signature[n] = "fp32"
                fake_vals.append(p["value"])
        if new_api:
            src = ASTSource(fn=kernel, signature=signature,
                            constexprs={(i,): constants[p["name"]] for i, p in enumerate(rec["params"])
                                        if p["name"] in constants},
                            attrs=attrs_new)
        else:  # triton 3.2: constants by name, non-constexpr signature, backend attrs descriptor
            from triton.compiler import make_backend

            backend = make_backend(tgt)
            attrs = backend.get_attrs_descriptor(kernel.params, fake_vals)
            for idx in attrs.get_constants():
                constants[kernel.params[idx].name] = fake_vals[idx]
            sig = {}
            for p in rec["params"]:
                n = p["name"]
                if p["kind"] == "none":
                    sig[n] = "*i8"
                elif n in constants and p["kind"] == "int" and p["value"] == 1:
                    sig[n] = "i32"
                elif signature[n] != "constexpr":
                    sig[n] = signature[n]
            src = ASTSource(kernel, sig, constants, attrs)
        before = set(dump.rglob("*"))
        stopped, resources = None, None
        try:
            compiled = triton.compile(src, target=tgt, options=rec.get("options") or None)
        except Exception as e:  # a stage that needs the vendor toolchain ends the capture there
            msg = str(e).strip().splitlines()
            stopped = next((ln for ln in msg if "ASCEND_HOME_PATH" in ln),
                           next((ln for ln in msg if "rror" in ln), msg[0] if msg else repr(e)))
            stopped = f"{type(e).__name__}: {stopped.strip()}"[:400]
        else:
            if target == "cuda":
                try:
                    resources = cuda_resources(compiled, int(req["arch"]))
                except Exception as e:  # the capture stands without them
                    resources = {"error": f"{type(e).__name__}: {str(e).strip()[:300]}"}
        kdir = out / rec["id"]
        kdir.mkdir(parents=True, exist_ok=True)
        stages, binaries = [], []
        for f in sorted(set(dump.rglob("*")) - before):
            if not f.is_file():
                continue
            ext = f.suffix.lstrip(".")
            data = f.read_bytes()
            try:
                text = data.decode()
            except UnicodeDecodeError:
                binaries.append({"stage": ext, "bytes": len(data)})
                continue
            if ext == "json":
                continue
            dest = kdir / f"{rec['name']}.{ext}"
            dest.write_text(text)
            stages.append({"stage": ext, "file": dest.relative_to(out).as_posix(), "bytes": len(data),
                           "lines": text.count("\n"), "features": features(text, ext)})
        stages.sort(key=lambda s: STAGE_ORDER.index(s["stage"]) if s["stage"] in STAGE_ORDER else 99)
        kernels.append({"id": rec["id"], "name": rec["name"], "module": rec["module"], "params": rec["params"],
                        "options": rec.get("options", {}),
                        "stages": stages, "binaries": binaries, "stopped": stopped, "resources": resources})
    return {"kernels": kernels, "triton_version": triton.__version__}


def cuda_resources(compiled, arch: int) -> dict:
    """Per-thread registers, spills, shared memory and ptxas performance warnings of a kernel
    compiled for CUDA, without a GPU: ``shared_bytes`` from Triton's metadata (what a launch
    checks against the SM's limit), the rest from Triton's bundled ``ptxas -v`` run again on the
    kernel's PTX.

    Returns:
        ``{"shared_bytes", "registers", "spill_stores", "spill_loads", "warnings"}``; byte
        counts per thread for spills, ``warnings`` the ptxas messages (e.g. ``C7517``:
        ``warpgroup.wait`` injected, the wgmma pipeline serialised); ``None`` for a number that
        ptxas did not report.

    Raises:
        subprocess.CalledProcessError: ptxas failed on the PTX (the caller records the error).
    """
    from triton.backends.nvidia.compiler import get_ptxas

    out = {"shared_bytes": getattr(compiled.metadata, "shared", None), "registers": None,
           "spill_stores": None, "spill_loads": None, "warnings": []}
    ptx = compiled.asm.get("ptx")
    if not ptx:
        return out
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "kernel.ptx"
        src.write_text(ptx)
        sm = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        r = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name={sm}", str(src), "-o", str(Path(d) / "k.cubin")],
                           capture_output=True, text=True)
        r.check_returncode()
    text = r.stderr + r.stdout
    if m := re.search(r"Used (\d+) registers", text):
        out["registers"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text):
        out["spill_stores"], out["spill_loads"] = int(m.group(1)), int(m.group(2))
    out["warnings"] = sorted({m.group(0).strip()[:200] for ln in text.splitlines()
                              if (m := re.search(r"\(C\d+\).*", ln))})
    return out


class _FakePtr:
    """Stands in for a tensor in Triton 3.2's attrs descriptor (it only reads ``data_ptr``)."""

    def __init__(self, aligned: bool):
        self._p = 0 if aligned else 8

    def data_ptr(self) -> int:
        return self._p


def features(text: str, stage: str) -> dict:
    """Counts worth a glance in one stage's IR.

    ``ttadapter``: ``mix_mode``, ``allocs`` (``memref.alloc``), ``matmuls`` (``linalg.matmul``),
    ``scalar_loops`` (``DiscreteMemAccess``); every stage: ``lines``.
    """
    out = {"lines": text.count("\n")}
    if stage == "ttadapter":
        m = re.search(r'mix_mode\s*=\s*"(\w+)"', text)
        out.update(mix_mode=m.group(1) if m else None, allocs=text.count("memref.alloc"),
                   matmuls=text.count("linalg.matmul"), scalar_loops=text.count("DiscreteMemAccess"))
    elif stage == "ttir":
        out.update(dots=text.count("tt.dot"), loads=text.count("tt.load"), stores=text.count("tt.store"))
    return out


# ---------------------------------------------------------------------------- parent side
def _run_child(cmd: str, req: dict, env_extra: dict, root: Path, python: str | None) -> dict:
    req_path = root / f"{cmd}-request.json"
    out_path = root / f"{cmd}-result.json"
    req_path.write_text(json.dumps(req | {"result": str(out_path)}))
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.run([python or sys.executable, "-m", f"{PACKAGE}.ir.capture", cmd, str(req_path)],
                          cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not out_path.is_file():
        tail = (proc.stdout[-1500:] + "\n" + proc.stderr[-3000:]).strip()
        raise IRCaptureError(f"ir {cmd} subprocess failed (exit {proc.returncode}):\n{tail}")
    return json.loads(out_path.read_text())


def _cores(target: str, arch: str) -> tuple[int, int]:
    """``(cube, vector)`` core counts of the target for the emulated launch plan: the SoC table
    (``fla_ascend.tiling.chips``) for NPU; SM count for CUDA (both entries)."""
    if target == "npu":
        from fla_ascend.tiling.chips import get_chip

        chip = get_chip(arch)
        return chip.cube_cores, chip.vector_cores
    sms = _CUDA_SMS.get(arch, 132)
    return sms, sms


# SM counts per compute capability of the usual data-centre part (H100/H200 SXM: 132).
_CUDA_SMS = {"80": 108, "90": 132, "100": 148}


def _flavour_of(python: str | None) -> tuple[str, str]:
    code = ("import importlib.metadata as m\nfor d in ('triton-ascend','triton'):\n"
            "    try: print(d, m.version(d)); break\n    except m.PackageNotFoundError: pass\nelse: print('none none')")
    out = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, check=True)
    name, ver = out.stdout.split()
    return name, ver


def known_ops() -> list[str]:
    """The ops :func:`capture` traces: every op of the catalogue with tensor inputs and a named shape."""
    from fla_ascend.ops import catalog

    return sorted(n for n, s in catalog.specs().items() if s.inputs and s.shapes)


def check_capture(op: str, out_dir: str | Path | None = None, target: str = "npu", arch: str | None = None,
                  mode: str = "fwd", shape: str | None = None) -> str:
    """Check :func:`capture`'s arguments before any work (``fla-ascend ir capture`` calls it before
    it makes ``--dir``); returns the arch (the target's default when ``arch`` is ``None``).

    ``out_dir`` may be missing, empty, or hold an earlier capture (a ``manifest.json``), which
    :func:`capture` replaces; a folder holding anything else is refused, since it would be deleted.

    Raises:
        ValueError: unknown op (the message lists the known ones), target or mode; an arch that
            does not fit the target; ``shape`` malformed or lacking a dimension of the op;
            ``out_dir`` a file or a folder of other files.
    """
    if op not in known_ops():
        raise ValueError(f"unknown op {op!r}; known ops: {', '.join(known_ops())}")
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
    if mode not in ("fwd", "fwdbwd"):
        raise ValueError(f"mode must be 'fwd' or 'fwdbwd', got {mode!r}")
    if shape is not None:
        from fla_ascend.bench import cases
        from fla_ascend.ops import catalog

        _, parsed = cases.parse_shapes([shape])[0]  # a malformed shape fails here, not in the child
        full = catalog.get(op).complete_shape(parsed)
        if isinstance(full, str):
            raise ValueError(f"shape: {full}")
    arch = arch or TARGETS[target][1]
    if target == "cuda" and not str(arch).isdigit():
        raise ValueError(f"arch for cuda must be a compute capability like '90', got {arch!r}")
    if out_dir is not None:
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise ValueError(f"--dir {out} is a file; expected a folder")
        if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
            raise ValueError(f"--dir {out} holds files that are not an IR capture (no manifest.json); a capture "
                             "replaces its folder: pass an empty or new folder")
    return arch


def capture(op: str, out_dir: str | Path, target: str = "npu", arch: str | None = None, dtype: str = "bfloat16",
            mode: str = "fwd", source: str | Path | None = None, python: str | None = None,
            shape: str | None = None) -> dict:
    """Capture every compilation stage of ``op``'s kernels into ``out_dir``.

    Args:
        op: op name (:func:`known_ops`).
        out_dir: output directory (created; an existing capture there is replaced).
        target: ``"npu"`` (triton-ascend) or ``"cuda"`` (upstream Triton).
        arch: NPU SoC name (default ``Ascend910B2``) or CUDA capability as an int string
            (default ``"90"``, the H200).
        dtype: dtype name of the traced example inputs (kernel signatures follow it).
        mode: ``"fwd"`` or ``"fwdbwd"`` (the backward's kernels too).
        source: a directory whose ``fla_ascend/**.py`` files overlay the checkout (a round's
            ``src/``), so the candidate's kernels are captured.
        python: interpreter to run in; its environment must provide the target's Triton.
        shape: the traced inputs' shape in the benchmark's syntax (``B=1,T=64,H=2,HV=4,K=128,V=128``
            or a named shape), used as given; default: the op's first default shape scaled down
            for the interpreter. Head dims and head counts decide the compiled tiles and launch
            choices, ``T`` only the run time of the trace.

    Returns:
        The manifest (also written as ``out_dir/manifest.json``): ``schema, op, target, arch,
        triton, dtype, mode, shape, source, kernels: [{id, name, module, params, stages: [{stage,
        file, bytes, lines, features}], binaries, stopped, resources}]`` (``resources``: CUDA
        only, :func:`cuda_resources`; ``None`` elsewhere).

    Raises:
        ValueError: what :func:`check_capture` refuses.
        IRCaptureError: the interpreter's Triton does not match the target, the trace failed,
            or no kernel launched.
    """
    arch = check_capture(op, out_dir, target=target, arch=arch, mode=mode, shape=shape)
    want = TARGETS[target][0]
    flavour, version = _flavour_of(python)
    if flavour != want:
        raise IRCaptureError(f"target {target} needs {want}, but {python or sys.executable} has {flavour} {version}; "
                             "pass --python with an interpreter of the right environment")
    out = Path(out_dir).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="fla-ir-"))
    try:
        shutil.copytree(package_root() / PACKAGE, tmp / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
        overlay = {}
        if source is not None:
            src = Path(source).resolve()
            if not (src / PACKAGE).is_dir():
                raise ValueError(f"source must hold a {PACKAGE}/ directory (a round's src/), got {src}")
            for f in (src / PACKAGE).rglob("*.py"):
                rel = f.relative_to(src)
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, tmp / rel)
                overlay[rel.as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
        treq = {"op": op, "dtype": dtype, "mode": mode, "target": target, "cores": _cores(target, str(arch)),
                "emulate": True, "shape": shape}
        plan = f"{target} launch plan emulated ({treq['cores'][0]} cube / {treq['cores'][1]} vector cores)"
        try:
            traced = _run_child("trace", treq, {"FLA_ASCEND_DEVICE": "cpu"}, tmp, python)
        except IRCaptureError as e:
            plan = f"CPU interpreter launch plan (emulating the {target} plan failed: {str(e).splitlines()[-1][:200]})"
            traced = _run_child("trace", treq | {"emulate": False}, {"FLA_ASCEND_DEVICE": "cpu"}, tmp, python)
        if not traced["launches"]:
            raise IRCaptureError(f"op {op!r} launched no Triton kernel")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        dump = tmp / "dump"
        dump.mkdir()
        env = {"FLA_ASCEND_DEVICE": target, "TRITON_KERNEL_DUMP": "1", "TRITON_DUMP_DIR": str(dump),
               "TRITON_ALWAYS_COMPILE": "1", "TRITON_CACHE_DIR": str(tmp / "cache")}
        res = _run_child("compile", {"target": target, "arch": str(arch), "launches": traced["launches"],
                                     "out": str(out)}, env, tmp, python)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    manifest = {"schema": SCHEMA, "op": op, "target": target, "arch": str(arch),
                "triton": f"{flavour} {res['triton_version']}", "dtype": dtype, "mode": mode, "shape": shape,
                "source": overlay or "checkout", "launch_plan": plan, "kernels": res["kernels"]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def load_manifest(ir_dir: str | Path) -> dict:
    """Read ``ir_dir/manifest.json``.

    Raises:
        FileNotFoundError: no manifest (not a capture directory).
        ValueError: wrong schema.
    """
    p = Path(ir_dir) / "manifest.json"
    if not p.is_file():
        raise FileNotFoundError(f"{ir_dir} holds no manifest.json; capture it with `fla-ascend ir capture`")
    m = json.loads(p.read_text())
    if m.get("schema") != SCHEMA:
        raise ValueError(f"{p}: schema must be {SCHEMA!r}, got {m.get('schema')!r}")
    return m


def _select(m: dict, kernel: str | None, stage: str | None):
    for k in m["kernels"]:
        if kernel and kernel not in (k["name"], k["id"]):
            continue
        for s in k["stages"]:
            if stage and s["stage"] != stage:
                continue
            yield k, s


def stages_text(ir_dir: str | Path, kernel: str | None = None, stage: str | None = None) -> str:
    """A table of the captured kernels and stages (lines, features), one row per stage."""
    m = load_manifest(ir_dir)
    lines = [f"{m['op']} on {m['target']} {m['arch']} ({m['triton']}, {m['dtype']}, {m['mode']})"]
    for k, s in _select(m, kernel, stage):
        feats = ", ".join(f"{a}={b}" for a, b in s["features"].items() if a != "lines")
        lines.append(f"  {k['id']:<40} {s['stage']:<10} {s['lines']:>6} lines  {feats}")
    for k in m["kernels"]:
        if kernel and kernel not in (k["name"], k["id"]):
            continue
        if k.get("stopped"):
            lines.append(f"  {k['id']:<40} stopped: {k['stopped']}")
        r = k.get("resources")
        if r and "error" in r:
            lines.append(f"  {k['id']:<40} resources: not read ({r['error']})")
        elif r:
            warn = f", ptxas: {'; '.join(r['warnings'])}" if r["warnings"] else ""
            lines.append(f"  {k['id']:<40} resources: {r['registers']} registers, "
                         f"spills {r['spill_stores']} B stored / "
                         f"{r['spill_loads']} B loaded, {r['shared_bytes']} B shared{warn}")
    return "\n".join(lines)


def diff_stages(dir_a: str | Path, dir_b: str | Path, kernel: str | None = None,
                stage: str | None = None) -> list[dict]:
    """Per (kernel name, stage): lines added / removed from capture ``dir_a`` to ``dir_b``.

    Kernels are matched by name (the n-th specialisation of a name in one capture with the
    n-th in the other); a kernel or stage present in one capture only is reported as such.

    Returns:
        ``[{kernel, stage, status: "same"|"changed"|"only_a"|"only_b", added, removed, diff}]``.
    """
    ma, mb = load_manifest(dir_a), load_manifest(dir_b)

    def index(m, root):
        seen, out = {}, {}
        for k, s in _select(m, kernel, stage):
            key = (k["name"], s["stage"])
            seen[key] = seen.get(key, 0) + 1
            label = k["name"] if seen[key] == 1 else f"{k['name']}#{seen[key]}"
            out[(label, s["stage"])] = (Path(root) / s["file"]).read_text()
        return out

    a, b = index(ma, dir_a), index(mb, dir_b)
    rows = []
    for key in sorted(set(a) | set(b)):
        if key not in b or key not in a:
            rows.append({"kernel": key[0], "stage": key[1], "status": "only_a" if key in a else "only_b",
                         "added": 0, "removed": 0, "diff": ""})
            continue
        d = list(difflib.unified_diff(a[key].splitlines(), b[key].splitlines(), f"a/{key[0]}.{key[1]}",
                                      f"b/{key[0]}.{key[1]}", lineterm="", n=2))
        added = sum(1 for x in d if x.startswith("+") and not x.startswith("+++"))
        removed = sum(1 for x in d if x.startswith("-") and not x.startswith("---"))
        rows.append({"kernel": key[0], "stage": key[1], "status": "changed" if d else "same",
                     "added": added, "removed": removed, "diff": "\n".join(d)})
    return rows


def diff_text(dir_a, dir_b, kernel=None, stage=None, full: bool = False) -> str:
    """Text form of :func:`diff_stages`; ``full`` appends the unified diffs."""
    rows = diff_stages(dir_a, dir_b, kernel, stage)
    out = [f"{r['kernel']:<36} {r['stage']:<10} {r['status']:<8} +{r['added']} -{r['removed']}" for r in rows]
    if full:
        out += [r["diff"] for r in rows if r["diff"]]
    return "\n".join(out)


def _main(argv: list[str]) -> int:
    cmd, req_path = argv
    req = json.loads(Path(req_path).read_text())
    res = _trace(req) if cmd == "trace" else _compile(req)
    Path(req["result"]).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
