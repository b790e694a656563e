"""The NPU launch plans, run under the interpreter: with an Ascend910B2 target (its core counts, the
UB model's and the estimate's tile choices, the conv's 4096-element tiles, the chunk backward's
whole-K dq/dk/dw/dg tile) the ops' forward and backward are compared with the float32 reference.
The CPU tiers otherwise run the interpreter's own plans, so an NPU-only tile (a K block of 128, a
conv tile of 64 rows) would first be exercised on a chip. The NPU's slice ops have no interpreter
implementation; under an NPU target the interpreter reloads the shifted rows instead
(``kernels._dpre_rows``) and the rest of the tile logic is the NPU's."""
import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops.causal_conv1d import causal_conv1d
from fla_ascend.ops.causal_conv1d.reference import causal_conv1d_ref
from fla_ascend.ops.gated_delta_rule import chunk_gated_delta_rule
from fla_ascend.ops.gated_delta_rule.reference import chunk_gated_delta_rule_ref
from fla_ascend.ops.kda import chunk_kda
from fla_ascend.ops.kda.reference import naive_recurrent_kda
from fla_ascend.tiling.chips import get_chip

from helpers import assert_close, make_inputs


def _target(name: str):
    if not backend.is_interpreter():
        pytest.skip("the NPU plans are run under the interpreter here")
    chip = get_chip(name)
    return backend.current().replace(device_type="npu", chip=chip, cube_cores=chip.cube_cores,
                                      vector_cores=chip.vector_cores)


@pytest.fixture
def npu_target():
    return _target("Ascend910B2")


def _leaves(inputs: dict) -> dict:
    return {k: v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v
            for k, v in inputs.items()}


@pytest.mark.parametrize("chip,chunk_size,K,V", [
    ("Ascend910B2", 64, 128, 128), ("Ascend910B2", 64, 64, 100), ("Ascend910B2", 32, 128, 128),
    ("Ascend910_9599", 16, 128, 128), ("Ascend910_9599", 16, 64, 100), ("Ascend910_9599", 64, 100, 16),
    ("Ascend910_9599", 32, 256, 64), ("Ascend910_9599", 64, 16, 64)])
