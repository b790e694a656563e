"""fla_ascend.bench.tuning.strict_stage: a stage A/B times exactly the variant asked for."""
import pytest
from triton.runtime.errors import OutOfResources

from fla_ascend.bench.tuning import stage_variant, strict_stage
from fla_ascend.ops.common import chunk_h, tiles


def _launcher(tried):
    def launch(cfg):
        tried.append(cfg)
        if cfg > 2:
            raise OutOfResources(cfg * 100, 200, "shared memory")
    return launch


def test_strict_stage_tries_only_the_first_candidate(monkeypatch):
    """A strict stage tries only its first candidate: a variant that does not fit is an error, never
    timed as another variant; other stages still step down, and so does the stage after the context."""
    monkeypatch.setattr(tiles, "_FIRST_FIT", {})
    tried = []
    launch = _launcher(tried)
    with strict_stage("timed"):
        with pytest.raises(RuntimeError, match=r"tried \[3\]"):
            tiles.launch_first_fitting("timed", ("k",), [3, 2], launch)
        assert tried == [3]
        assert tiles.launch_first_fitting("timed", ("k",), [2, 1], launch) == 2
        assert tiles.launch_first_fitting("other", ("k",), [3, 2], launch) == 2
    tried.clear()
    assert tiles.launch_first_fitting("timed", ("k",), [3, 2], launch) == 2 and tried == [3, 2]


def test_strict_stage_sets_the_target_and_restores_it(monkeypatch):
    """The context adds the stage to the active target's strict_stages (what the chunk stages'
    launch_first_fitting reads) and restores the previous target; contexts nest, also through an
    exception; no module attribute changes."""
    from fla_ascend import backend

    monkeypatch.setattr(tiles, "_FIRST_FIT", {})
    original = tiles.launch_first_fitting
    before = backend.current()
    with strict_stage("fwd_h"):
        assert backend.current().strict_stages == {"fwd_h"}
        with strict_stage("bwd_dh"):
            assert backend.current().strict_stages == {"fwd_h", "bwd_dh"}
        assert backend.current().strict_stages == {"fwd_h"}
        with pytest.raises(RuntimeError, match=r"tried \[3\]"):
            chunk_h.launch_first_fitting("fwd_h", ("strict-test",), [3, 2], _launcher([]))
    assert backend.current() is before
    assert chunk_h.launch_first_fitting is original and tiles.launch_first_fitting is original
    with strict_stage("fwd_h"), pytest.raises(ValueError):
        raise ValueError("left through an exception")
    assert backend.current() is before


def test_stage_variant_overrides_one_entry():
    """stage_variant replaces one entry of the chunk stage table for the block only."""
    from fla_ascend import backend

    shipped = tiles.cuda_launch("wy_fwd")
    with stage_variant("wy_fwd", {"num_warps": 8, "num_stages": 2, "precision": "tf32x3"}):
        assert dict(tiles.cuda_launch("wy_fwd")) == {"num_warps": 8, "num_stages": 2, "precision": "tf32x3"}
        assert tiles.cuda_launch("wy_bwd") is tiles.CUDA_LAUNCH["wy_bwd"]
        with stage_variant("wy_bwd", {"num_warps": 2, "num_stages": 1}):
            assert tiles.cuda_launch("wy_fwd")["num_warps"] == 8 and tiles.cuda_launch("wy_bwd")["num_warps"] == 2
    assert tiles.cuda_launch("wy_fwd") is shipped and not backend.current().overrides
