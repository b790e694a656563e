"""Bad input to ``chunk_gated_delta_rule`` and ``fused_recurrent_gated_delta_rule``:
each case raises ``ValueError`` / ``TypeError`` whose message starts with the op
name and names the argument, the expected value and the actual value. Nothing here launches
a kernel, so these run in well under a second.
"""
from __future__ import annotations

import pytest
import torch

from fla_ascend import backend
from fla_ascend.ops import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

from helpers import make_inputs

OPS = [pytest.param(chunk_gated_delta_rule, id="chunk"), pytest.param(fused_recurrent_gated_delta_rule, id="fused")]
B, T, H, HV, K, V = 2, 16, 2, 4, 32, 24


@pytest.fixture
def x(device):
    return make_inputs(B, T, H, HV, K, V, torch.float32, device)


def expect(exc, op, kwargs, *parts):
    """Call ``op(**kwargs)``; assert it raises ``exc`` with a message that starts with the op
    name and contains every string in ``parts`` (argument, expected, actual)."""
    with pytest.raises(exc) as info:
        op(**kwargs)
    msg = str(info.value)
    assert msg.startswith(op.__name__ + ":"), msg
    for part in parts:
        assert part in msg, f"{part!r} missing from: {msg}"
    return msg


def _with(x, **changes):
    return {**x, **changes}


# --- shapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "name, shape, expected",
    [
        ("k", (3, T, H, K), f"[{B}, {T}, {H}, {K}]"),  # B
        ("k", (B, T + 1, H, K), f"[{B}, {T}, {H}, {K}]"),  # T
        ("k", (B, T, H + 1, K), f"[{B}, {T}, {H}, {K}]"),  # H
        ("k", (B, T, H, K + 1), f"[{B}, {T}, {H}, {K}]"),  # K
        ("v", (3, T, HV, V), f"[{B}, {T}, *, *]"),
        ("v", (B, T - 1, HV, V), f"[{B}, {T}, *, *]"),
        ("g", (B, T, HV + 4), f"[{B}, {T}, {HV}]"),  # HV
        ("g", (B, T + 2, HV), f"[{B}, {T}, {HV}]"),
        ("g", (B, T, HV, 1), f"[{B}, {T}, {HV}]"),  # rank
        ("beta", (1, T, HV), f"[{B}, {T}, {HV}]"),
        ("beta", (B, T, H), f"[{B}, {T}, {HV}]"),
    ],
)
def test_mismatched_shapes(op, x, name, shape, expected):
    bad = torch.zeros(shape, dtype=x[name].dtype, device=x[name].device)
    expect(ValueError, op, _with(x, **{name: bad}), name, expected, str(tuple(shape)))


@pytest.mark.parametrize("op", OPS)
def test_q_rank(op, x):
    expect(ValueError, op, _with(x, q=x["q"][0]), "q", "4 dims", str(tuple(x["q"][0].shape)))


@pytest.mark.parametrize("op", OPS)
def test_hv_not_multiple_of_h(op, device):
    x = make_inputs(1, 8, 2, 3, 16, 16, torch.float32, device, h0=False)
    expect(ValueError, op, x, "HV", "multiple", "H", "HV=3", "H=2")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dim, size", [("K", 257), ("V", 257), ("V", 512)])
def test_head_dim_above_max(op, device, dim, size):
    Kd, Vd = (size, 16) if dim == "K" else (16, size)
    x = make_inputs(1, 4, 1, 1, Kd, Vd, torch.float32, device, h0=False)
    expect(ValueError, op, x, dim, "256", f"{dim}={size}")


@pytest.mark.parametrize("op", OPS)
def test_empty_sequence_length(op, device):
    x = make_inputs(1, 0, 1, 1, 16, 16, torch.float32, device, h0=False)
    expect(ValueError, op, x, "T", ">= 1", "T=0")


# --- cu_seqlens --------------------------------------------------------------------------------


def _varlen(device):
    return make_inputs(1, T, H, HV, K, V, torch.float32, device, varlen=[0, 5, T])


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_batch_not_one(op, x, device):
    cu = torch.tensor([0, 5, T], dtype=torch.int32, device=device)
    expect(ValueError, op, _with(x, cu_seqlens=cu, initial_state=None), "cu_seqlens", "B must be 1", f"B={B}")


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_not_1d(op, device):
    x = _varlen(device)
    cu = torch.tensor([[0, 5, T]], dtype=torch.int32, device=device)
    expect(ValueError, op, _with(x, cu_seqlens=cu, initial_state=None), "cu_seqlens", "1-D", "(1, 3)")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bool], ids=str)
