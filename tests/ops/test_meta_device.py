"""Tensors on the ``meta`` device (no data) are refused before any kernel, with an error naming
the argument, for every op and every tensor argument (they reached Triton and raised its
"Cannot copy out of meta tensor")."""
from __future__ import annotations

import pytest
import torch

from fla_ascend import backend
from fla_ascend.layers import GatedDeltaNet
from fla_ascend.modules import ShortConvolution
from fla_ascend.ops import (
    causal_conv1d,
    causal_conv1d_update,
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    l2norm,
    rms_norm_gated,
)

B, T, H, K = 1, 8, 1, 8


def _r(*shape):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(0)).to(backend.device())


def _gdr():
    return dict(q=_r(B, T, H, K), k=_r(B, T, H, K), v=_r(B, T, H, K), g=-_r(B, T, H), beta=_r(B, T, H),
                initial_state=_r(B, H, K, K))


CASES = {
    "chunk_gated_delta_rule": (chunk_gated_delta_rule, _gdr),
    "fused_recurrent_gated_delta_rule": (fused_recurrent_gated_delta_rule, _gdr),
    "causal_conv1d": (causal_conv1d, lambda: dict(x=_r(B, T, 4), weight=_r(4, 3), bias=_r(4), residual=_r(B, T, 4),
                                                  initial_state=_r(B, 4, 3))),
    "causal_conv1d_update": (causal_conv1d_update, lambda: dict(x=_r(2, 4), cache=_r(2, 4, 3), weight=_r(4, 3))),
    "l2norm": (l2norm, lambda: dict(x=_r(4, 8))),
    "rms_norm_gated": (rms_norm_gated, lambda: dict(x=_r(4, 8), g=_r(4, 8), weight=_r(8), bias=None)),
}
ARGS = [(op, name) for op, (_, build) in CASES.items() for name, t in build().items() if t is not None]


@pytest.mark.parametrize("op,name", ARGS)
def test_meta_tensor_is_refused_naming_it(op, name):
    fn, build = CASES[op]
    kwargs = build()
    kwargs[name] = torch.empty_like(kwargs[name], device="meta")
    with pytest.raises(ValueError, match=rf"^{op}: {name} must hold data .* meta device"):
        fn(**kwargs)


def test_meta_module_and_layer_are_refused():
    conv = ShortConvolution(4, 3, device="meta")
    with pytest.raises(ValueError, match="weight must hold data"):
        conv(_r(B, T, 4))
    layer = GatedDeltaNet(hidden_size=16, num_k_heads=1, num_v_heads=1, head_k_dim=8, head_v_dim=8, device="meta")
    with pytest.raises(ValueError, match="^GatedDeltaNet: hidden_states must hold data"):
        layer(torch.empty(B, T, 16, device="meta"))


@pytest.mark.parametrize("op", sorted(CASES))
def test_tensor_off_the_kernel_device_is_refused(op):
    """Tensors on a device of another type than the kernels' (CPU tensors on a GPU machine)
    are refused naming the first one; they reached Triton and failed inside its launcher. The
    CPU tier stands a 'cuda' kernel device in for the GPU machine."""
    fn, build = CASES[op]
    kwargs = {n: None if t is None else t.cpu() for n, t in build().items()}
    first = next(iter(kwargs))
    gpu = backend.current().replace(device_type="cuda", interpret=False, tensor_device="cuda", cube_cores=132,
                                    vector_cores=132)
    with backend.use(gpu), pytest.raises(ValueError, match=rf"^{op}: {first} must be on the device the kernels run "
                                                           "on, cuda .*got a tensor on cpu"):
        fn(**kwargs)


def _catalog_args():
    from fla_ascend.ops import catalog

    return [(name, inp.name) for name, spec in catalog.specs().items() for inp in spec.inputs if not inp.optional]


@pytest.mark.parametrize("op,name", _catalog_args())
def test_every_catalogued_op_refuses_meta_inputs(op, name):
    """The same refusal for every op of the catalogue and every input its spec names, so an op added
    with a spec is covered without an entry here (inputs built by the spec at its CI shape)."""
    from fla_ascend.ops import catalog
    from fla_ascend.ops.spec import build_inputs, resolve

    spec = catalog.get(op)
    kwargs = build_inputs(spec, dict(spec.ci_shape), torch.float32, backend.device(), fill="empty")
    kwargs[name] = torch.empty_like(kwargs[name], device="meta")
    with pytest.raises(ValueError, match=rf"^{op}: {name} must hold data .* meta device"):
        resolve(spec.entry)(**kwargs)
