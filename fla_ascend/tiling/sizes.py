"""Integer helpers for host-side tile and grid sizes.

Plain Python on purpose: from Triton 3.5 on, ``triton.cdiv`` and ``triton.next_power_of_2`` are
``ConstexprFunction`` objects (usable inside kernels too), and a host call of either costs about
7 us (Triton 3.9.0, measured on the CI-class CPU: 100000 calls of each); a chunked forward made 15
such calls, about 100 us of its 170 us of host time outside the kernel launches. Kernels keep
using ``tl.cdiv``.
"""
from __future__ import annotations

__all__ = ["cdiv", "next_pow2"]


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, ``b > 0`` (``triton.cdiv``'s rule)."""
    return (a + b - 1) // b


def next_pow2(n: int) -> int:
    """Smallest power of two ``>= n`` for ``n >= 1``, 0 for ``n = 0`` (``triton.next_power_of_2``'s
    rule)."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
