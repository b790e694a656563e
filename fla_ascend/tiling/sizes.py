"""Integer helpers for host-side tile and grid sizes.

Plain Python on purpose: in recent Triton (3.9.0 here) ``triton.cdiv`` and
``triton.next_power_of_2`` are ``ConstexprFunction`` objects (usable inside kernels too), and a
host call of either cost 3-9 us on the CI-class CPU (100000 calls, depending on load) against
0.2-0.4 us for these. A chunked forward made 15 such calls; with these helpers its host time
outside the kernel launches went from 256 to 120 us on that CPU (cases.md, "Host time"). Kernels
keep using ``tl.cdiv``.
"""
from __future__ import annotations

import operator

__all__ = ["cdiv", "next_pow2"]


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, ``b > 0`` (``triton.cdiv``'s rule)."""
    a, b = operator.index(a), operator.index(b)
    return (a + b - 1) // b


def next_pow2(n: int) -> int:
    """Smallest power of two ``>= n`` for ``n >= 1``, 0 for ``n = 0`` (``triton.next_power_of_2``'s
    rule)."""
    n = operator.index(n)
    return 1 << (n - 1).bit_length() if n > 0 else 0
