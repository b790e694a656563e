"""The check end to end: bad test kernels produce their findings (a kernel too big for UB fails the
compile with the compiler's own overflow), good ones stay clean and compile, and every kernel of the
package is registered and lowers (the package's compile runs in scripts/test.sh as ``fla-ascend check``).

Needs triton-ascend 3.2.0's front end: skipped in the upstream-Triton environment; the compile
needs PyPI's ascendnpu-ir."""
import importlib.metadata
import json
from pathlib import Path

import pytest

from fla_ascend.check.cli import run_worker
from fla_ascend.compiler.bishengir import compiler_available

try:
    importlib.metadata.version("triton-ascend")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("the NPU readiness check needs triton-ascend's compiler front end (not upstream Triton)",
                allow_module_level=True)

HERE = Path(__file__).parent


def _run(tmp_path, *args, extra_path=None):
    out = tmp_path / "r.json"
    proc = run_worker([*args, "--json", str(out), "--quiet"], extra_path=extra_path, capture_output=True, text=True,
                      timeout=900)
    assert out.exists(), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text())


needs_compiler = pytest.mark.skipif(not compiler_available("Ascend910B2"),
                                    reason="needs PyPI's ascendnpu-ir (bishengir-compile)")


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    return _run(tmp, "--no-default-chips", "--chip", "Ascend910B2", "--registry", "bad_kernels", "--discover", "",
                "--cache-dir", str(tmp / "cache"), "--jobs", "2", extra_path=str(HERE))


def _codes(data, kernel, config):
    rows = [r for r in data["results"]["Ascend910B2"] if r["kernel"].endswith("." + kernel)
            and config in (r.get("configs") or [r["config"]])]
    assert rows, f"no result for {kernel} [{config}]"
    return {f["code"] for r in rows for f in r["findings"] if f["severity"] == "error"}, rows[0]


@pytest.mark.parametrize("kernel,config,code", [
    ("bad_gather_kernel", "64", "gather_loop"),
    ("bad_strided_gate_kernel", "64", "strided_dma"),
    ("bad_oversized_kernel", "num_warps", "launch_num_warps"),
    ("good_copy_kernel", "dot-as-vector", "mix_mode_mismatch"),
    ("good_copy_kernel", "grid-too-large", "grid_too_large"),
])
def test_bad_kernel_finding_fires(bad, kernel, config, code):
    codes, _ = _codes(bad[1], kernel, config)
    assert code in codes


@needs_compiler
def test_kernel_too_big_for_ub_fails_the_check(bad):
    """A [256, 256] fp32 tile (256 KiB) cannot fit the 192 KiB UB: bishengir-compile says so, the
    finding is an error and the check exits 1."""
    rc, data = bad
    codes, row = _codes(data, "bad_oversized_kernel", "256")
    assert "compile_ub_overflow" in codes and rc == 1
    assert row["compiled"] is False and row["compile_error_class"] == "ub_overflow"
    assert row["compile_available_bytes"] == 196608 and row["compile_needed_bytes"] > 196608
    assert any("bad_oversized_kernel [256] Ascend910B2: compile_ub_overflow" in f for f in data["failures"])


@needs_compiler
@pytest.mark.parametrize("kernel,config,core", [("good_copy_kernel", "n1000", "AIV"), ("good_dot_kernel", "64", "AIC")])
def test_good_kernels_clean(bad, kernel, config, core):
    codes, row = _codes(bad[1], kernel, config)
    assert codes == set() and row["lowered"] and row["compiled"] and row["core_type"] == core
    assert row["model_bytes"] > 0 and row["compile_seconds"] is not None
    assert row["model_vs_plan"] is None or row["model_vs_plan"] > 0


def test_bad_registry_fails_and_lint_reports(bad):
    rc, data = bad
    assert rc == 1
    lint_codes = {f["code"] for f in data["lint"]}
    assert {"inplace_pointer_advance", "dot_operand_reused", "launch_num_warps"} <= lint_codes


def test_lowering_only_is_named(tmp_path):
    rc, data = _run(tmp_path, "--no-default-chips", "--chip", "Ascend910B2", "--registry", "bad_kernels",
                    "--discover", "", "--lowering-only", extra_path=str(HERE))
    assert data["chips"]["Ascend910B2"]["mode"].startswith("lowering only")
    assert all(r["compiled"] is None for r in data["results"]["Ascend910B2"])


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("pkg"), "--no-default-chips", "--chip", "Ascend910B2", "--lowering-only")


def test_every_package_kernel_registered_and_lowered(package):
    _, data = package
    assert data["import_errors"] == [] and data["missing"] == []
    for chip, rows in data["results"].items():
        assert rows, f"no kernel was checked on {chip}"
        # a launch a scenario does not make on this chip (an NPU-only split, accepted by allow entry) has no lowering
        launched = [r for r in rows if not any(f.get("code") == "not_launched" for f in r.get("findings", []))]
        assert [r["kernel"] for r in launched if not r["lowered"]] == []
        assert all(r["model_bytes"] for r in launched), "a registered kernel has no tile declaration"
