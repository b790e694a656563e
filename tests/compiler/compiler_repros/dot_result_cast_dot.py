"""A 16-row ``tl.dot`` result cast to bfloat16 and fed to a second ``tl.dot`` crashes
bishengir-compile-a5.

ascendnpu-ir 1.2.0, ``--target=Ascend910_9599`` (A5): ``A = dot(q, k^T)`` on ``[16, 128]`` bfloat16
tiles, then ``dot(A.to(bf16), v)``, aborts with ``PatternMatch.cpp:135: virtual void
mlir::RewriterBase::replaceOp(...): Assertion `op->getNumResults() == newValues.size() &&
"incorrect # of replacement values"' failed`, with or without a causal ``tl.where`` between the
dots; 32 rows compile, and Ascend910B2 compiles both. The same assertion ends ``chunk_fwd_o``,
``chunk_bwd_dv_local`` and ``chunk_wy_fwd`` at ``chunk_size = 16``, which chain dots this way; that
it is the same cause for the other launches ending with it (``chunk_bwd_dh``, ``chunk_bwd_dqkwg``
at ``BT = 64``, ``chunk_fwd_h`` at ``K = 256``) is not established (2026-12-01).

Restructured (:func:`fixed_kernel`): keep the first dot's float32 result and cast the other
operand up (``dot(A, v.to(float32))``); it compiles for both chips. The package's chunk stages do
this on A5 at ``chunk_size = 16`` and with 16-wide V blocks (``tiles.f32_dot_chain``).
"""
import torch
import triton
import triton.language as tl

MESSAGE = "PatternMatch.cpp:135"
CHIP = "Ascend910_9599"


@triton.jit
def kernel(q, k, v, out, BT: tl.constexpr, BK: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    b_q = tl.load(q + o_t[:, None] * BK + o_k[None, :])  # [BT, BK]
    b_k = tl.load(k + o_t[:, None] * BK + o_k[None, :])
    b_v = tl.load(v + o_t[:, None] * BK + o_k[None, :])
    b_A = tl.dot(b_q, tl.trans(b_k))  # [BT, BT]
    tl.store(out + o_t[:, None] * BK + o_k[None, :], tl.dot(b_A.to(b_v.dtype), b_v))


@triton.jit
def fixed_kernel(q, k, v, out, BT: tl.constexpr, BK: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    b_q = tl.load(q + o_t[:, None] * BK + o_k[None, :])  # [BT, BK]
    b_k = tl.load(k + o_t[:, None] * BK + o_k[None, :])
    b_v = tl.load(v + o_t[:, None] * BK + o_k[None, :])
    b_A = tl.dot(b_q, tl.trans(b_k))  # [BT, BT]
    tl.store(out + o_t[:, None] * BK + o_k[None, :], tl.dot(b_A, b_v.to(tl.float32)))


def launch_kwargs() -> dict:
    """Arguments of one launch (only dtypes and sizes matter: nothing runs)."""
    bf = torch.bfloat16
    return dict(q=torch.empty(16 * 128, dtype=bf), k=torch.empty(16 * 128, dtype=bf),
                v=torch.empty(16 * 128, dtype=bf), out=torch.empty(16 * 128), BT=16, BK=128)
