"""The op catalogue is complete and consistent: every public op has a spec, every kernel of the package
a spec entry with a Tile list, a stage label and NPU-check scenarios, and every spec's data is usable
by the tools that read it (inputs build at its CI shape, named shapes exist, entry points import)."""
import importlib
import inspect
import pkgutil

import pytest
import torch
from triton.runtime.jit import JITFunction

import fla_ascend.ops as ops
from fla_ascend.ops import catalog
from fla_ascend.ops.spec import build_inputs, resolve, shape_dims

SPECS = catalog.specs()


def test_every_public_op_has_a_spec():
    entries = {id(resolve(s.entry)): name for name, s in SPECS.items()}
    for name in ops.__all__:
        obj = getattr(ops, name)
        if inspect.isclass(obj):  # nn.Module wrappers of an op (FusedRMSNormGated) are not ops
            continue
        assert id(obj) in entries, f"fla_ascend.ops.{name} has no spec: add it to its folder's spec.py"


def _package_kernels() -> set[str]:
    """Every ``@triton.jit`` function named ``*_kernel`` defined under fla_ascend.ops (compiled or, on the
    CPU tier, interpreted: both wrap the Python function as ``.fn``)."""
    from triton.runtime.interpreter import InterpretedFunction

    out = set()
    for m in pkgutil.walk_packages(ops.__path__, "fla_ascend.ops."):
        mod = importlib.import_module(m.name)
        for attr, obj in vars(mod).items():
            if (isinstance(obj, (JITFunction, InterpretedFunction)) and attr.endswith("_kernel")
                    and obj.fn.__module__ == m.name):
                out.add(f"{m.name}.{attr}")
    return out


def test_every_kernel_has_tiles_a_stage_and_scenarios():
    found = _package_kernels()
    assert len(found) >= 21
    known = catalog.kernels()
    assert set(found) == set(known), (sorted(set(found) - set(known)), sorted(set(known) - set(found)))
    for name, (spec, k) in known.items():
        assert k.kind in ("cube", "vector"), name
        assert k.tiles, f"{name}: no Tile list (UB model)"
        assert k.stage, f"{name}: no stage label"
        representative, full = spec.scenarios[k.scenarios]
        assert representative and full and set(representative) <= set(full) | set(representative), name


def test_a_shared_kernel_is_listed_per_op():
    """The gated delta rule's fused recurrent kernel serves ``fused_recurrent_kda`` too: the catalogue
    keeps the first op as its owner and lists it once per op (the NPU check launches both ops' scenarios)."""
    name = "fla_ascend.ops.gated_delta_rule.fused_recurrent.fused_recurrent_gated_delta_rule_kernel"
    assert catalog.kernels()[name][0].name == "fused_recurrent_gated_delta_rule"
    ops_listing = [spec.name for spec, k in catalog.listings() if k.name == name]
    assert ops_listing == ["fused_recurrent_gated_delta_rule", "fused_recurrent_kda"]
    assert {k.name for _, k in catalog.listings()} == set(catalog.kernels())


@pytest.mark.parametrize("name", list(SPECS))
def test_spec_data_is_usable(name):
    spec = SPECS[name]
    resolve(spec.entry)
    names = catalog.named_shapes()
    assert all(n in names for n in spec.shapes), spec.shapes
    for inp in spec.inputs:
        assert all(t.isdigit() or t in spec.dims for t in inp.shape.split()), (inp.name, inp.shape, spec.dims)
    if spec.benchmark:
        assert spec.reference and spec.bytes_moved and spec.flops and spec.shapes
        resolve(spec.reference)
        shape = spec.complete_shape(names[spec.shapes[0]])
        assert isinstance(shape, dict), shape
        assert spec.bytes_moved(shape, torch.bfloat16, spec.modes[-1]) > 0 and spec.flops(shape, spec.modes[-1]) > 0
    if spec.inputs:
        shape = dict(spec.ci_shape)
        a = build_inputs(spec, shape, torch.float32, seed=1)
        b = build_inputs(spec, shape, torch.float32, seed=1)
        for inp in spec.inputs:
            if inp.optional:
                continue
            assert tuple(a[inp.name].shape) == shape_dims(inp.shape, shape)
            assert torch.equal(a[inp.name], b[inp.name])  # the same seed gives the same inputs
        assert build_inputs(spec, shape, fill="empty")[spec.inputs[0].name].shape == a[spec.inputs[0].name].shape


def test_shape_names_are_one_scheme():
    groups = catalog.shape_groups()
    names = catalog.named_shapes()
    assert groups["anchors"] == [m for g, ms in groups.items() if g.endswith("-anchors") for m in ms]
    assert all(m in names for ms in groups.values() for m in ms)
    assert names["default"] == names[catalog.DEFAULT_SHAPE]


def test_bad_lookups_name_the_known_ones():
    with pytest.raises(ValueError, match="known ops: chunk_gated_delta_rule"):
        catalog.get("chunk_gdn")
    with pytest.raises(ValueError, match="fill"):
        build_inputs(SPECS["l2norm"], dict(SPECS["l2norm"].ci_shape), fill="ones")
    with pytest.raises(ValueError, match="optional"):
        build_inputs(SPECS["l2norm"], dict(SPECS["l2norm"].ci_shape), optional=("initial_state",))
