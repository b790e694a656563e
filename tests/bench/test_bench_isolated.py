"""The isolated runner (benchmarks/run_all.py, the main job on a GPU/NPU) under the interpreter:
one process per op gives the rows one process per case gives, a crash costs one case, and
--compare adds a revision's rows and ratio column."""
import shutil
import subprocess
from pathlib import Path

import pytest

from fla_ascend.bench import isolated, report, suite

TINY = "B=1,T=20,H=1,HV=2,K=16,V=16"
SMALL = "B=1,T=8,H=1,K=16"
ROOT = Path(__file__).resolve().parents[2]


def _quiet(m):
    pass


def _facts(art):
    """What must not depend on the isolation: the cases, their gates and their errors."""
    return [(r["op"], r["shape"], r["mode"], r["provider"], r["correct"], r["rel_rmse"], r["tolerance"],
             r["skipped"], r["error"]) for r in art["results"]]


def test_run_suite_only_keeps_the_named_cases():
    art = suite.run_suite(ops=["l2norm"], shapes=f"{TINY};{SMALL}", modes=["fwd", "fwdbwd"], providers=["torch_ref"],
                          quick=True, progress=False, measure_peaks=False,
                          only=[("l2norm", "B1-T8-H1-K16", "fwdbwd")])
    assert [(r["shape"], r["mode"]) for r in art["results"]] == [("B1-T8-H1-K16", "fwdbwd")]


def test_one_process_per_op_gives_the_rows_of_one_per_case(tmp_path):
    kw = dict(ops=["l2norm", "rms_norm_gated"], shapes=TINY, modes=["fwd", "fwdbwd"],
              providers=["fla_ascend", "torch_ref"], quick=True, log=_quiet)
    per_case = isolated.run_isolated(tmp_path / "case", isolate="case", **kw)
    lines = []
    per_op = isolated.run_isolated(tmp_path / "op", isolate="op", **{**kw, "log": lines.append})
    assert _facts(per_op) == _facts(per_case)
    assert len(per_op["results"]) == 8 and all(r["correct"] is True and r["ms"] for r in per_op["results"])
    assert per_case["meta"]["processes"] == 4 and per_op["meta"]["processes"] == 2
    assert per_op["meta"]["isolation"] == isolated.ISOLATION["op"] and per_op["meta"]["complete"] is True
    assert per_op["meta"]["ops"] == ["l2norm", "rms_norm_gated"] and per_op["meta"]["modes"] == ["fwd", "fwdbwd"]
    # one progress line per case, with its time
    assert [ln.split(":")[0] for ln in lines] == [
        "[1/4] l2norm B1-T20-H1-K16 fwd", "[2/4] l2norm B1-T20-H1-K16 fwdbwd",
        "[3/4] rms_norm_gated B1-T20-HV2-V16 fwd", "[4/4] rms_norm_gated B1-T20-HV2-V16 fwdbwd"]
    assert all(ln.endswith(" s)") and "fla_ascend PASS" in ln for ln in lines)
    back = suite.read_json(tmp_path / "op" / "bench.json")
    assert _facts(back) == _facts(per_op) and back["meta"]["complete"] is True
    assert (tmp_path / "op" / "bench.md").read_text().count("| l2norm |") == 4
    assert (tmp_path / "op" / "bench.png").exists()


