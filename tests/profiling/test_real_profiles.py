"""The profiling toolkit on real Ascend profiler output: every directory and file of
``../shared/real-profiles`` (143 files from four public repositories, see its SOURCES.md) is read
and analysed. The expected numbers were checked by hand against the raw CSVs (and, for the step
split, against msprof-analyze 26.2.0's 70.1% / 74.7% uncovered communication of the CNN run).
The corpus is not copied into the project: these tests skip where it is absent."""
import collections
import csv
import importlib
import json
from pathlib import Path

import pytest

from fla_ascend.profiling import readers as R
from fla_ascend.profiling import roofline as RL
from fla_ascend.profiling.compare import compare

A = importlib.import_module("fla_ascend.profiling.analyze")

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "real-profiles"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real-profile corpus not found at {CORPUS} "
                                "(the shared/ folder beside the repository); nothing to test against")

CNN = "msinsight-pt-text"
LLM = "msinsight-st-level2"
GPT3 = "msinsight-server-testdata"
UT = "mstt-advisor-ut"

#: Every entry of the corpus the way a user would pass it: run folders, parents of ranks, files.
ENTRIES = [
    f"{CNN}/level0", f"{CNN}/level1", f"{CNN}/level2", LLM, GPT3,
    f"{GPT3}/test_kernel_parse/op_summary_1.csv",
    f"{UT}/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    f"{UT}/ut/advisor/compute_advice/data/kernel_details.csv",
    f"{UT}/ut/advisor/timeline_advice/trace_view.json",
    f"{UT}/resource/advisor/cluster_analysis_output/cluster_step_trace_time.csv",
    "vllm-ascend-tmp-prof/PROF_PipeUtilization", "vllm-ascend-tmp-prof/PROF_Memory",
    "vllm-ascend-tmp-prof/PROF_PipeUtilization/mindstudio_profiler_output/task_time_20260823165335.csv",
    "vllm-ascend-tmp-prof/PROF_PipeUtilization/mindstudio_profiler_output/op_statistic_20260823165335.csv",
    "neo-pan-sanitized/PROF_001", "neo-pan-sanitized/PROF_001/mindstudio_profiler_output/task_time_001.csv",
]


def _raw(rel):
    """The CSV's rows as dicts, read with the standard library only (independent of the readers)."""
    with open(CORPUS / rel, newline="") as f:
        return list(csv.DictReader(f))


def _kd(run):
    return f"{run}/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


@pytest.fixture(scope="module")
def reports():
    out = {}
    for e in ENTRIES:
        out[e] = A.analyze_ranks(CORPUS / e, top=5)
    return out


def test_every_file_of_the_corpus_is_covered(reports):
    """Each data file lies in a run that an entry reads, or is an entry itself."""
    covered = []
    for e in ENTRIES:
        p = CORPUS / e
        covered += [p] if p.is_file() else R.find_runs(p)
    covered = [c.resolve() for c in covered]
    files = [f for f in CORPUS.rglob("*") if f.is_file() and f.name != "SOURCES.md"]
    assert len(files) == 143  # SOURCES.md aside
    lost = [f for f in files if not any(f.resolve() == c or c in f.resolve().parents for c in covered)]
    assert lost == []
    for e, rep in reports.items():
        assert rep.ranks, e
        for r in rep.ranks:  # every report renders and serialises
            assert r.to_markdown() and json.loads(r.to_json())["source"]


