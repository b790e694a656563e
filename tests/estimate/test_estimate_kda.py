"""``fla-ascend estimate chunk_kda --against fla``: flash-linear-attention 0.6.0's NPU KDA kernels
placed in our stages, a side that failed shows no totals, a missing import of fla's ops is named
before any work, the compiled plan's UB per launch reaches the report and its per-launch table.
These run on the CPU without the compiler (a compiled module is faked where one is needed); the last
one captures and compiles both sides at the small shape (triton-ascend, bishengir-compile and
flash-linear-attention with einops, e.g. in ``<venv>/fla-site``; skipped elsewhere)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from fla_ascend.estimate import cli as E
from fla_ascend.estimate import model as M

VARLEN = Path(__file__).parent / "varlen_module.mlir"

FLA_KDA_NPU_STAGES = {
    "chunk_local_cumsum_vector_kernel_npu": "gate cumsum",
    "kda_gate_chunk_cumsum_vector_kernel_npu": "gate cumsum",
    "kda_gate_bwd_kernel_npu": "gate cumsum",
    "chunk_kda_fwd_kernel_intra_token_parallel_npu": "intra (Akk, Aqk)",
    "chunk_kda_fwd_kernel_intra_sub_chunk_npu": "intra (Akk, Aqk)",
    "chunk_kda_fwd_kernel_diag_solve_npu": "intra (Akk, Aqk)",
    "chunk_kda_fwd_kernel_inter_solve_fused_npu": "intra (Akk, Aqk)",
    "recompute_w_u_fwd_kda_kernel_npu": "WY fwd (inverse, w u)",
    "chunk_gated_delta_rule_h_fwd_kernel_single_slab": "state h",
    "chunk_gla_fwd_kernel_o_npu": "output o",
    "chunk_kda_bwd_kernel_dAv_npu": "dAqk, dv local",
    "chunk_gated_delta_rule_h_bwd_kernel": "state dh",
    "chunk_kda_bwd_kernel_wy_v_part_npu": "WY bwd, dq dk dg",
    "chunk_kda_bwd_kernel_wy_k_part_npu": "WY bwd, dq dk dg",
    "chunk_kda_bwd_kernel_wy_dw_part_npu": "WY bwd, dq dk dg",
    "chunk_kda_bwd_kernel_wy_dA_finalize_npu": "WY bwd, dq dk dg",
    "chunk_kda_bwd_kernel_intra_npu": "intra bwd",
}
"""flash-linear-attention 0.6.0's KDA NPU kernels (``fla/ops/kda/backends/triton_ascend``, the shared
state kernels of ``fla/ops/common/backends/triton_ascend``, the output kernel of
``fla/ops/gla/backends/triton_ascend``, the cumsum of ``fla/ops/utils/triton_ascend``) -> our stage."""


@pytest.mark.parametrize("kernel", sorted(FLA_KDA_NPU_STAGES))
def test_fla_kda_npu_kernels_map_to_our_stages(kernel):
    """Each NPU kernel flash-linear-attention's chunk_kda launches lands in the stage of ours that
    does the same work; its state kernels (``chunk_gated_delta_rule_h_*``, whose name holds "gate")
    are not taken for the gate cumsum."""
    assert E.stage_of(kernel, "chunk_kda") == FLA_KDA_NPU_STAGES[kernel]


def test_our_kda_kernels_keep_their_spec_stages():
    from fla_ascend.ops import catalog

    ours = {k.short_name: k.stage for k in catalog.get("chunk_kda").kernels}
    assert ours and all(E.stage_of(name, "chunk_kda") == stage for name, stage in ours.items())
    assert E.stage_of("chunk_fwd_h_kernel", "chunk_kda") == "state h"
    assert E.stage_of("chunk_bwd_dh_kernel", "chunk_kda") == "state dh"
    # the diagonal-block inverse both ops run: in each op's own WY forward row
    assert E.stage_of("chunk_wy_diag_inverse_kernel", "chunk_kda") == "WY fwd (inverse, w u)"
    assert E.stage_of("chunk_wy_diag_inverse_kernel", "chunk_gated_delta_rule") == "WY fwd (kkt, inverse, w u)"


def test_the_kda_names_leave_the_other_ops_alone():
    """chunk_kda's patterns come after each op's own: flash-linear-attention's gated delta rule
    kernels keep that op's stages."""
    expected = {"chunk_local_cumsum_scalar_kernel": "gate cumsum",
                "merge_16x16_to_64x64_inverse_kernel_npu": "WY fwd (kkt, inverse, w u)",
                "chunk_gated_delta_rule_h_bwd_kernel": "state dh"}
    assert {n: E.stage_of(n, "chunk_gated_delta_rule") for n in expected} == expected


