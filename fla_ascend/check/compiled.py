"""The check's compile stage: merge launches that lowered to the same specialisation, compile each
distinct one with ``bishengir-compile`` (:func:`fla_ascend.compiler.bishengir.compile_module`) in parallel,
and turn the compiled plan into report fields and findings.

Findings:

- ``compile_<class>`` (severity ``error`` on every chip): the compiler rejected the launch
  (``compile_ub_overflow``, ``compile_l1_overflow``, ``compile_l0c_overflow``, ``compile_crash``,
  ``compile_timeout``, ``compile_other``...).
- ``ub_headroom`` (``error`` on A2/A3; on A5 ``warning`` unless ``strict_a5``): the planned UB leaves
  less than :data:`UB_HEADROOM` of the chip's UB free. On A2/A3 such a plan is probed
  (:func:`fla_ascend.compiler.reserve.reserve_fits`): bishengir-compile's planner spends spare UB on
  avoiding buffer reuse across pipes, so the kernel is planned again beside a reserved
  :data:`UB_HEADROOM` share of the UB; when that plan is found the finding is ``info`` (the room is
  there), otherwise it stays an error. The probe's outcome is the row's ``ub_reserve``.
- ``ub_model_vs_plan`` (as ``ub_headroom``): the UB model (:func:`fla_ascend.tiling.ub.predict`, charged
  bytes) is above :data:`MODEL_MAX_RATIO` times the planned UB, or below it; below a plan that leaves
  :data:`UB_HEADROOM` free (or passes the reservation probe) it is ``info`` (see :data:`MODEL_MAX_RATIO`).
"""
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from fla_ascend.compiler.bishengir import compile_module, compiler_available, is_a5
from fla_ascend.compiler.reserve import reserve_fits, reserve_size
from fla_ascend.tiling.chips import ChipSpec

__all__ = ["merge_specialisations", "compile_results", "UB_HEADROOM", "MODEL_MAX_RATIO"]

UB_HEADROOM = 0.10
"""Share of UB a launch's plan must leave free on every chip (the compiler's retries, CANN's code
generator and later kernel edits need room)."""

MODEL_MAX_RATIO = 1.3
"""The UB model should satisfy ``plan <= model <= MODEL_MAX_RATIO x plan`` (it picks tiles for NPU
launch plans: far above the plan it wastes UB, below the plan it could let a tile overflow). A model below
a plan that leaves :data:`UB_HEADROOM` free is reported as ``info``: there bishengir-compile spends
free UB on more buffers than the tiles need, so the plan is no measure of the need. The fused
recurrence plans 123360 B at ``K = 64, BV = 64`` and 133540 B at ``K = 128, BV = 64`` (half the tile
data, 92% of the UB), 145984 B at ``K = 256, BV = 16`` and 134628 B at ``BV = 32``; the WY forward at
chunk 32, ``K = 16, V = 256`` plans 161152 B (82%) with 16-wide tiles (Ascend910B2, 2026-12-07,
``fla-ascend check --full``). Every launch the ops can pick is compiled by ``--full``, so a tile that
overflows shows as a compile error, and ``ub_headroom`` bounds every plan."""


def _row_key(r) -> tuple:
    return (r.kernel, r.ttadapter_sha256, tuple(sorted(r.options.items())),
            tuple(sorted((f["code"], f["message"]) for f in r.findings)))


def merge_specialisations(results: list) -> list:
    """Merge results of one chip that lowered to the same text with the same options (the same
    compiled kernel) and carry the same lowering findings: the first row is kept and the others'
    configs are appended to its ``configs``. Unlowered rows are kept as they are. (Rows that differ
    only in findings stay apart; :func:`compile_results` still compiles their kernel once.)"""
    out, seen = [], {}
    for r in results:
        if not r.lowered:
            out.append(r)
            continue
        k = _row_key(r)
        if k not in seen:
            seen[k] = r
            out.append(r)
        else:
            seen[k].configs += [c for c in r.configs if c not in seen[k].configs]
    return out


def _finding(code, message, severity="error", where=""):
    return {"code": code, "message": message, "severity": severity, "where": where}


def _over_headroom(res, chip: ChipSpec) -> bool:
    return res.ok and res.facts is not None and res.facts.planned_bytes.get("ub", 0) > (1 - UB_HEADROOM) * chip.ub_bytes


