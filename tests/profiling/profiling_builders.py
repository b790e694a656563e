"""Write synthetic profiler output directories for the tests and the shipped sample.

The four PMU rows are the public A2 PipeUtilization rows quoted in docs/profiling.md (values from
msprof-analyze's public test data); everything else (names, task ids, start times, extra rows,
header variants) is made up here to exercise the readers.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

BASE_FULL = [
    "Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
    "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim",
    "Mix Block Dim", "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats",
    "Output Shapes", "Output Data Types", "Output Formats", "Context ID",
]
PIPE_UTIL = (
    "aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,"
    "aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
).split(",")
MEMORY_UB = (
    "aicore_time(us),aic_total_cycles,aic_ub_read_bw_scalar(GB/s),aic_ub_write_bw_scalar(GB/s),"
    "aiv_time(us),aiv_total_cycles,aiv_ub_read_bw_vector(GB/s),aiv_ub_write_bw_vector(GB/s),"
    "aiv_ub_read_bw_scalar(GB/s),aiv_ub_write_bw_scalar(GB/s)"
).split(",")

# Type, Accelerator Core, Duration, Wait, Block Dim, Mix Block Dim, then the PIPE_UTIL values.
REAL_ROWS = {
    "MatMulV2": "MatMulV2,AI_CORE,185.504,1.087,16,0,183.87,5295467,151.425,0.824,88.03,0.479,119.148,0.648,177.314,0.964,5.736,0.031,0.001,0,0,0,0,0,0,0,0,0,0,0,79.295",
    "MatMulV3": "MatMulV3,AI_CORE,501.17,2.2,20,0,478.701,17233251,356.349,0.744,118.087,0.247,296.009,0.618,452.112,0.944,35.833,0.075,0.001,0,0,0,0,0,0,0,0,0,0,0,95.517",
    "FlashAttentionScore": "FlashAttentionScore,MIX_AIC,410.188,1.53,20,40,366.147,13181275,129.055,0.352,352.275,0.962,108.364,0.296,172.86,0.872,216.141,0.59,0.003,365.782,26336326,228.687,0.625,137.979,0.377,118.603,0.324,71.448,0.195,0.013,89.263",
    "Add": "Add,AI_VECTOR_CORE,26.78,0.485,40,0,0,0,0,0,0,0,0,0,0,0,0,0,0,24.19,1741674,5.986,0.247,1.352,0.056,20.363,0.842,3.195,0.132,0.027,0",
}
SHAPES = {
    "MatMulV2": ("81920,4096;8192,512", "DT_BF16;DT_BF16", "ND;ND", "81920,512", "DT_BF16", "ND"),
    "MatMulV3": ("16384,4096;4096,8192", "DT_BF16;DT_BF16", "ND;ND", "16384,8192", "DT_BF16", "ND"),
    "FlashAttentionScore": ("8192,1,4096;8192,1,512;8192,1,512;;;;;;;", "DT_BF16;DT_BF16;DT_BF16", "ND;ND;ND",
                            "1,32,8192,8;1,32,8192,8;;8192,1,4096", "FLOAT;FLOAT;DT_BF16;DT_BF16", "ND;ND;ND;ND"),
    "Add": ("8192,4096;8192,4096", "DT_BF16;DT_BF16", "ND;ND", "8192,4096", "DT_BF16", "ND"),
}
START0 = "1736413971558972.912"


def pmu_values(op: str) -> dict:
    """Column -> value text of one real row (Type, core, duration, wait, blocks, PMU)."""
    vals = REAL_ROWS[op].split(",")
    keys = ["Type", "Accelerator Core", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim"] + PIPE_UTIL
    return dict(zip(keys, vals))


def kernel_row(op: str, *, step=1, task=1, start_ns=None, scale=1.0, name=None) -> dict:
    """One kernel_details row dict (header name -> text) for a real row, optionally with its
    duration scaled by ``scale``."""
    d = pmu_values(op)
    if scale != 1.0:
        d["Duration(us)"] = f"{float(d['Duration(us)']) * scale:.3f}"
    ins, idt, ifm, outs, odt, ofm = SHAPES[op]
    if start_ns is None:
        start = START0 + "\t"
    else:
        start = f"{start_ns // 1000}.{start_ns % 1000:03d}\t"
    d.update({
        "Step Id": str(step), "Device_id": "0", "Model ID": "4294967295", "Task ID": str(task),
        "Stream ID": "2", "Name": name or f"aclnn{op}_{op}", "OP State": "dynamic",
        "Start Time(us)": start, "HF32 Eligible": "NO", "Input Shapes": f'"{ins}"',
        "Input Data Types": idt, "Input Formats": ifm, "Output Shapes": f'"{outs}"',
        "Output Data Types": odt, "Output Formats": ofm, "Context ID": "N/A",
    })
    return d


def aicpu_row(*, step=1, task=1, duration="35.2", start_ns=None, name="GatherV2") -> dict:
    """An AI_CPU row: N/A in every PMU and block column, as the profiler writes it."""
    d = {k: "N/A" for k in PIPE_UTIL}
    s = start_ns if start_ns is not None else 1736413971559000000
    d.update({
        "Step Id": str(step), "Device_id": "0", "Model ID": "4294967295", "Task ID": str(task),
        "Stream ID": "3", "Name": name, "Type": name, "OP State": "N/A", "Accelerator Core": "AI_CPU",
        "Start Time(us)": f"{s // 1000}.{s % 1000:03d}\t", "Duration(us)": duration,
        "Wait Time(us)": "0", "Block Dim": "N/A", "Mix Block Dim": "N/A", "HF32 Eligible": "N/A",
        "Input Shapes": '"64,128;64"', "Input Data Types": "FLOAT;INT64", "Input Formats": "ND;ND",
        "Output Shapes": '"64,128"', "Output Data Types": "FLOAT", "Output Formats": "ND", "Context ID": "N/A",
    })
    return d


def _cell(v: str) -> str:
    if any(ch in v for ch in ',"\t\n'):
        return '"' + v.replace('"', '""') + '"'
    return v


def write_csv(path, header, rows):
    """Write rows (dicts) under ``header``; missing keys become empty cells. Cells holding a
    comma, quote, TAB or newline are quoted (so a TAB-suffixed time is written
    ``"1736413971558972.912<TAB>"`` as in real files)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(",".join(_cell(h) for h in header) + "\n")
        for r in rows:
            f.write(",".join(_cell(str(r.get(h, ""))) for h in header) + "\n")
    return path


