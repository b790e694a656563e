"""CPU-tier tests of the KimiDeltaAttention layer: construction and flash-linear-attention's parameter
names, against the same layer built from pure-PyTorch references (rel-RMSE ratio <= 0.005) on the
fused recurrent path (short inputs, cached decode); the chunked path once ``chunk_kda`` exists;
loading Kimi Linear's checkpoint names and transformers' ``KimiLinearDeltaAttention``."""
import pytest
import torch

import fla_ascend.ops.kda as kda_ops
from fla_ascend.layers import KimiDeltaAttention, KimiDeltaAttentionCache
from fla_ascend.ops.utils import rel_rmse

TOL = 5e-3
SMALL = dict(hidden_size=64, head_dim=32, num_heads=2)
needs_chunk_kda = pytest.mark.skipif(not hasattr(kda_ops, "chunk_kda"),
                                     reason="fla_ascend.ops.kda.chunk_kda is not in this build")

# flash-linear-attention's KimiDeltaAttention state dict at hidden 64, 2 heads of 32, GVA 2 (num_v_heads 4)
FLA_KEYS = {
    "q_proj.weight": (64, 64), "k_proj.weight": (64, 64), "v_proj.weight": (128, 64),
    "q_conv1d.weight": (64, 1, 4), "k_conv1d.weight": (64, 1, 4), "v_conv1d.weight": (128, 1, 4),
    "f_proj.0.weight": (32, 64), "f_proj.1.weight": (128, 32), "b_proj.weight": (4, 64),
    "A_log": (4,), "dt_bias": (128,), "g_proj.0.weight": (32, 64), "g_proj.1.weight": (128, 32),
    "g_proj.1.bias": (128,), "o_norm.weight": (32,), "o_proj.weight": (64, 128),
}


def _layer(device, **kw):
    torch.manual_seed(0)
    m = KimiDeltaAttention(**{**SMALL, **kw}).to(device)
    with torch.no_grad():
        m.o_norm.weight.uniform_(0.5, 1.5)
        m.A_log.uniform_(-2, 0)  # exp(A_log) below 1: a decay that matters over the test's tokens
        m.dt_bias.normal_(0, 0.5)
        m.g_proj[1].bias.normal_()
    return m.eval()


def _cmp(a, b):
    assert rel_rmse(a, b) <= TOL, rel_rmse(a, b)


def test_construction_and_names():
    m = KimiDeltaAttention(**SMALL, num_v_heads=4)
    assert {n: tuple(p.shape) for n, p in m.state_dict().items()} == FLA_KEYS
    assert m.A_log.dtype == m.dt_bias.dtype == torch.float32
    assert m.o_norm.activation == "sigmoid" and m.head_v_dim == 32 and m.gate_dim == 128
    assert KimiDeltaAttention(**SMALL, expand_v=2).v_proj.weight.shape == (128, 64)
    assert "q_conv1d.weight" not in KimiDeltaAttention(**SMALL, use_short_conv=False).state_dict()
    assert torch.equal(KimiDeltaAttention(**SMALL, safe_gate=True, lower_bound=-5.0).A_log, torch.zeros(2))


@pytest.mark.parametrize("kw, match", [
    (dict(num_v_heads=3), "multiple of num_heads"), (dict(mode="parallel"), "mode must be one of"),
    (dict(safe_gate=True), "safe_gate=True requires lower_bound"), (dict(head_dim=512), "head_dim must be <= 256"),
    (dict(expand_v=0.3), "integer"), (dict(lower_bound=1.0), "lower_bound must be a finite negative log decay"),
    (dict(lower_bound=0.0), "lower_bound must be a finite negative"),
    (dict(safe_gate=True, lower_bound=-6.0), r"safe_gate=True requires lower_bound in \[-5, 0\)"),
])
def test_bad_construction(kw, match):
    with pytest.raises(ValueError, match=match):
        KimiDeltaAttention(**{**SMALL, **kw})
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        KimiDeltaAttention(**SMALL, hidden_ratio=4)


@pytest.mark.parametrize("kw", [dict(), dict(num_v_heads=4, allow_neg_eigval=True), dict(lower_bound=-5.0),
                                dict(use_short_conv=False, expand_v=2)], ids=["plain", "gva-neg", "lb", "noconv"])
def test_recurrent_path_and_decode(kw, device):
    """T <= 64 without autograd: the fused recurrent kernel; then 3 decode steps through step()."""
    m = _layer(device, **kw)
    x = torch.randn(2, 9, 64, device=device)
    with torch.no_grad():
        y, c = m(x, use_cache=True)
        yr, cr = m.forward_reference(x, use_cache=True)
        _cmp(yr, y)
        _cmp(cr.recurrent_state, c.recurrent_state)
        assert c.recurrent_state.shape == (2, m.num_v_heads, m.head_v_dim, m.head_k_dim)
        for _ in range(3):
            t = torch.randn(2, 64, device=device)
            yr_t, cr = m.forward_reference(t[:, None], cache=cr, use_cache=True)
            y_t = m.step(t, c)
            assert y_t.shape == (2, 64)
            _cmp(yr_t[:, 0], y_t)
        _cmp(cr.recurrent_state, c.recurrent_state)
        if m.use_short_conv:
            for a, b in zip(cr.conv_state, c.conv_state):
                _cmp(a, b)


