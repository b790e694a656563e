"""The affine state chain of context parallelism on one device, against fp32 references.

- :func:`part_maps`: ``A`` (the recurrence run on the identity) and ``b`` (the state from zero) against
  the token-by-token reference's final states.
- :func:`part_state_grad`: the start-state gradient against autograd through the reference.
- :func:`compose` / :func:`affine_step`: the fold ``h = op(A_s) h + b_s`` against ``torch.matmul``.

CPU tier in fp32 (and fp16 inputs for the maps); GPU tier in bf16 at Qwen3-Next's head sizes.
"""
from __future__ import annotations

import math

import pytest
import torch

from fla_ascend.ops.cp.chain import compose, part_maps, part_state_grad
from fla_ascend.ops.gated_delta_rule.reference import naive_recurrent_gated_delta_rule
from fla_ascend.ops.norm import l2norm

from helpers import assert_close, make_inputs, nan_empty  # noqa: F401  (nan_empty: a fixture)

RATIO = {"A": 0.005, "b": 0.005, "c": 0.008}
"""The op tests' limits: the maps are final states (0.005), ``c`` an initial-state gradient (0.008)."""
BF16_A_RATIO = 0.02
"""``A``'s limit in bf16. ``A`` goes through the op's own stages, as a start state does on one device:
``w`` stored in bf16 and the state rounded to bf16 for each chunk's dot, so its error grows with the
number of chunks, and nothing (no ``b``) dominates it. A torch emulation of those roundings (one head,
K = 128, 4096 tokens in chunks of 64, decay exp(-1.5) over the segment; 2026-12-01) gave 0.0107 against
fp32 (0.0061 with the state kept in tf32, 0.0014 with ``w`` too): limit 0.02. Its effect on the
state the chain passes on is ``|A| |h_in|`` against ``|b|`` (there ``|A|`` was 5e-5, the identity's 11)."""


def _maps_ref(x: dict, scale: float, do: torch.Tensor):
    """fp32 ``(A, b, c)`` of one segment from the token-by-token reference."""
    gate = dict(use_gate_in_kernel=x["A_log"] is not None, A_log=x["A_log"], dt_bias=x["dt_bias"])
    q, k, v, g, beta = (x[n].float() for n in ("q", "k", "v", "g", "beta"))
    HV, K = v.shape[2], k.shape[3]
    _, b = naive_recurrent_gated_delta_rule(q, k, v, g, beta, scale, output_final_state=True, **gate)
    eye = torch.eye(K, device=k.device).expand(1, HV, K, K)
    _, A = naive_recurrent_gated_delta_rule(q, k, torch.zeros(*v.shape[:3], K, device=k.device), g, beta, scale,
                                            initial_state=eye, output_final_state=True, **gate)
    h0 = torch.zeros(1, HV, K, v.shape[3], device=k.device, requires_grad=True)
    o, _ = naive_recurrent_gated_delta_rule(q, k, v, g, beta, scale, initial_state=h0, **gate)
    (c,) = torch.autograd.grad((o * do.float()).sum(), h0)
    return A[0], b[0], c[0]


def _check_maps(L, H, HV, K, V, dtype, device, gate, chunk_size, ratio_A=RATIO["A"]):
    x = make_inputs(1, L, H, HV, K, V, dtype, device, h0=False, gate_in_kernel=gate, seed=3)
    # a decay of about exp(-1.5) over the whole segment: with the inputs' usual gates A (the segment's
    # whole decay) falls below fp32's range at these lengths and would compare 0 with 0
    if gate:  # -exp(A_log) * softplus(g + dt_bias), softplus about 0.8 on average
        x["A_log"] = torch.full_like(x["A_log"], math.log(1.5 / (0.8 * L)))
    else:
        x["g"] = x["g"] * (1.5 / (x["g"].abs().mean() * L))
    x["q"], x["k"] = l2norm(x["q"]), l2norm(x["k"])  # the op normalises before the chain
    do = torch.randn(1, L, HV, V, generator=torch.Generator().manual_seed(4)).to(device=device, dtype=dtype)
    scale = K ** -0.5
    A_log, dt_bias = x.get("A_log"), x.get("dt_bias")
    A, b = part_maps(x["k"], x["v"], x["g"], x["beta"], A_log, dt_bias, chunk_size, need_A=True)
    c = part_state_grad(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log, dt_bias, scale, do, chunk_size)
    A_ref, b_ref, c_ref = _maps_ref(dict(x, A_log=A_log, dt_bias=dt_bias), scale, do)
    assert_close("A", A_ref, A, ratio_A)
    assert_close("b", b_ref, b, RATIO["b"])
    assert_close("c", c_ref, c, RATIO["c"])
    A0, b0 = part_maps(x["k"], x["v"], x["g"], x["beta"], A_log, dt_bias, chunk_size, need_A=False)
    assert torch.equal(b0, b) and not A0.any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("gate", [False, True], ids=["g", "gate_in_kernel"])
def test_part_maps_cpu(dtype, gate, device, nan_empty):
    """40 tokens in chunks of 16 (a partial last chunk), GVA, V != K (catches a transposed map)."""
    _check_maps(40, 1, 2, 16, 32, dtype, device, gate, 16)


def _check_compose(S, HV, K, V, device, ratio):
    gen = torch.Generator().manual_seed(5)
    A = (0.5 * torch.randn(S, HV, K, K, generator=gen) / K ** 0.5).to(device)  # spectral norm about 1
    b = torch.randn(S, HV, K, V, generator=gen).to(device)
    for transpose, slots in ((False, range(0, S)), (True, range(S - 1, -1, -1)), (False, range(1, 2))):
        ref = None
        for s in slots:
            op = A[s].transpose(-1, -2) if transpose else A[s]
            ref = b[s].clone() if ref is None else op.double() @ ref.double() + b[s]
        assert_close(f"compose transpose={transpose}", ref.float(), compose(A, b, slots, transpose), ratio)


def test_compose_cpu(device, nan_empty):
    """Three links, both directions, K over two 64-row blocks and not a power of two."""
    _check_compose(3, 2, 80, 24, device, 1e-5)  # fp32 dots are exact here (ieee)


@pytest.mark.gpu
@pytest.mark.parametrize("gate", [False, True], ids=["g", "gate_in_kernel"])
@pytest.mark.parametrize("L", [1000, 4096])
def test_part_maps_gpu_bf16(L, gate, device, nan_empty):
    """Qwen3-Next's head sizes (K = V = 128, GVA 2:1), one segment of ``L`` tokens in chunks of 64."""
    _check_maps(L, 2, 4, 128, 128, torch.bfloat16, device, gate, 64, BF16_A_RATIO)


@pytest.mark.gpu
@pytest.mark.parametrize("K,V", [(128, 128), (256, 256), (100, 72)])
def test_compose_gpu(K, V, device, nan_empty):
    """The fold in fp32 (tf32x3 dots on CUDA) over 15 links, as a rank of a 16-part chain composes."""
    _check_compose(15, 8, K, V, device, 1e-4)