def make_run(parent, *, name="host_1234_20250109100000000_ascend_pt", rows=None, header=None,
             ai_core_num=20, aiv_num=40, freq="1800", op_statistic=True, level="Level1",
             metrics="PipeUtilization", extra_files=True):
    """Write one ``*_ascend_pt`` run under ``parent`` and return its path.

    ``rows``: kernel_details row dicts (default: the four real rows, one step);
    ``header``: kernel_details header (default: BASE_FULL + PIPE_UTIL);
    ``op_statistic``: also write op_statistic.csv built from the rows (Level1 writes it).
    """
    run = Path(parent) / name
    out = run / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    header = header or BASE_FULL + PIPE_UTIL
    if rows is None:
        rows = [kernel_row(op, task=i + 1, start_ns=1736413971558972912 + i * 600_000)
                for i, op in enumerate(REAL_ROWS)]
    write_csv(out / "kernel_details.csv", header, rows)
    if op_statistic:
        stats = {}
        for r in rows:
            dur = r.get("Duration(us)", "N/A")
            if dur == "N/A":
                continue
            k = (r["Type"], r["Accelerator Core"])
            stats.setdefault(k, []).append(float(dur))
        total = sum(sum(v) for v in stats.values()) or 1.0
        srows = []
        for (t, c), v in sorted(stats.items(), key=lambda kv: -sum(kv[1])):
            srows.append({"Device_id": "0", "OP Type": t, "Core Type": c, "Count": str(len(v)),
                          "Total Time(us)": f"{sum(v):.3f}", "Min Time(us)": f"{min(v):.3f}",
                          "Avg Time(us)": f"{sum(v) / len(v):.3f}", "Max Time(us)": f"{max(v):.3f}",
                          "Ratio(%)": f"{sum(v) / total * 100:.3f}"})
        write_csv(out / "op_statistic.csv",
                  ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                   "Avg Time(us)", "Max Time(us)", "Ratio(%)"], srows)
    if extra_files:
        steps = sorted({r.get("Step Id", "1") for r in rows}) or ["1"]
        write_csv(out / "step_trace_time.csv",
                  ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                   "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"],
                  [{"Step": s, "Computing": "1200.5", "Communication(Not Overlapped)": "0", "Overlapped": "0",
                    "Communication": "0", "Free": "85.25", "Stage": "0", "Bubble": "0",
                    "Communication(Not Overlapped and Exclude Receive)": "0", "Preparing": "12.0"} for s in steps])
        write_csv(out / "operator_details.csv",
                  ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                   "Device Self Duration(us)", "Device Total Duration(us)",
                   "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)"],
                  [{"Name": "aten::matmul", "Input Shapes": "[[81920, 4096], [4096, 512]]", "Call Stack": "",
                    "Host Self Duration(us)": "21.3", "Host Total Duration(us)": "48.0",
                    "Device Self Duration(us)": "0", "Device Total Duration(us)": "185.504",
                    "Device Self Duration With AICore(us)": "0",
                    "Device Total Duration With AICore(us)": "185.504"}])
        prof = run / "PROF_000001_20250109100000001_ABCDEFGHIJ" / "device_0"
        prof.mkdir(parents=True, exist_ok=True)
        (prof / "info.json.0").write_text(json.dumps({"DeviceInfo": [
            {"id": 0, "ai_core_num": ai_core_num, "aiv_num": aiv_num, "aic_frequency": freq,
             "aiv_frequency": freq, "hwts_frequency": "50"}]}))
        (run / "profiler_info.json").write_text(json.dumps({"config": {
            "common_config": {"activities": ["CPU", "NPU"]},
            "experimental_config": {"_profiler_level": level, "_aic_metrics": metrics, "_export_type": ["text"]}}}))
    return run


