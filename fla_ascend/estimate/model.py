"""Static NPU time estimate per kernel launch, from the compiled plan (``fla-ascend estimate``).

For one op at one shape: every kernel launch of its forward and backward is captured from the real
launcher (:func:`fla_ascend.compiler.capture.capture`, the launch plan of the target chip), lowered with
triton-ascend's front end (:func:`fla_ascend.compiler.lower.lower`), compiled with Ascend's own compiler
(:func:`fla_ascend.compiler.bishengir.compile_module`, cached), and the compiled module is walked with the
launch's real arguments and grid (:mod:`fla_ascend.compiler.planeval`). The counts per core give a time
bound per launch::

    t = max(t_hbm, t_dma, t_cube, t_vector, t_scalar) + n_sync * SYNC_S + LAUNCH_S + (rounds - 1) * ROUND_S

    t_hbm    = (all cores' GM bytes in and out, less the workspace hand-offs, which stay in L2)
               / (chip.hbm_bw * HBM_EFFICIENCY)
    t_dma    = max over cores of (that core's GM bytes) / CORE_DMA_BYTES_PER_CYCLE / clock
    t_cube   = max over AI cores of sum_dtype MACs / (chip.cube_macs_per_cycle * CUBE_DTYPE_FACTOR[dtype]) / clock
    t_vector = max over vector cores of ((vector bytes + (SLOW_VECTOR_FACTOR - 1) * slow bytes)
               / chip.vector_bytes_per_cycle + instructions * VECTOR_ISSUE_CYCLES) / clock / VECTOR_EFFICIENCY
    t_scalar = max over cores of (scalar ops * SCALAR_OP_CYCLES + scalar GM accesses * SCALAR_GM_CYCLES) / clock
    n_sync   = max over cores of cross-core waits (sync_block_wait)
    rounds   = ceil(grid / cores of the kernel's type)

The bounding resource is the term that attains the max, or ``sync`` when the cross-core waits
(``n_sync * SYNC_S``) outweigh it. Chip figures come from
:mod:`fla_ascend.tiling.chips` with their sources; the constants in :data:`ASSUMPTIONS` are labelled
assumptions: the fixed costs and efficiencies are fitted on public hardware timings
(:mod:`fla_ascend.estimate.calibration`), each says on which. A whole op call also pays host-side
costs the kernels do not show (:func:`host_us`: framework ops, host syncs, the Triton launcher); the
calibration adds them for op-level measurements, the op estimates (:class:`OpEstimate`) count kernels
only. This is an estimate from the compiled plan, not a hardware timing: it sees no instruction
latency, no pipe stalls between MTE2, Vector and MTE3 inside a core (perfect overlap is assumed), no
bank conflicts and no L2 hits.

The same is done for flash-linear-attention 0.6.0's NPU kernels (``fla/**/backends/triton_ascend``)
when ``fla`` is importable (an optional benchmark dependency): its public ops are run under the same
capture with its NPU backends selected, its autotuned kernels are estimated for every config and the
best one is kept (what its autotuner would pick if the estimate were the clock).

Run only in a worker process without the Triton interpreter: ``fla-ascend estimate`` starts one,
``python -m fla_ascend.estimate.cli`` (:func:`fla_ascend.estimate.cli.worker_main`).
"""
from __future__ import annotations

import contextlib
import math
import os
import time
import types
from dataclasses import asdict, dataclass, field

from fla_ascend.compiler import planeval
from fla_ascend.tiling.chips import ChipSpec, get_chip

__all__ = ["ASSUMPTIONS", "anchor_shapes", "estimated_ops", "LaunchEstimate", "OpEstimate", "HostWork",
           "estimate_launch", "estimate_op", "time_bound", "host_us", "fla_available", "npu_standin", "record_host"]

