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


@triton.jit
def softplus(x):
    """``log(1 + exp(x))`` with torch's threshold 20 (``x`` above it is returned as is). Below
    ``exp(x) = 0.01`` it is the series ``y - y^2/2 + y^3/3 - y^4/4`` of ``log1p(y)``, ``y = exp(x)``
    (truncation below 2e-9 relative): ``log(1 + y)`` in float32 rounds ``1 + y`` to 1 for
    ``y < 6e-8`` (``x < -16.6``), so a gate ``-exp(A_log) * softplus(x)`` with a large ``A_log``
    came out 0 instead of about ``-exp(A_log + x)``. Above it, ``log(1 + y)`` is within 6e-6
    relative."""
    x = x.to(tl.float32)
    y = tl.exp(tl.minimum(x, 20.0))
    series = y * (1.0 - y * (0.5 - y * (0.3333333333333333 - 0.25 * y)))
    return tl.where(x > 20.0, x, tl.where(y < 0.01, series, tl.log(1.0 + y)))


@triton.jit
def masked_exp(x, m):
    """``exp(x)`` where ``m``, 0 elsewhere; ``exp`` never sees the masked entries (padding rows
    whose differences could overflow)."""
    return tl.where(m, tl.exp(tl.where(m, x, 0.0)), 0.0)
