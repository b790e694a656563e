"""CPU-tier tests of the norm ops against pure-PyTorch float32 references (rel-RMSE ratio <= 0.005)."""
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
    with pytest.raises(TypeError, match="^l2norm: x must have dtype"):
        l2norm(torch.ones(2, 4, dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="^l2norm: x.s last dimension D"):
        l2norm(torch.ones(2, 8193, device=device))
    with pytest.raises(ValueError, match="^l2norm: eps must be >= 0"):
        l2norm(torch.ones(2, 4, device=device), eps=-1.0)
    with pytest.raises(TypeError, match="^l2norm: eps must be a float"):
        l2norm(torch.ones(2, 4, device=device), eps="1")


# ----------------------------------------------------------------------------- gated RMSNorm
from fla_ascend.ops.norm import FusedRMSNormGated, rms_norm_gated  # noqa: E402
from fla_ascend.ops.norm.reference import rms_norm_gated_ref  # noqa: E402


def _check_rmsg(shape, dtype, device, activation="swish", use_g=True, use_w=True, use_b=False, eps=1e-5):
    D = shape[-1]
    x = torch.randn(shape, device=device).to(dtype).requires_grad_()
    g = torch.randn(shape, device=device).to(dtype).requires_grad_() if use_g else None
    w = (1 + 0.1 * torch.randn(D, device=device)).to(dtype).requires_grad_() if use_w else None
    b = (0.1 * torch.randn(D, device=device)).to(dtype).requires_grad_() if use_b else None
    dy = torch.randn(shape, device=device).to(dtype)
    y = rms_norm_gated(x, g, w, b, activation=activation, eps=eps)
    assert y.shape == x.shape and y.dtype == dtype
    ins = [t for t in (x, g, w, b) if t is not None]
    got = torch.autograd.grad(y, ins, dy)
    ref_in = [t.detach().float().requires_grad_() for t in ins]
    it = iter(ref_in)
    xr = next(it)
    gr = next(it) if use_g else None
    wr = next(it) if use_w else None
    br = next(it) if use_b else None
    yr = rms_norm_gated_ref(xr, gr, wr, br, eps=eps, activation=activation)
    want = torch.autograd.grad(yr, ref_in, dy.float())
    assert rel_rmse(yr, y) <= TOL, rel_rmse(yr, y)
    for a, b_ in zip(want, got):
        assert rel_rmse(a, b_) <= TOL, rel_rmse(a, b_)


@pytest.mark.parametrize("dtype", _dtypes())
@pytest.mark.parametrize("shape", [(2, 7, 4, 128), (33, 200), (3, 1024), (2, 8192)])
def test_rms_norm_gated(shape, dtype, device):
    _check_rmsg(shape, dtype, device)


@pytest.mark.parametrize("activation", ["sigmoid", "silu"])
def test_rms_norm_gated_variants(activation, device):
    _check_rmsg((9, 64), torch.float32, device, activation=activation, use_b=True)
    _check_rmsg((9, 64), torch.float32, device, activation=activation, use_g=False, use_w=False)


def test_fused_rms_norm_gated_module(device):
    m = FusedRMSNormGated(96, eps=1e-5).to(device)
    assert m.eps == 1e-5 and torch.equal(m.weight.detach(), torch.ones(96, device=device))
    with torch.no_grad():
        m.weight.mul_(1.5)
    x, g = torch.randn(5, 96, device=device), torch.randn(5, 96, device=device)
    assert rel_rmse(rms_norm_gated_ref(x, g, m.weight.detach(), eps=1e-5), m(x, g)) <= TOL
    y = m(x.requires_grad_(), g)
    y.sum().backward()
    assert m.weight.grad is not None and m.weight.grad.shape == (96,)


@pytest.mark.gpu
def test_rms_norm_gated_gpu_bf16(device):
    _check_rmsg((4, 4096, 32, 128), torch.bfloat16, device)


def test_rms_norm_gated_bad_input(device):
    x = torch.randn(3, 16, device=device)
    with pytest.raises(ValueError, match="^rms_norm_gated: activation must be one of"):
        rms_norm_gated(x, x, None, activation="relu")
    with pytest.raises(ValueError, match="^rms_norm_gated: g must have x's shape"):
        rms_norm_gated(x, x[:2], None)
    with pytest.raises(ValueError, match="^rms_norm_gated: weight must have shape"):
        rms_norm_gated(x, x, torch.ones(15, device=device))
    with pytest.raises(TypeError, match="^rms_norm_gated: x must have dtype"):
        rms_norm_gated(x.long(), None, None)
    # eps: the same rule and exception types as l2norm's
    with pytest.raises(TypeError, match="^rms_norm_gated: eps must be a float, got str"):
        rms_norm_gated(x, x, None, eps="1e-5")
    with pytest.raises(ValueError, match="^rms_norm_gated: eps must be >= 0, got -1.0"):
        rms_norm_gated(x, x, None, eps=-1.0)
    with pytest.raises(ValueError, match="^FusedRMSNormGated: activation must be one of"):
        FusedRMSNormGated(16, activation="gelu")
    with pytest.raises(ValueError, match=r"^FusedRMSNormGated: hidden_size must be in \[1, 8192\], got 0"):
        FusedRMSNormGated(0)


def test_rms_norm_gated_no_rows_keeps_every_input_in_the_graph(device):
    """Zero rows: an empty output whose gradient reaches x, g, weight and bias (as zeros)."""
    x = torch.randn(0, 8, device=device, requires_grad=True)
    g = torch.randn(0, 8, device=device, requires_grad=True)
    w = torch.ones(8, device=device, requires_grad=True)
    b = torch.zeros(8, device=device, requires_grad=True)
    y = rms_norm_gated(x, g, w, b)
    assert y.shape == (0, 8) and y.dtype == x.dtype
    grads = torch.autograd.grad(y.sum(), (x, g, w, b))
    assert all(gr.shape == t.shape and not gr.any() for gr, t in zip(grads, (x, g, w, b)))


def test_numpy_eps_accepted(device):
    """eps may be any real number, NumPy's included (np.float32 was refused, np.float64 not)."""
    np = pytest.importorskip("numpy")
    x = torch.randn(3, 16, device=device)
    torch.testing.assert_close(l2norm(x, eps=np.float32(1e-6)), l2norm(x, eps=1e-6))
    torch.testing.assert_close(rms_norm_gated(x, x, None, eps=np.float32(1e-5)), rms_norm_gated(x, x, None, eps=1e-5))


def test_fused_rms_norm_gated_names_the_input_dimension(device):
    """A module built for D = 32 called on D = 48 blames x's dimension, not its own weight."""
    norm = FusedRMSNormGated(32, device=device)
    x = torch.randn(2, 48, device=device)
    with pytest.raises(ValueError, match=r"^FusedRMSNormGated: x's last dimension must be hidden_size=32, got 48"):
        norm(x, x)