ASSUMPTIONS = {
    "SYNC_S": (0.85e-6, "seconds per cross-core wait (Cube<->Vector hand-off through FFTS, with the latency of the "
                        "work it waits for); fitted with ROUND_S and LAUNCH_S on every kernel-level calibration "
                        "point (vllm-ascend's stages, flash-linear-attention's dhu, dv_local, dqkwg, conv)"),
    "LAUNCH_S": (14e-6, "seconds of device time per kernel launch (start-up of the blocks); fitted with SYNC_S "
                        "(mostly on the smallest launch, flash-linear-attention's conv backward tail)"),
    "ROUND_S": (3.7e-6, "seconds per extra round of blocks when the grid exceeds the core count; fitted with SYNC_S "
                        "(mostly on flash-linear-attention's dv_local and dqkwg, 22 rounds each)"),
    "HBM_EFFICIENCY": (0.74, "share of chip.hbm_bw a kernel's DMA achieves; fitted on flash-linear-attention's "
                             "causal_conv1d forward (HBM-bound, 350 us measured)"),
    "VECTOR_EFFICIENCY": (0.76, "share of the Vector unit's peak the counted vector work achieves; from "
                                "flash-linear-attention's conv notes (vector busy 0.948 of the backward bulk "
                                "kernel, 0.64 of the forward)"),
    "CORE_DMA_BYTES_PER_CYCLE": (64, "GM bytes one core's MTE can move per cycle (~115 GB/s at 1.8 GHz); "
                                     "assumption"),
    "VECTOR_ISSUE_CYCLES": (8, "cycles of issue/setup per vector instruction call; assumption"),
    "SLOW_VECTOR_FACTOR": (4, "passes per 256 B of exp/log/sqrt/div-class vector instructions; assumption"),
    "SCALAR_OP_CYCLES": (1, "cycles per scalar operation; assumption"),
    "SCALAR_GM_CYCLES": (200, "cycles per scalar load/store on GM (uncached); assumption"),
    "CUBE_DTYPE_FACTOR": ({"bf16": 1.0, "f16": 1.0, "f32": 0.5, "i8": 2.0},
                          "Cube MACs per cycle relative to bf16 (fp32 K0 = 8 vs 16: half); assumption"),
    "TORCH_OP_S": (12e-6, "seconds of host dispatch per framework (PyTorch) op of a whole op call, plus its bytes "
                          "at the achieved HBM rate; source: flash-linear-attention's note that a host-side "
                          "g.transpose(1, 2).contiguous() costs ~10-15 us (references/g-contiguous-loading.md)"),
    "HOST_SYNC_S": (530e-6, "seconds per read of a device value on the host in a whole op call (.tolist() of "
                            "sequence lengths, with the host-side index preparation around it); fitted on "
                            "MegaGDN's vllm-ascend chunk_local_cumsum calls"),
    "LAUNCH_HOST_S": (55e-6, "seconds of host time per Triton kernel launch in a whole op call (triton-ascend "
                             "3.2's Python launcher); fitted with HOST_SYNC_S on the cumsum calls and "
                             "flash-linear-attention's causal_conv1d op timings"),
}
"""Model constants: ``name -> (value, what it is)``: assumptions, each fitted on the calibration points
it names, taken from the public source it names, or a plain assumption."""


def _a(name):
    return ASSUMPTIONS[name][0]


# ----------------------------------------------------------------------------- shapes and calls
def anchor_shapes(op: str, small: bool = False) -> list[tuple[str, dict]]:
    """``[(name, shape)]`` the estimate runs ``op`` at: its spec's named shapes (the anchors;
    docs/estimate.md, "Shapes and commands"), and with ``small`` its CI shape, named ``small``.

    Raises:
        ValueError: unknown op.
    """
    from fla_ascend.ops import catalog

    spec = catalog.get(op)
    names = catalog.named_shapes()
    out = [(n, spec.complete_shape(names[n])) for n in spec.shapes]
    return out + ([("small", dict(spec.ci_shape))] if small else [])


def _run(op: str, side: str, shape: dict, mark, host=None, backward: bool = True) -> None:
    """Call ``op`` (ours or flash-linear-attention's) at ``shape`` with bf16 zero inputs and the spec's
    estimate arguments, ``mark("bwd")``, then its backward where it has one. ``host``: a
    :class:`HostWork` that counts the framework ops of the call and of its backward (not of building
    the inputs or the loss). ``backward=False``: the forward only (inference)."""
    import torch

    from fla_ascend.ops import catalog
    from fla_ascend.ops.spec import build_inputs, call

    spec = catalog.get(op)
    optional = {i.name for i in spec.inputs if i.optional}
    with_inputs = tuple(k for k, v in spec.estimate_kwargs.items() if k in optional and v is True)
    extra = {k: v for k, v in spec.estimate_kwargs.items() if k not in optional}
    backward = backward and "fwdbwd" in spec.modes
    inputs = build_inputs(spec, shape, torch.bfloat16, "cpu", fill="zeros", optional=with_inputs, grad=backward)
    rec = (lambda: record_host(host)) if host is not None else contextlib.nullcontext
    with rec():
        outs = call(spec, spec.entry if side == "ours" else spec.fla, {**inputs, **extra})
    mark("bwd")
    if backward:
        loss = sum(o.float().sum() for o in outs.values() if o.requires_grad)
        with rec():
            loss.backward()


