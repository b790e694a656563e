"""The ``fla-ascend`` command's conventions, the same for every sub-command: ``--version``, each
sub-command's own usage on a bad flag, list options with commas or semicolons, output paths,
explicit shapes scaled on the CPU with a line saying from what to what, op names in tables as
``--ops`` takes them, interpreter timings labelled wherever a ratio is printed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import fla_ascend
from fla_ascend import cli
from fla_ascend.bench import cases as C
from fla_ascend.bench import report, suite
from fla_ascend.cli_common import output_file, split_list

ROOT = Path(__file__).resolve().parents[1]
TINY = "B=1,T=20,H=1,HV=2,K=16,V=16"


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"fla-ascend {fla_ascend.__version__}"


@pytest.mark.parametrize("argv,usage", [
    (["bench", "--bogus"], "usage: fla-ascend bench"),
    (["info", "--bogus"], "usage: fla-ascend info"),
    (["round", "init", "l2norm", "--bogus"], "usage: fla-ascend round init"),
    (["ir", "stages", "x", "--bogus"], "usage: fla-ascend ir stages"),
])
def test_unknown_flag_prints_the_subcommands_usage(argv, usage, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and "unrecognized arguments: --bogus" in err


@pytest.mark.parametrize("argv", [["bench", "--ops", ""], ["bench", "--ops", ","], ["check", "--kernels", ""],
                                  ["check", "--ops", " ; "]])
def test_a_list_option_naming_nothing_is_refused(argv, capsys):
    """``--ops ''`` / ``--kernels ,`` ran every op or kernel (as if the option were left out)."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and "names nothing" in capsys.readouterr().err


def test_list_options_take_commas_and_semicolons():
    assert split_list("fwd, fwdbwd") == split_list("fwd;fwdbwd") == ["fwd", "fwdbwd"]
    assert split_list("") is None and split_list(None) is None
    assert C.split_shapes("qwen3next,gdn-t32k") == C.split_shapes("qwen3next;gdn-t32k") == ["qwen3next", "gdn-t32k"]
    # DIM=N parts in a row are one free-form shape; two of them need a ';'
    assert C.split_shapes("qwen3next,B=1,T=64,H=2;B=2,T=8,H=1") == ["qwen3next", "B=1,T=64,H=2", "B=2,T=8,H=1"]
    a = [s for _, s in C.parse_shapes("gdn-t32k," + TINY)]
    b = [s for _, s in C.parse_shapes("gdn-t32k;" + TINY)]
    assert a == b and len(a) == 2


