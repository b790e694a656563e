"""CPU-tier tests of causal_conv1d / causal_conv1d_update against the F.conv1d reference
(rel-RMSE ratio <= 1e-3 for outputs and every gradient)."""
import pytest
import torch
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.causal_conv1d import causal_conv1d, causal_conv1d_update
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref, causal_conv1d_update_ref
from fla_ascend.ops.utils import rel_rmse

TOL = 1e-3


def _check(B, T, D, W, device, dtype=torch.float32, activation="silu", use_bias=True, use_residual=False,
           use_h0=False, final=False, cu_seqlens=None, x=None, dy_transform=None, tol=TOL, state_views=False):
    N = len(cu_seqlens) - 1 if cu_seqlens is not None else B
    if x is None:
        x = torch.randn(B, T, D, device=device).to(dtype)
    x = x.detach().requires_grad_()
    w = (torch.randn(D, W, device=device) / W**0.5).to(dtype).requires_grad_()
    b = torch.randn(D, device=device).to(dtype).requires_grad_() if use_bias else None
    r = torch.randn(B, T, D, device=device).to(dtype).requires_grad_() if use_residual else None
    h0 = None
    if use_h0:
        # state_views: [N, D, W] views of [N, W, D] storage (not contiguous) for h0 and the final-state grad
        h0 = torch.randn(N, W, D, device=device).transpose(1, 2) if state_views else torch.randn(N, D, W, device=device)
        h0 = h0.to(dtype).requires_grad_()
    cu = torch.tensor(cu_seqlens, dtype=torch.int32, device=device) if cu_seqlens is not None else None
    y, ht = causal_conv1d(x, w, b, r, h0, final, activation, cu_seqlens=cu)
    assert y.shape == (B, T, D) and y.dtype == dtype
    assert (ht is not None) == final
    dy = torch.randn(B, T, D, device=device).to(dtype)
    if dy_transform is not None:
        dy = dy_transform(dy)
    outs, grads = [y], [dy]
    if final:
        assert ht.shape == (N, D, W)
        outs.append(ht)
        grads.append(torch.randn(N, W, D, device=device).to(ht.dtype).transpose(1, 2) if state_views
                     else torch.randn_like(ht))
    inputs = [t for t in (x, w, b, r, h0) if t is not None]
    got = torch.autograd.grad(outs, inputs, grads)
    # float32 reference on the same (rounded) inputs
    ref_in = [t.detach().float().requires_grad_() for t in inputs]
    it = iter(ref_in)
    xr, wr = next(it), next(it)
    br = next(it) if use_bias else None
    rr = next(it) if use_residual else None
    hr = next(it) if use_h0 else None
    yr, htr = causal_conv1d_ref(xr, wr, br, rr, hr, final, activation, cu)
    want = torch.autograd.grad([yr] + ([htr] if final else []), ref_in, [g.float() for g in grads])
    assert rel_rmse(yr, y) <= tol, ("y", rel_rmse(yr, y))
    if final:
        assert rel_rmse(htr, ht) <= tol, ("final_state", rel_rmse(htr, ht))
    for name, a, g in zip(["dx", "dweight", "dbias", "dresidual", "dh0"], want, got):
        assert g.shape == a.shape
        assert rel_rmse(a, g) <= tol, (name, rel_rmse(a, g))


@pytest.mark.parametrize("T", [1, 2, 3, 4, 63, 64, 65, 500])
def test_conv_lengths(T, device):
    # long T without the activation: its backward recomputes W x W taps (slow under the interpreter)
    _check(2 if T < 100 else 1, T, 128, 4, device, activation="silu" if T < 100 else None,
           use_h0=True, final=True, use_residual=True)


@pytest.mark.parametrize("D", [128, 200, 1024])
@pytest.mark.parametrize("W", [2, 3, 4])
def test_conv_widths_channels(D, W, device):
    _check(1, 65 if D < 1024 else 17, D, W, device, use_h0=W != 3, final=True)


@pytest.mark.parametrize("activation", [None, "swish"])
def test_conv_no_activation_no_bias(activation, device):
    _check(2, 40, 72, 4, device, activation=activation, use_bias=False, use_h0=True, final=True)