def estimated_ops() -> list[str]:
    """The ops the estimate covers: every benchmarked op of the catalogue."""
    from fla_ascend.ops import catalog

    return [n for n, s in catalog.specs().items() if s.benchmark]


# ----------------------------------------------------------------------------- fla (optional)
FLA_REQUIRES = ("einops",)
"""What flash-linear-attention 0.6.0's op modules import besides torch and Triton (``fla.ops.kda``,
``fla.ops.gated_delta_rule``, ``fla.modules.causal_conv1d`` import ``einops`` at the top)."""


def fla_available() -> str | None:
    """``None`` when flash-linear-attention (``fla``) and what its ops import (:data:`FLA_REQUIRES`)
    can be found, else the reason (looked up, nothing imported: an import decides its backends)."""
    try:
        import importlib.util

        if importlib.util.find_spec("fla") is None:
            return "flash-linear-attention (fla-core 0.6.0) is not importable: pip install --no-deps fla-core==0.6.0"
        missing = [m for m in FLA_REQUIRES if importlib.util.find_spec(m) is None]
        if missing:
            return (f"flash-linear-attention's ops import {', '.join(missing)}, which is not importable: "
                    f"pip install {' '.join(missing)} (or put a folder holding it on PYTHONPATH)")
    except Exception as e:  # noqa: BLE001 - report any import-machinery failure
        return f"{type(e).__name__}: {e}"
    return None


class _StandinDriver:
    """A Triton driver with no device: the core counts of ``chip`` for launch planners that ask the
    driver, a benchmarker that measures nothing, and an NPU target once :attr:`npu` is set (until then
    ``get_current_target`` raises, so code that picks its device at import keeps ``cpu``)."""

    def __init__(self, chip: ChipSpec):
        self.chip = chip
        self.npu = False
        props = {"num_aicore": chip.cube_cores, "num_vectorcore": chip.vector_cores}
        self.utils = types.SimpleNamespace(get_device_properties=lambda i=0: dict(props))

    def get_benchmarker(self):
        return lambda *a, **k: [0.0]

    def get_current_target(self):
        if not self.npu:
            raise RuntimeError("no NPU (estimate capture)")
        from triton.backends.compiler import GPUTarget

        return GPUTarget("npu", self.chip.name, 0)

    def get_current_device(self):
        return 0


@contextlib.contextmanager
def npu_standin(chip: ChipSpec):
    """Run another project's NPU Triton code on this CPU-only machine as if on ``chip``, for capture.

    While the block runs: the active Triton driver is a :class:`_StandinDriver` (no device, ``chip``'s
    core counts; its ``npu`` flag is off until the caller sets it), ``torch.npu`` answers
    ``current_device``, ``device_count`` and ``device`` (a no-op context), ``ASCEND_UB_CAPACITY_BITS``
    is ``chip``'s UB, and every autotuned kernel is launched once per config (the launches of one
    call form a group: :data:`_GROUPS`; the estimate keeps the fastest). Everything is restored after.

    Yields the driver."""
    import torch
    import triton.runtime as tr
    from triton.runtime.autotuner import Autotuner

    saved = (tr.driver.active, getattr(torch, "npu", None), Autotuner.run, os.environ.get("ASCEND_UB_CAPACITY_BITS"))
    drv = _StandinDriver(chip)
    tr.driver.set_active(drv)
    torch.npu = types.SimpleNamespace(current_device=lambda: 0, device_count=lambda: 1,
                                      device=lambda *a, **k: contextlib.nullcontext(),
                                      synchronize=lambda *a, **k: _SYNC_HOOK[0]())
    os.environ["ASCEND_UB_CAPACITY_BITS"] = str(chip.ub_bytes * 8)
    groups = {"n": 0}

    def _autotune_run(self, *args, **kwargs):
        groups["n"] += 1
        start = len(_LIST[0]) if _LIST[0] is not None else 0
        for cfg in self.configs:
            self.fn.run(*args, **kwargs, **cfg.all_kwargs())
        if _LIST[0] is not None:
            _GROUPS.append((start, len(_LIST[0]), groups["n"]))

    Autotuner.run = _autotune_run
    try:
        yield drv
    finally:
        tr.driver.active, Autotuner.run = saved[0], saved[2]
        if saved[1] is None:
            with contextlib.suppress(AttributeError):
                del torch.npu
        else:
            torch.npu = saved[1]
        if saved[3] is None:
            os.environ.pop("ASCEND_UB_CAPACITY_BITS", None)
        else:
            os.environ["ASCEND_UB_CAPACITY_BITS"] = saved[3]


