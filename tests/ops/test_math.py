"""The kernels' shared elementwise helpers (fla_ascend.ops.utils.math) against torch in float32,
including the saturated ends (no NaN or inf from exp2 overflowing)."""
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


def test_sigmoid_silu_match_torch(device):
    x = torch.cat([torch.linspace(-30, 30, 1000), torch.tensor([0.0, -88.0, 88.0, -200.0, 200.0, -1e30, 1e30])])
    x = torch.nn.functional.pad(x, (0, 1024 - x.numel())).to(device)
    s, y = torch.empty_like(x), torch.empty_like(x)
    _apply_kernel[(1,)](x, s, y, N=1024)
    assert torch.isfinite(s).all() and torch.isfinite(y).all()
    torch.testing.assert_close(s, torch.sigmoid(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y, torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6)
