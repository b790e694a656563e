"""Plot measurements of the results table (``benchmarks/results/results.csv``).

Each row of the table is one measurement: date, run, device, software, timing, command, code,
op, kernel (a stage or kernel; empty for the whole op), shape, mode, provider, variant, dtype,
time_ms, ratio (``ratio_vs``'s time / this row's time; for ``fla_ascend`` rows beside ``fla``:
flash-linear-attention's time / ours), correct, max_rel_rmse, gbps, tflops, copy_gbps and
matmul_tflops (the copy bandwidth and bf16 matmul peak measured in the same run), tags and notes.
Compare ratios within one run: absolute times drift between runs and hosts.

Two kinds of figure, from the rows the filters select:

- ``--kind bench`` (default): per (op, mode) the time of each provider per shape, and, when the
  rows carry GB/s and the run's copy bandwidth, the achieved fraction of it (the figure of
  ``fla-ascend bench --plot``).
- ``--kind estimate``: per op and shape, stacked bars of the estimated NPU time per stage, ours
  beside flash-linear-attention's (the figure of ``fla-ascend estimate --png``).

The figures the documentation shows::

    python3 benchmarks/plot_results.py --tag gdn_table --out docs/h200_chunk_gated_delta_rule.png
    python3 benchmarks/plot_results.py --kind estimate --run "2026-12-01 NPU estimate" \\
        --op chunk_gated_delta_rule --out docs/npu_estimate_chunk_gated_delta_rule.png

``--list`` prints the runs (date, rows, device, command) instead of plotting.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "results" / "results.csv"
FILTERS = ("run", "tag", "op", "kernel", "mode", "provider", "variant", "device", "date")


def read_table(path: str | Path = TABLE) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def select(rows: list[dict], **want) -> list[dict]:
    """Rows whose columns equal every given value (comma-separated alternatives); ``tag`` matches
    one of a row's ``;``-separated tags, ``device`` a part of the device's name, ``kernel=""``
    the whole-op rows."""
    out = []
    for r in rows:
        ok = True
        for col, val in want.items():
            if val is None:
                continue
            alts = [v.strip() for v in val.split(",")] if val else [""]
            if col == "tag":
                ok = any(t in r["tags"].split(";") for t in alts)
            elif col == "device":
                ok = any(a.lower() in r["device"].lower() for a in alts)
            else:
                ok = r[col] in alts
            if not ok:
                break
        if ok:
            out.append(r)
    return out


def _num(s: str):
    return float(s) if s not in ("", None) else None


def bench_artifact(rows: list[dict]) -> dict:
    """The selected rows as a ``fla-ascend bench`` artifact (what :func:`fla_ascend.bench.report.write_plot` draws)."""
    first = rows[0]
    soft = dict(part.strip().split(" ", 1) for part in first["software"].split(";") if " " in part.strip())
    meta = {
        "device": "cuda" if "NVIDIA" in first["device"] else first["device"], "device_name": first["device"],
        "triton_flavour": "triton", "triton_version": soft.get("triton", "?"), "torch_version": soft.get("torch", "?"),
        "fla_version": soft.get("flash-linear-attention"), "timing_method": first["timing"],
        "copy_bandwidth_gbps": _num(first["copy_gbps"]), "matmul_tflops": _num(first["matmul_tflops"]),
        "interpreter": False, "cpu_scaled": False,
    }
    results = [{"op": r["op"] + (f" {r['kernel']}" if r["kernel"] else ""), "mode": r["mode"],
                "shape": r["shape"] + (f" {r['variant']}" if r["variant"] else ""), "provider": r["provider"],
                "ms": _num(r["time_ms"]), "gbps": _num(r["gbps"]), "tflops": _num(r["tflops"])} for r in rows]
    return {"meta": meta, "results": results}


def estimate_report(rows: list[dict]) -> dict:
    """The selected stage rows as a ``fla-ascend estimate`` report (what
    :func:`fla_ascend.estimate.cli.plot_png` draws): per op and shape, each stage's time of
    ours (``fla_ascend``) and flash-linear-attention's, in microseconds."""
    cases: dict[tuple[str, str], dict] = {}
    for r in rows:
        if not r["kernel"]:
            continue
        case = cases.setdefault((r["op"], r["shape"]), {"op": r["op"], "shape": r["shape"], "rows": {}})
        stage = case["rows"].setdefault(r["kernel"], {"stage": r["kernel"], "ours_us": None, "fla_us": None})
        stage["ours_us" if r["provider"] == "fla_ascend" else "fla_us"] = float(r["time_ms"]) * 1000
    chip = rows[0]["device"].split(" ")[0]
    return {"chip": chip, "cases": [dict(c, rows=list(c["rows"].values())) for c in cases.values()]}


def list_runs(rows: list[dict]) -> None:
    runs: dict[str, list[dict]] = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    for run, rs in runs.items():
        print(f"{rs[0]['date']}  {run!r}: {len(rs)} rows, {rs[0]['device']}; {rs[0]['command']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Plot measurements of benchmarks/results/results.csv.")
    p.add_argument("--table", default=str(TABLE), help="the results table (default: %(default)s)")
    p.add_argument("--kind", choices=["bench", "estimate"], default="bench")
    for col in FILTERS:
        p.add_argument(f"--{col}", default=None, help=f"keep rows whose {col} is one of these (commas)")
    p.add_argument("--out", default=None, help="the image to write (suffix picks the format)")
    p.add_argument("--list", action="store_true", help="print the selected rows' runs instead of plotting")
    args = p.parse_args(argv)
    rows = select(read_table(args.table), **{c: getattr(args, c) for c in FILTERS})
    if args.list:
        list_runs(rows)
        return 0
    if args.kind == "estimate":
        rows = [r for r in rows if r["kernel"] and "estimate" in r["device"]]
    if not rows:
        print("plot_results: no rows match the filters (--list shows the runs)", file=sys.stderr)
        return 2
    if not args.out:
        p.error("--out is required to plot")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.kind == "bench":
        from fla_ascend.bench import report

        report.write_plot(bench_artifact(rows), args.out)
    else:
        from fla_ascend.estimate import cli as estimate_cli

        estimate_cli.plot_png(estimate_report(rows), args.out)
    print(f"plot_results: {len(rows)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