_FLA_MOVED = {"fla.modules.causal_conv1d": "fla.modules.conv.causal_conv1d"}
"""Modules of flash-linear-attention 0.6.0 that sat elsewhere before it (``name -> old name``): the
calibration estimates flash-linear-attention as of its measurements, which predate 0.6.0."""


def _alias_fla_modules() -> None:
    """Alias each module of :data:`_FLA_MOVED` that the importable flash-linear-attention lacks (looked
    up on disk, importing nothing) to its old place. Call it once its NPU backends are selected: an
    import decides them."""
    import importlib
    import importlib.util
    import sys

    spec = importlib.util.find_spec("fla")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for new, old in _FLA_MOVED.items():
        rel = os.path.join(*new.split(".")[1:])
        if new in sys.modules or not roots or any(os.path.exists(os.path.join(r, rel + ".py"))
                                                  or os.path.isdir(os.path.join(r, rel)) for r in roots):
            continue
        try:
            sys.modules[new] = importlib.import_module(old)
        except ModuleNotFoundError:
            pass


@contextlib.contextmanager
def _fla_npu(chip: ChipSpec):
    """Make flash-linear-attention select its NPU (triton_ascend) backends on this CPU-only machine:
    :func:`npu_standin`, then ``IS_NPU`` for its backend registry and every backend verifier accepting
    (they check ``tensor.device.type == 'npu'``); its UB manager reads the chip's UB from the
    stand-in's environment."""
    with npu_standin(chip) as drv:
        import fla.utils as fu

        try:
            from fla import backends as fb
        except ImportError:  # before 0.6.0 the registry sat under fla.ops
            from fla.ops import backends as fb

        fu.IS_NPU = True
        drv.npu = True  # from now on fla's get_multiprocessor_count finds the chip's vector cores
        _alias_fla_modules()
        orig_verify = fb.BaseBackend.verify
        fb.BaseBackend.verify = lambda self, fn, *a, **k: (True, None)
        try:
            yield
        finally:
            fb.BaseBackend.verify = orig_verify


@dataclass
class HostWork:
    """The framework (PyTorch) work of one op call besides its Triton kernels, counted while the call
    runs under capture (:func:`record_host`): ``ops`` operations that would launch work on the device
    (copies such as ``transpose(...).contiguous()``, reductions, index preparation), their ``bytes``
    in and out, ``syncs`` reads of a device value on the host (``.tolist()``, ``.item()``), ``allocs``
    allocations (not charged), and ``by_op`` the count per operation name.

    Under capture every tensor is on the CPU, so an operation the real call runs on the host (a
    ``torch.arange`` of a Python int) is counted like one on the device."""

    ops: int = 0
    bytes: float = 0.0
    syncs: int = 0
    allocs: int = 0
    by_op: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


_ALLOC_OPS = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted")
_SYNC_OPS = ("_local_scalar_dense", "item", "is_nonzero", "equal")


