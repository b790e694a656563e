"""The kernels' shared elementwise helpers (fla_ascend.ops.utils.math) against torch in float32:
the saturated ends (no NaN or inf from exp2 overflowing), +-inf, NaN and -0.0; on CPU under the
interpreter and, in the GPU tier, compiled (where tl.exp2 is PTX ex2.approx.ftz)."""
import pytest
import torch
import triton
import triton.language as tl

from fla_ascend.ops.utils.math import sigmoid, silu


@triton.jit
def _apply_kernel(x, s, y, N: tl.constexpr):
    o = tl.arange(0, N)
    b_x = tl.load(x + o)
    tl.store(s + o, sigmoid(b_x))
    tl.store(y + o, silu(b_x))


def _check_sigmoid_silu(device):
    special = [0.0, -0.0, -88.0, 88.0, -200.0, 200.0, -1e30, 1e30, float("inf"), float("-inf"), float("nan")]
    x = torch.cat([torch.linspace(-30, 30, 1000), torch.tensor(special)])
    x = torch.nn.functional.pad(x, (0, 1024 - x.numel())).to(device)
    s, y = torch.full_like(x, 7.0), torch.full_like(x, 7.0)
    _apply_kernel[(1,)](x, s, y, N=1024)
    finite = torch.isfinite(x)
    assert torch.isfinite(s[finite]).all() and torch.isfinite(y[finite]).all()
    # torch gives NaN for silu(-inf) (-inf * 0) and for NaN inputs; the helpers match it there too
    torch.testing.assert_close(s, torch.sigmoid(x), rtol=1e-5, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(y, torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_sigmoid_silu_match_torch(device):
    _check_sigmoid_silu(device)


@pytest.mark.gpu
def test_sigmoid_silu_match_torch_gpu(device):
    _check_sigmoid_silu(device)


def test_sigmoid_silu_16bit_input_computed_in_float32(device):
    """A float16 input is computed in float32: sigmoid(-12) = 6.1e-6 and silu(-12) = -7.4e-5 (in
    float16 exp2 would overflow below about -11.1 and give 0)."""
    x = torch.tensor([-12.0, -20.0, 0.5, 12.0] * 4, device=device, dtype=torch.float16)
    s, y = torch.empty(16, device=device), torch.empty(16, device=device)
    _apply_kernel[(1,)](x, s, y, N=16)
    torch.testing.assert_close(s, torch.sigmoid(x.float()), rtol=1e-5, atol=0)
    torch.testing.assert_close(y, torch.nn.functional.silu(x.float()), rtol=1e-5, atol=0)
