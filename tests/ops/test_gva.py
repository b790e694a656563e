"""The GVA group sum (``fla_ascend.ops.common.gva``), the last backward stage when ``HV > H``."""
from __future__ import annotations

import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops.common.gva import gva_group_sum

from helpers import nan_empty  # noqa: F401  (a fixture)


def _ref(x, H, dtype):
    """The group sum in float32, slices added in order g = 0 .. G - 1, rounded once: what the
    kernel computes, so the comparison is exact."""
    B, T, HV, K = x.shape
    xs = x.view(B, T, H, HV // H, K)
    s = xs[:, :, :, 0].clone()
    for i in range(1, HV // H):
        s += xs[:, :, :, i]
    return s.to(dtype)


@pytest.mark.parametrize("B, T, H, G, K", [(1, 5, 2, 2, 128), (2, 33, 1, 4, 60), (1, 7, 3, 3, 100), (1, 1, 1, 1, 16)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_gva_group_sum(B, T, H, G, K, dtype, device, nan_empty):
    x = torch.randn(B, T, H * G, K, device=device)
    y = gva_group_sum(x, H, dtype)
    assert y.shape == (B, T, H, K) and y.dtype == dtype
    # exact, except bfloat16 under the interpreter, whose float32 -> bfloat16 cast does not round
    # to nearest as the GPU / NPU cast and torch do: there one bfloat16 unit (2^-7 relative)
    rtol = 2.0**-7 if dtype == torch.bfloat16 and backend.is_interpreter() else 0.0
    torch.testing.assert_close(y, _ref(x, H, dtype), rtol=rtol, atol=0)


def test_gva_group_sum_task_loop_and_partial_tiles(device, nan_empty):
    """More rows than one task holds, a last task only partly filled, and (on the CPU) a task loop
    over several programs: every row is written once, in its group's order."""
    x = torch.randn(3, 11, 5, 32, device=device)  # M = 3 * 11 * 5 = 165 rows: 83 tasks, the last with one row
    with backend.use(backend.current().replace(overrides={"gva_group_sum": {"tile_elems": 64}})):  # 2 rows per task
        y = gva_group_sum(x, 5, torch.float32)
    torch.testing.assert_close(y, _ref(x, 5, torch.float32), rtol=0, atol=0)


def test_gva_group_sum_fixed_order(device):
    """The slices are added in the order g = 0, 1, 2 in float32, then rounded once: with values
    where the order matters, (1 + 1e8) - 1e8 = 0 in float32, where the reverse order gives 1."""
    x = torch.zeros(1, 1, 3, 16, device=device)
    x[..., 0, :], x[..., 1, :], x[..., 2, :] = 1.0, 1e8, -1e8
    assert gva_group_sum(x, 1, torch.float32).abs().max().item() == 0.0


def test_gva_group_sum_bad_input(device):
    with pytest.raises(ValueError, match="HV=6 must be a multiple of H=4"):
        gva_group_sum(torch.zeros(1, 2, 6, 8, device=device), 4, torch.float32)
    with pytest.raises(ValueError, match="contiguous"):
        gva_group_sum(torch.zeros(1, 2, 8, 6, device=device).transpose(2, 3), 2, torch.float32)
    with pytest.raises(ValueError, match=r"\[B, T, HV, K\]"):
        gva_group_sum(torch.zeros(2, 8, 6, device=device), 2, torch.float32)
    with pytest.raises(ValueError, match="H must be >= 1, got 0"):
        gva_group_sum(torch.zeros(1, 2, 4, 8, device=device), 0, torch.float32)
    with pytest.raises(TypeError, match="H must be an int, got 2.0"):
        gva_group_sum(torch.zeros(1, 2, 4, 8, device=device), 2.0, torch.float32)
    with pytest.raises(TypeError, match=r"x must be float32 .*got torch.float16"):
        gva_group_sum(torch.zeros(1, 2, 4, 8, device=device, dtype=torch.float16), 2, torch.float32)
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype, got None"):
        gva_group_sum(torch.zeros(1, 2, 4, 8, device=device), 2, None)
