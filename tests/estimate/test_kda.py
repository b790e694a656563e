"""``fla-ascend estimate``: a missing import of flash-linear-attention's ops is named before any
work, and the compiled plan's UB per launch reaches the report and its per-launch table. These run on
the CPU without the compiler (a compiled module is faked where one is needed)."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

from fla_ascend.estimate import cli as E
from fla_ascend.estimate import model as M

VARLEN = Path(__file__).parent / "varlen_module.mlir"


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