def test_conv_large_width(device):
    _check(1, 20, 32, 7, device, use_h0=True, final=True)


def test_conv_fp16(device):
    _check(1, 65, 200, 4, device, dtype=torch.float16, use_h0=True, final=True, use_residual=True, tol=5e-3)


@pytest.mark.parametrize("cu", [[0, 1, 2, 40, 40, 70], [0, 3, 5, 6, 70], [0, 70]])
@pytest.mark.parametrize("use_h0", [True, False])
def test_conv_varlen(cu, use_h0, device):
    # segments of 0, 1, 2 and 3 tokens (shorter than W - 1 = 3) with initial and final states
    _check(1, 70, 128, 4, device, use_h0=use_h0, final=True, cu_seqlens=cu, use_residual=True)


@pytest.mark.parametrize("tiles", [{"fwd": (16, 64, 4), "bwd": (64, 32, 2)}, {"fwd": (64, 32, 4), "bwd": (16, 64, 2)}])
def test_conv_varlen_fwd_bwd_tiles_differ(tiles, device):
    """Off the NPU the forward and backward have their own tiles (conv.CUDA_TILES, here overridden
    through the active target): with token tiles of different sizes the backward builds its own
    varlen chunk list."""
    if backend.device_type() == "npu":
        pytest.skip("the NPU uses one tile for both directions")
    with backend.use(backend.current().replace(overrides={"causal_conv1d": tiles})):
        _check(1, 70, 96, 4, device, use_h0=True, final=True, cu_seqlens=[0, 1, 2, 40, 40, 70], use_residual=True)


@pytest.mark.parametrize("cu", [None, [0, 1, 2, 40, 40, 70]])
def test_conv_fwd_grid3d_launch(cu, device, monkeypatch):
    """The forward's 3-D grid launch (CUDA: channel blocks x chunks x batch rows, no task
    decode), forced here on any backend, against the reference; strided x, states, residual."""
    from fla_ascend.ops.causal_conv1d import conv

    launched = []

    def grid3d(*dims):
        launched.append(dims)
        return dims if min(dims) >= 1 else None

    monkeypatch.setattr(conv, "_grid3d", grid3d)
    B = 1 if cu is not None else 2
    D = 200  # two channel blocks of the CUDA tile (BD 128): the grid's x dimension is used
    proj = torch.randn(B, 70, 2 * D, device=device)
    _check(B, 70, D, 4, device, x=proj[:, :, D:], use_h0=True, final=True, cu_seqlens=cu, use_residual=True)
    assert launched, "the forward did not ask for a 3-D grid"
    if backend.device_type() != "npu":  # the NPU's UB tile may hold all 200 channels
        assert launched[0][0] > 1, launched


@pytest.mark.parametrize("W", [1, 3, 4, 16])
@pytest.mark.parametrize("cu", [None, [0, 1, 2, 40, 40, 70]])
@pytest.mark.parametrize("mode", ["SHIFT_GATHER", "SHIFT_LOAD"])
def test_conv_bwd_shift_modes(W, cu, mode, device, monkeypatch):
    """The backward tile with each way of moving rows this backend can run (``kernels._rows_from``):
    ``tl.gather`` (compiled CUDA's; the pre-activation recomputed from ``x``) and reloaded rows (the
    interpreters'; the forward's stored pre-activation read), forced here, against the
    reference: SiLU and none, states, residual, varlen with empty and one-token sequences, W up to 16.
    The NPU's slice ops are compiled by the check (they have no interpreter implementation)."""
    from triton.runtime import interpreter

    from fla_ascend.ops.causal_conv1d import conv, kernels

    if backend.device_type() == "npu":
        pytest.skip("the NPU moves rows with its slice ops")
    shift = getattr(kernels, mode)
    if shift == kernels.SHIFT_GATHER and (not hasattr(tl, "gather") or backend.is_interpreter()
                                          and not hasattr(interpreter.InterpreterBuilder, "create_gather")):
        pytest.skip("this Triton (or its interpreter) has no tl.gather")
    calls = []
    monkeypatch.setattr(conv, "_bwd_shift", lambda: calls.append(shift) or shift)
    B = 1 if cu is not None else 2
    for activation in (None, "silu"):
        _check(B, 70, 40, W, device, activation=activation, use_h0=True, final=True, use_residual=True,
               cu_seqlens=cu)
    assert calls and set(calls) == {shift}


