"""``fla-ascend estimate``: static NPU time estimates per kernel from the compiled plan, ours beside
flash-linear-attention 0.6.0's NPU kernels; terminal (rich), JSON, Markdown and PNG reports."""
from __future__ import annotations

import argparse
import json
import re
import sys
import time


def stage_of(kernel: str, op: str | None = None) -> str:
    """The logical stage a kernel belongs to, for side-by-side rows: a kernel of ours by the stage
    label ``op``'s spec gives it (a kernel two ops share may sit in a stage of each op's own name),
    else by its owner's; flash-linear-attention's by the ``fla_stages`` patterns of ``op``'s spec
    (then of every spec, in catalogue order); else the kernel name itself."""
    from fla_ascend.ops import catalog

    own = {k.short_name: k.stage for s, k in catalog.listings() if s.name == op}
    ours = {k.short_name: k.stage for _, k in catalog.kernels().values()}
    if kernel in own or kernel in ours:
        return own.get(kernel, ours.get(kernel))
    specs = catalog.specs()
    order = [s.fla_stages for s in ([specs[op]] if op in specs else [])]
    for patterns in order + [s.fla_stages for s in specs.values()]:
        for pat, name in patterns:
            if re.search(pat, kernel):
                return name
    return kernel


def _stage_table(op_est: dict) -> dict:
    out: dict = {}
    for la in op_est["launches"]:
        key = f"{la['direction']}: {stage_of(la['kernel'], op_est.get('op'))}"
        e = out.setdefault(key, {"time_us": 0.0, "bounds": {}, "launches": 0, "syncs": 0.0, "failed": []})
        e["launches"] += 1
        if la["ok"]:
            e["time_us"] += la["time_us"]
            e["bounds"][la["bound"]] = e["bounds"].get(la["bound"], 0.0) + la["time_us"]
            e["syncs"] += la["per_core_max"].get("syncs", 0.0)
        else:
            e["failed"].append(f"{la['kernel']}: {la['error']}")
    for e in out.values():
        e["bound"] = max(e["bounds"], key=e["bounds"].get) if e["bounds"] else "not compiled"
        if not e["bounds"]:
            e["time_us"] = None
    return out


def side_by_side(ours: dict, theirs: dict | None) -> list:
    """Rows ``{stage, ours_us, ours_bound, fla_us, fla_bound, ratio}`` plus totals (fwd, bwd, all)."""
    a = _stage_table(ours)
    b = _stage_table(theirs) if theirs else {}
    rows = []
    for st in list(a) + [s for s in b if s not in a]:
        ra, rb = a.get(st), b.get(st)
        rows.append({"stage": st, "ours_us": ra["time_us"] if ra else None, "ours_bound": ra["bound"] if ra else "",
                     "ours_syncs": ra["syncs"] if ra else None, "ours_failed": ra["failed"] if ra else [],
                     "fla_us": rb["time_us"] if rb else None, "fla_bound": rb["bound"] if rb else "",
                     "fla_syncs": rb["syncs"] if rb else None, "fla_failed": rb["failed"] if rb else []})
    n_fail = {s: sum(len(r[f"{s}_failed"]) for r in rows) for s in ("ours", "fla")}
    for d in ("fwd", "bwd", None):
        key = "total" if d is None else f"total {d}"
        ou = None if ours.get("error") else (ours["total_us"] if d is None else ours[f"{d}_us"])
        fu = (theirs["total_us"] if d is None else theirs[f"{d}_us"]) if theirs and not theirs.get("error") else None
        if d and not ou and not fu:
            continue
        rows.append({"stage": key, "ours_us": ou, "fla_us": fu,
                     "ours_bound": f"{n_fail['ours']} not compiled" if n_fail["ours"] and d is None else "",
                     "fla_bound": f"{n_fail['fla']} not compiled" if n_fail["fla"] and d is None and theirs else ""})
    for r in rows:
        r["ratio"] = (r["ours_us"] / r["fla_us"]) if r.get("ours_us") and r.get("fla_us") else None
    return rows