@pytest.mark.parametrize("varlen", [None, [0, 50, 50, 128]])
def test_chunk_gated_delta_rule_npu_plan(K, V, varlen, chip, chunk_size):
    """Ascend910B2 at chunk 64 (the estimate-chosen tiles) and 32 (the WY stages' capped K blocks,
    ``wy.NPU_WY_FWD_BK``, ``wy.NPU_WY_BWD_BK``), Ascend910_9599 at chunk 16 (the
    float32 dot chains A5's compiler needs there, ``tiles.f32_dot_chain``), at K = 256 (the output
    stage's runtime K-block count) and at K = 16 and V = 16 (tiles of ``tiles.A5_MIN_DOT_DIM``, the
    padding masked)."""
    inputs = make_inputs(1, 128, 1, 2, K, V, torch.float32, "cpu", varlen=varlen, requires_grad=True)
    ref = _leaves(inputs)
    with backend.use(_target(chip)):
        o, ht = chunk_gated_delta_rule(**inputs, output_final_state=True, chunk_size=chunk_size)
        (o * torch.randn(o.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
    ro, rht = chunk_gated_delta_rule_ref(**ref, output_final_state=True, chunk_size=chunk_size)
    (ro * torch.randn(ro.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
    assert_close("o", ro, o, 1e-5)
    assert_close("final_state", rht, ht, 1e-5)
    for name in ("q", "k", "v", "g", "beta", "initial_state"):
        assert_close(f"d{name}", ref[name].grad, inputs[name].grad, 1e-4)


@pytest.mark.parametrize("chip,chunk_size,K,V,varlen,decay", [
    ("Ascend910B2", 64, 128, 128, [0, 50, 50, 128], 0.25), ("Ascend910_9599", 16, 128, 64, None, 0.25),
    ("Ascend910_9599", 64, 100, 16, None, 0.25), ("Ascend910B2", 64, 100, 16, None, 0.25),
    ("Ascend910B2", 32, 60, 32, [0, 40, 128], 0.25), ("Ascend910_9599", 64, 16, 64, [0, 40, 128], 0.25),
    ("Ascend910B2", 32, 128, 64, None, 0.25), ("Ascend910B2", 64, 128, 64, None, 5.0),
    ("Ascend910_9599", 32, 64, 64, [0, 40, 128], 5.0)])
def test_chunk_kda_npu_plan(chip, chunk_size, K, V, varlen, decay):
    """KDA's stages with an NPU target's plans (K blocks of 32, the gate tiles; the diagonal blocks
    as [16, 16, 8] products at chunk 32 and 64; the WY backward's 32-wide V blocks and, for one V
    block, its runtime V-loop count; above K = 64 without varlen the intra backward's three launches,
    ``intra.NPU_SPLIT_BK``) and, on Ascend910_9599, at chunk 16 the float32 dot chains
    (``tiles.f32_dot_chain``) and at K = 16 and V = 16 tiles of ``tiles.A5_MIN_DOT_DIM``, against
    autograd of the float64 recurrence. Gates decay by up to ``decay`` per token: at 0.25 every
    sub-chunk's diagonal block goes through the dots (``tiles.NPU_DIAG_DOT_RANGE``), at 5 most take
    the exact form."""
    gen = torch.Generator().manual_seed(0)
    N = len(varlen) - 1 if varlen else 1
    T, H, HV = 128, 1, 2
    x = dict(q=torch.randn(1, T, H, K, generator=gen),
             k=torch.nn.functional.normalize(torch.randn(1, T, H, K, generator=gen), dim=-1),
             v=torch.randn(1, T, HV, V, generator=gen), g=-torch.rand(1, T, HV, K, generator=gen) * decay,
             beta=torch.rand(1, T, HV, generator=gen), initial_state=torch.randn(N, HV, K, V, generator=gen))
    x = {n: t.requires_grad_() for n, t in x.items()}
    cu = None if varlen is None else torch.tensor(varlen, dtype=torch.int32)
    ref = {n: t.detach().double().requires_grad_() for n, t in x.items()}
    do = torch.randn(1, T, HV, V, generator=gen)
    with backend.use(_target(chip)):
        o, ht = chunk_kda(**x, output_final_state=True, cu_seqlens=cu, chunk_size=chunk_size)
        ((o * do).sum() + ht.sum()).backward()
    ro, rht = naive_recurrent_kda(**ref, output_final_state=True, cu_seqlens=cu)
    ((ro * do.double()).sum() + rht.sum()).backward()
    assert_close("o", ro, o.double(), 1e-4)
    assert_close("final_state", rht, ht.double(), 1e-4)
    for name in x:
        assert_close(f"d{name}", ref[name].grad, x[name].grad.double(), 1e-3 if name in ("g", "beta") else 1e-4)


@pytest.mark.parametrize("chip", ["Ascend910B2", "Ascend910_9599"])
def test_chunk_kda_npu_backward_k256(chip):
    """Forward and backward at K = 256 with an NPU target's plans, every input's gradient against
    autograd of the float64 recurrence."""
    gen = torch.Generator().manual_seed(0)
    T, K, V = 80, 256, 32
    x = dict(q=torch.randn(1, T, 1, K, generator=gen),
             k=torch.nn.functional.normalize(torch.randn(1, T, 1, K, generator=gen), dim=-1),
             v=torch.randn(1, T, 1, V, generator=gen), g=-torch.rand(1, T, 1, K, generator=gen) / 4,
             beta=torch.rand(1, T, 1, generator=gen), initial_state=torch.randn(1, 1, K, V, generator=gen))
    ref = {n: t.double().requires_grad_() for n, t in x.items()}
    for t in x.values():
        t.requires_grad_()
    with backend.use(_target(chip)):
        o, ht = chunk_kda(**x, output_final_state=True, chunk_size=64)
        (o.sum() + ht.sum()).backward()
    ro, rht = naive_recurrent_kda(**ref, output_final_state=True)
    (ro.sum() + rht.sum()).backward()
    assert_close("o", ro, o.double(), 1e-4)
    for name in x:
        assert_close(f"d{name}", ref[name].grad, x[name].grad.double(), 1e-3 if name in ("g", "beta") else 1e-4)


@pytest.mark.parametrize("chip", ["Ascend910B2", "Ascend910_9599"])
def test_chunk_kda_npu_forward_k256(chip):
    """The forward at K = 256 with an NPU target's plans (the state recurrence's decay variant in
    V blocks of ``chunk_h.NPU_GK_WIDE_K_BV``: 64 on A2, 32 on A5), against the float64 recurrence."""
    gen = torch.Generator().manual_seed(0)
    T, K, V = 80, 256, 48
    x = dict(q=torch.randn(1, T, 1, K, generator=gen),
             k=torch.nn.functional.normalize(torch.randn(1, T, 1, K, generator=gen), dim=-1),
             v=torch.randn(1, T, 1, V, generator=gen), g=-torch.rand(1, T, 1, K, generator=gen) / 4,
             beta=torch.rand(1, T, 1, generator=gen), initial_state=torch.randn(1, 1, K, V, generator=gen))
    with backend.use(_target(chip)):
        o, ht = chunk_kda(**x, output_final_state=True, chunk_size=64)
    ro, rht = naive_recurrent_kda(**{n: t.double() for n, t in x.items()}, output_final_state=True)
    assert_close("o", ro, o.double(), 1e-4)
    assert_close("final_state", rht, ht.double(), 1e-4)


@pytest.mark.parametrize("states", [False, True])
@pytest.mark.parametrize("W", [1, 4])
def test_causal_conv1d_npu_plan(W, states, npu_target):
    gen = torch.Generator().manual_seed(0)
    B, T, D = 2, 150, 96
    x = torch.randn(B, T, D, generator=gen, requires_grad=True)
    w = (torch.randn(D, W, generator=gen) / W).requires_grad_(True)
    b = torch.randn(D, generator=gen, requires_grad=True)
    h0 = torch.randn(B, D, W, generator=gen, requires_grad=True) if states else None
    dy = torch.randn(B, T, D, generator=gen)
    with backend.use(npu_target):
        y, ht = causal_conv1d(x, w, b, initial_state=h0, output_final_state=states, activation="silu")
        loss = (y * dy).sum() + (ht.sum() if states else 0.0)
        grads = torch.autograd.grad(loss, [t for t in (x, w, b, h0) if t is not None])
    ry, rht = causal_conv1d_ref(x, w, b, initial_state=h0, output_final_state=states, activation="silu")
    rloss = (ry * dy).sum() + (rht.sum() if states else 0.0)
    rgrads = torch.autograd.grad(rloss, [t for t in (x, w, b, h0) if t is not None])
    assert_close("y", ry, y, 1e-5)
    if states:
        assert_close("final_state", rht, ht, 1e-5)
    for name, rg, g in zip(("dx", "dweight", "dbias", "dh0"), rgrads, grads):
        assert_close(name, rg, g, 1e-5)


class _Counting:
    """A kernel whose launches are counted (``kernel[grid](...)`` as before)."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.parametrize("store_ai", [False, True])
@pytest.mark.parametrize("varlen", [None, [0, 50, 50, 128]])
@pytest.mark.parametrize("K,V", [(128, 128), (64, 100)])
def test_wy_fwd_split_inverse(K, V, varlen, store_ai, npu_target, monkeypatch):
    """The NPU's three-launch inverse at chunk 64 (``wy.NPU_SPLIT_INVERSE_CHUNKS``: ``A`` and ``E``,
    ``D^-1`` on the vector cores, the products) gives the one-launch ``w``, ``u`` and ``Ai``."""
    from fla_ascend.ops.common import wy
    from fla_ascend.ops.common.cumsum import chunk_gate_cumsum
    from fla_ascend.ops.gated_delta_rule.chunk import _chunking

    inputs = make_inputs(1, 128, 1, 2, K, V, torch.float32, "cpu", varlen=varlen)
    k, v, cu = inputs["k"], inputs["v"], inputs.get("cu_seqlens")
    _, n_chunks, chunk_indices, _ = _chunking(1, 128, cu, 64, None, None)
    g_cum, beta_t = chunk_gate_cumsum(inputs["g"], inputs["beta"], 64, n_chunks, chunk_indices, cu)
    want = wy.chunk_wy_fwd(k, v, g_cum, beta_t, 64, n_chunks, chunk_indices, cu, store_ai=store_ai)
    counting = _Counting(wy.chunk_wy_diag_inverse_kernel)
    monkeypatch.setattr(wy, "chunk_wy_diag_inverse_kernel", counting)
    with backend.use(npu_target):
        got = wy.chunk_wy_fwd(k, v, g_cum, beta_t, 64, n_chunks, chunk_indices, cu, store_ai=store_ai)
    assert counting.launches == 1
    for name, a, b in zip(("w", "u", "Ai"), want, got):
        if a is None:
            assert b is None
            continue
        assert b.dtype == torch.float32
        assert_close(name, a, b, 1e-5)


def test_wy_diag_inverse_and_kda_wy_fwd_reject_bad_arguments():
    """The diagonal-block inverse names a wrong ``A`` / ``X`` and refuses ``X is A`` with
    ``zero_diag``; the KDA WY forward names an unknown ``ai_mode``."""
    from fla_ascend.ops.common.wy import wy_diag_inverse
    from fla_ascend.ops.kda.intra import kda_wy_fwd

    A = torch.zeros(1, 64, 2, 64)
    with pytest.raises(ValueError, match="A must be a contiguous float32"):
        wy_diag_inverse(A.double(), A, 64, 1)
    with pytest.raises(ValueError, match="X must be"):
        wy_diag_inverse(A, torch.zeros(1, 64, 2, 32), 64, 1)
    with pytest.raises(ValueError, match="X must not be A"):
        wy_diag_inverse(A, A, 64, 1, zero_diag=True)
    k = torch.zeros(1, 64, 2, 16)
    with pytest.raises(ValueError, match="ai_mode must be"):
        kda_wy_fwd(k, k, k, torch.zeros(2, 64), A, 64, 1, ai_mode="blocks")