def test_conv_grid3d_limits():
    """``conv._grid3d``: the grid as given on a CUDA build when x <= 2^31 - 1 and y, z <= 65535
    (CUDA's limits), ``None`` past them, for an empty dimension, with ``grid3d`` off, and off CUDA."""
    from fla_ascend.ops.causal_conv1d import conv
    from fla_ascend.tiling import grid

    gpu = backend.Target(device_type="cuda", interpret=False, cube_cores=132, vector_cores=132, tensor_device="cpu")
    with backend.use(gpu):
        assert conv._grid3d(64, grid.MAX_GRID, grid.MAX_GRID) == (64, grid.MAX_GRID, grid.MAX_GRID)
        assert conv._grid3d(grid.CUDA_MAX_GRID_X, 1, 1) == (grid.CUDA_MAX_GRID_X, 1, 1)
        for dims in [(1, grid.MAX_GRID + 1, 1), (1, 1, grid.MAX_GRID + 1), (grid.CUDA_MAX_GRID_X + 1, 1, 1),
                     (1, 0, 1)]:
            assert conv._grid3d(*dims) is None, dims
    with backend.use(gpu.replace(overrides={"causal_conv1d": {"grid3d": False}})):
        assert conv._grid3d(4, 8, 1) is None
    with backend.use(gpu.replace(device_type="npu")):
        assert conv._grid3d(4, 8, 1) is None


def test_conv_strided_x_and_dy(device):
    # x is the middle third of one projection (strided view, channel stride 1); dy non-contiguous
    proj = torch.randn(2, 33, 3 * 96, device=device)
    x = proj[:, :, 96:192]
    assert not x.is_contiguous()
    _check(2, 33, 96, 4, device, x=x, use_h0=True, final=True,
           dy_transform=lambda d: d.transpose(0, 1).contiguous().transpose(0, 1))


@pytest.mark.parametrize("cu", [None, [0, 2, 9, 30]])
def test_conv_state_views(cu, device):
    # initial state and final-state gradient as non-contiguous [N, D, W] views: the kernels read
    # states re-laid out as [N, W, D] and write the public [N, D, W] layout
    _check(1 if cu else 2, 30, 72, 4, device, use_h0=True, final=True, cu_seqlens=cu, state_views=True)


def test_conv_strided_x_no_copy(device, monkeypatch):
    import importlib

    # by module path: fla_ascend.ops re-exports the function under the package's name
    conv = importlib.import_module("fla_ascend.ops.causal_conv1d.conv")

    seen = {}
    orig = conv.causal_conv1d_fwd

    def spy(x, *a, **k):
        seen["ptr"] = x.data_ptr()
        return orig(x, *a, **k)

    monkeypatch.setattr(conv, "causal_conv1d_fwd", spy)
    proj = torch.randn(1, 9, 3 * 64, device=device)
    x = proj[:, :, 64:128]
    causal_conv1d(x, torch.randn(64, 4, device=device), activation="silu")
    assert seen["ptr"] == x.data_ptr()


def test_conv_dweight_deterministic(device):
    x = torch.randn(2, 130, 64, device=device, requires_grad=True)
    w = torch.randn(64, 4, device=device, requires_grad=True)
    b = torch.randn(64, device=device, requires_grad=True)
    dy = torch.randn(2, 130, 64, device=device)
    g1 = torch.autograd.grad(causal_conv1d(x, w, b, activation="silu")[0], (w, b), dy)
    g2 = torch.autograd.grad(causal_conv1d(x, w, b, activation="silu")[0], (w, b), dy)
    assert torch.equal(g1[0], g2[0]) and torch.equal(g1[1], g2[1])