def test_kernel_counts_match_the_raw_csvs(reports):
    for level in ("level0", "level1", "level2"):
        for rank in (0, 1):
            rel = _kd(f"{CNN}/{level}/rank{rank}_ascend_pt")
            rep = reports[f"{CNN}/{level}"].ranks[rank]
            assert rep.rank == rank and rep.totals["kernels"] == len(_raw(rel)) == 191
    llm = reports[LLM].ranks
    assert [r.rank for r in llm] == [0, 1, 2, 3]
    assert [r.totals["kernels"] for r in llm] == [len(_raw(_kd(f"{LLM}/rank_0_ascend_pt"))), 0,
                                                  len(_raw(_kd(f"{LLM}/rank_2_ascend_pt"))), 0] == [2463, 0, 2587, 0]
    assert reports["neo-pan-sanitized/PROF_001"].ranks[0].totals["kernels"] == 2
    assert reports["vllm-ascend-tmp-prof/PROF_Memory"].ranks[0].totals["kernels"] == 3
    report = reports[f"{UT}/ut/advisor/advisor_backend/compute_advice/kernel_details.csv"]
    assert report.ranks[0].totals["kernels"] == 591


def test_durations_and_block_num():
    k = R.read_kernel_details(CORPUS / "vllm-ascend-tmp-prof/PROF_PipeUtilization/mindstudio_profiler_output/"
                                       "op_summary_20260823165335.csv")
    assert sorted(k["type"]) == ["GroupedMatmul", "OnesLike", "OnesLike"]
    gm = k[k["type"] == "GroupedMatmul"].iloc[0]
    assert gm["core"] == "MIX_AIC" and gm["duration_us"] == pytest.approx(26.661)  # op_statistic rounds: 26.66
    assert k.loc[k["type"] == "OnesLike", "duration_us"].sum() == pytest.approx(12.66, abs=0.002)
    assert k["block_dim"].notna().all()  # the 2026 'Block Num' header
    neo = R.load_run(CORPUS / "neo-pan-sanitized/PROF_001")
    assert sorted(neo.kernels["duration_us"]) == pytest.approx([42058.48, 42399.12])
    assert neo.task_time["task_time_us"].max() == pytest.approx(42401.72)
    llm0 = R.load_run(CORPUS / LLM / "rank_0_ascend_pt")
    comp = llm0.kernels[~llm0.kernels["type"].astype(str).str.startswith("hcom_")]["duration_us"].sum()
    raw = sum(float(r["Duration(us)"]) for r in _raw(_kd(f"{LLM}/rank_0_ascend_pt"))
              if not r["Type"].startswith("hcom_") and r["Duration(us)"] != "N/A")
    assert comp == pytest.approx(raw)
    # the step trace's Computing (union of compute time) is the summed compute kernel time here
    assert comp == pytest.approx(231290.1, rel=1e-3)


def test_level0_groups_by_normalised_name():
    l0 = R.read_kernel_details(CORPUS / _kd(f"{CNN}/level0/rank0_ascend_pt"))
    assert l0.attrs["type_from_name"]
    assert R.normalise_kernel_name("trans_TransData_0") == "TransData"
    counts = collections.Counter(l0["type"])
    assert counts["TransData"] == 57 and "" not in counts and len(counts) == 34
    # the same ranks' Level1 run has the Type column: the Level0 grouping gives the same 34 types
    l1 = collections.Counter(r["Type"] for r in _raw(_kd(f"{CNN}/level1/rank0_ascend_pt")))
    assert counts == l1