def test_a_crash_costs_only_the_case_it_was_running(tmp_path, monkeypatch):
    """A provider that ends the process (here: the test hook) loses its own row; the rows of that
    case already measured stay, and the op's other cases run in a fresh process."""
    monkeypatch.setenv(isolated.EXIT_HOOK, "l2norm/B1-T20-H1-K16/fwd/torch_ref")
    art = isolated.run_isolated(tmp_path, ops=["l2norm", "rms_norm_gated"], shapes=f"{TINY};{SMALL}",
                                modes=["fwd"], providers=["fla_ascend", "torch_ref"], quick=True, log=_quiet)
    rows = {(r["op"], r["shape"], r["provider"]): r for r in art["results"]}
    assert len(rows) == 8
    crashed = rows[("l2norm", "B1-T20-H1-K16", "torch_ref")]
    assert crashed["correct"] is False and "process failed (exit 70)" in crashed["error"]
    others = [r for k, r in rows.items() if r is not crashed]
    assert all(r["correct"] is True and r["ms"] for r in others), [r["error"] for r in others]
    assert art["meta"]["processes"] == 3  # l2norm, l2norm again for the second shape, rms_norm_gated
    assert report.failed(art) == [crashed]
    assert isolated.main(["--out", str(tmp_path / "cli"), "--ops", "l2norm", "--shapes", TINY, "--modes", "fwd",
                          "--providers", "torch_ref", "--quick"]) == 1  # a crashed case is a failure


def _git_checkout() -> bool:
    return shutil.which("git") is not None and subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.skipif(not _git_checkout(), reason="needs git and a git checkout of the repository")
def test_compare_adds_the_revision_and_its_ratio(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    art = isolated.run_isolated(tmp_path, ops=["l2norm"], shapes=TINY, modes=["fwd"], providers=["fla_ascend"],
                                quick=True, log=_quiet, compare="HEAD")
    name = art["meta"]["compare"]["provider"]
    assert name.startswith("fla_ascend@") and head.startswith(name.split("@")[1])
    assert art["meta"]["compare"]["commit"] == head
    ours, theirs = art["results"]
    assert (ours["provider"], theirs["provider"]) == ("fla_ascend", name)
    assert ours["correct"] is True and theirs["correct"] is True, theirs["error"]
    assert ours["speedup"][name] == pytest.approx(theirs["ms"] / ours["ms"])
    md = (tmp_path / "bench.md").read_text()
    assert f"| x {name} |" in md and md.count("| l2norm |") == 2


def test_prepare_revision_unpacks_the_package_of_a_commit(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    (repo / "fla_ascend").mkdir(parents=True)
    (repo / "fla_ascend" / "__init__.py").write_text("WHICH = 'first'\n")
    (repo / "other.txt").write_text("not unpacked\n")

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                       capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    (repo / "fla_ascend" / "__init__.py").write_text("WHICH = 'second'\n")
    git("commit", "-q", "-am", "second")
    rev = isolated.prepare_revision("HEAD~1", tmp_path / "tree", repo=repo)
    assert (tmp_path / "tree" / "fla_ascend" / "__init__.py").read_text() == "WHICH = 'first'\n"
    assert not (tmp_path / "tree" / "other.txt").exists() and len(rev["commit"]) == 40
    with pytest.raises(ValueError, match="no such revision"):
        isolated.prepare_revision("no-such-rev", tmp_path / "t2", repo=repo)
    with pytest.raises(ValueError, match="not a git checkout"):
        isolated.prepare_revision("HEAD", tmp_path / "t3", repo=tmp_path / "tree")


def test_bad_isolate_and_compare_are_refused(tmp_path):
    with pytest.raises(ValueError, match="isolate"):
        isolated.run_isolated(tmp_path, ops=["l2norm"], isolate="shape", log=_quiet)
    if shutil.which("git") is not None:
        assert isolated.main(["--out", str(tmp_path), "--ops", "l2norm", "--compare", "no-such-rev-x"]) == 2


def test_a_spent_budget_skips_without_starting_a_process(tmp_path):
    art = isolated.run_isolated(tmp_path, ops=["l2norm"], shapes=f"{TINY};{SMALL}", modes=["fwd"],
                                providers=["fla_ascend", "torch_ref"], budget_s=0, log=_quiet)
    assert len(art["results"]) == 4 and art["meta"]["processes"] == 0
    assert all(r["correct"] is None and "time budget" in r["skipped"] for r in art["results"])