@contextlib.contextmanager
def record_host(work: HostWork):
    """Count into ``work`` (:class:`HostWork`) the PyTorch operations run while the block runs: views
    (``transpose``, ``slice``...: no device work) are skipped, allocations counted apart, reads of a
    value on the host counted as syncs (including ``Tensor.tolist``, which bypasses the dispatcher, and
    the stand-in's ``torch.npu.synchronize``),
    every other operation counted with the bytes of its tensor inputs and outputs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def nbytes(x):
        return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if getattr(func, "is_view", False) or name in ("detach", "alias", "_reshape_alias"):
                return out
            if name in _ALLOC_OPS:
                work.allocs += 1
                return out
            if name in _SYNC_OPS:
                work.syncs += 1
            else:
                work.ops += 1
                flat = list(args) + list((kwargs or {}).values()) + (list(out) if isinstance(out, (tuple, list))
                                                                     else [out])
                work.bytes += sum(nbytes(x) for x in flat)
            work.by_op[name] = work.by_op.get(name, 0) + 1
            return out

    orig_tolist = torch.Tensor.tolist

    def _tolist(self):
        work.syncs += 1
        work.by_op["tolist"] = work.by_op.get("tolist", 0) + 1
        return orig_tolist(self)

    def _synchronize():
        work.syncs += 1
        work.by_op["synchronize"] = work.by_op.get("synchronize", 0) + 1

    torch.Tensor.tolist = _tolist
    orig_sync, _SYNC_HOOK[0] = _SYNC_HOOK[0], _synchronize
    try:
        with _Mode():
            yield work
    finally:
        torch.Tensor.tolist = orig_tolist
        _SYNC_HOOK[0] = orig_sync


_SYNC_HOOK: list = [lambda: None]  # what the stand-in torch.npu.synchronize does (record_host counts it)
_LIST: list = [None]     # the capture's launch list while an op runs
_GROUPS: list = []       # (first, end, group id) of the launches of one autotuned call


# ----------------------------------------------------------------------------- estimate
@dataclass
class LaunchEstimate:
    """One kernel launch: identity, counts per core and in total, the time bound and its terms;
    ``ub_bytes`` the UB the compiler planned for one core (a MIX kernel's: its vector side's; for a
    UB overflow, what the compiler asked for), ``ub_capacity`` the chip's UB."""

    kernel: str
    module: str
    direction: str
    grid: tuple
    core_type: str = "?"
    cores: int = 0
    ok: bool = False
    error: str = ""
    total: dict = field(default_factory=dict)
    per_core_max: dict = field(default_factory=dict)
    per_unit_max: dict = field(default_factory=dict)
    terms_us: dict = field(default_factory=dict)
    sync_us: float = 0.0
    launch_us: float = 0.0
    time_us: float = 0.0
    bound: str = ""
    unresolved: list = field(default_factory=list)
    group: int | None = None
    config: dict = field(default_factory=dict)
    compile_seconds: float = 0.0
    ub_bytes: int | None = None
    ub_capacity: int = 0

    @property
    def ub_percent(self) -> float | None:
        """The planned UB as a percentage of the chip's (None when the plan gave none)."""
        return 100.0 * self.ub_bytes / self.ub_capacity if self.ub_bytes is not None and self.ub_capacity else None

    def to_dict(self):
        d = asdict(self)
        d["grid"] = list(self.grid)
        d["ub_percent"] = self.ub_percent
        return d


def _core_time_terms(c: planeval.Counts, chip: ChipSpec) -> dict:
    clock = chip.clock_mhz * 1e6
    cube = sum(v / (chip.cube_macs_per_cycle * _a("CUBE_DTYPE_FACTOR").get(dt, 0.5)) for dt, v in c.macs.items())
    vec = ((c.vector_bytes + (_a("SLOW_VECTOR_FACTOR") - 1) * c.vector_slow_bytes) / chip.vector_bytes_per_cycle
           + c.vector_instrs * _a("VECTOR_ISSUE_CYCLES")) / _a("VECTOR_EFFICIENCY")
    scalar = c.scalar_ops * _a("SCALAR_OP_CYCLES") + c.scalar_gm * _a("SCALAR_GM_CYCLES")
    dma = c.gm_bytes / _a("CORE_DMA_BYTES_PER_CYCLE")
    return {"dma": dma / clock, "cube": cube / clock, "vector": vec / clock, "scalar": scalar / clock,
            "sync": c.syncs * _a("SYNC_S")}


