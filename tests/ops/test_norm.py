"""CPU-tier tests of the norm ops against pure-PyTorch float32 references (issue 4: ratio <= 0.005)."""
import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops.norm import l2norm
from fla_ascend.ops.norm.reference import l2norm_ref
from fla_ascend.ops.utils import rel_rmse

TOL = 5e-3


def _dtypes():
    return [torch.float32, torch.float16] if backend.is_interpreter() else [torch.float32, torch.bfloat16]


def _check_l2norm(shape, dtype, device, eps=1e-6, scale=1.0):
    x = (torch.randn(shape, device=device) * scale).to(dtype).requires_grad_()
    dy = torch.randn(shape, device=device).to(dtype)
    y = l2norm(x, eps=eps)
    assert y.dtype == dtype and y.shape == x.shape
    y.backward(dy)
    xr = x.detach().float().requires_grad_()
    yr = l2norm_ref(xr, eps=eps)
    yr.backward(dy.float())
    assert rel_rmse(yr, y) <= TOL, rel_rmse(yr, y)
    assert rel_rmse(xr.grad, x.grad) <= TOL, rel_rmse(xr.grad, x.grad)


@pytest.mark.parametrize("dtype", _dtypes())
@pytest.mark.parametrize("shape", [(7, 128), (2, 3, 200), (1, 5, 2, 256), (3, 1024), (2, 8192), (5, 32)])
def test_l2norm(shape, dtype, device):
    _check_l2norm(shape, dtype, device)


def test_l2norm_eps_and_small_rows(device):
    # rows of tiny norm: eps dominates and the backward must follow it
    _check_l2norm((9, 64), torch.float32, device, eps=1e-2, scale=1e-2)


def test_l2norm_noncontiguous(device):
    base = torch.randn(4, 6, 256, device=device)
    x = base[:, ::2]  # strided view
    assert not x.is_contiguous()
    torch.testing.assert_close(l2norm(x), l2norm_ref(x), rtol=1e-5, atol=1e-6)


def test_l2norm_many_rows_task_loop(device):
    # more row blocks than programs: every task of the loop must be written
    _check_l2norm((300, 128), torch.float32, device)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4, 4096, 16, 128), (2, 77, 8192)])
def test_l2norm_gpu_bf16(shape, device):
    _check_l2norm(shape, torch.bfloat16, device)


def test_l2norm_bad_input(device):
    with pytest.raises(TypeError, match="x must have dtype"):
        l2norm(torch.ones(2, 4, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="last dimension D"):
        l2norm(torch.ones(2, 8193, device=device))
    with pytest.raises(ValueError, match="eps must be >= 0"):
        l2norm(torch.ones(2, 4, device=device), eps=-1.0)
    with pytest.raises(TypeError, match="eps must be a float"):
        l2norm(torch.ones(2, 4, device=device), eps="1")