def test_varlen_recurrent(device):
    m = _layer(device)
    x = torch.randn(1, 20, 64, device=device)
    cu = torch.tensor([0, 1, 8, 20], dtype=torch.int32, device=device)
    with torch.no_grad():
        y, c = m(x, cu_seqlens=cu, use_cache=True)
        yr, cr = m.forward_reference(x, cu_seqlens=cu, use_cache=True)
    _cmp(yr, y)
    _cmp(cr.recurrent_state, c.recurrent_state)


def test_init_cache_and_bad_step(device):
    m = _layer(device)
    c = m.init_cache(3)
    assert isinstance(c, KimiDeltaAttentionCache) and c.recurrent_state.shape == (3, 2, 32, 32)
    assert [s.shape for s in c.conv_state] == [(3, 64, 4), (3, 64, 4), (3, 64, 4)]
    with torch.no_grad():
        y = m.step(torch.randn(3, 1, 64, device=device), c)
    assert y.shape == (3, 1, 64) and c.recurrent_state.abs().sum() > 0
    with pytest.raises(TypeError, match="needs the cache"):
        m.step(torch.randn(3, 64), None)
    with pytest.raises(ValueError, match="one token per sequence"):
        m.step(torch.randn(3, 2, 64), c)
    with pytest.raises(TypeError, match="layer's dtype"):
        m(torch.randn(1, 4, 64, dtype=torch.float16))
    m.train()
    with pytest.raises(ValueError, match="mode='fused_recurrent' has no backward"):
        KimiDeltaAttention(**SMALL, mode="fused_recurrent").train()(torch.randn(1, 4, 64))


@needs_chunk_kda
@pytest.mark.parametrize("T", [70, 20])
def test_chunk_path(T, device):
    """T > 64, or autograd on: the chunked op, forward and gradients against the references."""
    m = _layer(device, num_v_heads=4)
    x = torch.randn(2, T, 64, device=device, requires_grad=True)
    y, c = m(x, use_cache=True)
    yr, cr = m.forward_reference(x, use_cache=True)
    _cmp(yr.detach(), y.detach())
    _cmp(cr.recurrent_state.detach(), c.recurrent_state.detach())
    dy = torch.randn_like(y)
    g = torch.autograd.grad((y * dy).sum(), [x, m.A_log, m.dt_bias, m.q_proj.weight])
    gr = torch.autograd.grad((yr * dy).sum(), [x, m.A_log, m.dt_bias, m.q_proj.weight])
    for a, b in zip(gr, g):
        _cmp(a, b)


def _kimi_checkpoint(m: KimiDeltaAttention) -> dict:
    """``m``'s weights under Kimi Linear's checkpoint names (``A_log`` ``[1, 1, HV, 1]``, no
    ``g_b_proj`` bias)."""
    sd = m.state_dict()
    out = {k: v for k, v in sd.items() if not k.startswith(("f_proj", "g_proj", "A_log"))}
    out.update({"f_a_proj.weight": sd["f_proj.0.weight"], "f_b_proj.weight": sd["f_proj.1.weight"],
                "g_a_proj.weight": sd["g_proj.0.weight"], "g_b_proj.weight": sd["g_proj.1.weight"],
                "A_log": sd["A_log"].view(1, 1, -1, 1)})
    return out


def test_loads_kimi_linear_checkpoint_names(device):
    src = _layer(device)
    with torch.no_grad():
        src.g_proj[1].bias.zero_()  # Kimi Linear's output gate has no bias
    dst = KimiDeltaAttention(**SMALL).to(device).eval()
    dst.load_state_dict(_kimi_checkpoint(src), strict=True)
    for n, p in src.state_dict().items():
        assert torch.equal(p, dst.state_dict()[n]), n


def test_loads_transformers_kimi_linear_layer(device):
    """transformers' KimiLinearDeltaAttention state dict (forget_gate.*, one conv1d over q, k, v) loads,
    and the layer computes what transformers' computes (its PyTorch path, T = 11 with a cache)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention

    cfg = transformers.KimiLinearConfig(hidden_size=64, linear_head_dim=32, linear_num_heads=2, num_hidden_layers=1,
                                        layer_types=["linear_attention"], rms_norm_eps=1e-5)
    torch.manual_seed(0)
    hf = KimiLinearDeltaAttention(cfg, 0).float().eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.2)
        hf.forget_gate.A_log.uniform_(-2, 0)
        hf.o_norm.weight.uniform_(0.5, 1.5)
    ours = KimiDeltaAttention(hidden_size=64, head_dim=32, num_heads=2, norm_eps=cfg.rms_norm_eps)
    ours.load_state_dict(hf.state_dict(), strict=True)
    ours.eval()
    x = torch.randn(2, 11, 64)
    with torch.no_grad():
        ref = hf(x)
        out, _ = ours(x)
    assert rel_rmse(ref, out) < 1e-4
