"""`fla-ascend check --kernels` / `--ops`: the check of a few kernels, for iterating on one.

The selection itself needs no compiler; the end-to-end run needs triton-ascend's front end and
bishengir-compile (skipped elsewhere)."""
import importlib.metadata
import json
import subprocess
import sys
import time

import pytest

from fla_ascend.check.runner import Case, select_cases

CASES = [Case(kernel="m.a.l2norm_fwd_kernel", config="D128", kind="vector", run=None, op="l2norm"),
         Case(kernel="m.a.l2norm_bwd_kernel", config="D128", kind="vector", run=None, op="l2norm"),
         Case(kernel="m.b.chunk_fwd_h_kernel", config="K128", kind="cube", run=None, op="chunk_gated_delta_rule"),
         Case(kernel="m.b.chunk_fwd_h_kernel", config="K64", kind="cube", run=None, op="chunk_gated_delta_rule")]


def _kernels(cases):
    return [(c.kernel.rsplit(".", 1)[-1], c.config) for c in cases]


def test_select_by_kernel_op_glob_and_full_name():
    assert select_cases(CASES) == CASES
    assert _kernels(select_cases(CASES, kernels=["chunk_fwd_h_kernel"])) == [("chunk_fwd_h_kernel", "K128"),
                                                                            ("chunk_fwd_h_kernel", "K64")]
    assert _kernels(select_cases(CASES, kernels=["m.a.l2norm_bwd_kernel"])) == [("l2norm_bwd_kernel", "D128")]
    assert len(select_cases(CASES, kernels=["l2norm_*"])) == 2
    assert len(select_cases(CASES, ops=["l2norm"])) == 2
    # both options: the kernels of both, in registry order
    picked = select_cases(CASES, kernels=["chunk_fwd_h_kernel"], ops=["l2norm"])
    assert _kernels(picked)[0] == ("l2norm_fwd_kernel", "D128")
    assert len(select_cases(CASES, kernels=["chunk_fwd_h_kernel"], ops=["l2norm"])) == 4


def test_unknown_names_list_the_known_ones():
    with pytest.raises(ValueError, match=r"--kernels: unknown kernel 'nosuch'; known kernels: chunk_fwd_h_kernel, "
                                         r"l2norm_bwd_kernel, l2norm_fwd_kernel$"):
        select_cases(CASES, kernels=["nosuch"])
    with pytest.raises(ValueError, match=r"--ops: unknown op 'gdn'; known ops: chunk_gated_delta_rule, l2norm$"):
        select_cases(CASES, ops=["gdn"])
    with pytest.raises(ValueError, match=r"'new_kernel' \(m.c.new_kernel\) has no registry entry"):
        select_cases(CASES, kernels=["new_kernel"], unregistered=["m.c.new_kernel"])


def test_registry_names_an_op_for_every_kernel():
    pytest.importorskip("triton")
    try:
        from fla_ascend.check import registry
    except Exception as e:  # the registry imports the ops' launchers
        pytest.skip(f"the check's registry does not import here: {e}")
    assert all(c.op for c in registry.CASES + registry.FULL_CASES)
    from fla_ascend.bench import cases

    assert set(cases.OPS) <= {c.op for c in registry.CASES}  # the benchmark's op names


def _has_triton_ascend():
    try:
        importlib.metadata.version("triton-ascend")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not _has_triton_ascend(), reason="the check needs triton-ascend's front end")
def test_check_of_one_kernel_takes_seconds(tmp_path):
    from fla_ascend.compiler.bishengir import compiler_available

    if not compiler_available("Ascend910B2"):
        pytest.skip("needs PyPI's ascendnpu-ir (bishengir-compile)")
    cmd = [sys.executable, "-m", "fla_ascend.cli", "check", "--kernels", "l2norm_fwd_kernel", "--no-default-chips",
           "--chip", "Ascend910B2", "--cache-dir", str(tmp_path / "cache"), "--json", str(tmp_path / "r.json"),
           "--markdown", str(tmp_path / "r.md"), "--jobs", "2"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert took < 60, f"a check of one kernel took {took:.0f} s"
    data = json.loads((tmp_path / "r.json").read_text())
    assert {x["kernel"].rsplit(".", 1)[-1] for x in data["results"]["Ascend910B2"]} == {"l2norm_fwd_kernel"}
    assert data["selection"]["selected"] == ["fla_ascend.ops.norm.l2norm.l2norm_fwd_kernel"] and data["missing"] == []
    assert "only 1 of" in r.stdout and "only 1 of" in (tmp_path / "r.md").read_text()
    r = subprocess.run([sys.executable, "-m", "fla_ascend.cli", "check", "--ops", "l2norm,nosuch"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--ops: unknown op 'nosuch'; known ops: causal_conv1d" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
