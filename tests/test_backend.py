"""The backend layer: device / flavour / interpreter detection,
launch-option filtering, task plans (grid <= 65535, >= 1; task loop on NPU and CPU, a plain
grid on CUDA below the limit) and the ``fla-ascend info`` command.

Backends this machine does not have are simulated with another active target (``backend.use``).
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from fla_ascend import backend
from fla_ascend.tiling.grid import CUDA_MAX_GRID_X, MAX_GRID, TaskPlan, check_int32_offsets, task_plan

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def simulate():
    """``simulate(device_type, interpreter, cores=None)``: make another machine's target the active
    one (:func:`fla_ascend.backend.use`) for the rest of the test (``cores`` cube cores, twice as many
    vector cores); the previous target is back after it."""
    with contextlib.ExitStack() as stack:
        def enter(device_type: str, interpreter: bool, cores: int | None = None):
            vector = None if cores is None else 2 * cores
            target = backend.Target(device_type=device_type, interpret=interpreter, cube_cores=cores,
                                    vector_cores=vector, tensor_device="cpu")
            stack.enter_context(backend.use(target))

        yield enter


# --- detection ---------------------------------------------------------------------------------


def test_detected_values_are_consistent():
    assert backend.device_type() in ("npu", "cuda", "cpu")
    assert backend.triton_flavour() in ("triton-ascend", "triton")
    if backend.device_type() == "cpu":
        assert backend.is_interpreter()
        assert os.environ.get("TRITON_INTERPRET") == "1"
        assert str(backend.device()) == "cpu"
    assert backend.device().type == backend.device_type()


def test_flavour_matches_installed_distribution():
    try:
        importlib.metadata.version("triton-ascend")
        expected = "triton-ascend"
    except importlib.metadata.PackageNotFoundError:
        expected = "triton"
    assert backend.triton_flavour() == expected
    assert backend.info().triton_version == importlib.metadata.version(expected)


def test_kernels_are_interpreted_on_cpu():
    """The interpreter must be on before the first kernel is defined: @triton.jit decides at
    decoration time. A compiled kernel would fail (or silently not run) on a CPU machine."""
    if not backend.is_interpreter():
        pytest.skip("kernels are compiled on this machine")
    from fla_ascend.ops.common.chunk_o import chunk_fwd_o_kernel

    assert "Interpreted" in type(chunk_fwd_o_kernel).__name__


def _python(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FLA_ASCEND_DEVICE")}
    env.update(env_changes)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_interpreter_switched_on_at_import_in_fresh_process():
    """A fresh process without TRITON_INTERPRET, forced to the CPU, gets it from the backend's import
    (``import fla_ascend`` alone imports nothing heavy; the ops and ``fla_ascend.backend`` do)."""
    r = _python("import os, fla_ascend; b = fla_ascend.backend; "
                "print(os.environ['TRITON_INTERPRET'], b.is_interpreter())", FLA_ASCEND_DEVICE="cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == ["1", "True"]


def test_forced_device_must_be_known():
    r = _python("import fla_ascend.ops", FLA_ASCEND_DEVICE="tpu")
    assert r.returncode != 0
    assert "FLA_ASCEND_DEVICE" in r.stderr and "'tpu'" in r.stderr and "npu, cuda, cpu" in r.stderr


def test_num_cores():
    assert backend.num_cores("cube") >= 1 and backend.num_cores("vector") >= 1
    assert backend.num_cores() == backend.num_cores("vector")
    with pytest.raises(ValueError, match="kind must be 'cube' or 'vector', got 'gpu'"):
        backend.num_cores("gpu")


def test_info_fields():
    info = backend.info()
    assert info.device_type == backend.device_type()
    assert info.triton_flavour == backend.triton_flavour()
    assert info.interpreter == backend.is_interpreter()
    assert info.cube_cores == backend.num_cores("cube") and info.vector_cores == backend.num_cores("vector")
    assert info.device_name and info.torch_version


# --- launch options ----------------------------------------------------------------------------


def test_launch_options_cuda(simulate):
    simulate("cuda", interpreter=False)
    assert backend.launch_options(num_warps=4, num_stages=2, multibuffer=True) == {"num_warps": 4, "num_stages": 2}
    assert backend.launch_options(num_warps=8, num_stages=None) == {"num_warps": 8}


def test_launch_options_npu(simulate):
    simulate("npu", interpreter=False)
    opts = backend.launch_options(num_warps=4, num_stages=2, multibuffer=False, unit_flag=True)
    assert opts == {"multibuffer": False, "unit_flag": True}


@pytest.mark.parametrize("device_type", ["cpu", "cuda", "npu"])
def test_launch_options_none_under_interpreter(simulate, device_type):
    simulate(device_type, interpreter=True)
    assert backend.launch_options(num_warps=4, num_stages=3, multibuffer=True) == {}


def test_launch_options_real_backend():
    """What this process really passes: nothing under the interpreter, no num_warps off CUDA."""
    opts = backend.launch_options(num_warps=4, num_stages=2, multibuffer=True)
    if backend.is_interpreter():
        assert opts == {}
    elif backend.device_type() == "cuda":
        assert opts == {"num_warps": 4, "num_stages": 2}
    else:
        assert "num_warps" not in opts and "num_stages" not in opts


@pytest.mark.parametrize("device_type, interpreter", [("cuda", False), ("npu", False), ("cpu", True)])
def test_launch_options_unknown_raises(simulate, device_type, interpreter):
    simulate(device_type, interpreter)
    with pytest.raises(ValueError) as info:
        backend.launch_options(num_warp=4, num_stages=2)
    msg = str(info.value)
    assert "num_warp" in msg and "num_warps" in msg and "multibuffer" in msg, msg


# --- task plans ----------------------------------------------------------------------------------

SIZES = [0, 1, 2, 3, 7, 24, 48, 100, 1000, 65534, 65535, 65536, 65537, 131072, 10**6, 2**31]


@pytest.mark.parametrize(
    "device_type, interpreter, cores",
    [("npu", False, 24), ("npu", False, 40), ("cuda", False, 132), ("cuda", True, 132), ("cpu", True, 4),
     ("npu", False, 10**6)],  # a (hypothetical) core count above the limit is still capped
)
@pytest.mark.parametrize("kind", ["cube", "vector"])
def test_task_plan_bounds(simulate, device_type, interpreter, cores, kind):
    simulate(device_type, interpreter, cores)
    for n in SIZES:
        plan = task_plan(n, kind)
        assert isinstance(plan, TaskPlan) and plan.n_tasks == n
        assert plan.grid == (plan.n_programs,)
        limit = CUDA_MAX_GRID_X if (device_type, interpreter) == ("cuda", False) else MAX_GRID
        assert 1 <= plan.n_programs <= limit, (n, plan)
        if not plan.task_loop:  # one program per task: the grid must cover every task
            assert plan.n_programs == max(n, 1), (n, plan)


@pytest.mark.parametrize("device_type, interpreter", [("npu", False), ("cpu", True), ("cuda", True)])
def test_task_plan_loops_over_cores(simulate, device_type, interpreter):
    """NPU and the interpreter: one program per physical core (cube or vector), looping."""
    simulate(device_type, interpreter, cores=24)
    assert task_plan(1000, "cube") == TaskPlan(1000, 24, True)
    assert task_plan(1000, "vector") == TaskPlan(1000, 48, True)
    assert task_plan(5, "cube") == TaskPlan(5, 5, True)  # never more programs than tasks
    assert task_plan(0, "vector") == TaskPlan(0, 1, True)


def test_task_plan_cuda_plain_grid_below_limit(simulate):
    simulate("cuda", interpreter=False, cores=132)
    assert task_plan(1, "cube") == TaskPlan(1, 1, False)
    assert task_plan(1000, "cube") == TaskPlan(1000, 1000, False)
    assert task_plan(MAX_GRID, "vector") == TaskPlan(MAX_GRID, MAX_GRID, False)
    assert task_plan(0, "cube").n_programs == 1


def test_task_plan_cuda_plain_grid_above_65535(simulate):
    """CUDA's x dimension holds 2^31 - 1 programs (65535 is the y/z limit): no loop below that."""
    simulate("cuda", interpreter=False, cores=132)
    # 2050 sequences x 32 heads: the varlen GPU case (an invalid launch in public ports)
    assert task_plan(2050 * 32, "cube") == TaskPlan(2050 * 32, 2050 * 32, False)
    assert task_plan(MAX_GRID + 1, "vector") == TaskPlan(MAX_GRID + 1, MAX_GRID + 1, False)
    assert task_plan(CUDA_MAX_GRID_X + 1, "vector") == TaskPlan(CUDA_MAX_GRID_X + 1, CUDA_MAX_GRID_X, True)


