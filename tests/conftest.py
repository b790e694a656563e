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
