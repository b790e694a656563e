"""A ``[BT, BT]`` ``tl.dot`` accumulator carried through a constant-trip loop beside a
``[BT, BK]`` one makes bishengir-compile-a5 reject its own outlined call.

ascendnpu-ir 1.2.0, ``--target=Ascend910_9599`` (A5): a loop of constexpr trip count (here 2) that
accumulates ``b_s += dot(a, a^T)`` (``[32, 32]`` float32, not read after the loop) and
``b_x += dot(a, b^T)`` (``[32, 64]``), followed by the row sum ``tl.sum(b_x * c, 1)``, fails with
``'func.call' op operand type mismatch: expected operand type 'tensor<32x64xf32>', but provided
'tensor<32x32xf32>' for operand number 0``; Ascend910B2 compiles it. ``chunk_bwd_dqkwg`` at
``chunk_size`` 32 (K = 128, two V blocks) fails with the same message (operand number 1): reduced
from it, the failure stays with only its V loop (the ``[BT, BT]`` ``dS`` and ``[BT, BK]`` ``dk``
dot accumulators) and ``tl.sum(dk * k, 1)``; neither ``tl.exp`` nor the masks are needed
(2026-12-01).

Restructured (:func:`fixed_kernel`): without the ``[BT, BT]`` accumulator in the loop it compiles
for both chips; with a runtime trip count (``NV`` a plain argument) the failing kernel compiles
too. A copy of ``chunk_bwd_dqkwg``'s task whose V loop runs ``range(NV)`` with ``NV`` a runtime
argument (instead of ``range(tl.cdiv(V, BV))``) compiles at ``chunk_size`` 32 on A5 and A2; at 16
it then stops at the ``PatternMatch.cpp:135`` assertion of ``dot_result_cast_dot``. The package's
kernel takes the runtime trip count off CUDA (``RUNTIME_NV``).
"""
import torch
import triton
import triton.language as tl

MESSAGE = "'func.call' op operand type mismatch: expected operand type 'tensor<32x64xf32>', but provided 'tensor<32x32xf32>'"
CHIP = "Ascend910_9599"


@triton.jit
def kernel(a, b, c, out, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    b_x = tl.zeros([BT, BK], dtype=tl.float32)
    b_s = tl.zeros([BT, BT], dtype=tl.float32)
    for i_v in range(NV):
        b_a = tl.load(a + o_t[:, None] * BV + i_v * BV * BT + o_v[None, :])  # [BT, BV]
        b_b = tl.load(b + o_k[:, None] * BV + i_v * BV * BK + o_v[None, :])  # [BK, BV]
        b_s += tl.dot(b_a, tl.trans(b_a))  # [BT, BT], never read
        b_x += tl.dot(b_a, tl.trans(b_b))  # [BT, BK]
    b_c = tl.load(c + o_t[:, None] * BK + o_k[None, :])  # [BT, BK]
    tl.store(out + o_t, tl.sum(b_x * b_c.to(tl.float32), 1))


@triton.jit
def fixed_kernel(a, b, c, out, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    b_x = tl.zeros([BT, BK], dtype=tl.float32)
    for i_v in range(NV):
        b_a = tl.load(a + o_t[:, None] * BV + i_v * BV * BT + o_v[None, :])  # [BT, BV]
        b_b = tl.load(b + o_k[:, None] * BV + i_v * BV * BK + o_v[None, :])  # [BK, BV]
        b_x += tl.dot(b_a, tl.trans(b_b))  # [BT, BK]
    b_c = tl.load(c + o_t[:, None] * BK + o_k[None, :])  # [BT, BK]
    tl.store(out + o_t, tl.sum(b_x * b_c.to(tl.float32), 1))


def launch_kwargs() -> dict:
    """Arguments of one launch (only dtypes and sizes matter: nothing runs)."""
    bf = torch.bfloat16
    return dict(a=torch.empty(32 * 128, dtype=bf), b=torch.empty(64 * 128, dtype=bf), c=torch.empty(32 * 64, dtype=bf),
                out=torch.empty(32), BT=32, BK=64, BV=64, NV=2)
