import os

import pytest
import torch

from fla_ascend import backend


def pytest_collection_modifyitems(config, items):
    if backend.device_type() != "cpu" and not backend.is_interpreter():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or NPU device (GPU tier)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return backend.device()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _no_worker_columns(monkeypatch):
    """pytest-xdist workers run with ``COLUMNS=80``, which the CLI's console honours (a user's
    COLUMNS wins): tests see what a log or pipe gets without it (fla_ascend.console.LOG_WIDTH)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(autouse=True)
def _stop_after_device_fault():
    """A CUDA fault (illegal address...) leaves the process's context unusable, so every later
    test would error for the same reason. Under pytest-xdist the worker exits (xdist reports the
    test as crashed and starts a fresh worker); single-process, the run stops."""
    yield
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:  # torch.AcceleratorError is a RuntimeError
        if os.environ.get("PYTEST_XDIST_WORKER"):
            os._exit(3)
        pytest.exit(f"CUDA context lost: {e}", returncode=3)