def test_cu_seqlens_not_int32_or_int64(op, device, dtype):
    x = _varlen(device)
    cu = torch.tensor([0, 5, T], device=device).to(dtype)
    expect(TypeError, op, _with(x, cu_seqlens=cu), "cu_seqlens", "int32", str(dtype))


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_not_a_tensor(op, device):
    x = _varlen(device)
    expect(TypeError, op, _with(x, cu_seqlens=[0, 5, T]), "cu_seqlens", "torch.Tensor", "list")


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_on_meta_device(op, device):
    """A meta cu_seqlens is named as such (its values are needed on the host), not a copy error."""
    x = _varlen(device)
    cu = torch.empty(3, dtype=torch.int32, device="meta")
    expect(ValueError, op, _with(x, cu_seqlens=cu), "cu_seqlens", "meta device")


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_not_starting_at_zero(op, device):
    x = _varlen(device)
    cu = torch.tensor([1, 5, T], dtype=torch.int32, device=device)
    expect(ValueError, op, _with(x, cu_seqlens=cu), "cu_seqlens", "start at 0", "got 1")


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_decreasing(op, device):
    x = make_inputs(1, T, H, HV, K, V, torch.float32, device, varlen=[0, 5, 9, T])
    cu = torch.tensor([0, 9, 5, T], dtype=torch.int64, device=device)
    expect(ValueError, op, _with(x, cu_seqlens=cu), "cu_seqlens", "non-decreasing", "cu_seqlens[1]=9 > cu_seqlens[2]=5")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("last", [T - 1, T + 1])
def test_cu_seqlens_not_ending_at_t(op, device, last):
    x = _varlen(device)
    cu = torch.tensor([0, 5, last], dtype=torch.int32, device=device)
    expect(ValueError, op, _with(x, cu_seqlens=cu), "cu_seqlens", f"T={T}", f"got {last}")


# --- initial_state -----------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    "shape",
    [(B + 1, HV, K, V), (B, H, K, V), (B, HV, K + 1, V), (B, HV, K, V - 1), (HV, K, V)],
    ids=["N", "HV", "K", "V", "rank"],
)
def test_initial_state_shape(op, x, shape):
    h0 = torch.zeros(shape, device=x["q"].device)
    expect(ValueError, op, _with(x, initial_state=h0), "initial_state", f"[{B}, {HV}, {K}, {V}]", str(shape))


@pytest.mark.parametrize("op", OPS)
def test_initial_state_varlen_n(op, device):
    """With cu_seqlens, N is the number of sequences (2 here), not B (1)."""
    x = _varlen(device)
    h0 = torch.zeros(1, HV, K, V, device=device)
    expect(ValueError, op, _with(x, initial_state=h0), "initial_state", f"[2, {HV}, {K}, {V}]", "(1, ")


# --- devices -----------------------------------------------------------------------------------


@pytest.fixture
def meta_as_second_device(monkeypatch):
    """'meta' stands in for a second device on a machine with one: its own refusal (a meta tensor
    has no data, tests/ops/test_meta_device.py) is switched off so the device check is reached."""
    from fla_ascend.ops.utils import validation

    monkeypatch.setattr(validation, "check_has_data", lambda name, x: None)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["q", "k", "v", "g", "beta", "initial_state"])
def test_tensor_on_another_device(op, x, name, meta_as_second_device):
    moved = _with(x, **{name: x[name].to("meta")})
    expect(ValueError, op, moved, "one device", f"{name} on meta", f"q on {x['q'].device}" if name != "q" else "k on")


@pytest.mark.parametrize("op", OPS)
def test_cu_seqlens_on_another_device(op, device, meta_as_second_device):
    x = _varlen(device)
    on_meta = {k: (v.to("meta") if isinstance(v, torch.Tensor) and k != "cu_seqlens" else v) for k, v in x.items()}
    expect(ValueError, op, on_meta, "one device", f"cu_seqlens on {device}", "q on meta")


@pytest.mark.parametrize("op", OPS)
def test_gate_params_on_another_device(op, device, meta_as_second_device):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device, gate_in_kernel=True)
    expect(ValueError, op, _with(x, A_log=x["A_log"].to("meta")), "one device", "A_log on meta")
    expect(ValueError, op, _with(x, dt_bias=x["dt_bias"].to("meta")), "one device", "dt_bias on meta")


