"""--shapes parsing, shape keys, op applicability and CPU scaling (no kernels run)."""
import pytest

from fla_ascend.bench import cases as C


def test_named_shape_and_key():
    [(label, shape)] = C.parse_shapes("qwen3next")
    assert label == "qwen3next"
    assert C.shape_key(shape) == "B1-T4096-H16-HV32-K128-V128"


def test_groups_expand_in_order_without_duplicates():
    got = [label for label, _ in C.parse_shapes("gdn-anchors;qwen3next;default")]
    assert got == ["qwen3next", "gdn-b4-t4096", "gdn-t32k", "gdn-b8-t2048"]
    fla = C.parse_shapes("fla-defaults")
    assert [(s["B"], s["T"], s["H"], s["K"]) for _, s in fla] == [
        (1, 8192, 96, 128), (2, 16384, 16, 128), (4, 2048, 16, 128),
        (4, 4096, 64, 128), (8, 2048, 32, 256), (8, 1024, 8, 64),
    ]


def test_free_form_and_list_input():
    [(_, s)] = C.parse_shapes("B=2, t=100,H=4,HV=8,K=64,V=32")
    assert s == dict(B=2, T=100, H=4, HV=8, K=64, V=32)
    got = C.parse_shapes(["B=1,T=8,H=1,K=16", "decode-b64"])
    assert [C.shape_key(s) for _, s in got] == ["B1-T8-H1-K16", "B64-T1-H16-HV32-K128-V128"]
    assert C.parse_shapes(None) == []


@pytest.mark.parametrize("text, words", [
    ("nosuchshape", ["unknown named shape", "'nosuchshape'", "qwen3next", "B=1,T=4096"]),
    # a name ending in a digit is a name, not a shape key with an unknown dimension QWEN
    ("qwen4", ["unknown named shape 'qwen4'", "known names: qwen3next,", "gdn-anchors"]),
    ("B=1,T=x", ["T='x'", "not a positive integer"]),
    ("B=1,T=0", ["T=0", ">= 1"]),
    ("B=1,Q=3", ["unknown dimension 'Q'", "HV"]),
    ("B=1,B=2", ["'B' given twice"]),
    ("B=1,T", ["'T'", "not NAME=INT"]),
    (";", ["no shape"]),
])
def test_bad_shapes_raise_clear_errors(text, words):
    with pytest.raises(ValueError) as e:
        C.parse_shapes(text)
    for w in words:
        assert w in str(e.value)


def test_complete_shape_defaults_and_applicability():
    gdn = C.OPS["chunk_gated_delta_rule"]
    assert gdn.complete_shape(dict(B=1, T=8, H=2, K=16)) == dict(B=1, T=8, H=2, HV=2, K=16, V=16)
    assert gdn.complete_shape(dict(B=1, T=8, H=2, D=64)) == dict(B=1, T=8, H=2, HV=2, K=64, V=64)
    reason = gdn.complete_shape(dict(C.NAMED_SHAPES["conv-b4-t4096"]))
    assert isinstance(reason, str) and "lacks H" in reason


def test_scale_for_cpu_clamps_and_keeps_gva():
    s = C.scale_for_cpu(dict(C.NAMED_SHAPES["qwen3next"]))
    assert s == dict(B=1, T=96, H=2, HV=4, K=32, V=32)
    assert C.scale_for_cpu(dict(B=1, T=4096, HV=32, V=128)) == dict(B=1, T=96, HV=4, V=32)
    tiny = dict(B=1, T=5, H=1, HV=1, K=8, V=8)
    assert C.scale_for_cpu(tiny) == tiny  # never enlarges
    q = C.scale_for_cpu(dict(C.NAMED_SHAPES["decode-b256"]), quick=True)
    assert q["B"] <= 2 and q["HV"] % q["H"] == 0


def test_counted_bytes_match_anchor_model():
    # anchors.md: q, k, v, g, beta in and o out at B1 T32768 H16 HV32 K=V=128 is ~0.8 GB
    import torch

    spec = C.OPS["chunk_gated_delta_rule"]
    n = spec.bytes_moved(C.NAMED_SHAPES["gdn-t32k"], torch.bfloat16, "fwd")
    assert 0.80e9 < n < 0.82e9
    assert spec.bytes_moved(C.NAMED_SHAPES["gdn-t32k"], torch.bfloat16, "fwdbwd") > 2 * n
    # decode: the fp32 state in and out dominates (anchors: 2.76 TB/s at 0.097 ms for B64)
    dec = C.OPS["fused_recurrent_gated_delta_rule"].bytes_moved(C.NAMED_SHAPES["decode-b64"], torch.bfloat16, "fwd")
    assert 2 * 64 * 32 * 128 * 128 * 4 <= dec < 1.01 * 2 * 64 * 32 * 128 * 128 * 4


def test_free_form_hv_must_be_a_multiple_of_h():
    with pytest.raises(ValueError, match="HV=4 .* must be a multiple of H=3"):
        C.parse_shapes("B=1,T=8,H=3,HV=4,K=16")


def test_shape_keys_parse_back():
    """A shape key as the tables print it is a valid --shapes item (round probe passes the
    baseline's keys; it was refused as an unknown name)."""
    from fla_ascend.bench.cases import parse_shapes, shape_key

    shape = {"B": 1, "T": 96, "H": 2, "HV": 4, "K": 32, "V": 16}
    assert parse_shapes(shape_key(shape)) == [(shape_key(shape), shape)]
    assert parse_shapes("gdn-t32k")[0][0] == "gdn-t32k"  # named shapes keep their meaning
    with pytest.raises(ValueError, match="unknown dimension 'Q'"):
        parse_shapes("B1-T96-Q2")
    assert parse_shapes("T64") == [("T64", {"T": 64})]  # one part: a key when it is a dimension


def test_anchors_run_each_op_at_its_own_anchor_shapes():
    """``--shapes anchors`` is each op at its spec's named shapes (22 cases in both modes), not every
    anchor for every op whose dimensions it has; a group named explicitly still applies to every op."""
    from fla_ascend.bench import suite
    from fla_ascend.ops import catalog

    plan, _ = suite.plan_cases(list(C.OPS), "anchors", ["fwd", "fwdbwd"], full_size=True)
    for op in C.OPS:
        spec = catalog.get(op)
        assert [p[1] for p in plan if p[0] == op] == [n for n in spec.shapes for m in ("fwd", "fwdbwd")
                                                        if m in spec.modes]
    assert len(plan) == sum(len(catalog.get(op).shapes) * len(catalog.get(op).modes) for op in C.OPS) >= 22
    explicit, _ = suite.plan_cases(["fused_recurrent_gated_delta_rule"], "gdn-anchors", ["fwd"], full_size=True)
    assert [p[1] for p in explicit] == list(catalog.shape_groups()["gdn-anchors"])
