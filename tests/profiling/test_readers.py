"""Readers on fixture directories: every header variant, N/A cells, TAB times, quoted shapes,
Level0 without op_statistic, empty files, msprof op output, and malformed files."""
from pathlib import Path

import pandas as pd
import pytest

from fla_ascend.profiling import readers as R

import profiling_builders as B

FIXTURE = Path(__file__).parent / "fixtures" / "a2_pipe_utilization"


def test_committed_fixture_reads_real_rows():
    k = R.read_kernel_details(FIXTURE)
    assert list(k["type"]) == ["MatMulV2", "MatMulV3", "FlashAttentionScore", "Add"]
    assert k["duration_us"].tolist() == [185.504, 501.17, 410.188, 26.78]
    assert k["aic_mac_ratio"].tolist() == [0.824, 0.744, 0.352, 0.0]
    assert k["mix_block_dim"].tolist() == [0, 0, 40, 0]
    assert k["core"].tolist() == ["AI_CORE", "AI_CORE", "MIX_AIC", "AI_VECTOR_CORE"]
    assert k.columns[: len(R.KERNEL_COLUMNS)].tolist() == R.KERNEL_COLUMNS


def test_tab_start_time_exact_and_quoted_shapes(tmp_path):
    run = B.make_run(tmp_path)
    raw = (run / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert '"1736413971558972.912\t"' in raw and '"""81920,4096;8192,512"""' in raw  # as in real files
    k = R.read_kernel_details(run)
    assert int(k["start_ns"].iloc[0]) == 1736413971558972912
    assert k["start_us"].dtype == "float64"
    assert abs(k["start_us"].iloc[0] - 1736413971558972.912) <= 0.25  # float64 spacing at this epoch
    assert int(k["start_ns"].iloc[1] - k["start_ns"].iloc[0]) == 600_000
    assert k["input_shapes"].iloc[0] == "81920,4096;8192,512"
    assert R.parse_shapes(k["input_shapes"].iloc[0]) == ((81920, 4096), (8192, 512))
    assert k["op_state"].iloc[0] == "dynamic" and k["hf32_eligible"].iloc[0] == "NO"
    assert int(k["model_id"].iloc[0]) == 4294967295


def test_parse_shapes_edge_cases():
    assert R.parse_shapes('"8,4;;2"') == ((8, 4), (), (2,))
    assert R.parse_shapes("") == () and R.parse_shapes(None) == () and R.parse_shapes(pd.NA) == ()
    with pytest.raises(ValueError, match="x4"):
        R.parse_shapes("8,x4")


def _rows_for(header):
    return [B.kernel_row(op, task=i + 1, start_ns=1736413971558972912 + i * 1000) for i, op in enumerate(B.REAL_ROWS)]


@pytest.mark.parametrize("variant", ["no_step_no_device", "block_num", "level0", "level0_block_num", "memory_ub"])
def test_header_variants(tmp_path, variant):
    rows = _rows_for(None)
    full = B.BASE_FULL + B.PIPE_UTIL
    if variant == "no_step_no_device":
        header = [h for h in full if h not in ("Step Id", "Device_id", "OP State", "HF32 Eligible")]
    elif variant == "block_num":
        header = [{"Block Dim": "Block Num", "Mix Block Dim": "Mix Block Num"}.get(h, h) for h in full]
        for r in rows:
            r["Block Num"], r["Mix Block Num"] = r["Block Dim"], r["Mix Block Dim"]
    elif variant.startswith("level0"):
        bd = "Block Num" if variant.endswith("block_num") else "Block Dim"
        header = ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                  "Wait Time(us)", bd]
        for r in rows:
            r[bd] = r["Block Dim"]
    else:
        header = B.BASE_FULL + B.MEMORY_UB
        for r in rows:
            r.update({c: "12.5" for c in B.MEMORY_UB if c not in r})
    run = B.make_run(tmp_path, rows=rows, header=header, op_statistic=not variant.startswith("level0"))
    k = R.read_kernel_details(run)
    assert len(k) == 4
    assert k["block_dim"].tolist() == [16, 20, 20, 40]
    assert k["duration_us"].tolist() == [185.504, 501.17, 410.188, 26.78]
    if variant == "no_step_no_device":
        assert k["step"].isna().all() and k["device_id"].isna().all()
    if variant == "block_num":
        assert k["mix_block_dim"].tolist() == [0, 0, 40, 0]
    if variant.startswith("level0"):
        assert "aic_mac_ratio" not in k
        st = R.read_op_statistic(run)
        assert st.attrs["built_from_kernels"]
        assert st["op_type"].tolist() == ["MatMulV3", "FlashAttentionScore", "MatMulV2", "Add"]
        assert st["ratio_pct"].sum() == pytest.approx(100.0)
    if variant == "memory_ub":
        assert k["aiv_ub_read_bw_vector(GB/s)"].dtype == "float64"
        assert k["aiv_ub_read_bw_vector(GB/s)"].iloc[0] == 12.5