def make_msprof_op(parent, *, times=None, name="OPPROF_20250109100000_ABCDEFGHIJ", op="chunk_fwd_kernel",
                   current_freq="1800", rated_freq="1800"):
    """Write an ``msprof op`` directory with OpBasicInfo.csv and a per-block MemoryUB.csv.

    ``times``: list of per-block ``(aic_time, aiv0_time, aiv1_time)`` in us (default: 20 blocks,
    block 7 slow).
    """
    d = Path(parent) / name
    d.mkdir(parents=True, exist_ok=True)
    if times is None:
        times = [(50.0, 48.0, 47.5)] * 20
        times = list(times)
        times[7] = (50.0, 60.0, 59.0)
    write_csv(d / "OpBasicInfo.csv",
              ["Op Name", "Op Type", "Task Duration(us)", "Block Dim", "Mix Block Dim", "Device Id", "Pid",
               "Current Freq", "Rated Freq"],
              [{"Op Name": op, "Op Type": "mix", "Task Duration(us)": f"{max(max(t) for t in times) + 2:.3f}",
                "Block Dim": str(len(times)), "Mix Block Dim": str(2 * len(times)), "Device Id": "0",
                "Pid": "4321", "Current Freq": current_freq, "Rated Freq": rated_freq}])
    rows = []
    for b, (c, v0, v1) in enumerate(times):
        for sub, (ct, vt) in (("cube0", (c, 0.0)), ("vector0", (0.0, v0)), ("vector1", (0.0, v1))):
            rows.append({"block_id": str(b), "sub_block_id": sub, "aic_time(us)": f"{ct:.3f}",
                         "aic_total_cycles": str(int(ct * 1800)), "aiv_time(us)": f"{vt:.3f}",
                         "aiv_total_cycles": str(int(vt * 1800)), "aiv_ub_read_bw_vector(GB/s)": "120.5",
                         "aiv_ub_write_bw_vector(GB/s)": "80.25", "aiv_ub_read_bw_scalar(GB/s)": "0.5",
                         "aiv_ub_write_bw_scalar(GB/s)": "0.25"})
    write_csv(d / "MemoryUB.csv",
              ["block_id", "sub_block_id", "aic_time(us)", "aic_total_cycles", "aiv_time(us)", "aiv_total_cycles",
               "aiv_ub_read_bw_vector(GB/s)", "aiv_ub_write_bw_vector(GB/s)", "aiv_ub_read_bw_scalar(GB/s)",
               "aiv_ub_write_bw_scalar(GB/s)"], rows)
    return d


def make_steps_run(parent, *, name, steps=3, scales=None, counts=None, drop=(), add=(), seed_ns=1736413971558972912):
    """A multi-step run: per step, ``counts[op]`` launches (default 1) of each real row, with its
    duration scaled by ``scales[op]`` (default 1). ``drop``: ops left out; ``add``: extra
    (name, type, core, duration) kernels present only here. Returns the run path."""
    scales = scales or {}
    counts = counts or {}
    rows = []
    t = seed_ns
    task = 1
    for s in range(1, steps + 1):
        for op in REAL_ROWS:
            if op in drop:
                continue
            for _ in range(counts.get(op, 1)):
                rows.append(kernel_row(op, step=s, task=task, start_ns=t, scale=scales.get(op, 1.0)))
                t += 700_000
                task += 1
        for (nm, typ, core, dur) in add:
            r = kernel_row("Add", step=s, task=task, start_ns=t)
            r.update({"Name": nm, "Type": typ, "Accelerator Core": core, "Duration(us)": f"{dur:.3f}"})
            rows.append(r)
            t += 100_000
            task += 1
        rows.append(aicpu_row(step=s, task=task, start_ns=t))
        t += 100_000
        task += 1
    return make_run(parent, name=name, rows=rows)


if __name__ == "__main__":  # pragma: no cover - manual use
    import sys
    target = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(target, exist_ok=True)
    print(make_run(target))
