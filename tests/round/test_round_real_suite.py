"""The round tool on the package's own benchmark suite (fla_ascend.bench.suite), driven through
the CLI: baseline of l2norm, one round with a changed tile size, compare, submit."""
import json

import pytest

from fla_ascend import backend
from fla_ascend.cli import main

suite = pytest.importorskip("fla_ascend.bench.suite")
cases = pytest.importorskip("fla_ascend.bench.cases")
if "l2norm" not in getattr(cases, "OPS", {}):
    pytest.skip("the benchmark registry has no l2norm", allow_module_level=True)

L2 = "fla_ascend/ops/norm/l2norm.py"


def test_round_with_real_suite(tmp_path, capsys):
    ws = tmp_path / "ws"
    # no --dtype: the suite's default (float32 under the CPU interpreter, bfloat16 on a GPU/NPU)
    assert main(["round", "init", "l2norm", "-w", str(ws), "--modes", "fwd", "--quick"]) == 0
    want = "float32" if backend.device_type() == "cpu" else "bfloat16"
    assert json.loads((ws / "workspace.json").read_text())["suite"]["dtype"] == want
    base = json.loads((ws / "baseline/bench.json").read_text())
    assert base["schema"] == "fla-ascend-bench/1" and base["results"]
    assert all(r["op"] == "l2norm" and r["provider"] == "fla_ascend" for r in base["results"])
    assert main(["round", "start", "-w", str(ws), "--hypothesis", "larger row tiles"]) == 0
    f = ws / "round-1/src" / L2
    text = f.read_text()
    assert "_TILE_ELEMS = 4096" in text
    f.write_text(text.replace("_TILE_ELEMS = 4096", "_TILE_ELEMS = 8192"))
    assert main(["round", "bench", "-w", str(ws)]) == 0
    assert main(["round", "compare", "-w", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "Geomean speedup" in out and "total-op" in out
    cmp = json.loads((ws / "round-1/compare.json").read_text())
    new = json.loads((ws / "round-1/bench.json").read_text())
    old_ms = {(r["shape"], r["mode"]): r["ms"] for r in base["results"] if r["provider"] == "fla_ascend"}
    for c in cmp["vs_baseline"]["cases"]:
        key = (c["shape"], c["mode"], c["provider"])
        n = next(r["ms"] for r in new["results"] if (r["shape"], r["mode"], r["provider"]) == key)
        assert c["speedup"] == pytest.approx(old_ms[(c["shape"], c["mode"])] / n)
    g = cmp["vs_parent"]["summary"]["geomean_speedup"]
    args = ["round", "submit", "-w", str(ws), "--status", "accepted"]
    if g < 1:
        assert main(args) == 2
        args += ["--allow-slower", "CPU interpreter timing"]
    assert main(args) == 0
    assert "Best: round-1" in (ws / "opt-note.md").read_text()
