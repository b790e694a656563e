"""A loaded tile carried out of a runtime loop crashes bishengir-compile-a5.

ascendnpu-ir 1.2.0, ``--target=Ascend910_9599`` (A5): a ``[BT, BD]`` tile loaded in a ``tl.range``
loop and assigned to a variable that the loop carries and the code after it reads aborts with
``Casting.h:566: ... llvm::cast(const From &) [To = mlir::BaseMemRefType, From = mlir::Type]:
Assertion ... failed``; a computed tile (``load * 2.0``) carried the same way crashes too. Ascend910B2
compiles it. Met in ``causal_conv1d_bwd_kernel`` (the per-tap tile carried ``dpre`` of its last
tap, ``k = 0``, out of the tap loop): every launch failed on A5 (2026-12-01).

Restructured (:func:`fixed_kernel`, now in the conv backward): select the tile,
``b_last = tl.where(j == W - 1, b_p, b_last)``; it compiles for both chips.
"""
import torch
import triton
import triton.language as tl

MESSAGE = "Casting.h:566"
CHIP = "Ascend910_9599"


@triton.jit
def kernel(x, out, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_d = tl.arange(0, BD)
    b = tl.zeros([BT, BD], dtype=tl.float32)
    b_last = tl.zeros([BT, BD], dtype=tl.float32)
    for j in tl.range(0, W):
        b_p = tl.load(x + (o_t[:, None] + j) * BD + o_d[None, :])  # [BT, BD]
        b += b_p
        b_last = b_p
    tl.store(out + o_t[:, None] * BD + o_d[None, :], b + b_last)


@triton.jit
def fixed_kernel(x, out, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    o_t = tl.arange(0, BT)
    o_d = tl.arange(0, BD)
    b = tl.zeros([BT, BD], dtype=tl.float32)
    b_last = tl.zeros([BT, BD], dtype=tl.float32)
    for j in tl.range(0, W):
        b_p = tl.load(x + (o_t[:, None] + j) * BD + o_d[None, :])  # [BT, BD]
        b += b_p
        b_last = tl.where(j == W - 1, b_p, b_last)
    tl.store(out + o_t[:, None] * BD + o_d[None, :], b + b_last)


def launch_kwargs() -> dict:
    """Arguments of one launch (only dtypes and sizes matter: nothing runs)."""
    return dict(x=torch.empty(64 * 128), out=torch.empty(16 * 128), W=4, BT=16, BD=128)