def test_non_split_chip_unprefixed_columns(tmp_path):
    header = ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim",
              "Input Shapes", "aicore_time(us)", "total_cycles", "mac_ratio", "vec_ratio", "scalar_ratio",
              "mte1_ratio", "mte2_ratio", "mte3_ratio", "memory_bound"]
    rows = [{"Name": "mm", "Type": "MatMul", "Accelerator Core": "AI_CORE", "Start Time(us)": "10.5",
             "Duration(us)": "100", "Wait Time(us)": "0", "Block Dim": "32", "Input Shapes": '"64,64;64,64"',
             "aicore_time(us)": "95", "total_cycles": "1000", "mac_ratio": "0.91", "vec_ratio": "0.1",
             "scalar_ratio": "0.05", "mte1_ratio": "0.3", "mte2_ratio": "0.4", "mte3_ratio": "0.1",
             "memory_bound": "0.44"}]
    run = B.make_run(tmp_path, rows=rows, header=header, op_statistic=False, extra_files=False)
    k = R.read_kernel_details(run)
    assert k["mac_ratio"].iloc[0] == 0.91 and k["memory_bound"].iloc[0] == 0.44


def test_na_rows_and_op_statistic(tmp_path):
    rows = _rows_for(None) + [B.aicpu_row(task=9)]
    run = B.make_run(tmp_path, rows=rows)
    k = R.read_kernel_details(run)
    cpu = k[k["core"] == "AI_CPU"].iloc[0]
    assert pd.isna(cpu["block_dim"]) and pd.isna(cpu["aic_mac_ratio"]) and cpu["duration_us"] == 35.2
    st = R.read_op_statistic(run)
    assert not st.attrs["built_from_kernels"]
    assert st.loc[st["op_type"] == "GatherV2", "count"].item() == 1
    built = R.op_statistic_from_kernels(k)
    assert built["op_type"].tolist() == st["op_type"].tolist()
    assert built["total_us"].tolist() == pytest.approx(st["total_us"].tolist(), abs=1e-3)


def test_empty_kernel_details(tmp_path):
    run = B.make_run(tmp_path, rows=[], op_statistic=False)
    k = R.read_kernel_details(run)
    assert len(k) == 0 and "duration_us" in k
    assert len(R.read_op_statistic(run)) == 0


def test_other_tables_and_device_info(tmp_path):
    run = B.make_run(tmp_path, ai_core_num=24, aiv_num=48, freq="1650")
    r = R.load_run(tmp_path)  # the parent: finds the one run
    assert r.path == run
    assert r.device == R.DeviceInfo(24, 48, 1650.0, 0, r.device.raw)
    assert r.step_trace["computing"].tolist() == [1200.5]
    assert "communication_not_overlapped" in r.step_trace
    assert r.operator_details["device_total_duration_us"].tolist() == [185.504]
    assert r.profiler_info["config"]["experimental_config"]["_aic_metrics"] == "PipeUtilization"