def time_bound(per_core: list, total: planeval.Counts, grid_blocks: int, n_cores: int, chip: ChipSpec) -> dict:
    """The time bound of one launch from its per-core counts.

    Args:
        per_core: list of ``[Counts, ...]`` per physical core (a MIX AI core holds its Cube counts
            and its two Vector sub-cores' counts; each resource takes the max over them).
        total: all cores together (for the HBM term).
        grid_blocks: blocks launched; ``n_cores``: cores of the kernel's type.
        chip: needs ``hbm_bw``, ``clock_mhz``, ``cube_macs_per_cycle``, ``vector_bytes_per_cycle``.

    Returns:
        ``{"terms_us": {...}, "sync_us", "launch_us", "time_us", "bound"}``.

    Raises:
        ValueError: the chip lacks a figure the model needs (named).
    """
    for f in ("hbm_bw", "clock_mhz", "cube_macs_per_cycle", "vector_bytes_per_cycle"):
        if getattr(chip, f, None) is None:
            raise ValueError(f"chip {chip.name} has no {f} in fla_ascend.tiling.chips; the estimate needs it")
    terms = {"hbm": total.hbm_bytes / (chip.hbm_bw * _a("HBM_EFFICIENCY")), "dma": 0.0, "cube": 0.0, "vector": 0.0,
             "scalar": 0.0}
    sync = 0.0
    for subs in per_core:
        for c in subs:
            t = _core_time_terms(c, chip)
            for k in ("dma", "cube", "vector", "scalar"):
                terms[k] = max(terms[k], t[k])
            sync = max(sync, t["sync"])
    rounds = max(1, math.ceil(grid_blocks / max(1, n_cores)))
    launch = _a("LAUNCH_S") + (rounds - 1) * _a("ROUND_S")
    bound = max(terms, key=terms.get)
    if sync > terms[bound]:
        bound = "sync"  # the hand-off waits outweigh every resource
    return {"terms_us": {k: v * 1e6 for k, v in terms.items()}, "sync_us": sync * 1e6, "launch_us": launch * 1e6,
            "time_us": (max(terms.values()) + sync + launch) * 1e6, "bound": bound}


def host_us(host: dict, launches: int, chip: ChipSpec) -> float:
    """Host-side time of a whole op call besides its kernels, microseconds: ``host`` is a
    :class:`HostWork` dict (its framework ops at ``TORCH_OP_S`` each plus their bytes at the achieved
    HBM rate, its host syncs at ``HOST_SYNC_S``), ``launches`` the Triton launches at
    ``LAUNCH_HOST_S`` each. Kernel-level measurements (a profiler's kernel time) have none of it."""
    ops, nbytes, syncs = host.get("ops", 0), host.get("bytes", 0.0), host.get("syncs", 0)
    return 1e6 * (ops * _a("TORCH_OP_S") + nbytes / (chip.hbm_bw * _a("HBM_EFFICIENCY"))
                  + syncs * _a("HOST_SYNC_S") + launches * _a("LAUNCH_HOST_S"))


_CUDA_ONLY = ("num_warps", "num_stages", "num_ctas", "num_buffers_warp_spec", "num_consumer_groups",
              "reg_dec_producer", "reg_inc_consumer", "maxnreg")
MAX_EXACT_BLOCKS = 64
"""Grids up to this many blocks are evaluated block by block; larger ones are sampled."""
SAMPLED_BLOCKS = 12


def _scalars(la, low) -> list:
    import torch

    return [None if isinstance(la.kwargs.get(k), torch.Tensor) else la.kwargs.get(k)
            for k in low.signature if k not in low.constants]


MAX_KNOWN_ELEMENTS = 1 << 20
"""Integer tensors of a launch up to this many elements have their contents passed to the plan walk
(:func:`fla_ascend.compiler.planeval.evaluate`'s ``memory``): ``cu_seqlens`` and chunk index tensors,
so the sequence bounds a varlen kernel reads from them resolve."""


def _memory(la, low) -> dict:
    import torch

    out = {}
    for i, k in enumerate(k for k in low.signature if k not in low.constants):
        v = la.kwargs.get(k)
        if isinstance(v, torch.Tensor) and not v.is_floating_point() and not v.is_complex() \
                and v.dtype != torch.bool and v.numel() <= MAX_KNOWN_ELEMENTS and v.device.type == "cpu":
            out[i] = v.reshape(-1).tolist()
    return out


