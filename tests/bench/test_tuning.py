"""fla_ascend.bench.tuning.strict_stage: a stage A/B times exactly the variant asked for."""
import pytest
from triton.runtime.errors import OutOfResources

from fla_ascend.bench.tuning import strict_stage
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


def test_strict_stage_reaches_the_kernel_modules_and_restores_them(monkeypatch):
    """The chunk stages call the name they imported: the context swaps it there and puts it back;
    contexts nest."""
    monkeypatch.setattr(tiles, "_FIRST_FIT", {})
    original = tiles.launch_first_fitting
    assert chunk_h.launch_first_fitting is original
    with strict_stage("fwd_h"):
        assert chunk_h.launch_first_fitting is not original
        with strict_stage("bwd_dh"):
            assert chunk_h.launch_first_fitting is not original
        assert chunk_h.launch_first_fitting is not original
        with pytest.raises(RuntimeError, match=r"tried \[3\]"):
            chunk_h.launch_first_fitting("fwd_h", ("strict-test",), [3, 2], _launcher([]))
    assert chunk_h.launch_first_fitting is original and tiles.launch_first_fitting is original
    with strict_stage("fwd_h"), pytest.raises(ValueError):
        raise ValueError("left through an exception")
    assert chunk_h.launch_first_fitting is original
