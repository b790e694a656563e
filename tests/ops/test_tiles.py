"""The chunk stages' per-backend choices (fla_ascend.ops.common.tiles): dot precision policy."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from fla_ascend import backend
from fla_ascend.ops.common import tiles


def _target(device_type: str, interpret: bool, cores: int | None = None, **overrides) -> backend.Target:
    """Another machine's target (``cores`` cube and vector cores; CPU tensors), with launch-table
    ``overrides``."""
    return backend.Target(device_type=device_type, interpret=interpret, cube_cores=cores, vector_cores=cores,
                          tensor_device="cpu", overrides=overrides)


def _stage(stage: str, **entry) -> dict:
    """An override of the chunk stage table: ``stage``'s shipped entry with ``entry``'s fields."""
    return {"chunk_stages": {stage: {**tiles.CUDA_LAUNCH[stage], **entry}}}


@pytest.mark.parametrize("choice", ["tf32x3", "tf32", "input"])
def test_dot_precision_cuda_table(choice):
    """On CUDA the table decides for bf16 inputs; float16 and float32 inputs always keep tf32x3."""
    with backend.use(_target("cuda", False, **_stage("wy_bwd", precision=choice))):
        assert tiles.dot_precision("wy_bwd", torch.bfloat16) == choice
        assert tiles.dot_precision("wy_bwd", torch.float16) == "tf32x3"
        assert tiles.dot_precision("wy_bwd", torch.float32) == "tf32x3"


@pytest.mark.parametrize("device_type", ["cpu", "npu"])
def test_dot_precision_exact_elsewhere(device_type):
    """The interpreter and the Ascend cube multiply fp32 exactly: always "ieee" there."""
    with backend.use(_target(device_type, device_type == "cpu", **_stage("wy_bwd", precision="input"))):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            assert tiles.dot_precision("wy_bwd", dtype) == "ieee"


def test_dot_precision_interpreter_on_cuda_host():
    """TRITON_INTERPRET=1 on a CUDA machine: the interpreter's bf16 dots are wrong, so "ieee"."""
    with backend.use(_target("cuda", True, **_stage("wy_bwd", precision="input"))):
        assert tiles.dot_precision("wy_bwd", torch.bfloat16) == "ieee"


@pytest.mark.parametrize("bk, bv, want", [(64, 32, (64, 64)), (16, 16, (32, 32)), (32, 16, (32, 32)),
                                          (64, 64, (64, 64)), (64, 128, (64, 128)), (16, 64, (32, 64))])
def test_wy_slabs_off_the_npu(bk, bv, want):
    """The WY stages' slab rule off the NPU (Hopper findings in cases.md): at least 32 wide and
    the V slab never narrower than the K slab."""
    from fla_ascend.ops.common.wy import off_npu_slabs

    assert off_npu_slabs(bk, bv) == want


def test_launch_first_fitting_steps_down_and_remembers(monkeypatch):
    """A candidate that does not fit on chip (Triton's OutOfResources at load) is skipped; the
    one that loaded is where the next call with the same key starts; when none fits the error
    names the stage, the sizes, the candidates and the bytes."""
    from triton.runtime.errors import OutOfResources

    monkeypatch.setattr(tiles, "_FIRST_FIT", {})
    tried = []

    def launch(cfg):
        tried.append(cfg)
        if cfg > 2:
            raise OutOfResources(cfg * 100, 200, "shared memory")

    assert tiles.launch_first_fitting("s", ("k",), [4, 3, 2, 1], launch) == 2
    assert tried == [4, 3, 2]
    tried.clear()
    assert tiles.launch_first_fitting("s", ("k",), [4, 3, 2, 1], launch) == 2
    assert tried == [2]
    with pytest.raises(RuntimeError, match=r"^s \(K=9\): no launch configuration fits the device's on-chip "
                                           r"memory; tried \[5, 4\], the last needs 400 B of shared memory, "
                                           r"the device has 200 B$") as e:
        tiles.launch_first_fitting("s", ("other",), [5, 4], launch, what="K=9")
    assert isinstance(e.value.__cause__, OutOfResources)
    with pytest.raises(ValueError, match="no launch candidates"):
        tiles.launch_first_fitting("s", ("k",), [], launch)


@pytest.fixture
def compiled_cuda():
    """``compiled_cuda(**overrides)``: the target of an H200 with compiled kernels (132 SMs) and
    those launch-table overrides, active for the rest of the test."""
    import contextlib

    with contextlib.ExitStack() as stack:
        yield lambda **overrides: stack.enter_context(backend.use(_target("cuda", False, 132, **overrides)))


