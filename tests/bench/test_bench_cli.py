"""`fla-ascend bench` argument handling and exit status."""
import json

from fla_ascend import cli
from fla_ascend.bench import cases as C

TINY = "B=1,T=20,H=1,HV=2,K=16,V=16"


def test_bad_shapes_exit_2_with_message(capsys):
    assert cli.main(["bench", "--shapes", "B=1,T=-3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--shapes" in err and "T='-3'" in err


def test_list(capsys):
    assert cli.main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "op chunk_gated_delta_rule" in out and "shape qwen3next: B1-T4096-H16-HV32-K128-V128" in out


def test_failing_gate_gives_exit_1_and_files(monkeypatch, tmp_path, capsys):
    def wrong(**kw):
        out = C._gdn_ref(**kw)
        return {"o": -out["o"], "final_state": out["final_state"]}

    monkeypatch.setitem(C.OPS["chunk_gated_delta_rule"].providers, "wrong", wrong)
    rc = cli.main(["bench", "--ops", "chunk_gated_delta_rule", "--shapes", TINY, "--providers", "wrong,torch_ref",
                   "--quick", "--no-progress", "--json", str(tmp_path / "b.json"),
                   "--markdown", str(tmp_path / "b.md"), "--plot", str(tmp_path / "b.png")])
    assert rc == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "1 case(s) failed" in captured.err
    art = json.loads((tmp_path / "b.json").read_text())
    cmd = art["meta"]["command"]
    assert cmd[:4] == ["fla-ascend", "bench", "--ops", "chunk_gated_delta_rule"]
    assert cmd[cmd.index("--shapes") + 1] == TINY and "--quick" in cmd
    assert [r["correct"] for r in art["results"]] == [False, True]
    assert (tmp_path / "b.md").read_text().count("| chunk_gated_delta_rule |") == 2
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_passing_run_exit_0(capsys):
    rc = cli.main(["bench", "--ops", "chunk_gated_delta_rule", "--shapes", TINY, "--providers", "torch_ref",
                   "--quick", "--no-progress"])
    assert rc == 0
    assert "PASS" in capsys.readouterr().out
