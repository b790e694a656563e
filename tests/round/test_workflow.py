"""End to end on CPU: baseline, one accepted and one rejected round of l2norm through the
overlay runner, with the stand-in suite (tests/round/fake_suite.py, contract schema)."""
import json
import math
import shutil
from pathlib import Path

import pytest

from fla_ascend.cli import main
from fla_ascend.round import RoundError, Workspace
from fla_ascend.round.sources import package_root

HERE = Path(__file__).parent
L2 = "fla_ascend/ops/norm/l2norm.py"
SUITE = dict(modes=["fwd"], dtype="float32", suite="fake_suite:run_suite", suite_pythonpath=[str(HERE)])


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}: the test's edit no longer applies"
    path.write_text(text.replace(old, new, 1))


def _ms(art: dict) -> dict:
    return {(r["shape"], r["mode"]): r["ms"] for r in art["results"]}


def test_full_workflow(tmp_path):
    ws = Workspace.init("l2norm", tmp_path / "ws", **SUITE)
    root = ws.path
    assert ws.config["files"] == [L2]
    base = json.loads((root / "baseline/bench.json").read_text())
    assert all(r["correct"] for r in base["results"])
    # the baseline ran the overlaid copy, not the checkout
    assert base["meta"]["fla_ascend_file"] != str(package_root() / "fla_ascend/__init__.py")
    assert (root / "baseline/src" / L2).read_text() == (package_root() / L2).read_text()

    # refusals before any round
    with pytest.raises(RoundError, match="no round is open"):
        ws.bench()
    with pytest.raises(ValueError, match="hypothesis"):
        ws.start("  ")

    # round 1: a legitimate change (bigger row tiles)
    r1 = ws.start("bigger row tiles: fewer tasks per launch", "pattern")
    with pytest.raises(RoundError, match="still open"):
        ws.start("another")
    with pytest.raises(RoundError, match="has no canonical benchmark artifact"):
        ws.compare()
    with pytest.raises(RoundError) as e:
        ws.submit("accepted")
    msg = str(e.value)
    assert "a change" in msg and "a correctness result" in msg and "a comparison" in msg
    _edit(r1.path / "src" / L2, "_TILE_ELEMS = 4096", "_TILE_ELEMS = 8192")
    assert ws.changed_files() == [L2]

    probe = ws.probe(n_shapes=1)
    assert probe["label"].startswith("SCREENING ONLY")
    assert len(probe["shapes"]) == 1 and (r1.path / "probes/probe-1.json").is_file()
    state = json.loads((r1.path / "round-state.json").read_text())
    assert state["benchmark"]["status"] == "not_run" and "probe-1" not in json.dumps(state)

    st = ws.bench()
    assert st["correctness"]["status"] == "passed" and (r1.path / "bench.json").is_file()
    cmp = ws.compare()
    new = json.loads((r1.path / "bench.json").read_text())
    old_ms, new_ms = _ms(base), _ms(new)
    ratios = [old_ms[k] / new_ms[k] for k in old_ms]
    s = cmp["vs_baseline"]["summary"]
    assert s["n_cases"] == len(ratios) == 3
    assert s["geomean_speedup"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    assert s["avg_improvement_pct"] == pytest.approx(sum((1 - 1 / r) * 100 for r in ratios) / 3)
    assert cmp["vs_baseline"]["effective_metric_source"] == "total-op"
    for c in cmp["vs_baseline"]["cases"]:
        assert c["old_ms"] == old_ms[(c["shape"], c["mode"])] and c["new_ms"] == new_ms[(c["shape"], c["mode"])]

    # editing after bench makes the evidence stale
    src_file = r1.path / "src" / L2
    good = src_file.read_text()
    src_file.write_text(good + "\n# touched\n")
    with pytest.raises(RoundError, match="src changed after"):
        ws.compare()
    assert any("current snapshot" in m for m in ws.missing_for("accepted"))
    src_file.write_text(good)

    if s["geomean_speedup"] < 1.0:
        with pytest.raises(RoundError, match="speedup over the parent"):
            ws.submit("accepted")
        ws.submit("accepted", allow_slower="CPU interpreter timing noise; tile change kept for the GPU")
    else:
        ws.submit("accepted", note="fewer, larger tasks")
    assert ws.config["best"] == "round-1" and ws.config["open_round"] is None
    assert (r1.path / "summary.md").is_file()

    # round 2: a deliberately wrong change
    r2 = ws.start("wrong scale in rstd", "ir", reason="testing the gate")
    assert r2.state["parent"] == "round-1"
    assert (r2.path / "src" / L2).read_text() == good
    _edit(r2.path / "src" / L2, "b_rstd = 1.0 / tl.sqrt(", "b_rstd = 1.5 / tl.sqrt(")
    st = ws.bench()
    assert st["correctness"]["status"] == "failed"
    assert st["benchmark"]["status"] == "not_run"
    assert not (r2.path / "bench.json").exists() and (r2.path / "correctness.json").is_file()
    with pytest.raises(RoundError, match="correctness gate failed"):
        ws.compare()
    with pytest.raises(RoundError, match="submit this round as rejected"):
        ws.submit("accepted")
    ws.submit("rejected", note="correctness gate failed as intended")
    assert ws.config["best"] == "round-1"

    note = (root / "opt-note.md").read_text()
    assert note.count("## Overall Summary") == 1
    assert note.index("### round-1") < note.index("### round-2") < note.index("## Overall Summary")
    assert "1 accepted, 1 rejected" in note and "Best: round-1" in note
    g = json.loads((r1.path / "compare.json").read_text())["vs_baseline"]["summary"]["geomean_speedup"]
    assert f"{g:.3f}x" in note
    attempts = (r2.path / "attempts.md").read_text()
    assert "Correctness: FAILED" in attempts and "Submitted: rejected" in attempts

    # round 3 starts from the last accepted round, not from the rejected one
    r3 = ws.start("next idea")
    assert r3.state["parent"] == "round-1" and (r3.path / "src" / L2).read_text() == good

    # lessons need evidence inside the workspace
    outside = tmp_path / "evidence.txt"
    outside.write_text("x")
    with pytest.raises(RoundError, match="outside the workspace"):
        ws.lesson("Row-blocked norms: larger row tiles cut task overhead", outside)
    with pytest.raises(RoundError, match="does not exist"):
        ws.lesson("Row-blocked norms: larger row tiles cut task overhead", "round-1/nothing.json")
    ws.lesson("Row-blocked norms: larger row tiles cut task overhead", "round-1/compare.json", scope="row norms")
    lessons = (root / "learned_lessons.md").read_text()
    assert "Evidence: round-1/compare.json" in lessons and "Applies to: row norms" in lessons

    # the CLI is a thin layer: status, refusal exit code
    assert main(["round", "status", "-w", str(root)]) == 0
    assert main(["round", "start", "-w", str(root), "--hypothesis", "x"]) == 2
    assert main(["round", "submit", "-w", str(root), "--status", "accepted"]) == 2


def test_baseline_with_failing_correctness_is_refused(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(package_root() / "fla_ascend", tree / "fla_ascend", ignore=shutil.ignore_patterns("__pycache__"))
    _edit(tree / L2, "b_rstd = 1.0 / tl.sqrt(", "b_rstd = 2.0 / tl.sqrt(")
    with pytest.raises(RoundError, match="refusing to record a baseline whose correctness fails"):
        Workspace.init("l2norm", tmp_path / "ws", source_root=tree, **SUITE)
    assert not (tmp_path / "ws").exists()


def test_init_refuses_non_empty_dir_and_bad_args(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x").write_text("")
    with pytest.raises(RoundError, match="not empty"):
        Workspace.init("l2norm", tmp_path / "ws", **SUITE)
    with pytest.raises(ValueError, match="target"):
        Workspace.init("l2norm", tmp_path / "ws2", target="fast", **SUITE)
    with pytest.raises(RoundError, match="not a round workspace"):
        Workspace(tmp_path)


def test_relative_python_path_is_made_absolute():
    """--python .venv-ascend/bin/python works from any folder the subprocess runs in (a relative
    path failed with 'No such file or directory'); a bare name stays for PATH."""
    import os

    from fla_ascend.cli_common import interpreter_path as _interpreter

    relative = os.path.join(".venv", "bin", "python")
    assert _interpreter(relative) == os.path.abspath(relative)
    assert _interpreter("python3") == "python3"
