"""fla_ascend.tiling.sizes: the host-side integer helpers follow Triton's rules exactly."""
import triton

from fla_ascend.tiling.sizes import cdiv, next_pow2


def test_next_pow2_matches_triton():
    for n in [*range(0, 600), 2**20 - 1, 2**20, 2**20 + 1, 2**31 - 1, 2**31]:
        assert next_pow2(n) == triton.next_power_of_2(n), n


def test_cdiv_matches_triton():
    for a in [*range(0, 300), 2**31 - 1, 2**40 + 3]:
        for b in (1, 2, 3, 16, 64, 127):
            assert cdiv(a, b) == triton.cdiv(a, b), (a, b)