def test_task_plan_real_backend_programs_cover_tasks():
    """With a task loop, programs p, p + P, p + 2P, ... together visit every task exactly once."""
    for n in (0, 1, 5, 37, 1000):
        plan = task_plan(n, "cube")
        visited = sorted(t for p in range(plan.n_programs) for t in range(p, n, plan.n_programs)) \
            if plan.task_loop else list(range(n))
        assert visited == list(range(n))


def test_task_plan_bad_input():
    with pytest.raises(ValueError, match="n_tasks must be >= 0, got -1"):
        task_plan(-1, "cube")
    with pytest.raises(ValueError, match="kind must be 'cube' or 'vector', got 'matrix'"):
        task_plan(10, "matrix")


def test_check_int32_offsets():
    check_int32_offsets("v", 2**31 - 1)
    with pytest.raises(ValueError) as info:
        check_int32_offsets("v", 2**31)
    msg = str(info.value)
    assert "v" in msg and str(2**31) in msg and str(2**31 - 1) in msg


# --- fla-ascend info -----------------------------------------------------------------------------


def test_info_cli_in_process(capsys):
    from fla_ascend.cli import main

    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device_type"] == backend.device_type()
    assert data["triton_flavour"] == backend.triton_flavour()
    assert data["interpreter"] == backend.is_interpreter()
    assert data["cube_cores"] == backend.num_cores("cube")
    assert main(["info"]) == 0
    table = capsys.readouterr().out
    for key in ("device_type", "triton_flavour", "interpreter", "cube_cores", "vector_cores"):
        assert key in table


def test_info_cli_subprocess():
    """``python -m fla_ascend.cli info`` (what the ``fla-ascend`` console script calls)."""
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "fla_ascend.cli", "info", "--json"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= {"device_type", "triton_flavour", "triton_version", "interpreter", "cube_cores",
                         "vector_cores", "device_name", "torch_version"}
    assert data["device_type"] == backend.device_type()