def test_conv_weight_conv1d_layout(device):
    x = torch.randn(1, 10, 32, device=device)
    w = torch.randn(32, 1, 4, device=device)
    y, _ = causal_conv1d(x, w, activation="silu")
    yr, _ = causal_conv1d_ref(x, w.squeeze(1), activation="silu")
    assert rel_rmse(yr, y) <= TOL


@pytest.mark.parametrize("W", [2, 4])
def test_update_matches_full_sequence(W, device):
    N, T, D = 3, 6, 200
    x = torch.randn(N, T, D, device=device)
    w = torch.randn(D, W, device=device)
    b = torch.randn(D, device=device)
    h0 = torch.randn(N, D, W, device=device)
    y_full, ht = causal_conv1d(x, w, b, initial_state=h0, output_final_state=True, activation="silu")
    cache = h0.clone()
    ptr = cache.data_ptr()
    for t in range(T):
        y_t, cache_out = causal_conv1d_update(x[:, t], cache, weight=w, bias=b, activation="silu")
        assert cache_out.data_ptr() == ptr
        assert rel_rmse(y_full[:, t], y_t) <= TOL
    assert rel_rmse(ht, cache) <= TOL


def test_update_vs_reference_shapes_residual(device):
    N, D, W = 4, 96, 3
    x = torch.randn(N, 1, D, device=device)
    cache = torch.randn(N, D, W, device=device)
    w = torch.randn(D, W, device=device)
    res = torch.randn(N, 1, D, device=device)
    yr, cr = causal_conv1d_update_ref(x[:, 0], cache, w, None, None, res[:, 0])
    y, c = causal_conv1d_update(x, cache, res, w)
    assert y.shape == x.shape
    assert rel_rmse(yr, y[:, 0]) <= TOL and rel_rmse(cr, c) <= TOL


