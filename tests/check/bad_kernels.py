"""Small kernels for the check's own tests: each bad one carries exactly one known trap, the
good ones none. Lowered by the check's worker (``--registry bad_kernels``); linted as text.

Never imported by the pytest process itself (it runs the interpreter)."""
import torch
import triton
import triton.language as tl

from fla_ascend.check.runner import Case
from fla_ascend.tiling.ub import Tile


@triton.jit(do_not_specialize=["n", "n_tasks", "n_programs"])
def good_copy_kernel(x, y, n, n_tasks, n_programs, BLOCK: tl.constexpr):
    for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
        o = i_task * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        b_x = tl.load(x + o, mask=m, other=0.0)  # [BLOCK]
        tl.store(y + o, b_x * 2.0, mask=m)


@triton.jit
def good_dot_kernel(a, b, c, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    o_m = tl.arange(0, BM)
    o_k = tl.arange(0, BK)
    o_n = tl.arange(0, BN)
    b_a = tl.load(a + o_m[:, None] * BK + o_k[None, :])  # [BM, BK]
    b_b = tl.load(b + o_k[:, None] * BN + o_n[None, :])  # [BK, BN]
    tl.store(c + o_m[:, None] * BN + o_n[None, :], tl.dot(b_a, b_b))


@triton.jit
def bad_gather_kernel(x, idx, y, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    b_i = tl.load(idx + o)  # [BLOCK] indices
    tl.store(y + o, tl.load(x + b_i))  # gather through loaded indices


@triton.jit
def bad_strided_gate_kernel(g, y, H, BT: tl.constexpr):
    o_t = tl.arange(0, BT)
    b_g = tl.load(g + o_t * H)  # gates [T, H] read along T: innermost stride H
    tl.store(y + o_t, b_g)


@triton.jit
def bad_oversized_kernel(x, y, BM: tl.constexpr, BN: tl.constexpr):
    o = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    b_x = tl.load(x + o)  # [BM, BN] fp32: 256 x 256 x 4 = 256 KiB > UB
    tl.store(y + o, tl.exp(b_x))


@triton.jit
def bad_inplace_advance_kernel(x, y, n_tasks, n_programs, BLOCK: tl.constexpr):
    p_x = x + tl.arange(0, BLOCK)
    for i_task in tl.range(tl.program_id(0), n_tasks, n_programs):
        tl.store(y + i_task * BLOCK + tl.arange(0, BLOCK), tl.load(p_x))
        p_x += BLOCK  # carried across task-loop iterations


@triton.jit
def bad_dot_reuse_kernel(a, b, c, BM: tl.constexpr):
    o = tl.arange(0, BM)[:, None] * BM + tl.arange(0, BM)[None, :]
    b_a = tl.load(a + o)  # [BM, BM]
    b_b = tl.load(b + o)  # [BM, BM]
    b_c = tl.dot(b_a, b_b)
    tl.store(c + o, b_c + b_a)  # left operand read again after the dot


@triton.jit
def bad_runtime_if_kernel(x, z, y, flag, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    if flag > 0:
        b = tl.load(x + o)
    else:
        b = tl.load(z + o)
    tl.store(y + o, b)


@triton.jit
def bad_constexpr_size_kernel(x, y, T: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < T, other=0.0))


@triton.jit
def bad_block_ptr_kernel(x, y, T, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr):
    # linted only (not in CASES): a partial last tile in T or K runs past the tensor
    i_t, i_k = tl.program_id(0), tl.program_id(1)
    p_x = tl.make_block_ptr(x, (T, K), (K, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0))
    b_x = tl.load(p_x)
    p_y = tl.make_block_ptr(y, (T, K), (K, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0))
    tl.store(tl.advance(p_y, (0, 0)), b_x, boundary_check=(0,))
    p_z = tl.advance(p_x, (BT, 0))
    tl.store(p_y, tl.load(p_z, boundary_check=(1,)), boundary_check=(0, 1))


@triton.jit
def good_block_ptr_kernel(x, y, T, K: tl.constexpr, BT: tl.constexpr):
    # linted only: T is checked, the block spans all of K from offset 0
    i_t = tl.program_id(0)
    p_x = tl.make_block_ptr(x, (T, K), (K, 1), (i_t * BT, 0), (BT, K), (1, 0))
    p_y = tl.make_block_ptr(y, (T, K), (K, 1), (i_t * BT, 0), (BT, K), (1, 0))
    tl.store(p_y, tl.load(p_x, boundary_check=(0,)), boundary_check=(0, 1))


def launch_with_num_warps(x, y):
    bad_oversized_kernel[(1,)](x, y, BM=16, BN=16, num_warps=4)


def _f(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


_K = __name__ + "."
CASES = [
    Case(_K + "good_copy_kernel", "n1000", "vector",
         lambda: ((4,), dict(x=_f(1024), y=_f(1024), n=1000, n_tasks=8, n_programs=4, BLOCK=128)),
         tiles=[Tile(("BLOCK",), "fp32", "x"), Tile(("BLOCK",), "fp32", "2x")]),
    Case(_K + "good_dot_kernel", "64", "cube",
         lambda: ((1,), dict(a=_f(64, 64, dtype=torch.float16), b=_f(64, 64, dtype=torch.float16), c=_f(64, 64),
                              BM=64, BK=64, BN=64)),
         tiles=[Tile(("BM", "BK"), "fp16"), Tile(("BK", "BN"), "fp16"), Tile(("BM", "BN"), "fp32")]),
    Case(_K + "good_copy_kernel", "dot-as-vector", "cube",  # wrong kind on purpose: mix_mode_mismatch
         lambda: ((4,), dict(x=_f(1024), y=_f(1024), n=1000, n_tasks=8, n_programs=4, BLOCK=128))),
    Case(_K + "bad_gather_kernel", "64", "vector",
         lambda: ((1,), dict(x=_f(64), idx=torch.zeros(64, dtype=torch.int32), y=_f(64), BLOCK=64))),
    Case(_K + "bad_strided_gate_kernel", "64", "vector", lambda: ((1,), dict(g=_f(64 * 8), y=_f(64), H=8, BT=64))),
    Case(_K + "bad_oversized_kernel", "256", "vector",
         lambda: ((1,), dict(x=_f(256, 256), y=_f(256, 256), BM=256, BN=256)),
         tiles=[Tile(("BM", "BN"), "fp32")]),
    Case(_K + "bad_oversized_kernel", "num_warps", "vector",
         lambda: ((1,), dict(x=_f(16, 16), y=_f(16, 16), BM=16, BN=16, num_warps=4))),
    Case(_K + "good_copy_kernel", "grid-too-large", "vector",
         lambda: ((70000,), dict(x=_f(1024), y=_f(1024), n=1000, n_tasks=8, n_programs=70000, BLOCK=128))),
]
