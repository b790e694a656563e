"""The estimate against public hardware timings (``fla-ascend estimate calibration``).

Each :class:`Measured` point is a time someone measured on an Ascend 910B-class chip and published,
with its source, chip, shape, dtype and scope: ``kernel`` (a profiler's kernel duration) or ``op`` (a
whole call of a Python function, host included: a synced wall-clock or event time). The kernels it
covers are captured and compiled here the way the estimate does for any launch, and divided:

- flash-linear-attention's Ascend case notes (its kernels as of those notes: the main branch at the
  merge of flash-linear-attention PR 1126, 2026-08-14; 0.6.0 renamed and rewrote some of them);
- MegaGDN's per-stage timings of vllm-ascend 0.18.0rc1's Triton GDN kernels on a 910B2
  (:mod:`fla_ascend.estimate.vllm_ascend`) and its timings of their whole forward chain.

A kernel-level point is compared with the sum of its launches' estimates; an op-level point adds the
host-side costs the call pays (:func:`fla_ascend.estimate.model.host_us`). The constants of the model
that are fitted (``fits``) are fitted on named points; the others (``fits`` empty) are held out and
check the fit. :func:`fit_assumptions` refits the constants from the rows of :func:`calibrate`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from fla_ascend.tiling.chips import ChipSpec, get_chip

__all__ = ["Measured", "CALIBRATION", "calibrate", "fit_assumptions", "error_band", "DEVICE_CONSTANTS",
           "HOST_CONSTANTS"]

DEVICE_CONSTANTS = ("SYNC_S", "ROUND_S", "LAUNCH_S")
"""Fitted together on the kernel-level points (and the stage calls whose host share is small)."""
HOST_CONSTANTS = ("HOST_SYNC_S", "LAUNCH_HOST_S")
"""Fitted together on op-level points whose host share is large."""


@dataclass(frozen=True)
class Measured:
    """A public hardware timing.

    Attributes:
        name: what was measured, with its shape.
        side: whose kernels: ``"fla"`` (flash-linear-attention, through its public op ``op`` of the
            catalogue) or ``"vllm-ascend"`` (a stage ``op`` of :data:`fla_ascend.estimate.vllm_ascend.STAGES`).
        op: the catalogue op or the vllm-ascend stage.
        shape: the op's sizes (catalogue names) or the stage's (:func:`~fla_ascend.estimate.vllm_ascend.stage_shape`).
        us: the measured time, microseconds.
        scope: ``"kernel"`` (kernel duration) or ``"op"`` (a whole call, host included).
        source: where it was published (URL).
        chip: the chip it was measured on.
        dtype: the dtype of the inputs.
        direction: ``"fwd"`` / ``"bwd"`` launches only; ``None`` both.
        kernels: regex on kernel names whose estimates are summed.
        nth: only the ``nth`` launch (0-based) of those, where the source times one of several.
        host_ops: for an op-level point that is part of the captured call, the framework ops of that
            part (the note names them); ``None``: the ops recorded for the whole call.
        vector_busy: the share of the kernel time the Vector unit was busy, where the source gives it.
        fits: the constants of :data:`fla_ascend.estimate.model.ASSUMPTIONS` this point is fitted on
            (empty: a held-out check).
        date: when it was measured or published.
        note: what the source says, briefly.
    """

    name: str
    side: str
    op: str
    shape: dict
    us: float
    scope: str
    source: str
    chip: str
    dtype: str
    direction: str | None = None
    kernels: str = "."
    nth: int | None = None
    host_ops: int | None = None
    vector_busy: float | None = None
    fits: tuple = ()
    date: str = ""
    note: str = field(default="", compare=False)


_FLA_NOTES = "https://github.com/fla-org/flash-linear-attention/blob/main/.agents/skills/fla-ascend-performance/references/"
_CASES_MD = _FLA_NOTES + "cases.md"
_G_CONTIG_MD = _FLA_NOTES + "g-contiguous-loading.md"
_MEGAGDN = "https://github.com/huawei-csl/megagdn-pto/blob/main/outputs/data/"
_MEGAGDN_STAGES = _MEGAGDN + "kernel_bench_L8192.json"
_MEGAGDN_CHAIN = _MEGAGDN + "pto_pipeline_latency.json"

_DEV = DEVICE_CONSTANTS
_HOST = HOST_CONSTANTS
_CONV = dict(B=1, T=8192, D=4096, W=4)
_G2 = dict(B=2, T=2048, H=4, HV=8, K=64, V=64)


def _fla_points() -> list:
    c, g = _CASES_MD, _G_CONTIG_MD
    conv = "causal_conv1d"
    gdn = "chunk_gated_delta_rule"
    common = dict(side="fla", chip="Ascend910B2", dtype="bf16")
    return [
        Measured("causal_conv1d fwd+bwd B1 T8192 D4096 W4", op=conv, shape=_CONV, us=1371.0, scope="op", source=c,
                 fits=_HOST, date="2026-08", note="synced median of the op's fwd+bwd after the TAIL_MODE split; "
                 "host transpose and a dweight/dbias ReduceSum ~10%", **common),
        Measured("causal_conv1d fwd+bwd B1 T2048 D4096 W4", op=conv, shape=dict(_CONV, T=2048), us=590.0, scope="op",
                 source=c, fits=_HOST, date="2026-08", note="as above", **common),
        Measured("causal_conv1d fwd+bwd B1 T2048 D1024 W4", op=conv, shape=dict(_CONV, T=2048, D=1024), us=457.0,
                 scope="op", source=c, fits=_HOST, date="2026-08", note="as above", **common),
        Measured("causal_conv1d fwd kernel B1 T8192 D4096 W4", op=conv, shape=_CONV, us=350.0, scope="kernel",
                 source=c, direction="fwd", kernels="fwd", vector_busy=0.64, fits=("HBM_EFFICIENCY",
                 "VECTOR_EFFICIENCY") + _DEV, date="2026-08", note="'Fwd ~350us unchanged (vec~0.64)', pipe view",
                 **common),
        Measured("causal_conv1d bwd bulk kernel B1 T8192 D4096 W4", op=conv, shape=_CONV, us=759.0, scope="kernel",
                 source=c, direction="bwd", kernels="bwd", nth=0, vector_busy=0.948, fits=("VECTOR_EFFICIENCY",) + _DEV,
                 date="2026-08", note="'bulk 759us vec=0.948' (the first backward launch)", **common),
        Measured("causal_conv1d bwd tail kernel B1 T8192 D4096 W4", op=conv, shape=_CONV, us=23.0, scope="kernel",
                 source=c, direction="bwd", kernels="bwd", nth=1, fits=_DEV, date="2026-08",
                 note="'+ tail 23us' (the second backward launch)", **common),
        Measured("chunk_gated_delta_rule bwd dhu B8 T2048 H32 K=V=128", op=gdn,
                 shape=dict(B=8, T=2048, H=32, HV=32, K=128, V=128), us=3300.0, scope="kernel", source=c,
                 direction="bwd", kernels=r"h_bwd|dhu|bwd_dh", fits=_DEV, date="2026-08",
                 note="'D128 ~6.2 -> 3.3ms' after the tile cost model; 'still AIC-scalar dominated'", **common),
        Measured("chunk_gated_delta_rule bwd dhu B8 T2048 H32 K=V=256", op=gdn,
                 shape=dict(B=8, T=2048, H=32, HV=32, K=256, V=256), us=11400.0, scope="kernel", source=c,
                 direction="bwd", kernels=r"h_bwd|dhu|bwd_dh", fits=_DEV, date="2026-08",
                 note="'D256 ~15.5 -> 11.4ms'", **common),
        Measured("chunk_gated_delta_rule bwd dv_local B2 T2048 H4 HV8 K=V=64", op=gdn, shape=_G2, us=180.0,
                 scope="kernel", source=g, direction="bwd", kernels=r"dv_local", fits=_DEV, date="2026-07",
                 note="'chunk_bwd_kernel_dv_local_npu (kernel only) ~6.5 ms -> ~0.18 ms'", **common),
        Measured("chunk_gated_delta_rule bwd dqkwg B2 T2048 H4 HV8 K=V=64", op=gdn, shape=_G2, us=910.0,
                 scope="kernel", source=g, direction="bwd", kernels=r"dqkwg", fits=_DEV, date="2026-07",
                 note="'chunk_bwd_dqkwg_npu (kernel only) ~10.8 ms -> ~0.91 ms'", **common),
        Measured("chunk_gated_delta_rule bwd dqkwg + dg + g transpose B2 T2048 H4 HV8 K=V=64", op=gdn, shape=_G2,
                 us=1500.0, scope="op", source=g, direction="bwd", kernels=r"dqkwg|kernel_dg|_dg_", host_ops=1,
                 date="2026-07", note="'chunk_bwd_dqkwg_npu (e2e incl. dg + transpose) ~1.5 ms'; held out",
                 **common),
    ]


# MegaGDN kernel_bench_L8192.json (2026-05-02, 910B2): N_seq 16 x L_seg 8192, Hg 16, D 128; vllm-ascend
# 0.18.0rc1's Triton stages at chunk 64 and 128, milliseconds (null entries failed on the device)
_STAGE_MS = {
    ("cumsum", 16, 64): 1.0265, ("cumsum", 16, 128): 1.0259, ("kkt", 16, 64): 2.2278,
    ("solve_tril", 16, 64): 12.1799, ("wy_fast", 16, 64): 11.8603, ("wy_fast", 16, 128): 6.1403,
    ("chunk_h", 16, 64): 15.6044, ("chunk_h", 16, 128): 8.1011, ("chunk_o", 16, 64): 8.4800,
    ("cumsum", 32, 64): 0.9596, ("kkt", 32, 64): 3.9042, ("wy_fast", 32, 64): 23.2855, ("wy_fast", 32, 128): 11.9116,
    ("chunk_h", 32, 64): 30.9104, ("chunk_h", 32, 128): 15.8361, ("chunk_o", 32, 64): 16.1723,
    ("cumsum", 48, 64): 0.9963, ("kkt", 48, 64): 5.6381, ("wy_fast", 48, 64): 34.5851, ("wy_fast", 48, 128): 17.6198,
    ("chunk_h", 48, 64): 46.1345, ("chunk_h", 48, 128): 23.2907, ("chunk_o", 48, 64): 23.6987,
    ("cumsum", 64, 64): 1.0852, ("kkt", 64, 64): 7.4021, ("wy_fast", 64, 64): 45.9216, ("wy_fast", 64, 128): 23.4095,
    ("chunk_h", 64, 128): 31.2404,
}
# MegaGDN pto_pipeline_latency.json (2026-05-02, 910B2): N_seq 16, Hg 16, D 128, vllm-ascend's six Triton
# stages chained at chunk 64 (triton_bt64_chain_ms, host wall clock with a sync), milliseconds
_CHAIN_MS = {(1024, 16): 11.188, (1024, 32): 17.553, (1024, 48): 24.138, (1024, 64): 30.943, (2048, 16): 17.629,
             (2048, 32): 31.036, (2048, 48): 44.388, (2048, 64): 57.621, (4096, 16): 31.299, (4096, 32): 58.005}


_STAGE_DTYPE = {"cumsum": "fp32", "kkt": "bf16 (g fp32, A out fp32)", "solve_tril": "fp32",
                "wy_fast": "bf16 (g fp32)", "chunk_h": "bf16 (g fp32)", "chunk_o": "bf16 (g fp32)"}


def _vllm_points() -> list:
    from fla_ascend.estimate.vllm_ascend import stage_shape

    common = dict(side="vllm-ascend", chip="Ascend910B2", scope="op", date="2026-05-02")
    out = []
    for (stage, H, BT), ms in _STAGE_MS.items():
        host_heavy = stage in ("cumsum", "solve_tril")
        out.append(Measured(f"vllm-ascend {stage} N16 L8192 H{H} Hg16 D128 BT{BT}", op=stage,
                            shape=stage_shape(16, 8192, H, 16, 128, BT), us=round(ms * 1000, 1), source=_MEGAGDN_STAGES,
                            dtype=_STAGE_DTYPE[stage],
                            fits=() if stage == "solve_tril" else (_HOST if host_heavy else _DEV),
                            note="event-timed stage call (host index preparation inside)" if host_heavy else
                            "event-timed stage call", **common))
    for (L, H), ms in _CHAIN_MS.items():
        out.append(Measured(f"vllm-ascend forward (6 stages) N16 L{L} H{H} Hg16 D128", op="forward",
                            shape=stage_shape(16, L, H, 16, 128, 64), us=round(ms * 1000, 1), source=_MEGAGDN_CHAIN,
                            dtype="fp16 (g fp32)", note="host wall clock around the chained call and a sync; held out",
                            **common))
    return out


CALIBRATION = _fla_points() + _vllm_points()
"""The public hardware timings the model is calibrated on and checked against (see the module
docstring for the sources)."""


def _launch_row(x) -> dict:
    rounds = -(-_prod(x.grid) // max(1, x.cores))
    return {"kernel": x.kernel, "direction": x.direction, "core_type": x.core_type, "time_us": x.time_us,
            "bound": x.bound, "terms_us": dict(x.terms_us), "syncs": x.per_core_max.get("syncs", 0.0),
            "rounds": rounds}


def _prod(xs) -> int:
    n = 1
    for v in xs:
        n *= int(v)
    return n


def _capture(m: Measured, chip: ChipSpec, log):
    """``(launch estimates, HostWork dict, error)`` of the call behind ``m``."""
    from fla_ascend.estimate import model as M

    if m.side == "fla":
        est = M.estimate_op(m.op, "calibration", chip, "fla", dict(m.shape), log)
        return est.kept(), est.host, est.error
    from fla_ascend.estimate import vllm_ascend as va

    host = M.HostWork()
    try:
        launches = va.capture_stage(m.op, m.shape, chip, host)
    except Exception as e:  # noqa: BLE001 - the stage call itself failed: report it
        return [], {}, f"{type(e).__name__}: {str(e)[:300]}"
    out = []
    for d, la in launches:
        x = M.estimate_launch(la, chip, d)
        if log:
            log(f"  vllm-ascend {m.op} {m.shape} {x.kernel} grid={x.grid} "
                f"{f'{x.time_us:.1f} us ({x.bound})' if x.ok else x.error[:120]}")
        out.append(x)
    return out, host.to_dict(), ""


def _fla_version() -> str:
    """flash-linear-attention's ``__version__`` as its source states it (importing it needs the capture's
    stand-in driver)."""
    import importlib.util

    spec = importlib.util.find_spec("fla")
    try:
        with open(spec.origin) as f:
            m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
        return m.group(1) if m else "?"
    except (OSError, AttributeError, TypeError):
        return "?"


def _unavailable(side: str) -> str | None:
    if side == "fla":
        from fla_ascend.estimate.model import fla_available

        return fla_available()
    from fla_ascend.estimate.vllm_ascend import available

    return available()


def calibrate(chip: ChipSpec | str = "Ascend910B2", log=None, points=None) -> list:
    """Estimate every point of :data:`CALIBRATION` (or ``points``).

    Returns one dict per point: its fields, ``kernel_us`` (its launches' estimates summed),
    ``host_us`` (op-level points: :func:`fla_ascend.estimate.model.host_us`), ``estimated_us`` (the
    two), ``ratio`` (estimate / measurement), ``bounds`` (time per bounding resource), ``launches``
    (the counts :func:`fit_assumptions` needs), ``failed`` (launches that did not compile) and
    ``skipped`` (why nothing was estimated: the other project is not importable). Each call is
    captured and compiled once."""
    from fla_ascend.estimate import model as M

    chip = get_chip(chip)
    done: dict = {}
    versions: dict = {}
    out = []
    for m in points if points is not None else CALIBRATION:
        row = {"name": m.name, "side": m.side, "op": m.op, "shape": dict(m.shape), "scope": m.scope, "dtype": m.dtype,
               "chip": m.chip, "source": m.source, "date": m.date, "note": m.note, "fits": list(m.fits),
               "measured_us": m.us, "vector_busy": m.vector_busy, "kernel_us": None, "host_us": None,
               "estimated_us": None, "ratio": None, "bounds": {}, "launches": [], "failed": [], "skipped": "",
               "host": {}}
        reason = _unavailable(m.side)
        if reason:
            row["skipped"] = reason
            out.append(row)
            continue
        if m.side == "fla" and "fla" not in versions:
            versions["fla"] = _fla_version()
        row["version"] = versions.get("fla") if m.side == "fla" else None
        key = (m.side, m.op, tuple(sorted(m.shape.items())))
        if key not in done:
            done[key] = _capture(m, chip, log)
        launches, host, err = done[key]
        sel = [x for x in launches
               if re.search(m.kernels, x.kernel) and (m.direction is None or x.direction == m.direction)]
        if m.nth is not None:
            sel = sel[m.nth:m.nth + 1]
        ok = [x for x in sel if x.ok]
        row["failed"] = [f"{x.kernel}: {x.error}" for x in sel if not x.ok] + ([err] if err else [])
        row["launches"] = [_launch_row(x) for x in ok]
        for x in ok:
            row["bounds"][x.bound] = round(row["bounds"].get(x.bound, 0.0) + x.time_us, 1)
        if ok and not [x for x in sel if not x.ok]:
            row["kernel_us"] = sum(x.time_us for x in ok)
            if m.scope == "op":
                row["host"] = dict(host) if m.host_ops is None else {"ops": m.host_ops, "bytes": 0.0, "syncs": 0}
                row["host_us"] = M.host_us(row["host"], len(ok), chip)
            row["estimated_us"] = row["kernel_us"] + (row["host_us"] or 0.0)
            row["ratio"] = row["estimated_us"] / m.us
        out.append(row)
    return out


def error_band(rows: list) -> dict:
    """``{scope: (lowest ratio, highest ratio, points)}`` over the estimated rows, and ``"held out"``
    for the rows no constant is fitted on."""
    out = {}
    for label, keep in (("kernel", lambda r: r["scope"] == "kernel"), ("op", lambda r: r["scope"] == "op"),
                        ("held out", lambda r: not r["fits"])):
        rs = [r["ratio"] for r in rows if r["ratio"] is not None and keep(r)]
        if rs:
            out[label] = (min(rs), max(rs), len(rs))
    return out


def _lstsq(rows_a: list, rows_b: list, weights: list) -> list:
    import numpy as np

    a = np.array(rows_a, dtype=float) * np.array(weights)[:, None]
    b = np.array(rows_b, dtype=float) * np.array(weights)
    return [float(v) for v in np.linalg.lstsq(a, b, rcond=None)[0]]


def fit_assumptions(rows: list, chip: ChipSpec | str = "Ascend910B2") -> dict:
    """Refit the fitted constants of :data:`fla_ascend.estimate.model.ASSUMPTIONS` from the rows of
    :func:`calibrate` (which were estimated with the current values), each on the rows whose
    ``fits`` name it:

    - ``HBM_EFFICIENCY``: the HBM-bound kernel's time at peak bandwidth over its measured time;
    - ``VECTOR_EFFICIENCY``: the mean of the vector term at peak over the measured vector-busy time;
    - ``SYNC_S``, ``ROUND_S``, ``LAUNCH_S``: linear least squares of measured minus (resource bound
      + host) against the waits, the extra rounds and the launches, weighted by 1 / measured;
    - ``HOST_SYNC_S``, ``LAUNCH_HOST_S``: the same for measured minus (kernels + framework ops)
      against the host syncs and the launches; the two groups alternate three times.

    Returns ``{name: value}`` in the units of :data:`ASSUMPTIONS` (seconds, shares).

    Raises:
        ValueError: a group has fewer rows than constants."""
    from fla_ascend.estimate import model as M

    chip = get_chip(chip)
    a = {k: M.ASSUMPTIONS[k][0] for k in ("HBM_EFFICIENCY", "VECTOR_EFFICIENCY") + DEVICE_CONSTANTS + HOST_CONSTANTS}
    est = [r for r in rows if r["estimated_us"] is not None]

    def of(name):
        return [r for r in est if name in r["fits"]]

    hb = of("HBM_EFFICIENCY")
    if hb:
        a["HBM_EFFICIENCY"] = sum(sum(x["terms_us"]["hbm"] for x in r["launches"]) * M.ASSUMPTIONS["HBM_EFFICIENCY"][0]
                                  for r in hb) / sum(r["measured_us"] for r in hb)
    vb = [r for r in of("VECTOR_EFFICIENCY") if r.get("vector_busy")]
    if vb:
        a["VECTOR_EFFICIENCY"] = sum(sum(x["terms_us"]["vector"] for x in r["launches"])
                                     * M.ASSUMPTIONS["VECTOR_EFFICIENCY"][0] / (r["vector_busy"] * r["measured_us"])
                                     for r in vb) / len(vb)

    def resource(x):
        t = dict(x["terms_us"])
        t["hbm"] *= M.ASSUMPTIONS["HBM_EFFICIENCY"][0] / a["HBM_EFFICIENCY"]
        t["vector"] *= M.ASSUMPTIONS["VECTOR_EFFICIENCY"][0] / a["VECTOR_EFFICIENCY"]
        return max(t.values())

    def kernels(r):
        return sum(resource(x) + 1e6 * (x["syncs"] * a["SYNC_S"] + a["LAUNCH_S"] + (x["rounds"] - 1) * a["ROUND_S"])
                   for x in r["launches"])

    def host_fixed(r):  # the part of host_us that is not fitted
        h = r.get("host") or {}
        return 1e6 * (h.get("ops", 0) * M.ASSUMPTIONS["TORCH_OP_S"][0]) + h.get("bytes", 0.0) / (
            chip.hbm_bw * a["HBM_EFFICIENCY"]) * 1e6

    def host(r):
        if r["scope"] != "op":
            return 0.0
        h = r.get("host") or {}
        return host_fixed(r) + 1e6 * (h.get("syncs", 0) * a["HOST_SYNC_S"] + len(r["launches"]) * a["LAUNCH_HOST_S"])

    dev, hst = of(DEVICE_CONSTANTS[0]), of(HOST_CONSTANTS[0])
    for group, n in ((dev, len(DEVICE_CONSTANTS)), (hst, len(HOST_CONSTANTS))):
        if group and len(group) < n:
            raise ValueError(f"{len(group)} rows cannot fit {n} constants")
    for _ in range(3):
        if dev:
            lhs = [[sum(x["syncs"] for x in r["launches"]), sum(x["rounds"] - 1 for x in r["launches"]),
                    len(r["launches"])] for r in dev]
            rhs = [r["measured_us"] - sum(resource(x) for x in r["launches"]) - host(r) for r in dev]
            s, rd, ln = _lstsq(lhs, rhs, [1 / r["measured_us"] for r in dev])
            a["SYNC_S"], a["ROUND_S"], a["LAUNCH_S"] = s * 1e-6, rd * 1e-6, ln * 1e-6
        if hst:
            lhs = [[(r.get("host") or {}).get("syncs", 0), len(r["launches"])] for r in hst]
            rhs = [r["measured_us"] - kernels(r) - host_fixed(r) for r in hst]
            hs, lh = _lstsq(lhs, rhs, [1 / r["measured_us"] for r in hst])
            a["HOST_SYNC_S"], a["LAUNCH_HOST_S"] = hs * 1e-6, lh * 1e-6
    return a