def launch_rows(case: dict) -> list:
    """Every kept launch of both sides of a report case, grouped by stage in the order of its
    :func:`side_by_side` rows (ours, then flash-linear-attention's, each in launch order): rows
    ``{stage, side, kernel, launches, core_type, ub_bytes, ub_percent, syncs, time_us, bound, ok,
    error}``. Consecutive launches of one kernel in one stage (a grid split into several launches)
    are one row: ``launches`` of them, their time and waits summed, the largest planned UB.
    ``syncs``: the cross-core waits of the busiest core."""
    per_stage: dict = {r["stage"]: [] for r in case["rows"] if not r["stage"].startswith("total")}
    for side in ("ours", "fla"):
        est = case.get(side) or {}
        for la in est.get("launches", []):
            stage = f"{la['direction']}: {stage_of(la['kernel'], case.get('op'))}"
            rows = per_stage.setdefault(stage, [])
            row = {"stage": stage, "side": side, "kernel": la["kernel"], "launches": 1,
                   "core_type": la.get("core_type", "?"), "ub_bytes": la.get("ub_bytes"),
                   "ub_percent": la.get("ub_percent"),
                   "syncs": la["per_core_max"].get("syncs", 0.0) if la["ok"] else None,
                   "time_us": la["time_us"] if la["ok"] else None, "bound": la.get("bound", "") if la["ok"] else "",
                   "ok": la["ok"], "error": la.get("error", "")}
            last = rows[-1] if rows else None
            if last and last["side"] == side and last["kernel"] == row["kernel"] and last["ok"] and row["ok"]:
                last["launches"] += 1
                last["time_us"] += row["time_us"]
                last["syncs"] += row["syncs"]
                if (row["ub_bytes"] or 0) > (last["ub_bytes"] or 0):
                    last["ub_bytes"], last["ub_percent"] = row["ub_bytes"], row["ub_percent"]
                continue
            rows.append(row)
    return [r for rows in per_stage.values() for r in rows]