def estimate_launch(la, chip: ChipSpec, direction: str = "fwd", timeout_s: float = 600.0) -> LaunchEstimate:
    """Lower, compile (cached) and evaluate one captured launch (:class:`fla_ascend.compiler.capture.Launch`).

    A lowering or compile failure is returned in ``error`` (``ok=False``), not raised."""
    from fla_ascend.compiler.bishengir import _KNOWN_OPTIONS, compile_module
    from fla_ascend.compiler.lower import lower

    fn = la.fn
    params = {p.name for p in fn.params}
    est = LaunchEstimate(kernel=fn.fn.__name__, module=fn.fn.__module__, direction=direction,
                         grid=tuple(int(g) for g in la.grid), group=getattr(la, "group", None),
                         ub_capacity=chip.ub_bytes)
    est.config = {k: v for k, v in la.kwargs.items() if k in params and isinstance(v, (int, bool))
                  and k.isupper()}
    # options triton-ascend 3.2.0 passes to bishengir-compile; others (Config fields of later
    # triton-ascend versions such as force_simt_template, enable_ubuf_saving) are dropped and noted
    opts = {k: v for k, v in la.options.items() if k in _KNOWN_OPTIONS}
    dropped = sorted(k for k, v in la.options.items() if k not in _KNOWN_OPTIONS and k not in _CUDA_ONLY and v)
    low = lower(fn, la.kwargs, chip, opts)
    if not low.ok:
        est.error = f"lowering ({low.stage}): {low.error.strip().splitlines()[-1][:300] if low.error else ''}"
        return est
    t0 = time.perf_counter()
    try:
        res = compile_module(low.ttadapter, chip.name, opts, timeout_s=timeout_s)
    except Exception as e:  # noqa: BLE001 - an unusable option set, a missing binary: report
        est.error = f"compile: {type(e).__name__}: {e}"
        return est
    est.compile_seconds = time.perf_counter() - t0
    if res.facts is not None:  # the plan's UB (a Cube-only kernel plans none); a UB overflow: what it asked for
        est.ub_bytes = int(res.facts.planned_bytes.get("ub", 0))
    elif res.space == "ub" and res.needed_bytes:
        est.ub_bytes = int(res.needed_bytes)
    if not res.ok:
        est.error = f"bishengir-compile {res.error_class}: {res.message[:300]}"
        return est
    with open(res.module_path) as f:
        mod = planeval.parse(f.read())
    fns = mod.device_functions()
    aic = [f for f in fns if f.core == "AIC"]
    aiv = [f for f in fns if f.core == "AIV"]
    est.core_type = "MIX" if aic and aiv else ("AIC" if aic else "AIV")
    n_cores = chip.cube_cores if aic else chip.vector_cores
    est.cores = n_cores
    scal = _scalars(la, low)
    memory = _memory(la, low)
    G = 1
    for g in est.grid:
        G *= g
    blocks = list(range(G)) if G <= MAX_EXACT_BLOCKS else sorted({round(i * (G - 1) / (SAMPLED_BLOCKS - 1))
                                                                  for i in range(SAMPLED_BLOCKS)})
    per_block = {}
    for b in blocks:
        subs = []
        for f in aic:
            subs.append(planeval.evaluate(mod, f, scal, est.grid, b, memory=memory))
        for f in aiv:
            for sb in ((0, 1) if aic else (0,)):
                subs.append(planeval.evaluate(mod, f, scal, est.grid, b, sb, memory=memory))
        per_block[b] = subs
    # assign blocks to cores round-robin; a sampled grid gives each core its share of the mean block
    per_core: list = []
    total = planeval.Counts()
    if G <= MAX_EXACT_BLOCKS:
        for core in range(min(G, n_cores)):
            acc = [planeval.Counts() for _ in per_block[0]]
            for b in range(core, G, n_cores):
                for a, c in zip(acc, per_block[b]):
                    a.add(c)
            per_core.append(acc)
        for subs in per_block.values():
            for c in subs:
                total.add(c)
    else:
        mean = [planeval.Counts() for _ in per_block[blocks[0]]]
        for subs in per_block.values():
            for a, c in zip(mean, subs):
                a.add(c, 1.0 / len(blocks))
        per_core.append([m.scaled(math.ceil(G / n_cores)) for m in mean])
        for m in mean:
            total.add(m, G)
    est.total = total.to_dict()
    busiest = planeval.Counts()
    for subs in per_core:
        for c in subs:
            for k in planeval.Counts._SCALARS:
                setattr(busiest, k, max(getattr(busiest, k), getattr(c, k)))
            for dt, v in c.macs.items():
                busiest.macs[dt] = max(busiest.macs.get(dt, 0.0), v)
    est.per_core_max = busiest.to_dict()
    # the busiest Cube function and the busiest Vector function apart (a MIX core holds one of each kind)
    kinds = ["cube"] * len(aic) + ["vector"] * (len(per_block[blocks[0]]) - len(aic))
    for kind in dict.fromkeys(kinds):
        unit = planeval.Counts()
        for subs in per_core:
            for c, k in zip(subs, kinds):
                if k == kind:
                    for name in planeval.Counts._SCALARS:
                        setattr(unit, name, max(getattr(unit, name), getattr(c, name)))
        est.per_unit_max[kind] = {k: v for k, v in unit.to_dict().items() if k not in ("macs", "unresolved")}
    est.unresolved = list(total.unresolved) + ([f"launch options not known to triton-ascend 3.2.0, "
                                                  f"dropped: {', '.join(dropped)}"] if dropped else [])
    tb = time_bound(per_core, total, G, n_cores, chip)
    est.terms_us, est.sync_us, est.launch_us, est.time_us, est.bound = (
        tb["terms_us"], tb["sync_us"], tb["launch_us"], tb["time_us"], tb["bound"])
    est.ok = True
    return est