def _apply(r, res, chip: ChipSpec, strict_a5: bool, reserve=None) -> None:
    # the plan findings of A5 (whose UB model is not fitted and which the A2/A3 tiles serve) are warnings
    # by default; a launch that does not compile is an error on every chip
    sev = "warning" if is_a5(chip.name) and not strict_a5 else "error"
    r.compiled = res.ok
    r.compile_error_class, r.compile_message = res.error_class, res.message
    r.compile_needed_bytes, r.compile_available_bytes = res.needed_bytes, res.available_bytes
    r.compile_seconds, r.compile_cached, r.module_path = round(res.seconds, 3), res.cached, res.module_path
    r.compile_cpu_seconds = None if res.cpu_seconds is None else round(res.cpu_seconds, 3)
    if res.facts is not None:
        f = res.facts
        r.core_type = f.core_type
        r.planned = {sp: f.planned_bytes.get(sp, 0) for sp in ("ub", "l1", "l0c")}
        caps = {"ub": chip.ub_bytes, "l1": chip.l1_bytes, "l0c": chip.l0c_bytes}
        r.share = {sp: round(r.planned[sp] / caps[sp], 4) for sp in caps if caps[sp]}
        r.multibuffered = dict(f.multibuffered)
        r.intra_core_syncs, r.cross_core_syncs = f.n_intra_core_syncs, f.n_cross_core_syncs
    if not res.ok:
        extra = ""
        if res.needed_bytes is not None:
            extra = f" ({res.needed_bytes} B needed of {res.available_bytes} B {res.space.upper()})"
        r.findings.append(_finding(f"compile_{res.error_class}", f"bishengir-compile: {res.message}{extra}"))
        return
    ub = r.planned.get("ub", 0)
    room = ub <= (1 - UB_HEADROOM) * chip.ub_bytes
    if reserve is not None:
        r.ub_reserve = reserve.to_dict()
    if not room:
        msg = f"planned UB {ub} B = {ub / chip.ub_bytes:.0%} of {chip.ub_bytes} B (at most {1 - UB_HEADROOM:.0%})"
        if reserve is not None and reserve.fits:
            room = True
            r.findings.append(_finding("ub_headroom", f"{msg}; it plans beside a reserved {reserve.reserve_bytes} B "
                                       f"({reserve.reserve_bytes / chip.ub_bytes:.0%}) live through the kernel: the "
                                       "planner filled spare UB", "info"))
        else:
            why = "" if reserve is None else (" and does not plan beside a reserved "
                                              f"{reserve.reserve_bytes} B" if reserve.fits is False
                                              else f"; reservation probe undecided: {reserve.reason}")
            r.findings.append(_finding("ub_headroom", msg + why, sev))
    if r.model_bytes is not None and ub:
        r.model_vs_plan = round(r.model_bytes / ub, 3)
        if not 1.0 <= r.model_vs_plan <= MODEL_MAX_RATIO:
            fits = room
            r.findings.append(_finding("ub_model_vs_plan", f"UB model {r.model_bytes} B vs planned {ub} B: ratio "
                                       f"{r.model_vs_plan} outside [1, {MODEL_MAX_RATIO}]",
                                       "info" if r.model_vs_plan < 1.0 and fits else sev))


def compile_results(results: list, chip: ChipSpec, jobs: int, timeout_s: float, cache_dir: str | None,
                    use_cache: bool = True, strict_a5: bool = False, log=sys.stderr) -> str:
    """Compile every lowered result of ``chip`` (one compile per distinct specialisation, ``jobs``
    at a time) and fill in its compiled fields and findings, in place.

    Each compile is its own ``bishengir-compile`` process; the pool only waits on them, so it is a
    thread pool.

    Returns:
        ``"compiled"``, or ``"lowering only: ..."`` with the reason when the compiler for ``chip``
        is not installed (then nothing is compiled).
    """
    if not compiler_available(chip.name):
        return "lowering only: ascendnpu-ir (bishengir-compile) is not installed; pip install ascendnpu-ir"
    groups: dict = {}
    for r in results:
        if r.lowered and r.ttadapter:
            groups.setdefault((r.ttadapter_sha256, tuple(sorted(r.options.items()))), []).append(r)
    todo = list(groups.items())
    t0, done = time.perf_counter(), 0

    def work(item):
        (_sha, opts), rows = item
        res = compile_module(rows[0].ttadapter, chip.name, dict(opts), timeout_s=timeout_s,
                             cache_dir=cache_dir, use_cache=use_cache)
        reserve = None
        if _over_headroom(res, chip) and not is_a5(chip.name):
            reserve = reserve_fits(rows[0].ttadapter, chip.name, dict(opts), reserve_size(chip.ub_bytes, UB_HEADROOM),
                                   res.facts.planned_bytes["ub"], timeout_s=timeout_s, cache_dir=cache_dir,
                                   use_cache=use_cache)
        return item, res, reserve

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        for ((_sha, _opts), rows), res, reserve in ex.map(work, todo):
            done += 1
            for r in rows:
                _apply(r, res, chip, strict_a5, reserve)
            if log is not None and (res.seconds > 10 and not res.cached or done == len(todo)):
                name = rows[0].kernel.rsplit(".", 1)[-1]
                print(f"[{chip.name}] {done}/{len(todo)} compiled ({time.perf_counter() - t0:.0f} s): {name} "
                      f"[{rows[0].config}] {'ok' if res.ok else res.error_class} in {res.seconds:.1f} s"
                      f"{' (cached)' if res.cached else ''}", file=log, flush=True)
    return "compiled"
