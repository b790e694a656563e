import pytest

from fla_ascend.round.sources import check_snapshot_path, op_source_files, source_hash


def test_l2norm_files_are_its_kernel_module_only():
    assert op_source_files("l2norm") == ["fla_ascend/ops/norm/l2norm.py"]


def test_chunk_op_follows_common_stages_but_not_references_or_utils():
    files = op_source_files("chunk_gated_delta_rule")
    assert "fla_ascend/ops/gated_delta_rule/chunk.py" in files
    assert "fla_ascend/ops/common/cumsum.py" in files
    assert not any(f.endswith("reference.py") or "/ops/utils/" in f or f.endswith("__init__.py") for f in files)


def test_bad_paths_and_ops_rejected():
    with pytest.raises(ValueError, match="not a public op"):
        op_source_files("no_such_op")
    for bad in ("/abs/x.py", "fla_ascend/../x.py", "fla_ascend/bench/suite.py",
                "fla_ascend/ops/norm/reference.py", "other/x.py"):
        with pytest.raises(ValueError):
            check_snapshot_path(bad)


def test_source_hash_depends_on_content_not_order():
    assert source_hash({"a": "1", "b": "2"}) == source_hash({"b": "2", "a": "1"})
    assert source_hash({"a": "1"}) != source_hash({"a": "2"})
