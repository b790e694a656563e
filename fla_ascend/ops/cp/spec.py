"""Spec of the context-parallel state chain (:mod:`fla_ascend.ops.cp.chain`): an internal primitive
with a kernel of its own (``affine_step_kernel``), launched by the ops' context-parallel paths. Not
benchmarked; the NPU check compiles it in the scenarios below (``fla-ascend check --ops cp``)."""
from __future__ import annotations

import torch

from fla_ascend.ops.spec import Kernel, OpSpec
from fla_ascend.tiling.ub import Tile

ORDER = 90
"""Place in the catalogue (:func:`fla_ascend.ops.catalog.spec_modules`)."""


def _chain(K=128, V=128, transpose=False):
    def run():
        from fla_ascend.ops.cp.chain import compose

        A, b = torch.randn(3, 32, K, K), torch.randn(3, 32, K, V)  # fp32 maps of 3 parts, HV = 32
        compose(A, b, range(3), transpose)
    return run


CHAIN_SCENARIOS = {"K128-V128": _chain(), "K128-V128-transposed": _chain(transpose=True),
                   "K256-V256": _chain(256, 256)}

SPECS = [
    OpSpec(
        name="cp",
        entry="fla_ascend.ops.cp.chain:compose",
        reference=None,
        dims=("K", "V"),
        inputs=(),
        outputs=("h",),
        modes=("fwd",),
        shapes=(),
        ci_shape=dict(K=128, V=128),
        kernels=(Kernel("fla_ascend.ops.cp.chain.affine_step_kernel", "cube",
                        # bishengir-compile's plan (A2): one [BK, BV] fp32 buffer in UB (the dots' operands stay
                        # in L1 / L0)
                        [Tile(("BK", "BV"), "fp32", "acc (b + A h)", buffered=False)], "cp chain", "chain"),),
        scenarios={"chain": (CHAIN_SCENARIOS, CHAIN_SCENARIOS)},  # no full matrix: the representative one
        benchmark=False,
    ),
]