# --- dtypes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float64], ids=str)
def test_q_unsupported_dtype(op, x, dtype):
    expect(TypeError, op, _with(x, q=x["q"].to(dtype), k=x["k"].to(dtype), v=x["v"].to(dtype)),
           "q", "torch.float32", "torch.bfloat16", str(dtype))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["k", "v"])
def test_k_v_unsupported_dtype(op, x, name):
    """k and v may differ from q's float dtype (tests/ops/test_dtype_mixes.py), not be float64."""
    expect(TypeError, op, _with(x, **{name: x[name].double()}), name, "torch.float32", "torch.float64")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name, dtype", [("g", torch.float64), ("beta", torch.int32), ("initial_state", torch.float64)])
def test_other_unsupported_dtypes(op, x, name, dtype):
    expect(TypeError, op, _with(x, **{name: x[name].to(dtype)}), name, "torch.float32", str(dtype))


@pytest.mark.parametrize("op", OPS)
def test_not_a_tensor(op, x):
    expect(TypeError, op, _with(x, v=x["v"].tolist()), "v", "torch.Tensor", "list")


@pytest.mark.parametrize("op", OPS)
def test_scale_not_a_number(op, x):
    expect(TypeError, op, _with(x, scale="0.1"), "scale", "float", "str")


# --- chunk_size, gate parameters ---------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [0, 8, 48, 128, 16.0])
def test_chunk_size(x, chunk_size):
    with pytest.raises(ValueError) as info:
        chunk_gated_delta_rule(**x, chunk_size=chunk_size)
    msg = str(info.value)
    assert "chunk_size" in msg and "(16, 32, 64)" in msg and f"got {chunk_size}" in msg, msg


def test_fused_recurrent_takes_no_chunk_size(x):
    with pytest.raises(TypeError, match="chunk_size"):
        fused_recurrent_gated_delta_rule(**x, chunk_size=64)


@pytest.mark.parametrize("op", OPS)
def test_a_log_missing_with_gate_in_kernel(op, device):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device, gate_in_kernel=True)
    expect(ValueError, op, _with(x, A_log=None), "use_gate_in_kernel", "A_log", "[HV]", "A_log=None")
    expect(ValueError, op, _with(x, A_log=None, dt_bias=None), "A_log", "A_log=None")


@pytest.mark.parametrize("op", OPS)
def test_gate_params_without_gate_in_kernel_raise(op, device):
    """A_log / dt_bias given with use_gate_in_kernel=False would not be used (flash-linear-attention
    ignores them): a ValueError names them and the flag to pass."""
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device)
    a, d = torch.randn(HV, device=device), torch.randn(HV, device=device)
    expect(ValueError, op, _with(x, A_log=a, dt_bias=d), "A_log and dt_bias given with use_gate_in_kernel=False",
           "pass use_gate_in_kernel=True")
    expect(ValueError, op, _with(x, dt_bias=d), "dt_bias given with use_gate_in_kernel=False")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["A_log", "dt_bias"])
def test_gate_param_shape(op, device, name):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device, gate_in_kernel=True)
    bad = torch.zeros(H, device=device)
    expect(ValueError, op, _with(x, **{name: bad}), name, f"[{HV}]", f"({H},)")


@pytest.mark.parametrize("op", OPS)
def test_gate_param_dtype(op, device):
    x = make_inputs(B, T, H, HV, K, V, torch.float32, device, gate_in_kernel=True)
    expect(TypeError, op, _with(x, A_log=x["A_log"].double()), "A_log", "torch.float32", "torch.float64")


@pytest.mark.skipif(not backend.is_interpreter(), reason="only the Triton interpreter mis-computes bf16 dots")
def test_bf16_rejected_on_the_interpreter():
    x = make_inputs(1, 8, 1, 1, 16, 16, torch.bfloat16, "cpu", h0=False)
    with pytest.raises(TypeError, match=r"chunk_gated_delta_rule: bfloat16 .*interpreter.*float32 or float16"):
        chunk_gated_delta_rule(**x)


@pytest.mark.parametrize("op", OPS)
def test_scalar_arguments(op, x):
    """scale must be a finite real number (NaN gave NaN outputs, True was taken as 1.0);
    output_final_state a bool."""
    expect(ValueError, op, _with(x, scale=float("nan")), "scale", "finite", "nan")
    expect(TypeError, op, _with(x, scale=True), "scale", "float", "bool")
    with pytest.raises(TypeError, match=f"^{op.__name__}: output_final_state must be a bool, got str"):
        op(**x, output_final_state="yes")