@pytest.mark.parametrize("N, HV, V, want_bv", [(1, 32, 128, 32), (8, 32, 128, 64), (1, 4, 128, 32), (8, 32, 16, 16)])
def test_state_launches_on_cuda(N, HV, V, want_bv, compiled_cuda):
    """The state recurrences on CUDA: the widest table BV with one program per SM (else the
    narrowest table BV) at the table's num_stages first, then fewer stages, then narrower BV."""
    from fla_ascend.ops.common import chunk_h

    compiled_cuda(**_stage("bwd_dh", num_warps=4, num_stages={128: 3, 256: 2}, bv=(64, 32)))
    x = torch.empty(1, dtype=torch.bfloat16)
    got = chunk_h._state_launches("bwd_dh", N, HV, 128, V, chunk_h.BWD_DH_TILES, 64, x)
    assert got[0] == (want_bv, {"num_warps": 4, "num_stages": 3})
    assert [ns["num_stages"] for bv, ns in got[:3]] == [3, 2, 1]
    widths = [bv for bv, _ in got]
    assert widths == sorted(widths, reverse=True) and widths[-1] == min(16, want_bv)
    assert len(got) == 3 * len(set(widths))


def test_state_launches_on_npu_and_interpreter(monkeypatch):
    """On an NPU one candidate from the UB model, with multibuffer passed on; under the
    interpreter one candidate, BV = min(64, dot_dim(V)), no options."""
    from fla_ascend.ops.common import chunk_h

    x = torch.empty(1, dtype=torch.bfloat16)
    monkeypatch.setattr(chunk_h, "npu_tiles", lambda *a, **k: {"BV": 32, "multibuffer": False})
    with backend.use(_target("npu", False, 24)):
        assert chunk_h._state_launches("bwd_dh", 1, 4, 256, 128, chunk_h.BWD_DH_TILES, 64, x) == \
            [(32, {"multibuffer": False})]
    monkeypatch.setattr(chunk_h, "npu_tiles", lambda *a, **k: None)
    with backend.use(_target("cpu", True)):
        assert chunk_h._state_launches("fwd_h", 1, 4, 128, 20, chunk_h.FWD_H_TILES, 64, x) == [(32, {})]


def test_state_launches_reject_zero_stages(compiled_cuda):
    """A table entry with num_stages below 1 (a benchmark override) is refused by name instead of
    giving an empty candidate list."""
    from fla_ascend.ops.common import chunk_h

    compiled_cuda(**_stage("fwd_h", num_warps=4, num_stages=0, bv=(64, 32)))
    x = torch.empty(1, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"CUDA_LAUNCH\['fwd_h'\]\['num_stages'\] must be >= 1, got 0"):
        chunk_h._state_launches("fwd_h", 1, 4, 128, 128, chunk_h.FWD_H_TILES, 64, x)


@pytest.mark.parametrize("K, want", [(64, 3), (100, 3), (128, 3), (200, 2), (256, 2), (512, 2)])
def test_state_launches_stages_per_head_dim(K, want, compiled_cuda):
    """num_stages given per largest dot_dim(K): the first candidate takes the entry for the
    smallest key >= dot_dim(K) (the largest key beyond it)."""
    from fla_ascend.ops.common import chunk_h

    compiled_cuda(**_stage("fwd_h", num_warps=4, num_stages={128: 3, 256: 2}, bv=(64, 32)))
    x = torch.empty(1, dtype=torch.bfloat16)
    got = chunk_h._state_launches("fwd_h", 1, 32, K, 128, chunk_h.FWD_H_TILES, 64, x)
    assert got[0][1]["num_stages"] == want


def test_dot_operand_copies_except_on_compiled_cuda():
    """The R7 dot-operand copy is made everywhere but compiled CUDA (the NPU needs it; the
    interpreter keeps the NPU's code path)."""
    assert bool(tiles.DOT_OPERAND_COPY) == (not tiles.backend.is_cuda_compiled())


@triton.jit
def _dot_operand_kernel(x, y, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(y + o, tiles.dot_operand(tl.load(x + o)))


def test_dot_operand_is_a_copy_here(device):
    """What a kernel gets from ``dot_operand``: a new value (``x + 0.0``, which turns -0.0 into
    +0.0) on the NPU and under the interpreter, ``x`` itself (the sign of zero kept) on compiled
    CUDA."""
    x = torch.full((16,), -0.0, device=device)
    y = torch.empty_like(x)
    _dot_operand_kernel[(1,)](x, y, N=16)
    assert torch.signbit(y).any().item() == tiles.backend.is_cuda_compiled()


@pytest.mark.parametrize("chip,n,want", [("Ascend910B2", 16, 16), ("Ascend910_9599", 16, 32), ("Ascend910_9599", 8, 32),
                                         ("Ascend910_9599", 100, 128), ("Ascend910B2", 100, 128)])
def test_dot_dim_a5_minimum(chip, n, want):
    """dot_dim pads to a power of two, at least 16; on an A5 target at least A5_MIN_DOT_DIM (its
    compiler aborts on 16-wide K blocks)."""
    from fla_ascend.tiling.chips import get_chip

    c = get_chip(chip)
    with backend.use(_target("npu", False, c.cube_cores).replace(chip=c)):
        assert tiles.dot_dim(n) == want
    with backend.use(_target("cpu", True)):
        assert tiles.dot_dim(n) == max(16, triton.next_power_of_2(n))
