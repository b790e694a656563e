"""Ascend SoC specifications: core counts, on-chip buffer sizes, HBM, peak compute.

Every row carries the source it was taken from and a confidence level, because most of these
numbers come from public documents and configuration files rather than measurement. Unknown
numbers are ``None``, never guessed. Names are the A2/A3/A5 ones triton-ascend 3.2.0 accepts in
``TRITON_ASCEND_ARCH`` (``triton/backends/ascend/utils.py``, ``get_ascend_arch_from_env``), each also
a ``--target`` that ``bishengir-compile`` (A2/A3) or ``bishengir-compile-a5`` (A5) accepts
(tests/compiler/test_compile.py compiles a kernel for every row). The marketing names ``Ascend950PR``,
``Ascend950`` and ``Ascend910_95`` are aliases of ``Ascend910_9599``: none is a compiler target
(``Cannot find option named 'Ascend950PR'``).

Sources:

- ``cann-platform-config``: CANN ``platform_config/<SoC>.ini`` files as quoted in public repositories
  (``ai_core_cnt``, ``vector_core_cnt``, ``ub_size``, ``l1_size``, ``l0_a_size``...).
- ``triton-ascend-docs``: triton-ascend documentation and its 3.2.0 wheel (UB 192 KiB per vector core
  on A2/A3; the ``ub overflow ... 1572864 bits available`` message = 196608 bytes).
- ``derived``: peak cube FLOP/s = cube cores x clock (MHz) x 1e6 x 8192 (fp16/bf16 MACs x 2 per
  cycle per cube core).
- ``ascend-c-guide``: Ascend C programming guide (hardware architecture chapter): one Cube core does a
  16 x 16 x 16 fp16/bf16 matrix multiply-accumulate per cycle (4096 MACs); one Vector core processes
  256 bytes per cycle (128 fp16 or 64 fp32 lanes). Used by the time estimate
  (``fla_ascend.estimate.model``); the clock is the 1800 MHz behind the derived peak.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["ChipSpec", "CHIPS", "get_chip", "list_chips", "detect_chip", "environment_chip", "DEFAULT_CHIP"]

KiB = 1024
GiB = 1024**3


@dataclass(frozen=True)
class ChipSpec:
    """One Ascend SoC.

    Attributes:
        name: the SoC name as triton-ascend / CANN spell it (``"Ascend910B2"``).
        cube_cores: AI (Cube) cores; the grid of task-loop kernels that use ``tl.dot``.
        vector_cores: Vector cores (2 per AI core on the split A2/A3/A5 chips); the grid of
            vector-only kernels.
        ub_bytes: Unified Buffer per vector core, bytes; what the compiler's ``ub overflow``
            check compares against.
        l1_bytes, l0a_bytes, l0b_bytes, l0c_bytes: Cube-side buffers per AI core, bytes.
        hbm_bytes: device memory, bytes (``None`` when unknown).
        hbm_bw: HBM bandwidth, bytes/s (``None`` when unknown).
        peak_bf16_flops: dense bf16 Cube peak, FLOP/s (``None`` when unknown).
        compile_on_910_95: True for the A5 generation, where triton-ascend lowers with
            ``compile_on_910_95=True`` (different adapter passes, no automatic multibuffer).
        default_multibuffer: the compiler's default ``multibuffer`` option (True on A2/A3:
            ``NPUOptions.multibuffer = not is_compile_on_910_95`` in triton-ascend 3.2.0).
        source: where the numbers come from.
        confidence: ``"high"``, ``"medium"`` or ``"low"``, with the doubtful fields named.
        clock_mhz: AI core clock, MHz (``None`` when unknown); the one behind ``peak_bf16_flops``.
        cube_macs_per_cycle: bf16/fp16 MACs per cycle of one Cube core (16 x 16 x 16 = 4096,
            ascend-c-guide).
        vector_bytes_per_cycle: bytes one Vector core processes per cycle (256, ascend-c-guide).
    """

    name: str
    cube_cores: int
    vector_cores: int
    ub_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    hbm_bytes: int | None
    hbm_bw: float | None
    peak_bf16_flops: float | None
    compile_on_910_95: bool
    source: str
    confidence: str
    aliases: tuple[str, ...] = field(default=())
    clock_mhz: float | None = None
    cube_macs_per_cycle: int | None = 4096
    vector_bytes_per_cycle: int | None = 256

    @property
    def default_multibuffer(self) -> bool:
        return not self.compile_on_910_95

    def cores(self, kind: str) -> int:
        """Core count for ``kind`` (``"cube"`` or ``"vector"``); ValueError otherwise."""
        if kind == "cube":
            return self.cube_cores
        if kind == "vector":
            return self.vector_cores
        raise ValueError(f"kind must be 'cube' or 'vector', got {kind!r}")


def _peak(cube_cores: int, mhz: float) -> float:
    return cube_cores * mhz * 1e6 * 8192


_A2_BUFFERS = dict(ub_bytes=196608, l1_bytes=524288, l0a_bytes=64 * KiB, l0b_bytes=64 * KiB, l0c_bytes=128 * KiB)

_ROWS: list[ChipSpec] = [
    ChipSpec("Ascend910B1", 24, 48, **_A2_BUFFERS, hbm_bytes=64 * 10**9, hbm_bw=1.6e12, peak_bf16_flops=None,
             compile_on_910_95=False, source="cann-platform-config (cores, UB, L0); HBM from product brief",
             confidence="medium: L1 (one document says 1 MiB), bandwidth and clock unconfirmed"),
    ChipSpec("Ascend910B2", 24, 48, **_A2_BUFFERS, hbm_bytes=64 * GiB, hbm_bw=1.6e12,
             peak_bf16_flops=_peak(24, 1800), compile_on_910_95=False,
             source="cann-platform-config Ascend910B2.ini; peak derived at 1800 MHz", confidence="high",
             clock_mhz=1800),
    ChipSpec("Ascend910B3", 20, 40, **_A2_BUFFERS, hbm_bytes=64 * 10**9, hbm_bw=None,
             peak_bf16_flops=_peak(20, 1800), compile_on_910_95=False,
             source="cann-platform-config (cores, UB); L0/L1 assumed as B2; peak derived at 1800 MHz",
             confidence="medium: L1, HBM size, bandwidth and clock unconfirmed", clock_mhz=1800),
    ChipSpec("Ascend910B4", 20, 40, **_A2_BUFFERS, hbm_bytes=32 * GiB, hbm_bw=None, peak_bf16_flops=None,
             compile_on_910_95=False, source="cann-platform-config (cores, UB, L0); HBM from product brief",
             confidence="medium: L1, bandwidth and clock unconfirmed"),
]
for _n in ("Ascend910_9362", "Ascend910_9372", "Ascend910_9381", "Ascend910_9382", "Ascend910_9391",
           "Ascend910_9392"):
    _ROWS.append(ChipSpec(_n, 24, 48, **_A2_BUFFERS, hbm_bytes=64 * 10**9, hbm_bw=1.6e12,
                          peak_bf16_flops=_peak(24, 1800), compile_on_910_95=False,
                          source="cann-platform-config Ascend910_93xx (A3, per die); peak derived at 1800 MHz",
                          confidence="medium: per-SKU differences within 93xx unknown; values per die",
                          clock_mhz=1800))
_A5 = dict(ub_bytes=253952, l1_bytes=524288, l0a_bytes=64 * KiB, l0b_bytes=64 * KiB, l0c_bytes=256 * KiB,
           hbm_bytes=128 * 10**9, hbm_bw=1.6e12, peak_bf16_flops=432e12, compile_on_910_95=True)
_ROWS.append(ChipSpec("Ascend910_9599", 32, 64, **_A5,
                      source="public A5 (Ascend 950PR / 910_95) briefs; UB = usable bytes per vector core "
                             "(bishengir-compile-a5: 2031616 bits available)",
                      confidence="medium-high: one SKU has 28 / 56 cores; bandwidth unconfirmed",
                      aliases=("Ascend950PR", "Ascend910_95", "Ascend950")))
for _n in ("Ascend910_9579", "Ascend910_9581", "Ascend910_9589"):
    _ROWS.append(ChipSpec(_n, 32, 64, **_A5, source="as Ascend910_9599 (same generation, 910_95xx SoC names)",
                          confidence="low: which 910_95xx SKU has 28 / 56 cores is not known here"))

CHIPS: Mapping[str, ChipSpec] = MappingProxyType({c.name: c for c in _ROWS})
"""All known SoCs by canonical name (read-only)."""

_LOOKUP: dict[str, str] = {}
for _c in _ROWS:
    _LOOKUP[_c.name.lower()] = _c.name
    for _a in _c.aliases:
        _LOOKUP[_a.lower()] = _c.name

DEFAULT_CHIP = "Ascend910B2"
"""The chip assumed when none is named and none is detected (the A2 part with the most cores)."""


def list_chips() -> list[str]:
    """Canonical names of all SoCs in the table, in table order."""
    return list(CHIPS)


def get_chip(name: str | ChipSpec | None = None) -> ChipSpec:
    """Look up a SoC by name, case-insensitively; aliases (``Ascend910_95``) are accepted.

    Args:
        name: a SoC name, a :class:`ChipSpec` (returned as is), or ``None`` for the active
            target's chip (:func:`detect_chip`; :data:`DEFAULT_CHIP` when it has none).

    Raises:
        TypeError: ``name`` is not a string, ChipSpec or None.
        ValueError: unknown name (the message lists the known names), e.g. ``Ascend310P3``,
            which triton-ascend does not support.
    """
    if isinstance(name, ChipSpec):
        return name
    if name is None:
        return CHIPS[detect_chip() or DEFAULT_CHIP]
    if not isinstance(name, str):
        raise TypeError(f"chip must be a str name or ChipSpec, got {type(name).__name__}")
    key = _LOOKUP.get(name.strip().lower())
    if key is None:
        raise ValueError(f"unknown Ascend chip {name!r}; known: {', '.join(list_chips())} "
                         f"(aliases: Ascend950PR, Ascend950, Ascend910_95 = Ascend910_9599)")
    return CHIPS[key]


def detect_chip() -> str | None:
    """The canonical name of the chip this process targets, or ``None``: the active target's
    (:func:`fla_ascend.backend.current`) when it names one, else the environment's
    (:func:`environment_chip`; without torch, where ``fla_ascend.backend`` cannot be imported, that
    alone)."""
    try:
        from fla_ascend import backend
    except ImportError:
        return environment_chip()
    target = backend.current()
    if target.chip is not None:
        return target.chip.name
    return environment_chip(npu=target.device_type == "npu")


def environment_chip(npu: bool = False) -> str | None:
    """The chip this process's environment names: the chip of a target that names none (the
    default target's).

    Order: the NPU's device name (``torch.npu.get_device_name()``, only with ``npu`` true: the
    backend layer found an NPU), then ``TRITON_ASCEND_ARCH`` (the variable triton-ascend itself
    reads). A name not in the table gives ``None`` rather than an error, so launch plans fall
    back to :data:`DEFAULT_CHIP`.
    """
    candidates = []
    if npu:
        try:
            import torch

            candidates.append(torch.npu.get_device_name())
        except Exception:  # no torch_npu / no device: fall through to the environment
            pass
    candidates.append(os.environ.get("TRITON_ASCEND_ARCH", ""))
    for c in candidates:
        if c and c.strip().lower() in _LOOKUP:
            return _LOOKUP[c.strip().lower()]
    return None