def test_trimmed_row_skipped_and_counted(reports):
    rep = reports[GPT3].ranks[0]
    assert rep.totals["kernels"] == 20 and rep.totals["skipped_rows"] == 1
    (issue,) = rep.issues
    assert issue.line == 17 and issue.path.endswith("test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    assert "got 31" in issue.message and "Malformed rows skipped (1)" in rep.to_markdown()
    fa = rep.summary.set_index("type").loc["FlashAttentionScore"]
    assert fa["count"] == 3 and fa["total_us"] == pytest.approx(6969.308 + 7119.9688 + 7023.5739)
    with pytest.raises(R.ProfilingFormatError, match=r"line 17.*got 31"):
        R.load_run(CORPUS / GPT3 / "test_rank_0", strict=True)
    op = reports[f"{GPT3}/test_kernel_parse/op_summary_1.csv"].ranks[0]
    assert op.totals["kernels"] == 20 and op.totals["skipped_rows"] == 1  # same rows, op_summary naming


def test_cnn_step_split_matches_msprof_analyze(reports):
    """msprof-analyze: 70.1% (Level0) and 74.7% (Level1) of rank 0's step is communication that no
    compute overlaps."""
    for level, share in (("level0", 0.701), ("level1", 0.747)):
        s = reports[f"{CNN}/{level}"].ranks[0].step.iloc[0]
        assert s["communication_not_overlapped_share"] == pytest.approx(share, abs=0.01)
        assert s["computing"] + s["communication_not_overlapped"] + s["free"] == pytest.approx(s["stage"])
    rep = reports[f"{CNN}/level1"].ranks[0]
    assert "communication not overlapped 74.7%" in rep.findings[0]
    # shares of compute are shares of compute: ForeachAddList is 22% of compute time, not 1.7%
    assert rep.summary.set_index("type").loc["ForeachAddList", "share"] == pytest.approx(1959.079 / 8873.737, rel=1e-3)
    assert not any("launch-bound or host-bound" in f for f in rep.findings)
    assert any("one active step" in w for w in rep.warnings)


def test_communication_per_collective(reports):
    c = reports[f"{CNN}/level1"].ranks[0].communication.set_index("op_type").loc["allReduce"]
    assert c["count"] == 4 and c["source"] == "communication.json"
    assert c["size_mb"] == pytest.approx(427.6, abs=0.1) and 10 < c["bandwidth_gbs"] < 25
    l0 = reports[f"{CNN}/level0"].ranks[0].communication  # Level0: no communication.json, from the tasks
    assert l0.iloc[0]["op_type"] == "allReduce" and l0.iloc[0]["count"] == 4 and l0.iloc[0]["source"] == "kernel table"


def test_cross_rank_names_the_slowest(reports):
    cnn = reports[f"{CNN}/level1"]
    assert cnn.verdict.startswith("slowest rank 0") and "communication not overlapped" in cnn.verdict
    llm = reports[LLM]
    assert llm.cross.set_index("rank")["stage"].idxmax() == 3 and llm.verdict.startswith("slowest rank 3")
    # PP2: ranks 2/3 compute ~400 ms, ranks 0/1 ~231 ms; the others wait on them
    assert "rank 3 computes longest" in llm.verdict
    cl = reports[f"{UT}/resource/advisor/cluster_analysis_output/cluster_step_trace_time.csv"]
    assert len(cl.cross) == 8 and cl.verdict.startswith("slowest rank 0: step 1754645.8 us")


def test_trace_view_overlap(reports):
    s = reports[f"{UT}/ut/advisor/timeline_advice/trace_view.json"].ranks[0].step.iloc[0]
    assert s["source"] == "trace_view.json"
    assert s["computing"] == pytest.approx(1788.2505) and s["free"] == pytest.approx(9481.667)
    o = R.read_trace_overlap(CORPUS / CNN / "level1" / "rank0_ascend_pt")
    assert o["computing"] > 0 and o["communication_not_overlapped"] > 0


def test_bounds_on_real_rows(reports):
    cnn = reports[f"{CNN}/level1"].ranks[0]
    k = A.bound_table(cnn.kernels[cnn.kernels["core"] == "AI_CORE"])
    conv = k[(k["type"] == "Conv2D") & k["input_shapes"].str.startswith("32,1,224")].iloc[0]
    # MTE1 0.883 crosses 0.8 but MTE2 (0.913) is busier: the busiest pipe is named
    assert conv["bound"] == "MTE2(cube) bound" and "MTE1 0.883" in conv["rule"]
    pipe = reports[f"{UT}/ut/advisor/compute_advice/data/kernel_details.csv"].ranks[0]
    assert pipe.metric_group == "PipeUtilization"
    arith = reports[f"{UT}/ut/advisor/advisor_backend/compute_advice/kernel_details.csv"].ranks[0]
    assert arith.metric_group == "ArithmeticUtilization"
    assert "no PMU data" not in set(arith.bounds.head(5)["bound"])
    mem = reports["vllm-ascend-tmp-prof/PROF_Memory"].ranks[0]
    assert mem.metric_group == "Memory" and mem.bounds["rule"].str.contains("GB/s").all()
    l0b = reports[GPT3].ranks[0]
    assert l0b.metric_group == "L0B_AND_WIDTH"
    assert l0b.bounds.set_index("type").loc["FlashAttentionScore", "bound"].startswith("L0B_AND_WIDTH: busiest")


def test_flash_attention_thresholds():
    fwd = {"aic_mac_ratio": 0.3, "aic_mte2_ratio": 0.82, "aic_scalar_ratio": 0.2, "aic_fixpipe_ratio": 0.1,
           "aiv_vec_ratio": 0.5, "aiv_mte2_ratio": 0.1, "aiv_mte3_ratio": 0.1}
    r = A.classify_bound(fwd, core="MIX_AIC", op_type="FlashAttentionScore")
    assert r.label == "MTE2(cube) bound" and "MTE2(cube) 0.82 >= 0.8" in r.rule
    r = A.classify_bound({**fwd, "aic_mte2_ratio": 0.5, "aiv_vec_ratio": 0.6}, core="MIX_AIC",
                         op_type="FlashAttentionScore")
    assert r.label == "not bound" and r.room == pytest.approx(max(0.8 - 0.5, 0.75 - 0.6))
    r = A.classify_bound({**fwd, "aiv_vec_ratio": 0.9}, core="MIX_AIC", op_type="FlashAttentionScore")
    assert r.label == "vec bound" or r.label == "MTE2+vec bound"
    grad = {**fwd, "aic_mte2_ratio": 0.7, "aic_fixpipe_ratio": 0.76}
    r = A.classify_bound(grad, core="MIX_AIC", op_type="FlashAttentionScoreGrad")
    assert r.label == "fixpipe bound" and "fixpipe 0.76 >= 0.75" in r.rule


def test_roofline_of_a_real_matmul(reports):
    roof = reports[f"{CNN}/level1"].ranks[0].roofline
    mm = roof[(roof["type"] == "MatMulV2") & (roof["input_shapes"] == "32,9216;4096,9216;4096")].iloc[0]
    assert mm["flops"] == 2 * 32 * 4096 * 9216
    assert mm["bytes"] == 4 * (32 * 9216 + 4096 * 9216 + 4096 + 32 * 4096)  # FLOAT
    assert mm["tflops"] == pytest.approx(mm["flops"] / 346.567e-6 / 1e12)
    assert mm["hbm_share"] == pytest.approx(mm["bytes"] / 346.567e-6 / 1.6e12)
    assert mm["peak_share"] != mm["peak_share"]  # fp32 inputs: no bf16 peak share
    assert RL.kernel_flops("MatMulV2", "32,1000;32,4096", "1000,4096") == 2 * 1000 * 4096 * 32


def test_file_kind_checked():
    op_summary = CORPUS / GPT3 / "test_kernel_parse" / "op_summary_1.csv"
    with pytest.raises(R.ProfilingFormatError, match=r"step_trace_time.csv.*kernel_details.csv / op_summary"):
        R.read_step_trace(op_summary)
    st = CORPUS / _kd(f"{CNN}/level1/rank0_ascend_pt").replace("kernel_details", "step_trace_time")
    with pytest.raises(R.ProfilingFormatError, match="asked for kernel_details.csv / op_summary_"):
        R.read_kernel_details(st)


def test_compare_two_ranks_counts_compute_only():
    base, new = (CORPUS / CNN / "level1" / f"rank{i}_ascend_pt" for i in (0, 1))
    cmp = compare(base, new)
    assert "hcom_allReduce_" not in set(cmp.table["type"])
    assert cmp.totals["base_us"] == pytest.approx(8873.737, rel=1e-4)
    assert cmp.totals["communication_base_us"] == pytest.approx(105991.9, rel=1e-4)
    assert "compute kernels only" in cmp.to_markdown()


def test_multi_rank_report_and_plots(reports, tmp_path):
    files = reports[f"{CNN}/level1"].write(tmp_path)
    for k in ("step_split", "cross_rank", "rank0_pipe_ratios", "rank1_time_share"):
        assert files[k].read_bytes()[:4] == b"\x89PNG"
    md = files["markdown"].read_text()
    assert md.count("# Profile report:") == 3 and "## Across ranks" in md


def test_cli_on_a_folder_of_ranks(capsys, tmp_path):
    from fla_ascend.cli import main

    assert main(["profile", "analyze", str(CORPUS / LLM), "--json", "--no-plots"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in js["cross"]] == [0, 1, 2, 3] and js["verdict"].startswith("slowest rank 3")
    assert main(["profile", "analyze", str(CORPUS / LLM), "--msprof-op", str(tmp_path)]) == 2
    assert "--msprof-op applies to one run" in capsys.readouterr().err
    assert main(["profile", "analyze", str(CORPUS / GPT3 / "test_rank_0"), "--strict"]) == 2
    assert "line 17" in capsys.readouterr().err


def test_parent_of_unrelated_runs_is_refused(capsys):
    """The corpus root holds runs of several jobs (rank 0 five times): `profile analyze` refuses
    it with the runs listed per folder instead of a cross-rank verdict over unrelated runs."""
    from fla_ascend.cli import main

    with pytest.raises(ValueError, match="not the ranks of one job"):
        A.analyze_ranks(CORPUS, top=5)
    assert main(["profile", "analyze", str(CORPUS)]) == 2
    err = capsys.readouterr().err
    assert "ranks 0, 1 occur more than once" in err and "msinsight-st-level2: rank_0_ascend_pt (rank 0)" in err
    assert "slowest rank" not in err
    assert len(A.analyze_ranks(CORPUS / LLM, top=5).ranks) == 4  # one job's folder of ranks still works


def test_runs_of_one_app_per_metric_group_name_what_they_are(capsys):
    """vllm-ascend-tmp-prof holds PROF_Memory and PROF_PipeUtilization, both rank 0: one
    application profiled once per msprof metric group. The refusal says so and names one run's
    folder to pass (it suggested the refused folder itself)."""
    from fla_ascend.cli import main

    folder = CORPUS / "vllm-ascend-tmp-prof"
    assert main(["profile", "analyze", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "PROF_Memory: Memory, PROF_PipeUtilization: PipeUtilization" in err
    assert "once per msprof --aic-metrics group" in err
    assert f"fla-ascend profile analyze {folder / 'PROF_Memory'}" in err
    assert f"e.g. {folder})" not in err and "job's folder of ranks" not in err and "Traceback" not in err
    assert main(["profile", "analyze", str(folder / "PROF_Memory")]) == 0  # what the message says to run


@pytest.mark.parametrize("folder, kind", [(f"{GPT3}/test_kernel_parse", "op_summary"),
                                          (f"{UT}/resource/advisor/cluster_analysis_output", "cluster")])
def test_folder_of_one_profiler_file_reads_that_file(folder, kind, capsys):
    """A folder holding only op_summary_1.csv or only cluster_step_trace_time.csv stands for
    that file (it was 'no profiler run under ...'); a folder with neither names the file kinds."""
    from fla_ascend.cli import main

    f = R.resolve_input(CORPUS / folder)
    assert f.is_file() and f.parent == CORPUS / folder
    assert R.load_run(CORPUS / folder).kernels.shape == R.load_run(f).kernels.shape
    assert main(["profile", "analyze", str(CORPUS / folder)]) == 0
    assert str(f) in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match=r"op_summary_\*\.csv"):
        R.load_run(CORPUS / UT / "resource")
