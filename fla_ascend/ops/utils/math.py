"""Elementwise math shared by the kernels (``@triton.jit`` helpers: any float in, computed and
returned in float32, so a 16-bit input cannot overflow ``exp2``)."""
import triton
import triton.language as tl


@triton.jit
def sigmoid(x):
    """``1 / (1 + exp(-x))`` through ``exp2``: on CUDA one ``ex2.approx.ftz`` (about 2 ulp;
    ``tl.sigmoid``'s ``exp`` adds a range check and two scalings around the same instruction,
    cases.md, causal_conv1d). Saturates like ``tl.sigmoid``: 0 for large negative ``x``, 1 for
    large positive."""
    x = x.to(tl.float32)
    return 1.0 / (1.0 + tl.exp2(-1.4426950408889634 * x))


@triton.jit
def silu(x):
    """``x * sigmoid(x)``, written as one division (``x / (1 + exp(-x))``)."""
    x = x.to(tl.float32)
    return x / (1.0 + tl.exp2(-1.4426950408889634 * x))