def test_bench_ops_with_semicolons_and_full_op_names_in_the_table(capsys):
    rc = cli.main(["bench", "--ops", "chunk_gated_delta_rule;l2norm", "--shapes", TINY, "--providers",
                   "torch_ref", "--quick", "--no-progress", "--no-peaks"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "chunk_gated_delta_rule" in out and "chunk_gdr" not in out


def test_op_names_in_every_table_are_what_ops_accepts():
    art = {"meta": {"copy_bandwidth_gbps": None, "matmul_tflops": None, "device": "cpu", "device_name": "cpu",
                    "triton_flavour": "triton", "triton_version": "x", "torch_version": "x", "fla_version": None,
                    "timing_method": "wall", "interpreter": True},
           "results": [dict(op=op, shape="B1", mode="fwd", dtype="float32", provider="fla_ascend", rel_rmse={"o": 0.0},
                            correct=True, ms=1.0, tokens_per_s=1.0, gbps=1.0, tflops=1.0, skipped=None, error=None)
                       for op in C.OPS],
           "notes": []}
    _, rows = report.table_rows(art)
    assert [r[0] for r in rows] == list(C.OPS)
    assert "Triton interpreter" in report.to_markdown(art)


def test_explicit_shape_scaled_on_cpu_says_from_what_to_what():
    plan, notes = suite.plan_cases(["chunk_gated_delta_rule"], "B=1,T=100,H=1,HV=1,K=100000,V=16", ["fwd"])
    [(_, _, shape, full, _)] = plan
    assert shape["T"] == 96 and full["T"] == 100
    assert any("B1-T100-H1-HV1-K100000-V16 is scaled for the CPU interpreter to B1-T96-H1-HV1-K32-V16" in n
               for n in notes)
    # a shape that fits is not mentioned, and --full-size runs it as given
    _, notes = suite.plan_cases(["chunk_gated_delta_rule"], TINY, ["fwd"])
    assert not any("scaled" in n for n in notes)
    plan, _ = suite.plan_cases(["chunk_gated_delta_rule"], "B=1,T=100,H=1,K=16", ["fwd"], full_size=True)
    assert plan[0][2]["T"] == 100


def test_output_folder_outside_the_current_directory_is_refused(tmp_path, monkeypatch, capsys):
    """``--json /nonexistent/x.json`` created /nonexistent: a missing folder is
    made only under the current directory."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    outside = tmp_path / "elsewhere" / "x.json"
    with pytest.raises(ValueError, match="does not exist; create it first"):
        output_file(outside, "--json")
    assert not outside.parent.exists()
    assert cli.main(["bench", "--ops", "l2norm", "--json", str(outside)]) == 2
    assert "--json" in capsys.readouterr().err and not outside.parent.exists()
    path, created = output_file("out/sub/x.json", "--json")
    assert created == work / "out" and (work / "out" / "sub").is_dir() and not path.exists()
    path, created = output_file(outside.parent.parent / "y.json", "--json")  # an existing folder: fine
    assert created is None
    with pytest.raises(ValueError, match="is a folder"):
        output_file(work, "--json")


def test_round_compare_labels_interpreter_timings():
    from fla_ascend.round.compare import compare_artifacts, comparison_markdown

    def art(ms):
        return {"schema": suite.SCHEMA, "meta": {"device": "cpu", "device_name": "cpu", "timing_method": "wall",
                                                  "triton_flavour": "triton", "interpreter": True},
                "results": [dict(op="l2norm", shape="B1", mode="fwd", provider="fla_ascend", dtype="float32",
                                 correct=True, ms=ms, error=None)]}

    cmp = compare_artifacts(art(2.0), art(1.0))
    assert cmp["interpreter"] is True
    md = comparison_markdown(cmp, "vs baseline")
    assert md.index("Triton interpreter") < md.index("Geomean speedup")


@pytest.mark.parametrize("script", ["benchmarks/side_by_side_h200.py", "benchmarks/tune_chunk_stages.py"])
def test_gpu_only_scripts_say_so_on_a_cpu_machine(script):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    r = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0  # the help is no GPU work
    r = subprocess.run([sys.executable, script] + (["--out", "unused"] if "side_by_side" in script else []),
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "needs a CUDA GPU" in r.stderr and "Traceback" not in r.stderr


def test_gpu_shell_scripts_say_so_on_a_cpu_machine(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    r = subprocess.run(["bash", "scripts/gpu_bench.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "OUT": str(tmp_path / "o")})
    assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr
    assert not (tmp_path / "o").exists()


def test_benchmark_scripts_state_their_question():
    """The A/B and tuning scripts say in their docstring's first paragraph what question they answer."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.name.startswith(("ab_", "tune_")):
            first = " ".join(path.read_text().split('"""')[1].strip().split("\n\n")[0].split())
            assert first.endswith("?"), f"{path.name}: {first!r}"


def test_plot_has_no_empty_panel_and_labels_the_interpreter(tmp_path):
    """On the CPU no peak is measured: the plot has one row of time panels, one scale for all."""
    art = suite.run_suite(ops=["l2norm", "chunk_gated_delta_rule"], shapes=TINY, providers=["torch_ref"],
                          quick=True, progress=False, measure_peaks=False)
    import matplotlib.image

    png = report.write_plot(art, tmp_path / "p.png")
    h, w = matplotlib.image.imread(png).shape[:2]
    assert h < w  # one row of panels (two rows made it taller than wide)
    assert "Triton interpreter" in report._meta_line(art)
    json.dumps(art)


def test_output_folders_follow_the_same_rule(tmp_path, monkeypatch, capsys):
    """``--out``/``--workspace``/``--dir``: the folder asked for is made when its parent exists or
    under the current directory; a missing chain elsewhere is refused before any work."""
    from fla_ascend.cli_common import output_dir

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert output_dir(tmp_path / "one", "--out") == (tmp_path / "one", tmp_path / "one")
    assert output_dir(tmp_path / "one", "--out") == (tmp_path / "one", None)
    with pytest.raises(ValueError, match="does not exist"):
        output_dir(tmp_path / "no" / "such", "--out")
    assert not (tmp_path / "no").exists()
    path, created = output_dir("a/b/c", "--out")
    assert path.is_dir() and created == work / "a"
    (work / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        output_dir("f", "--out")
    assert cli.main(["round", "init", "l2norm", "--workspace", str(tmp_path / "no" / "ws")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "no").exists()
    assert cli.main(["ir", "capture", "l2norm", "--dir", str(tmp_path / "no" / "ir")]) == 2
    assert not (tmp_path / "no").exists()


def test_estimate_without_triton_ascend_names_estimate():
    """Outside the triton-ascend environment `fla-ascend estimate` exits 2 and names itself (not
    `check`) as the command to run in `.venv-ascend`."""
    import importlib.metadata

    try:
        importlib.metadata.version("triton-ascend")
        pytest.skip("triton-ascend is installed here: the estimate runs")
    except importlib.metadata.PackageNotFoundError:
        pass
    proc = subprocess.run([sys.executable, "-m", "fla_ascend.cli", "estimate", "l2norm", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and ".venv-ascend/bin/fla-ascend estimate`" in proc.stderr, proc.stderr


def test_cp_demo_seqlens_accept_commas():
    """`scripts/cp_demo.py --seqlens` takes lengths separated by spaces, commas or semicolons (the
    CLI's list convention), and names the option on a bad value."""
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "cp_demo.py"
    spec = importlib.util.spec_from_file_location("cp_demo", script)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.parse_args(["--seqlens", "40,150,67"]).seqlens == [40, 150, 67]
    assert demo.parse_args(["--seqlens", "40", "150;67"]).seqlens == [40, 150, 67]
    assert demo.parse_args([]).seqlens == [40, 150, 66]
    with pytest.raises(SystemExit):
        demo.parse_args(["--seqlens", "40,x"])


# ------------------------------------------------------------------ misuse refused before any work

#: Every option of a sub-command that names a file or folder the command writes. A new one is
#: added here and goes through cli_common.check_outputs (the audit test below fails otherwise).
OUTPUT_OPTIONS = {
    ("bench",): ["--json", "--markdown", "--plot"],
    ("check",): ["--json", "--markdown", "--cache-dir"],
    ("estimate", "l2norm"): ["--json", "--markdown", "--png"],
    ("round", "init", "l2norm"): ["--workspace"],
    ("ir", "capture", "l2norm"): ["--dir"],
    ("profile", "analyze", "PATH"): ["--out"],
    ("profile", "compare", "PATH", "PATH"): ["--out"],
    ("profile", "op", "l2norm"): ["--out"],
}
#: Options taking a path that the command only reads.
INPUT_OPTIONS = {"--evidence", "--from", "--source", "--python", "--msprof-op", "--suite-path", "--files",
                 "--extra-files", "--suite"}
#: The round sub-commands after init work in the workspace init made (refused when it is not one).
EXISTING_WORKSPACE = {"start", "set", "log", "sync", "probe", "bench", "compare", "submit", "lesson", "status"}


def _leaf_parsers(parser, words=()):
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
    for a in subs:
        for name, p in a.choices.items():
            yield from _leaf_parsers(p, (*words, name))


def test_every_output_option_is_listed():
    """The options of every sub-command that take a value and name a path are the ones
    OUTPUT_OPTIONS checks, or inputs: none is left out of the audit."""
    listed = {(tuple(w for w in k if w.islower() and w not in ("l2norm",)), o) for k, v in OUTPUT_OPTIONS.items()
              for o in v}
    found = set()
    for words, p in _leaf_parsers(cli.build_parser()):
        for a in p._actions:
            opt = next((s for s in a.option_strings if s.startswith("--")), None)
            if opt is None or a.nargs == 0 or opt in INPUT_OPTIONS:
                continue
            if words[0] == "round" and words[1] in EXISTING_WORKSPACE and opt == "--workspace":
                continue
            if a.metavar in ("PATH", "DIR") or set(opt[2:].split("-")) & {"json", "markdown", "plot", "png", "out",
                                                                          "dir", "workspace", "cache"}:
                found.add((words, opt))
    assert found == listed


@pytest.mark.parametrize("words,option", [(k, o) for k, v in OUTPUT_OPTIONS.items() for o in v],
                         ids=lambda x: " ".join(x) if isinstance(x, tuple) else x)
def test_every_output_option_refuses_a_bad_path_before_work(words, option, tmp_path, monkeypatch, capsys):
    """A path under a file (``afile/x.png``) is refused for every output option of every
    sub-command: one line naming the option, status 2, nothing run (the suite, the check's worker,
    the profiler are replaced by failures here)."""
    from fla_ascend.bench import suite as S
    from fla_ascend.check import cli as check_cli
    from fla_ascend.profiling import collect

    def must_not_run(*a, **k):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr(S, "run_suite", must_not_run)
    monkeypatch.setattr(check_cli, "run_worker", must_not_run)
    monkeypatch.setattr(collect, "detect_device", lambda: "npu")  # profile op checks --out after the device
    monkeypatch.setattr(collect, "profile_op", must_not_run)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    argv = [str(tmp_path) if w == "PATH" else w for w in words] + [option, str(tmp_path / "afile" / "x.png")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert option in err and "afile is a file, not a folder" in err, err


def test_check_json_to_an_unwritable_place_is_refused_before_the_check(tmp_path, capsys):
    """`fla-ascend check --json /nonexistent/x.json` ran the whole check, then a traceback (status
    1, a finding's status); now status 2 before the worker starts."""
    for path, why in [("/nonexistent-folder/x.json", "folder /nonexistent-folder does not exist"),
                      ("/proc/x.json", "cannot create a file in folder /proc")]:
        t0 = __import__("time").perf_counter()
        assert cli.main(["check", "--json", path]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"fla-ascend check: error: --json {path}: {why}"), err
        assert __import__("time").perf_counter() - t0 < 5
    (tmp_path / "f").write_text("x")
    assert cli.main(["check", "--cache-dir", str(tmp_path / "f")]) == 2
    assert "--cache-dir" in capsys.readouterr().err


def test_bench_plot_suffix_checked_against_matplotlib(tmp_path, monkeypatch, capsys):
    """`--plot out.txt` ran the whole bench, then failed in matplotlib; the suffix is checked first
    against the formats matplotlib writes."""
    from fla_ascend.cli_common import plot_suffixes

    monkeypatch.chdir(tmp_path)
    assert ".png" in plot_suffixes() and ".svg" in plot_suffixes() and ".txt" not in plot_suffixes()
    assert cli.main(["bench", "--ops", "l2norm", "--plot", "out.txt"]) == 2
    err = capsys.readouterr().err
    assert "--plot out.txt: expected a file name ending in one of" in err and ".png" in err and "got '.txt'" in err
    assert cli.main(["bench", "--ops", "l2norm", "--plot", "out"]) == 2
    assert "got no suffix" in capsys.readouterr().err
    assert cli.main(["estimate", "l2norm", "--png", "bars.txt"]) == 2
    assert "--png bars.txt: expected a file name ending in one of" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_two_outputs_on_one_path_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--json", "r.json", "--markdown", "./r.json"]) == 2
    assert "--json and --markdown name the same path" in capsys.readouterr().err


def test_output_file_and_dir_refusals(tmp_path, monkeypatch):
    """What cli_common.output_file / output_dir refuse, each naming the option and the path."""
    from fla_ascend.cli_common import output_dir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match=r"--json f.txt/x.json: f.txt is a file, not a folder"):
        output_file("f.txt/x.json", "--json")
    with pytest.raises(ValueError, match=r"--out f.txt/sub: f.txt is a file, not a folder"):
        output_dir("f.txt/sub", "--out")
    with pytest.raises(ValueError, match=r"--plot p.PNG.txt: expected .* \.png.*got '.txt'"):
        output_file("p.PNG.txt", "--plot", [".png"])
    assert output_file("p.PNG", "--plot", [".png"]) == (Path("p.PNG"), None)  # case ignored
    assert not (tmp_path / "f.txt" / "sub").exists()


def test_bench_unknown_named_shape(capsys):
    """`--shapes qwen4` was reported as an unknown dimension QWEN."""
    assert cli.main(["bench", "--ops", "l2norm", "--shapes", "qwen4"]) == 2
    err = capsys.readouterr().err
    assert "--shapes: unknown named shape 'qwen4'; known names: qwen3next" in err and "QWEN" not in err


def test_ir_capture_unknown_op_is_refused_before_work(tmp_path, capsys):
    """`fla-ascend ir capture nosuchop` printed the capture subprocess's traceback; the op is now
    checked first, before --dir is made; a folder of other files is refused (a capture replaces
    its folder)."""
    assert cli.main(["ir", "capture", "nosuchop", "--dir", str(tmp_path / "ir")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fla-ascend ir capture: error: unknown op 'nosuchop'; known ops: ") and "l2norm" in err
    assert "Traceback" not in err and not (tmp_path / "ir").exists()
    (tmp_path / "notes.txt").write_text("keep me")
    assert cli.main(["ir", "capture", "l2norm", "--dir", str(tmp_path)]) == 2
    assert "holds files that are not an IR capture" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "keep me"