@dataclass
class OpEstimate:
    """All launches of one op at one shape for one side (``"ours"`` or ``"fla"``)."""

    op: str
    shape: str
    side: str
    chip: str
    launches: list = field(default_factory=list)
    error: str = ""
    host: dict = field(default_factory=dict)

    def kept(self) -> list:
        """The launches that count: for an autotuned group, its fastest estimated config."""
        out, groups = [], {}
        for la in self.launches:
            if la.group is None:
                out.append(la)
            else:
                groups.setdefault(la.group, []).append(la)
        for g in groups.values():
            ok = [x for x in g if x.ok]
            out.append(min(ok, key=lambda x: x.time_us) if ok else g[0])
        return sorted(out, key=lambda x: self.launches.index(x))

    def total_us(self, direction: str | None = None) -> float:
        return sum(x.time_us for x in self.kept() if x.ok and (direction is None or x.direction == direction))

    def failures(self) -> list:
        return [x for x in self.kept() if not x.ok]

    def to_dict(self):
        return {"op": self.op, "shape": self.shape, "side": self.side, "chip": self.chip, "error": self.error,
                "total_us": self.total_us(), "fwd_us": self.total_us("fwd"), "bwd_us": self.total_us("bwd"),
                "launches": [x.to_dict() for x in self.kept()], "host": dict(self.host)}


def capture_op(op: str, shape: dict, chip: ChipSpec, side: str = "ours", host=None, backward: bool = True) -> list:
    """Run ``op`` (forward and backward) at ``shape`` under capture; returns ``[(direction, Launch)]``.
    ``host``: a :class:`HostWork` that counts the call's framework ops besides its kernels;
    ``backward=False``: the forward only.

    Raises:
        ValueError: unknown op or side.
    """
    from fla_ascend.compiler.capture import capture

    if op not in estimated_ops():
        raise ValueError(f"op must be one of {', '.join(estimated_ops())}, got {op!r}")
    if side not in ("ours", "fla"):
        raise ValueError(f"side must be 'ours' or 'fla', got {side!r}")
    marks = []
    ctx = _fla_npu(chip) if side == "fla" else contextlib.nullcontext()
    _GROUPS.clear()
    with ctx, capture(chip) as launches:
        _LIST[0] = launches
        try:
            _run(op, side, shape, lambda d: marks.append(len(launches)), host, backward)
        finally:
            _LIST[0] = None
    for la in launches:
        la.group = None
    for first, end, gid in _GROUPS:
        for la in launches[first:end]:
            la.group = gid
    cut = marks[0] if marks else len(launches)
    return [("fwd" if i < cut else "bwd", la) for i, la in enumerate(launches)]


def estimate_op(op: str, shape_name: str, chip: ChipSpec | str = "Ascend910B2", side: str = "ours",
                shape: dict | None = None, log=None, backward: bool = True) -> OpEstimate:
    """Estimate every launch of ``op`` at its anchor ``shape_name`` (:func:`anchor_shapes`; or at
    ``shape``, then ``shape_name`` is only its label) for ``side``.

    A launch that fails to lower or compile is kept with its message; an op whose launcher fails is
    returned with ``error`` set. ``backward=False``: the forward only (inference shapes)."""
    chip = get_chip(chip)
    shape = shape or dict(anchor_shapes(op, small=True))[shape_name]
    out = OpEstimate(op, shape_name, side, chip.name)
    host = HostWork()
    try:
        launches = capture_op(op, shape, chip, side, host, backward)
    except Exception as e:  # noqa: BLE001 - the launcher itself failed: report it
        out.error = f"{type(e).__name__}: {str(e)[:400]}"
        return out
    out.host = host.to_dict()
    for direction, la in launches:
        est = estimate_launch(la, chip, direction)
        if log:
            log(f"  {side:4s} {op} {shape_name} {direction} {est.kernel} grid={est.grid} "
                f"{f'{est.time_us:.1f} us ({est.bound})' if est.ok else est.error[:120]}")
        out.launches.append(est)
    return out
