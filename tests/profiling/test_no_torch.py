"""``fla_ascend.profiling``, ``fla_ascend.tiling.chips`` and ``fla-ascend profile analyze/compare``
need only pandas, NumPy, matplotlib (and rich for the CLI's tables): a subprocess whose import
system refuses torch, triton and torch_npu runs them. And the lazy package import still sets up
``fla_ascend.backend`` before any kernel is defined."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "a2_pipe_utilization"
CORPUS_RANKS = ROOT / ".." / "shared" / "real-profiles" / "msinsight-pt-text" / "level1"

BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "triton", "torch_npu"):
                raise ImportError(f"{name} is blocked in this test")
    sys.meta_path.insert(0, _Block())
""")


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                       "MPLCONFIGDIR": str(tmp_path), "COLUMNS": "160"})


def test_profiling_runs_without_torch_or_triton(tmp_path):
    ranks = CORPUS_RANKS if CORPUS_RANKS.is_dir() else FIXTURE
    r = _run(f"""
        import sys
        import fla_ascend.profiling, fla_ascend.tiling.chips
        from fla_ascend.cli import main
        assert main(["profile", "analyze", {str(ranks)!r}, "--top", "3", "--out", {str(tmp_path / "a")!r}]) == 0
        assert main(["profile", "compare", {str(FIXTURE)!r}, {str(FIXTURE)!r}, "--no-plots"]) == 0
        bad = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "torch_npu"))
        assert not bad, bad
        print("NO-TORCH-OK")
    """, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NO-TORCH-OK" in r.stdout and "compute time new/base 1.000 (same time" in r.stdout
    assert (tmp_path / "a" / "report.md").is_file()


def test_blocked_kernels_fail_clearly(tmp_path):
    r = _run("from fla_ascend import chunk_gated_delta_rule", tmp_path)
    assert r.returncode != 0 and "blocked in this test" in r.stderr


def test_lazy_import_still_sets_up_the_backend_first(tmp_path):
    code = textwrap.dedent("""
        import sys
        import fla_ascend
        assert "torch" not in sys.modules and "fla_ascend.backend" not in sys.modules
        from fla_ascend import chunk_gated_delta_rule, backend
        import fla_ascend.ops.gated_delta_rule.chunk as chunk
        assert callable(chunk_gated_delta_rule) and backend.device_type() in ("cpu", "cuda", "npu")
        order = list(sys.modules)
        assert order.index("fla_ascend.backend") < order.index("fla_ascend.ops.gated_delta_rule")
        assert order.index("fla_ascend.backend") < order.index("triton")
        print("LAZY-OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLCONFIGDIR": str(tmp_path)})
    if r.returncode != 0 and "No module named 'torch'" in r.stderr:
        pytest.skip("torch is not installed in this environment")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LAZY-OK" in r.stdout
