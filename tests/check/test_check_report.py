"""The check's report printing (no compiler needed)."""
from rich.console import Console

from fla_ascend.check.report import print_report


def test_report_shows_info_tag():
    """The table prints a finding's "[info]" tag literally (rich would take it for markup and
    drop it, making an info finding look like an error; fresh-user trial)."""
    row = dict(kernel="m.k", config="c", lowered=True, stage=None, kind="vector", mix_mode="aiv", grid=1, cores=1,
               ir_bytes=1024, ir_bytes_mb=2048, model_bytes=1024,
               findings=[dict(code="vector_int_compare", severity="info")])
    data = dict(results={"Ascend910B2": [row]}, chips={"Ascend910B2": dict(ub_bytes=1, cube_cores=1, vector_cores=1)},
                lint=[], missing=[], import_errors=[], failures=[], n_cases=1, seconds=1.0)
    console = Console(width=300, record=True)
    print_report(data, console)
    text = console.export_text()
    assert "vector_int_compare [info]" in text and "PASS" in text