def launch_markdown(case: dict) -> list:
    """:func:`launch_rows` as Markdown lines, one row per kernel launch (``x N``: N launches of it, a
    split grid); the stage sums and totals are :func:`side_by_side`'s rows."""
    lines = ["| stage | side | kernel | core | UB bytes | UB % | syncs/core | us | bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in launch_rows(case):
        ub = "-" if r["ub_bytes"] is None else str(r["ub_bytes"])
        us = _fmt(r["time_us"]) if r["ok"] else f"not compiled: {r['error'][:120]}"
        name = r["kernel"] + (f" x {r['launches']}" if r["launches"] > 1 else "")
        lines.append(f"| {r['stage']} | {r['side']} | {name} | {r['core_type']} | {ub} | "
                     f"{_fmt(r['ub_percent'], 0)} | {_fmt(r['syncs'], 0)} | {us} | {r['bound']} |")
    return lines + [""]


def published_rows(op: str, sizes: dict, rows: list) -> list:
    """The published timings of the fastest Ascend code known (:mod:`fla_ascend.estimate.published`)
    measured for ``op`` at ``sizes``, each beside our estimate of the same part (``rows``: this case's
    :func:`side_by_side` rows): ``{code, part, role, published_us, scope, dtype, chip, date, source,
    note, ours_stage, ours_us, ours_over_published}``. Parts that are pieces of one of our stages
    (MegaGDN's kkt, solve_tril and wy_fast are our one WY stage) are compared as their sum, in an extra
    row after them."""
    from fla_ascend.estimate.published import at_shape

    ours = {r["stage"]: r.get("ours_us") for r in rows}
    entries = at_shape(op, sizes)
    out = []

    def our(pattern):
        hit = [st for st in ours if re.fullmatch(pattern, st) or (pattern != "total fwd" and re.match(pattern, st))]
        return (hit[0], ours[hit[0]]) if hit else (None, None)

    groups: dict = {}
    for e in entries:
        groups.setdefault((e.code, e.ours), []).append(e)
    for e in entries:
        stage, us = our(e.ours)
        shared = len(groups[(e.code, e.ours)]) > 1
        out.append({"code": e.code, "part": e.part, "role": e.role, "published_us": e.value, "scope": e.scope,
                    "dtype": e.dtype, "chip": e.chip, "date": e.date, "source": e.source, "note": e.note,
                    "packed": list(e.packed) if e.packed else None, "ours_stage": stage,
                    "ours_us": None if shared else us,
                    "ours_over_published": (us / e.value) if us and not shared else None})
        group = groups[(e.code, e.ours)]
        if shared and e is group[-1]:
            total = sum(x.value for x in group)
            out.append({"code": e.code, "part": " + ".join(x.part for x in group), "role": e.role,
                        "published_us": total, "scope": e.scope, "dtype": e.dtype, "chip": e.chip, "date": e.date,
                        "source": e.source, "note": "sum of the published parts above", "packed": out[-1]["packed"],
                        "ours_stage": stage, "ours_us": us, "ours_over_published": (us / total) if us else None})
    return out


def _published_lines(case: dict) -> list:
    pub = case.get("published") or []
    if not pub:
        return []
    lines = ["Published measurements at this shape (hardware timings by others, not estimates; ours is the "
             "estimate above):", "",
             "| code | part | published us | scope | chip | dtype | date | ours (estimated) us | ours / published | "
             "source and conditions |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in pub:
        ours = f"{p['ours_us']:.0f} ({p['ours_stage']})" if p.get("ours_us") else (
            f"in {p['ours_stage']}" if p.get("ours_stage") else "-")
        packed = f"; packed {p['packed'][0]} x {p['packed'][1]}" if p.get("packed") else ""
        lines.append(f"| {p['code']}{' (baseline)' if p['role'] == 'baseline' else ''} | {p['part']} | "
                     f"{p['published_us']:.0f} | {p['scope']} | {p['chip']} | {p['dtype']} | {p['date']} | {ours} | "
                     f"{_fmt(p['ours_over_published'], 2)} | [source]({p['source']}): {p['note']}{packed} |")
    return lines + [""]


def _fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def markdown(report: dict) -> str:
    """The report as Markdown: one side-by-side table per op and shape, then per-launch details."""
    lines = [f"# NPU time estimates from the compiled plan ({report['chip']}, {report['date']})", "",
             "Estimates from bishengir-compile's plan, not hardware timings. Times in microseconds; "
             "ratio = ours / flash-linear-attention 0.6.0 (NPU kernels).", ""]
    for case in report["cases"]:
        lines += [f"## {case['op']} {case['shape']}", "", f"`{case['command']}`", ""]
        if case["ours"].get("error"):
            lines += [f"ours failed: {case['ours']['error']}", ""]
        if case.get("fla") and case["fla"].get("error"):
            lines += [f"flash-linear-attention failed: {case['fla']['error']}", ""]
        lines += ["| stage | ours us | bound | syncs/core | fla us | bound | syncs/core | ours/fla |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in case["rows"]:
            fails = "; ".join(r.get("ours_failed", []) + r.get("fla_failed", []))
            lines.append(f"| {r['stage']} | {_fmt(r['ours_us'])} | {r['ours_bound']} | {_fmt(r.get('ours_syncs'), 0)} "
                         f"| {_fmt(r['fla_us'])} | {r['fla_bound']} | {_fmt(r.get('fla_syncs'), 0)} "
                         f"| {_fmt(r['ratio'], 2)} |" + (f" not compiled: {fails}" if fails else ""))
        lines.append("")
        lines += ["Every launch (UB: planned by the compiler for one core, % of the chip's UB; syncs/core: "
                  "cross-core waits of the busiest core):", ""] + launch_markdown(case)
        lines += _published_lines(case)
        for side in ("ours", "fla"):
            est = case.get(side)
            if not est:
                continue
            lines += [f"<details><summary>{side}: launches</summary>", "",
                      "| dir | kernel | grid | core | UB bytes | UB % | us | bound | hbm | cube | vector | scalar | "
                      "syncs | sync us | GM MB | MACs (M) | unresolved |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for la in est["launches"]:
                ub = "-" if la.get("ub_bytes") is None else str(la["ub_bytes"])
                if not la["ok"]:
                    lines.append(f"| {la['direction']} | {la['kernel']} | {la['grid']} | | {ub} | "
                                 f"{_fmt(la.get('ub_percent'), 0)} | | not compiled: {la['error'][:160]} "
                                 f"| | | | | | | | | |")
                    continue
                t = la["terms_us"]
                gm = (la["total"]["mte2_bytes"] + la["total"]["mte3_bytes"]) / 1e6
                macs = sum(la["total"]["macs"].values()) / 1e6
                lines.append(f"| {la['direction']} | {la['kernel']} | {la['grid']} | {la['core_type']} | {ub} | "
                             f"{_fmt(la.get('ub_percent'), 0)} | {la['time_us']:.1f} | {la['bound']} | "
                             f"{t['hbm']:.1f} | {t['cube']:.1f} | {t['vector']:.1f} | {t['scalar']:.1f} | "
                             f"{la['per_core_max'].get('syncs', 0.0):.0f} | {la['sync_us']:.1f} | {gm:.1f} | "
                             f"{macs:.0f} | "
                             f"{'; '.join(la['unresolved'])[:120]} |")
            lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def summary_markdown(reports: list) -> str:
    """One row per op and shape over several reports: totals, ratio, and where ours loses, the
    stage that loses most with its bounding resource."""
    lines = ["| op | shape | ours fwd us | fla fwd us | ours fwd+bwd us | fla fwd+bwd us | ours/fla | "
             "largest losing stage (ours vs fla us, bound) | fla launches not compiled |",
             "|---|---|---|---|---|---|---|---|---|"]
    for rep in reports:
        for case in rep["cases"]:
            rows = {r["stage"]: r for r in case["rows"]}
            tot, fwd = rows.get("total", {}), rows.get("total fwd", {})
            lose = [r for r in case["rows"] if not r["stage"].startswith("total") and r.get("ours_us")
                    and (r.get("fla_us") or 0) < r["ours_us"]]
            worst = max(lose, key=lambda r: r["ours_us"] - (r.get("fla_us") or 0), default=None)
            ws = (f"{worst['stage']} ({worst['ours_us']:.0f} vs {_fmt(worst.get('fla_us'), 0)}, {worst['ours_bound']})"
                  if worst else "-")
            nf = sum(len(r.get("fla_failed", [])) for r in case["rows"])
            lines.append(f"| {case['op']} | {case['shape']} | {_fmt(fwd.get('ours_us'), 0)} "
                         f"| {_fmt(fwd.get('fla_us'), 0)} "
                         f"| {_fmt(tot.get('ours_us'), 0)} | {_fmt(tot.get('fla_us'), 0)} "
                         f"| {_fmt(tot.get('ratio'), 2)} "
                         f"| {ws} | {nf or '-'} |")
    return "\n".join(lines) + "\n"


def print_rich(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(f"[bold]NPU time estimates from the compiled plan[/] ({report['chip']}): estimates, not hardware "
              f"timings; ratio = ours / flash-linear-attention 0.6.0")
    for case in report["cases"]:
        t = Table(title=f"{case['op']} {case['shape']}")
        for c in ("stage", "ours us", "bound", "fla us", "bound ", "ours/fla"):
            t.add_column(c, justify="right" if "us" in c or "/" in c else "left")
        for r in case["rows"]:
            t.add_row(r["stage"], _fmt(r["ours_us"]), r["ours_bound"], _fmt(r["fla_us"]), r["fla_bound"],
                      _fmt(r["ratio"], 2))
        con.print(t)
        if case.get("published"):
            pt = Table(title=f"published measurements at {case['shape']} (hardware timings by others, not estimates)")
            for c in ("code", "part", "published us", "scope", "chip", "ours us (est.)", "ours/published"):
                pt.add_column(c, justify="right" if "us" in c or "/" in c else "left")
            for p in case["published"]:
                pt.add_row(p["code"] + (" (baseline)" if p["role"] == "baseline" else ""), p["part"],
                           f"{p['published_us']:.0f}", p["scope"], p["chip"],
                           _fmt(p["ours_us"], 0), _fmt(p["ours_over_published"], 2))
            con.print(pt)
        for side in ("ours", "fla"):
            est = case.get(side) or {}
            if est.get("error"):
                con.print(f"  {side} failed: {est['error']}")
            for la in est.get("launches", []):
                if not la["ok"]:
                    con.print(f"  {side} {la['kernel']}: not compiled: {la['error'][:200]}")
                elif la["unresolved"]:
                    con.print(f"  {side} {la['kernel']}: unresolved: {'; '.join(la['unresolved'])[:200]}")


def plot_png(report: dict, path: str) -> None:
    """Stacked bars per stage: for each op and shape, one bar for ours and one for fla."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = report["cases"]
    fig, axes = plt.subplots(len(cases), 1, figsize=(10, 1.6 + 1.3 * len(cases)), squeeze=False)
    cmap = plt.get_cmap("tab20")
    stages = []
    for case in cases:
        for r in case["rows"]:
            if not r["stage"].startswith("total") and r["stage"] not in stages:
                stages.append(r["stage"])
    color = {s: cmap(i % 20) for i, s in enumerate(stages)}
    for ax, case in zip(axes[:, 0], cases):
        for y, side in enumerate(("ours", "fla")):
            left = 0.0
            for r in case["rows"]:
                v = r[f"{side}_us"]
                if r["stage"].startswith("total") or not v:
                    continue
                ax.barh(y, v, left=left, color=color[r["stage"]], edgecolor="white", linewidth=0.5)
                left += v
            ax.text(left, y, f" {left:.0f} us", va="center", fontsize=7)
        ax.set_yticks([0, 1], ["ours", "fla 0.6.0"], fontsize=8)
        ax.set_title(f"{case['op']} {case['shape']}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color[s]) for s in stages]
    fig.legend(handles, stages, fontsize=6, ncol=4, loc="lower center")
    axes[-1, 0].set_xlabel(f"estimated NPU time, us ({report['chip']}; from the compiled plan, not measured)")
    fig.tight_layout(rect=(0, 0.08 + 0.02 * (len(stages) // 4), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parse_shape(op: str, text: str) -> list:
    """``--shape``: ``anchors`` (the op's named shapes), ``all`` (and its CI shape ``small``),
    ``small``, ``published`` (the shapes of :mod:`fla_ascend.estimate.published`), a named shape or
    shape key as ``fla-ascend bench --shapes`` takes them, or ``KEY=VALUE,...`` over the op's first
    anchor."""
    from fla_ascend.bench.cases import parse_shapes, shape_key
    from fla_ascend.estimate.model import anchor_shapes
    from fla_ascend.ops import catalog

    spec = catalog.get(op)
    if text == "published":
        from fla_ascend.estimate.published import shapes_for

        return [(name, spec.complete_shape(shape)) for name, shape in shapes_for(op)]
    if text in ("anchors", "all", "small"):
        shapes = anchor_shapes(op, small=True)
        return [s for s in shapes if (s[0] == "small") == (text == "small") or text == "all"]
    if "=" in text:
        base = dict(anchor_shapes(op)[0][1])
        for part in text.split(","):
            k, _, v = (x.strip() for x in part.partition("="))
            if k not in base:
                raise ValueError(f"--shape key {k!r} is not a size of {op} (sizes: {', '.join(base)})")
            if not v.isdigit() or int(v) < 1:
                raise ValueError(f"--shape {k}: expected a positive integer (KEY=VALUE,...), got {v!r}")
            base[k] = int(v)
        return [(shape_key(base), base)]
    out = []
    for label, shape in parse_shapes(text):
        full = spec.complete_shape(shape)
        if isinstance(full, str):
            raise ValueError(f"--shape {label}: {full}")
        out.append((label, full))
    return out


def build_parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(prog="fla-ascend estimate")
    # the op names come from the catalogue, which needs torch: checked in the worker (collect)
    p.add_argument("op", help="op to estimate (forward and backward launches; a benchmarked op of the catalogue, "
                              "e.g. chunk_gated_delta_rule), 'all', or 'calibration': public hardware timings "
                              "(flash-linear-attention's and vllm-ascend's NPU kernels, when importable) and the "
                              "estimate's error")
    p.add_argument("--shape", default="anchors",
                   help="'anchors' (default: the op's named shapes), 'all' (and 'small', its CI shape), "
                        "'published' (the shapes of the published timings of fastest Ascend code, shown beside "
                        "the estimate), a "
                        "named shape or shape key as fla-ascend bench --shapes takes them (qwen3next, "
                        "B1-T4096-H16-HV32-K128-V128), or KEY=VALUE,... over the first anchor (e.g. T=8192)")
    p.add_argument("--chip", default="Ascend910B2", help="Ascend SoC (default Ascend910B2)")
    p.add_argument("--against", choices=["fla"], default=None,
                   help="also estimate flash-linear-attention 0.6.0's NPU kernels (needs fla importable)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the full report as JSON")
    p.add_argument("--markdown", default=None, metavar="PATH", help="write the tables as Markdown")
    p.add_argument("--png", default=None, metavar="PATH",
                   help="write stacked bars per stage; the suffix picks the format (.png, .svg, .pdf, ...)")
    p.add_argument("--quiet", action="store_true", help="no per-launch progress lines")
    return p


def collect(args) -> dict:
    """Run the estimates the arguments ask for; returns the report dict."""
    from fla_ascend.compiler.lower import require_compiler
    from fla_ascend.estimate.model import estimate_op, estimated_ops, fla_available
    from fla_ascend.tiling.chips import get_chip

    require_compiler("estimate")
    chip = get_chip(args.chip)
    if args.op != "all" and args.op not in estimated_ops():
        raise ValueError(f"op must be one of {', '.join(estimated_ops())}, 'all' or 'calibration', got {args.op!r}")
    ops = estimated_ops() if args.op == "all" else [args.op]
    if args.shape == "published":
        from fla_ascend.estimate.published import shapes_for

        ops = [op for op in ops if shapes_for(op)]
        if not ops:
            raise ValueError(f"--shape published: no published timings for {args.op}")
    fla_reason = fla_available() if args.against == "fla" else None
    if args.against == "fla" and fla_reason:
        raise RuntimeError(fla_reason)
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    cases = []
    for op in ops:
        for name, shape in _parse_shape(op, args.shape):
            t0 = time.perf_counter()
            fwd_only = args.shape == "published"  # published timings are of inference (forward) calls
            ours = estimate_op(op, name, chip, "ours", shape, log, backward=not fwd_only).to_dict()
            if (ours.get("error") or "").startswith("ValueError"):  # the op refused the shape: a usage error
                raise ValueError(f"{op} --shape {name}: {ours['error'].removeprefix('ValueError: ')}")
            theirs = (estimate_op(op, name, chip, "fla", shape, log, backward=not fwd_only).to_dict()
                      if args.against == "fla" else None)
            cmd = (f"fla-ascend estimate {op} --shape {name} --chip {chip.name}"
                   + (" --against fla" if args.against else ""))
            rows = side_by_side(ours, theirs)
            cases.append({"op": op, "shape": name, "sizes": shape, "command": cmd, "ours": ours, "fla": theirs,
                          "rows": rows, "published": published_rows(op, shape, rows),
                          "seconds": time.perf_counter() - t0})
    from fla_ascend.estimate.model import ASSUMPTIONS

    return {"chip": chip.name, "date": time.strftime("%Y-%m-%d"), "cases": cases,
            "chip_figures": {"hbm_bw": chip.hbm_bw, "clock_mhz": chip.clock_mhz, "cube_cores": chip.cube_cores,
                             "vector_cores": chip.vector_cores, "cube_macs_per_cycle": chip.cube_macs_per_cycle,
                             "vector_bytes_per_cycle": chip.vector_bytes_per_cycle, "source": chip.source},
            "assumptions": {k: {"value": v[0], "what": v[1]} for k, v in ASSUMPTIONS.items()}}


def _host_text(r) -> str:
    if r.get("host_us") is None:
        return _fmt(r["estimated_us"])
    return f"{r['estimated_us']:.1f} ({r['kernel_us']:.1f} + {r['host_us']:.1f})"


def _source_label(url: str) -> str:
    if "megagdn" in url:
        return f"[MegaGDN {url.rsplit('/', 1)[-1]}]({url})"
    return f"[flash-linear-attention {url.rsplit('/', 1)[-1]}]({url})"


def calibration_markdown(rows: list, chip: str) -> str:
    """The calibration rows of :func:`fla_ascend.estimate.calibration.calibrate` as a Markdown table
    (estimated on ``chip``), then the error band per scope and of the held-out points."""
    from fla_ascend.estimate.calibration import error_band

    lines = [f"Estimated for {chip}. Estimated us of an op-level point: total (kernels + host-side costs).", "",
             "| point | source | chip | scope | dtype | measured us | estimated us | estimate / measured | "
             "bounds (us) | fitted on it |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("skipped"):
            est = "not run: " + r["skipped"][:160]
        elif r["estimated_us"] is None:
            est = "not compiled: " + "; ".join(r["failed"])[:200]
        else:
            est = _host_text(r)
        fits = ", ".join(r["fits"]) if r["fits"] else "held out"
        lines.append(f"| {r['name']} | {_source_label(r['source'])} | {r['chip']} | {r['scope']} | {r['dtype']} "
                     f"| {r['measured_us']:.0f} | {est} | {_fmt(r['ratio'], 2)} | "
                     f"{', '.join(f'{k} {v}' for k, v in r['bounds'].items())} | {fits} |")
    band = error_band(rows)
    if band:
        lines.append("")
        for label, (lo, hi, n) in band.items():
            lines.append(f"- {label}: estimate / measured {lo:.2f} to {hi:.2f} ({n} points)")
    return "\n".join(lines) + "\n"


def _calibration(args) -> int:
    from fla_ascend.compiler.lower import require_compiler
    from fla_ascend.estimate.calibration import calibrate, fit_assumptions

    require_compiler("estimate")
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    rows = calibrate(args.chip, log)
    if all(r.get("skipped") for r in rows):
        reasons = "; ".join(sorted({r["skipped"] for r in rows}))
        raise RuntimeError(f"no calibration point could be estimated: {reasons}")
    try:
        refit = fit_assumptions(rows, args.chip)
    except ValueError as e:
        refit = {"error": str(e)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"chip": args.chip, "calibration": rows, "refit": refit}, f, indent=1, default=str)
    text = calibration_markdown(rows, args.chip)
    if "error" not in refit:
        text += "- refit on these points: " + ", ".join(
            f"{k} {v * 1e6:.3g} us" if k.endswith("_S") else f"{k} {v:.3g}" for k, v in refit.items()) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    print(text)
    return 0


def check_output_options(args) -> None:
    """Check ``--json`` / ``--markdown`` / ``--png`` before any work
    (:func:`fla_ascend.cli_common.check_outputs`; ``--png`` takes any image suffix matplotlib
    writes); raises :class:`~fla_ascend.cli_common.UsageError`."""
    from fla_ascend.cli_common import check_outputs, plot_suffixes

    check_outputs(files=[("--json", args.json, None), ("--markdown", args.markdown, None),
                         ("--png", args.png, plot_suffixes() if args.png else None)])


WORKER_MODULE = "fla_ascend.estimate.cli"
"""What ``fla-ascend estimate`` runs as ``python -m`` in its worker process (no Triton interpreter,
backend told it targets an NPU: :func:`fla_ascend.check.cli.worker_env`): this module's
:func:`worker_main`."""


def worker_main(argv=None) -> int:
    """The worker's entry: parse ``argv`` (``fla-ascend estimate``'s arguments), estimate and report.
    Returns the exit status (2 for a usage error or an estimate that cannot run)."""
    args = build_parser().parse_args(argv)
    from fla_ascend.cli_common import UsageError

    try:
        check_output_options(args)
    except UsageError as e:
        print(f"fla-ascend estimate: error: {e}", file=sys.stderr)
        return 2
    if args.op == "calibration":
        try:
            return _calibration(args)
        except (RuntimeError, ValueError) as e:
            print(f"fla-ascend estimate: {e}", file=sys.stderr)
            return 2
    try:
        report = collect(args)
    except (RuntimeError, ValueError) as e:
        print(f"fla-ascend estimate: {e}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(report))
    if args.png:
        plot_png(report, args.png)
    print_rich(report)
    return 0


def register(sub) -> None:
    p = sub.add_parser("estimate", help="static NPU time estimate per kernel from the compiled plan "
                                        "(optionally beside flash-linear-attention's NPU kernels)")
    build_parser(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from fla_ascend.check.cli import run_worker

    check_output_options(args)  # before the worker starts
    argv = [args.op, "--shape", args.shape, "--chip", args.chip]
    for flag in ("against", "json", "markdown", "png"):
        if getattr(args, flag):
            argv += [f"--{flag}", getattr(args, flag)]
    if args.quiet:
        argv.append("--quiet")
    return run_worker(argv, module=WORKER_MODULE).returncode


if __name__ == "__main__":
    sys.exit(worker_main())
