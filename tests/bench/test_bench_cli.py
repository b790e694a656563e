"""`fla-ascend bench` argument handling and exit status."""
import json

import pytest

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
        out = C.OPS["chunk_gated_delta_rule"].reference(**kw)
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


def test_isolated_runner_merges_parts_and_survives_a_timeout(tmp_path):
    from fla_ascend.bench import isolated, suite

    art = isolated.run_isolated(tmp_path, ops=["chunk_gated_delta_rule"], shapes=TINY, modes=["fwd"],
                                providers=["torch_ref"], quick=True, log=lambda m: None)
    [r] = art["results"]
    assert r["correct"] is True and r["ms"] > 0 and r["provider"] == "torch_ref"
    back = suite.read_json(tmp_path / "bench.json")
    assert back["results"][0]["ms"] == r["ms"] and back["meta"]["isolation"]
    assert (tmp_path / "bench.md").exists() and (tmp_path / "bench.png").exists()
    # a process that does not finish in time becomes error rows; the run goes on and writes its files
    art = isolated.run_isolated(tmp_path / "t", ops=["chunk_gated_delta_rule"], shapes=TINY + ";B=1,T=8,H=1,K=16",
                                modes=["fwd"], providers=["torch_ref", "fla_ascend"], timeout_s=0.01,
                                log=lambda m: None)
    assert len(art["results"]) == 4
    assert all(r["correct"] is False and "timed out" in r["error"] for r in art["results"])
    assert suite.read_json(tmp_path / "t" / "bench.json")["results"] == json.loads(json.dumps(art["results"]))


def test_output_path_that_is_a_directory(tmp_path, capsys):
    """Refused before any case runs (the artifact is rewritten after every case)."""
    assert cli.main(["bench", "--ops", "l2norm", "--providers", "fla_ascend", "--json", str(tmp_path)]) == 2
    assert "--json" in capsys.readouterr().err


def test_unwritable_output_path_refused_before_running(tmp_path, capsys, monkeypatch):
    """An output path that cannot be written is refused before the first case (it crashed with
    an OSError traceback after the first case); a new file's folder under the
    current directory is made, and the command says so."""
    from fla_ascend.bench import suite

    ran = []

    def fake_run_suite(**kw):
        ran.append(kw)
        raise ValueError("stopped by the test")

    monkeypatch.setattr(suite, "run_suite", fake_run_suite)
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main(["bench", "--ops", "l2norm", "--json", "file/sub/x.json"]) == 2
    err = capsys.readouterr().err
    assert "--json file/sub/x.json" in err and "not a folder" in err and not ran
    out = tmp_path / "new" / "dir" / "x.md"
    assert cli.main(["bench", "--ops", "l2norm", "--markdown", "new/dir/x.md"]) == 2
    assert ran and out.parent.is_dir() and not out.exists()  # probed, then left for the writer
    assert "created folder" in capsys.readouterr().err


def test_layer_refuses_suite_outputs(capsys):
    """--layer prints its own table; --json was silently ignored with it."""
    assert cli.main(["bench", "--layer", "--json", "x.json"]) == 2
    assert "--json is for the op suite" in capsys.readouterr().err


def test_all_cases_skipped_is_not_success(capsys):
    """A run that measured nothing (here: flash-linear-attention alone, not importable on the
    CPU) exits 2, not 0."""
    if C.fla_available():
        pytest.skip("flash-linear-attention is importable here")
    assert cli.main(["bench", "--ops", "l2norm", "--providers", "fla", "--quick", "--no-progress"]) == 2
    assert "every case was skipped" in capsys.readouterr().err


def test_quick_with_full_size_refused(capsys):
    """--quick (smaller CPU shapes) and --full-size (shapes as given) contradict each other."""
    assert cli.main(["bench", "--quick", "--full-size", "--no-progress"]) == 2
    assert "--quick" in capsys.readouterr().err


def test_no_matching_case_error_first_without_empty_table(capsys):
    """A selection with no case (the recurrent op has no backward) gives the error and the reason,
    and no empty table before it."""
    assert cli.main(["bench", "--ops", "fused_recurrent_gated_delta_rule", "--modes", "fwdbwd",
                     "--no-progress"]) == 2
    cap = capsys.readouterr()
    assert "no case matched" in cap.err and "has no fwdbwd mode" in cap.err
    assert "fla-ascend bench" not in cap.out and cap.out.strip() == ""


def test_plot_caption_fits_the_figure(tmp_path, monkeypatch):
    """The plot's title and metadata line are wrapped to the figure width: no text leaves the figure."""
    import matplotlib.figure

    from fla_ascend.bench import report

    meta = {"device": "cpu", "device_name": "a long processor name " * 3, "triton_flavour": "triton",
            "triton_version": "3.9.0", "torch_version": "2.13.0", "fla_version": None,
            "timing_method": "median of repeated calls timed with time.perf_counter " * 2, "cpu_scaled": True,
            "interpreter": True}
    rows = [{"op": "l2norm", "mode": "fwd", "shape": "B1-T64-H2-D64", "provider": p, "ms": ms, "gbps": None,
             "tflops": None} for p, ms in (("fla_ascend", 1.0), ("torch_ref", 2.0))]
    seen = {}
    save = matplotlib.figure.Figure.savefig

    def capture(fig, *a, **k):
        save(fig, *a, **k)
        seen["box"] = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
        seen["fig"] = fig.bbox.width, fig.bbox.height

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", capture)
    report.write_plot({"meta": meta, "results": rows}, tmp_path / "p.png")
    (width, height), box = seen["fig"], seen["box"]
    assert box.x0 >= 0 and box.x1 <= width and box.y1 <= height, (box, width, height)