def test_a_side_that_failed_has_no_totals():
    """A side whose launcher failed (an import error, a refused shape) shows no totals and no ratio,
    not 0 us."""
    ours = {"total_us": 30.0, "fwd_us": 10.0, "bwd_us": 20.0,
            "launches": [{"direction": "fwd", "kernel": "kda_fwd_o_kernel", "ok": True, "time_us": 10.0,
                          "bound": "sync", "per_core_max": {"syncs": 3}},
                         {"direction": "bwd", "kernel": "kda_bwd_dav_kernel", "ok": True, "time_us": 20.0,
                          "bound": "hbm", "per_core_max": {"syncs": 1}}]}
    theirs = {"error": "ModuleNotFoundError: No module named 'einops'", "total_us": 0.0, "fwd_us": 0.0,
              "bwd_us": 0.0, "launches": []}
    rows = {r["stage"]: r for r in E.side_by_side(ours, theirs)}
    for key in ("total", "total fwd", "total bwd"):
        assert rows[key]["fla_us"] is None and rows[key]["ratio"] is None
    assert rows["total"]["ours_us"] == 30.0


def test_fla_available_names_a_missing_einops(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        if name == "fla":
            return types.SimpleNamespace(submodule_search_locations=[])
        if name == "einops":
            return None
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    reason = M.fla_available()
    assert reason and "einops" in reason and "pip install einops" in reason


class _Param:
    def __init__(self, name):
        self.name = name


def _fake_launch():
    torch = pytest.importorskip("torch")

    def k():
        pass

    fn = types.SimpleNamespace(fn=k, params=[_Param("cu"), _Param("x"), _Param("BLOCK")])
    return types.SimpleNamespace(fn=fn, grid=(2,), options={},
                                 kwargs={"cu": torch.tensor([0, 5, 12]), "x": torch.zeros(12), "BLOCK": 64})


def _patch_compile(monkeypatch, result):
    from fla_ascend.compiler import bishengir, lower

    low = lower.Lowered(ok=True, ttadapter="module {}", signature={"cu": "*i64", "x": "*fp32", "BLOCK": "constexpr"},
                        constants={"BLOCK": 64})
    monkeypatch.setattr(lower, "lower", lambda *a, **k: low)
    monkeypatch.setattr(bishengir, "compile_module", lambda *a, **k: result)


def test_launch_reports_the_planned_ub(monkeypatch):
    """The UB the compiler planned for one core reaches the launch estimate, with its share of the
    chip's UB, in the JSON and the per-launch table."""
    from fla_ascend.compiler.bishengir import CompileResult, ModuleFacts
    from fla_ascend.tiling.chips import get_chip

    chip = get_chip("Ascend910B2")
    facts = ModuleFacts(core_type="AIV", planned_bytes={"ub": chip.ub_bytes // 2})
    _patch_compile(monkeypatch, CompileResult(ok=True, chip=chip.name, module_path=str(VARLEN), facts=facts))
    est = M.estimate_launch(_fake_launch(), chip)
    assert est.ok and est.core_type == "AIV"
    assert est.ub_bytes == chip.ub_bytes // 2 and est.ub_percent == pytest.approx(50.0)
    d = est.to_dict()
    assert d["ub_bytes"] == chip.ub_bytes // 2 and d["ub_percent"] == pytest.approx(50.0)
    assert d["ub_capacity"] == chip.ub_bytes

    ours = {"op": "chunk_kda", "total_us": d["time_us"], "fwd_us": d["time_us"], "bwd_us": 0.0,
            "launches": [dict(d, kernel="kda_fwd_o_kernel")]}
    case = {"op": "chunk_kda", "shape": "small", "command": "fla-ascend estimate chunk_kda", "ours": ours,
            "fla": None, "rows": E.side_by_side(ours, None), "published": []}
    (row,) = E.launch_rows(case)
    assert row["stage"] == "fwd: output o" and row["ub_bytes"] == chip.ub_bytes // 2 and row["side"] == "ours"
    md = E.markdown({"chip": chip.name, "date": "2026-12-04", "cases": [case]})
    line = next(x for x in md.splitlines() if x.startswith("| fwd: output o | ours | kda_fwd_o_kernel"))
    assert f"| {chip.ub_bytes // 2} | 50 |" in line
    # every row of a Markdown table has its header's number of cells
    tables: list = []
    for x in md.splitlines():
        if x.startswith("|"):
            if tables and tables[-1][0] is not None:
                tables[-1].append(x.count("|"))
            else:
                tables.append([x.count("|")])
        elif tables:
            tables.append([None])
    for t in tables:
        if t[0] is not None:
            assert len(set(t)) == 1, t


def test_a_ub_overflow_reports_what_the_compiler_asked_for(monkeypatch):
    from fla_ascend.compiler.bishengir import CompileResult
    from fla_ascend.tiling.chips import get_chip

    chip = get_chip("Ascend910B2")
    _patch_compile(monkeypatch, CompileResult(ok=False, chip=chip.name, error_class="ub_overflow", space="ub",
                                              needed_bytes=532480, available_bytes=chip.ub_bytes,
                                              message="ub overflow, requires 4259840 bits"))
    est = M.estimate_launch(_fake_launch(), chip)
    assert not est.ok and "ub overflow" in est.error
    assert est.ub_bytes == 532480 and est.ub_percent > 100


def _needs_compiler_and_fla() -> Path | None:
    """The folder to put on the worker's path for flash-linear-attention (None: already importable);
    skips unless triton-ascend, bishengir-compile and flash-linear-attention with einops are there."""
    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the estimate needs triton-ascend's compiler front end (not upstream Triton)")
    from fla_ascend.compiler.bishengir import compiler_available

    if not compiler_available("Ascend910B2"):
        pytest.skip("bishengir-compile (PyPI ascendnpu-ir) is not installed")
    if M.fla_available() is None:
        return None
    site = Path(sys.prefix) / "fla-site"
    if not (site / "fla").is_dir() or not (site / "einops").is_dir():
        pytest.skip(M.fla_available())
    return site


@pytest.mark.slow
def test_chunk_kda_against_fla_runs_its_npu_kernels(tmp_path):
    """At the small shape both sides' launches compile; flash-linear-attention's come from its
    ``triton_ascend`` backends (none of its CUDA kernels), each lands in one of our stages, and every
    launch carries its planned UB (about 1 minute on a warm compile cache)."""
    from fla_ascend.check.cli import run_worker

    site = _needs_compiler_and_fla()
    out = tmp_path / "r.json"
    proc = run_worker(["chunk_kda", "--shape", "small", "--against", "fla", "--json", str(out), "--quiet"],
                      extra_path=str(site) if site else None, module=E.WORKER_MODULE, capture_output=True,
                      text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (case,) = json.loads(out.read_text())["cases"]
    assert not case["ours"]["error"] and not case["fla"]["error"]
    fla = case["fla"]["launches"]
    assert {la["direction"] for la in fla} == {"fwd", "bwd"}
    for la in fla:
        assert "triton_ascend" in la["module"].split("."), la["module"]
        assert la["ok"], f"{la['kernel']}: {la['error']}"
    names = {la["kernel"] for la in fla}
    assert {"chunk_kda_fwd_kernel_intra_token_parallel_npu", "recompute_w_u_fwd_kda_kernel_npu",
            "chunk_kda_bwd_kernel_intra_npu", "chunk_kda_bwd_kernel_wy_k_part_npu"} <= names
    assert names <= set(FLA_KDA_NPU_STAGES)
    stages = {r["stage"] for r in case["rows"]}
    assert all(st.startswith("total") or st.split(": ", 1)[1] in set(FLA_KDA_NPU_STAGES.values()) for st in stages)
    for la in case["ours"]["launches"] + fla:
        assert la["ub_bytes"] is not None and 0 < la["ub_percent"] <= 100, la["kernel"]


def test_a_split_grid_is_one_row_of_the_launch_table():
    """flash-linear-attention splits a long sequence's grid into several launches of one kernel: the
    per-launch table shows them as one row, their time and waits summed."""
    def la(kernel, us, syncs, ub):
        return {"direction": "fwd", "kernel": kernel, "ok": True, "time_us": us, "bound": "vector",
                "core_type": "AIV", "ub_bytes": ub, "ub_percent": ub / 1966.08, "per_core_max": {"syncs": syncs}}

    fla = {"op": "chunk_kda", "total_us": 36.0, "fwd_us": 36.0, "bwd_us": 0.0,
           "launches": [la("chunk_kda_fwd_kernel_diag_solve_npu", 10.0, 2, 4096),
                        la("chunk_kda_fwd_kernel_diag_solve_npu", 12.0, 3, 8192),
                        la("chunk_kda_fwd_kernel_inter_solve_fused_npu", 14.0, 5, 1024)]}
    ours = {"op": "chunk_kda", "total_us": 20.0, "fwd_us": 20.0, "bwd_us": 0.0,
            "launches": [la("kda_intra_fwd_kernel", 20.0, 7, 2048)]}
    case = {"op": "chunk_kda", "ours": ours, "fla": fla, "rows": E.side_by_side(ours, fla)}
    rows = E.launch_rows(case)
    assert [(r["side"], r["kernel"], r["launches"]) for r in rows] == [
        ("ours", "kda_intra_fwd_kernel", 1), ("fla", "chunk_kda_fwd_kernel_diag_solve_npu", 2),
        ("fla", "chunk_kda_fwd_kernel_inter_solve_fused_npu", 1)]
    assert rows[1]["time_us"] == 22.0 and rows[1]["syncs"] == 5 and rows[1]["ub_bytes"] == 8192
    assert {r["stage"] for r in rows} == {"fwd: intra (Akk, Aqk)"}
    assert any("chunk_kda_fwd_kernel_diag_solve_npu x 2" in line for line in E.launch_markdown(case))
    (stage,) = [r for r in E.side_by_side(ours, fla) if r["stage"] == "fwd: intra (Akk, Aqk)"]
    assert stage["fla_us"] == 36.0 and stage["ratio"] == pytest.approx(20 / 36)