@pytest.mark.gpu
@pytest.mark.parametrize("cu", [None, [0, 1, 2, 300, 301, 1000]])
def test_conv_gpu_bf16(cu, device):
    B = 1 if cu is not None else 2
    _check(B, 1000, 1024, 4, device, dtype=torch.bfloat16, use_h0=True, final=True, use_residual=True,
           cu_seqlens=cu, tol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("W", [1, 3, 4, 16])
@pytest.mark.parametrize("cu", [None, [0, 1, 2, 40, 40, 333]])
def test_conv_gpu_gather_bwd_fp32(W, cu, device):
    """Compiled CUDA's backward tile (``tl.gather`` of ``dpre``, tasks overlapping by ``W - 1`` rows)
    in float32 against the reference: 12 tiles per sequence at W = 4 (20 at W = 16), four channel
    blocks of the backward's BD = 64, empty and one-token sequences, states and residual, SiLU and
    none."""
    from fla_ascend.ops.causal_conv1d import conv

    if conv._bwd_shift() != conv.SHIFT_GATHER:
        pytest.skip("the gather tile is the backward on compiled CUDA only")
    B = 1 if cu is not None else 2
    for activation in (None, "silu"):
        _check(B, 333, 200, W, device, activation=activation, use_h0=True, final=True, use_residual=True,
               cu_seqlens=cu)


@pytest.mark.slow
def test_conv_long(device):
    _check(2, 2000, 1024, 4, device, use_h0=True, final=True, use_residual=True)


def test_conv_bad_input(device):
    x = torch.randn(2, 5, 16, device=device)
    w = torch.randn(16, 4, device=device)
    with pytest.raises(ValueError, match=r"^causal_conv1d: weight must have shape \[D=16"):
        causal_conv1d(x, torch.randn(8, 4, device=device))
    with pytest.raises(ValueError, match="^causal_conv1d: .*W=4"):
        causal_conv1d(x, w, initial_state=torch.randn(2, 16, 3, device=device))
    with pytest.raises(ValueError, match="^causal_conv1d: activation must be one of"):
        causal_conv1d(x, w, activation="relu")
    with pytest.raises(ValueError, match="^causal_conv1d: .*B must be 1"):
        causal_conv1d(x, w, cu_seqlens=torch.tensor([0, 5], dtype=torch.int32, device=device))
    with pytest.raises(TypeError, match="^causal_conv1d: x must have dtype"):
        causal_conv1d(x.to(torch.int32), w)
    with pytest.raises(ValueError, match="^causal_conv1d: bias must have shape"):
        causal_conv1d(x, w, bias=torch.randn(15, device=device))
    with pytest.raises(ValueError, match="^causal_conv1d: x must have shape"):
        causal_conv1d(x[0], w)
    with pytest.raises(ValueError, match="^causal_conv1d_update: cache's width"):
        causal_conv1d_update(x[:, 0], torch.randn(2, 16, 3, device=device), weight=w)
    with pytest.raises(ValueError, match="^causal_conv1d_update: cache must have shape"):
        causal_conv1d_update(x[:, 0], torch.randn(2, 8, 4, device=device), weight=w)
    # a 4-D x is [N, 1, H, P] with H > 1 heads only (flash-linear-attention raises on [N, 1, 1, D] too)
    with pytest.raises(ValueError, match=r"^causal_conv1d_update: x must have shape \[N, D\], \[N, 1, D\], \[1, N, D\] "
                                         r"or \[N, 1, H, P\] .*got \(2, 1, 1, 16\)"):
        causal_conv1d_update(x[:, :1, None], torch.randn(2, 16, 4, device=device), weight=w)
    y, _ = causal_conv1d_update(x[:, :1].view(2, 1, 4, 4), torch.zeros(2, 16, 4, device=device), weight=w)
    assert y.shape == (2, 1, 4, 4)
    with pytest.raises(TypeError, match="^causal_conv1d: unexpected keyword"):
        causal_conv1d(x, w, bogus=1)
    with pytest.raises(ValueError, match=r"^causal_conv1d: x must have at least one channel, got D=0"):
        causal_conv1d(x[:, :, :0], w[:0])


def test_conv_kernels_lower_clean(tmp_path):
    """Every causal_conv1d kernel lowers for Ascend910B2 with no error finding of the front end
    (adapter crash, strided DMA, gather loop, grid). Needs triton-ascend's front end; the compile by
    bishengir-compile (UB plan, compile time) is the check's own run in scripts/test.sh."""
    import importlib.metadata
    import json

    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("lowering needs triton-ascend's compiler front end (not upstream Triton)")
    from fla_ascend.check.cli import run_worker

    (tmp_path / "conv_only_registry.py").write_text(
        "from fla_ascend.check.registry import CASES as _ALL\n"
        "CASES = [c for c in _ALL if '.causal_conv1d.' in c.kernel]\n")
    out = tmp_path / "r.json"
    proc = run_worker(["--no-default-chips", "--chip", "Ascend910B2", "--lowering-only", "--registry",
                       "conv_only_registry", "--discover", "", "--json", str(out), "--quiet"],
                      extra_path=str(tmp_path), capture_output=True, text=True, timeout=900)
    assert out.exists(), proc.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]["Ascend910B2"]
    kernels = {r["kernel"].rsplit(".", 1)[-1] for r in rows}
    assert {"causal_conv1d_fwd_kernel", "causal_conv1d_bwd_kernel", "causal_conv1d_states_fwd_kernel",
            "causal_conv1d_states_bwd_kernel", "causal_conv1d_update_kernel"} <= kernels
    bad = [(r["kernel"].rsplit(".", 1)[-1], r["config"], f["code"], f["message"][:200])
           for r in rows for f in r["findings"] if f["severity"] == "error"]
    assert bad == []
    assert all(r["lowered"] and r["mix_mode"] == "aiv" for r in rows)


def test_conv_bwd_step():
    """``conv._bwd_step``: backward tiles advance by BT - (W - 1), which needs BT > W - 1 (the CUDA
    and NPU backward tiles hold every accepted width)."""
    from fla_ascend.ops.causal_conv1d import conv

    assert conv._bwd_step(32, 4) == 29 and conv._bwd_step(32, 1) == 32
    assert conv._bwd_step(conv.CUDA_TILES["bwd"][0], conv.MAX_W) >= 1
    assert conv._bwd_step(conv.NPU_BT, conv.MAX_W) >= 1
    with pytest.raises(ValueError, match="BT=8, W=9"):
        conv._bwd_step(8, 9)
