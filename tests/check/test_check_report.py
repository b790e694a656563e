"""The check's report printing (no compiler needed)."""
from rich.console import Console

from fla_ascend.check.report import print_report


def test_report_shows_info_tag():
    """The table prints a finding's "[info]" tag literally (rich would take it for markup and
    drop it, making an info finding look like an error)."""
    row = dict(kernel="m.k", config="c", lowered=True, stage=None, kind="vector", mix_mode="aiv", grid=1, cores=1,
               model_bytes=1024, compiled=True, core_type="AIV", planned={"ub": 4096, "l1": 0, "l0c": 0},
               share={"ub": 0.02, "l1": 0.0, "l0c": 0.0}, intra_core_syncs=3, cross_core_syncs=0, compile_seconds=0.2,
               compile_cpu_seconds=0.1, model_vs_plan=1.1, findings=[dict(code="vector_int_compare", severity="info")])
    data = dict(results={"Ascend910B2": [row]}, chips={"Ascend910B2": dict(ub_bytes=1, cube_cores=1, vector_cores=1)},
                lint=[], missing=[], import_errors=[], failures=[], n_cases=1, seconds=1.0)
    console = Console(width=300, record=True)
    print_report(data, console)
    text = console.export_text()
    assert "vector_int_compare [info]" in text and "PASS" in text


def _row(**kw):
    base = dict(kernel="m.k", config="c", configs=["c"], lowered=True, stage="", findings=[], compiled=None)
    base.update(kw)
    return base


def test_report_compiled_columns_and_json(tmp_path):
    """A compiled row shows core type, planned bytes with their share, syncs and time; a failed one its
    class and bytes; a lowering-only chip says so; the JSON round-trips."""
    import json

    from fla_ascend.check.report import write_json

    ok = _row(config="K128", configs=["K128", "K64"], compiled=True, core_type="MIX",
              planned={"ub": 98304, "l1": 114688, "l0c": 49152}, share={"ub": 0.5, "l1": 0.2188, "l0c": 0.375},
              multibuffered={"l1": 4}, intra_core_syncs=103, cross_core_syncs=30, compile_seconds=0.8,
              compile_cpu_seconds=0.7, model_vs_plan=1.12)
    bad = _row(kernel="m.big", compiled=False, compile_error_class="ub_overflow", compile_needed_bytes=264960,
               compile_available_bytes=196608, findings=[dict(code="compile_ub_overflow", severity="error")])
    a5 = _row(kernel="m.k5", compiled=False, compile_error_class="crash",
              findings=[dict(code="compile_crash", severity="warning")])
    data = dict(results={"Ascend910B2": [ok, bad], "Ascend910_9599": [a5], "Ascend910B3": [_row()]},
                chips={c: dict(ub_bytes=1, cube_cores=1, vector_cores=1, mode="compiled")
                       for c in ("Ascend910B2", "Ascend910_9599")}
                | {"Ascend910B3": dict(ub_bytes=1, cube_cores=1, vector_cores=1, mode="lowering only: not installed")},
                matrix="representative", lint=[], missing=[], import_errors=[],
                failures=["big [c] Ascend910B2: compile_ub_overflow: ..."], n_cases=4, seconds=1.0)
    console = Console(width=300, record=True)
    print_report(data, console)
    text = console.export_text()
    assert "K128 (+1)" in text and "MIX" in text and "96.0 (50%)" in text and "l1 4" in text and "103/30" in text
    assert "0.8 (0.7)" in text and "1.12" in text
    assert "NO: ub_overflow 264960/196608 B" in text and "compile_crash [warning]" in text
    assert "lowering only: not installed" in text and "FAIL" in text
    write_json(data, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["results"]["Ascend910B2"][1]["compile_needed_bytes"] == 264960


def test_markdown_summary_per_kernel(tmp_path):
    """--markdown: one row per kernel and chip with its largest planned bytes, syncs and compile time, the
    model/plan range over its compiled launches and the error classes of those that failed."""
    from fla_ascend.check.report import write_markdown

    a = _row(kernel="m.k", configs=["a"], compiled=True, core_type="MIX",
             planned={"ub": 98304, "l1": 114688, "l0c": 49152}, share={"ub": 0.5, "l1": 0.2, "l0c": 0.4},
             intra_core_syncs=103, cross_core_syncs=30, compile_seconds=2.5, compile_cpu_seconds=0.7,
             model_vs_plan=1.12)
    b = _row(kernel="m.k", configs=["b"], compiled=True, core_type="MIX", planned={"ub": 147456, "l1": 0, "l0c": 0},
             share={"ub": 0.75, "l1": 0.0, "l0c": 0.0}, intra_core_syncs=90, cross_core_syncs=41, compile_seconds=1.0,
             compile_cpu_seconds=0.9, model_vs_plan=1.01)
    c = _row(kernel="m.k", compiled=False, compile_error_class="timeout")
    data = dict(results={"Ascend910B2": [a, b, c]}, chips={"Ascend910B2": dict(ub_bytes=196608)})
    write_markdown(data, tmp_path / "k.md")
    row = [ln for ln in (tmp_path / "k.md").read_text().splitlines() if ln.startswith("| k |")]
    assert row == ["| k | 2 of 3 | MIX | 147456 (75%) | 114688 | 49152 | 103/41 | 0.9 (2.5) | 1.01-1.12 | timeout |"]
