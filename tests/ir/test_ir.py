"""IR capture: NPU target with triton-ascend (ttir, ttadapter without CANN), CUDA target with
upstream Triton (slow), and listing / diffing of captures."""
import json
import shutil

import pytest

from fla_ascend import backend
from fla_ascend.ir import capture as ir

ascend = pytest.mark.skipif(backend.triton_flavour() != "triton-ascend",
                            reason="NPU IR capture needs triton-ascend (this environment has upstream Triton)")
upstream = pytest.mark.skipif(backend.triton_flavour() != "triton",
                              reason="CUDA IR capture needs upstream Triton (this environment has triton-ascend)")


@ascend
def test_npu_capture_l2norm_and_diff(tmp_path):
    man = ir.capture("l2norm", tmp_path / "a", target="npu", dtype="float32", mode="fwdbwd")
    names = sorted(k["name"] for k in man["kernels"])
    assert names == ["l2norm_bwd_kernel", "l2norm_fwd_kernel"]
    for k in man["kernels"]:
        assert [s["stage"] for s in k["stages"]] == ["ttir", "ttadapter"]
        assert "ASCEND_HOME_PATH" in k["stopped"]  # the binary stage needs CANN
        ttadapter = (tmp_path / "a" / k["stages"][1]["file"]).read_text()
        assert k["stages"][1]["features"]["mix_mode"] == "aiv"  # vector-only kernels
        assert "memref.alloc" in ttadapter
        task_loop = next(p for p in k["params"] if p["name"] == "TASK_LOOP")
        assert task_loop["value"] is True  # NPU launch plan emulated: task loop over cores
    assert "npu launch plan emulated" in man["launch_plan"]
    text = ir.stages_text(tmp_path / "a")
    assert "l2norm_fwd_kernel" in text and "ttadapter" in text and "mix_mode=aiv" in text

    # diff: an identical copy, then one stage edited
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert {r["status"] for r in ir.diff_stages(tmp_path / "a", tmp_path / "b")} == {"same"}
    fwd = next(k for k in man["kernels"] if k["name"] == "l2norm_fwd_kernel")
    f = tmp_path / "b" / fwd["stages"][0]["file"]
    f.write_text(f.read_text() + "// extra line\n")
    rows = {(r["kernel"], r["stage"]): r for r in ir.diff_stages(tmp_path / "a", tmp_path / "b")}
    assert rows[("l2norm_fwd_kernel", "ttir")]["status"] == "changed"
    assert rows[("l2norm_fwd_kernel", "ttir")]["added"] == 1
    assert rows[("l2norm_fwd_kernel", "ttadapter")]["status"] == "same"
    assert "+// extra line" in ir.diff_text(tmp_path / "a", tmp_path / "b", stage="ttir", full=True)


@ascend
def test_npu_capture_of_a_round_snapshot(tmp_path):
    src = tmp_path / "src" / "fla_ascend/ops/norm"
    src.mkdir(parents=True)
    from fla_ascend.round.sources import package_root

    text = (package_root() / "fla_ascend/ops/norm/l2norm.py").read_text()
    assert "_TILE_ELEMS = 4096" in text
    (src / "l2norm.py").write_text(text.replace("_TILE_ELEMS = 4096", "_TILE_ELEMS = 1024"))
    man = ir.capture("l2norm", tmp_path / "ir", target="npu", dtype="float32", source=tmp_path / "src",
                     shape="B=1,T=16,H=4,K=128")
    assert list(man["source"]) == ["fla_ascend/ops/norm/l2norm.py"]
    bm = next(p for p in man["kernels"][0]["params"] if p["name"] == "BM")
    assert bm["value"] == 1024 // 128  # the snapshot's tile size reached the kernel


@upstream
def test_npu_target_refused_with_upstream_triton(tmp_path):
    with pytest.raises(ir.IRCaptureError, match="needs triton-ascend"):
        ir.capture("l2norm", tmp_path / "x", target="npu")


@upstream
@pytest.mark.slow
def test_cuda_capture_l2norm(tmp_path):
    man = ir.capture("l2norm", tmp_path / "c", target="cuda", dtype="bfloat16")
    k = man["kernels"][0]
    assert [s["stage"] for s in k["stages"]][:4] == ["ttir", "ttgir", "llir", "ptx"]
    assert next(p for p in k["params"] if p["name"] == "TASK_LOOP")["value"] is False  # CUDA plan
    assert k["options"] == {"num_warps": 4}
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["target"] == "cuda"
    r = k["resources"]  # offline ptxas -v: l2norm is small, no spills
    assert 0 < r["registers"] <= 255 and r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert r["shared_bytes"] >= 0 and isinstance(r["warnings"], list)
    assert "resources: " in ir.stages_text(tmp_path / "c")


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="target"):
        ir.capture("l2norm", tmp_path, target="tpu")
    with pytest.raises(ValueError, match="mode"):
        ir.capture("l2norm", tmp_path, mode="bwd")
    with pytest.raises(FileNotFoundError, match="manifest"):
        ir.stages_text(tmp_path)
    with pytest.raises(ValueError, match="lacks H, K needed by l2norm"):
        ir.capture("l2norm", tmp_path, target="cuda", shape="B=1,T=16")
    with pytest.raises(ValueError, match="unknown dimension|NAME=INT|unknown"):
        ir.capture("chunk_gated_delta_rule", tmp_path, target="cuda", shape="B=1,Q=3")


def test_stages_text_lists_resources(tmp_path):
    """ir stages prints each CUDA kernel's resources, and says when they could not be read."""
    kernel = {"id": "k-1", "name": "k", "module": "m", "params": [], "options": {}, "stages": [], "binaries": [],
              "stopped": None, "resources": {"shared_bytes": 1024, "registers": 255, "spill_stores": 40,
                                             "spill_loads": 44, "warnings": ["(C7517) warpgroup.wait is injected"]}}
    broken = dict(kernel, id="k-2", resources={"error": "CalledProcessError: ptxas failed"})
    (tmp_path / "manifest.json").write_text(json.dumps({
        "schema": ir.SCHEMA, "op": "x", "target": "cuda", "arch": "90", "triton": "triton 3.6.0",
        "dtype": "bfloat16", "mode": "fwd", "shape": None, "source": "checkout", "kernels": [kernel, broken]}))
    text = ir.stages_text(tmp_path)
    assert "k-1" in text and "255 registers, spills 40 B stored / 44 B loaded, 1024 B shared, ptxas: (C7517)" in text
    assert "k-2" in text and "resources: not read (CalledProcessError: ptxas failed)" in text