def test_find_runs(tmp_path):
    a = B.make_run(tmp_path / "p", name="w_1_20250101000000000_ascend_pt")
    b = B.make_run(tmp_path / "p", name="w_2_20250101000000001_ascend_ms")
    assert R.find_runs(tmp_path / "p") == [a, b]
    assert R.find_runs(tmp_path) == [a, b]  # one level further up
    assert R.find_runs(a / "ASCEND_PROFILER_OUTPUT") == [a]
    with pytest.raises(ValueError, match="2 profiler runs"):
        R.read_kernel_details(tmp_path / "p")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no profiler run"):
        R.find_runs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        R.find_runs(tmp_path / "missing")


def _write(tmp_path, text):
    run = tmp_path / "x_1_20250101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    (run / "kernel_details.csv").write_text(text)
    return run / "kernel_details.csv"


def test_truncated_row_names_file_line_column(tmp_path):
    f = _write(tmp_path, "Name,Type,Accelerator Core,Duration(us),Wait Time(us)\nk,K,AI_CORE,1.5,0\nk,K,AI_CO")
    with pytest.raises(R.ProfilingFormatError) as e:
        R.read_kernel_details(f)
    assert e.value.line == 3 and e.value.column == 4
    assert str(f) in str(e.value) and "line 3, column 4" in str(e.value) and "Duration(us)" in str(e.value)


def test_unterminated_quote_is_an_error(tmp_path):
    f = _write(tmp_path, 'Name,Type,Accelerator Core,Duration(us)\nk,K,AI_CORE,1\nk,K,AI_CORE,"1.5')
    with pytest.raises(R.ProfilingFormatError, match=r"line 3.*truncated"):
        R.read_kernel_details(f)


def test_bad_number_names_line_and_column(tmp_path):
    f = _write(tmp_path, "Name,Type,Accelerator Core,Duration(us),aic_mac_ratio\nk,K,AI_CORE,1,0.5\n"
                         "k,K,AI_CORE,2,abc\n")
    with pytest.raises(R.ProfilingFormatError) as e:
        R.read_kernel_details(f)
    assert (e.value.line, e.value.column) == (3, 5) and "aic_mac_ratio" in str(e.value)


def test_missing_required_header_and_empty_file(tmp_path):
    f = _write(tmp_path, "Name,Type\nk,K\n")
    with pytest.raises(R.ProfilingFormatError, match="Accelerator Core"):
        R.read_kernel_details(f)
    f.write_text("")
    with pytest.raises(R.ProfilingFormatError, match="empty file"):
        R.read_kernel_details(f)


def test_malformed_device_info_json(tmp_path):
    run = B.make_run(tmp_path)
    info = next(run.glob("PROF_*/device_*/info.json.*"))
    info.write_text('{"DeviceInfo": [\n  {"ai_core_num": 20,,}]}')
    with pytest.raises(R.ProfilingFormatError) as e:
        R.read_device_info(run)
    assert e.value.line == 2 and e.value.column is not None


def test_msprof_op(tmp_path):
    d = B.make_msprof_op(tmp_path)
    op = R.read_msprof_op(tmp_path)
    assert op.path == d
    assert op.basic["op_name"] == "chunk_fwd_kernel" and op.basic["block_dim"] == 20
    ub = op.metrics["MemoryUB"]
    assert len(ub) == 60 and set(ub["sub_block_id"]) == {"cube0", "vector0", "vector1"}
    assert ub.loc[(ub["block_id"] == 7) & (ub["sub_block_id"] == "vector0"), "aiv_time(us)"].item() == 60.0
    with pytest.raises(FileNotFoundError, match="OpBasicInfo"):
        (tmp_path / "nothing_here").mkdir()
        R.read_msprof_op(tmp_path / "nothing_here")
