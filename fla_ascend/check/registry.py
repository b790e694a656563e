"""Every kernel of the package with its core kind, its declared live tiles (UB model) and the
representative configurations it is checked with.

A *scenario* calls a public op (forward, and backward where the op has one) on small CPU
tensors with one configuration; under :func:`fla_ascend.check.runner.capture`
nothing runs, every kernel launch is recorded with the exact grid, sizes and options the op's
launcher computes for the chip. Each registered kernel is checked in the scenarios listed for it.

Adding a kernel: add it to ``KERNELS`` (kind + tiles + scenarios). A ``*_kernel`` under
``fla_ascend.ops`` without an entry fails the check ("kernel without registry entry").

``ALLOW`` is the allow-list: ``(kernel glob, finding code, config glob, reason)``. Every entry
says why the finding is acceptable; keep it short.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fla_ascend.check.runner import Case
from fla_ascend.ops.causal_conv1d import kernels as conv_kernels
from fla_ascend.ops.common import chunk_h, chunk_o, gva, wy
from fla_ascend.ops.gated_delta_rule import fused_recurrent
from fla_ascend.ops.norm.rms_norm_gated import BWD_TILES as RMS_GATED_BWD_TILES
from fla_ascend.tiling.ub import Tile

DTYPE = torch.bfloat16  # what the NPU runs; nothing is computed (launches are captured)


# ----------------------------------------------------------------------------- scenarios
def _gdn_inputs(T=256, H=2, HV=4, K=128, V=128, varlen=False, grad=True):
    B = 1 if varlen else 2
    q = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=grad)
    k = torch.randn(B, T, H, K, dtype=DTYPE, requires_grad=grad)
    v = torch.randn(B, T, HV, V, dtype=DTYPE, requires_grad=grad)
    g = torch.randn(B, T, HV, dtype=DTYPE, requires_grad=grad)
    beta = torch.rand(B, T, HV, dtype=DTYPE, requires_grad=grad)
    cu = torch.tensor([0, 100, 160, T], dtype=torch.long) if varlen else None
    N = 3 if varlen else B
    h0 = torch.randn(N, HV, K, V, dtype=torch.float32, requires_grad=grad)
    return q, k, v, g, beta, cu, h0


def _chunk(K=128, V=128, BT=64, varlen=False, gate=False, l2norm=False):
    def run():
        from fla_ascend.ops.gated_delta_rule.chunk import chunk_gated_delta_rule

        q, k, v, g, beta, cu, h0 = _gdn_inputs(K=K, V=V, varlen=varlen)
        extra = {}
        if gate:
            extra = dict(use_gate_in_kernel=True, A_log=torch.randn(v.shape[2]), dt_bias=torch.randn(v.shape[2]))
        o, ht = chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu,
                                       chunk_size=BT, use_qk_l2norm_in_kernel=l2norm, **extra)
        _backward(o.float().sum() + ht.sum())
    return run


def _backward(loss):
    """Run the backward pass when the op has one (an op without one raises NotImplementedError)."""
    if not loss.requires_grad:
        return
    try:
        loss.backward()
    except NotImplementedError:
        pass


def _recurrent(K=128, V=128, varlen=False, l2norm=True, fla_flags=False):
    """``fla_flags``: per-dim decays ``gk``/``gv``, per-value beta logits (``2 sigmoid``), a V-first state."""
    def run():
        from fla_ascend.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule

        q, k, v, g, beta, cu, h0 = _gdn_inputs(T=8 if not varlen else 12, K=K, V=V, varlen=varlen, grad=False)
        if varlen:
            cu = torch.tensor([0, 3, 7, 12], dtype=torch.long)
        extra = {}
        if fla_flags:
            B, T, HV = v.shape[:3]
            extra = dict(gk=-torch.rand(B, T, HV, K), gv=-torch.rand(B, T, HV, V), use_beta_sigmoid_in_kernel=True,
                         allow_neg_eigval=True, state_v_first=True)
            beta = torch.randn(B, T, HV, V, dtype=DTYPE)
            h0 = h0.transpose(-1, -2).contiguous()
        fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                                         cu_seqlens=cu, use_qk_l2norm_in_kernel=l2norm, **extra)
    return run


def _l2norm(D=128):
    def run():
        from fla_ascend.ops.norm.l2norm import l2norm

        x = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        _backward(l2norm(x).float().sum())
    return run


def _conv(D=256, W=4, varlen=False, update=False, act=True, state=True):
    def run():
        from fla_ascend.ops.causal_conv1d.conv import causal_conv1d, causal_conv1d_update

        B, T = (1, 256) if varlen else (2, 256)
        w = torch.randn(D, W, dtype=DTYPE, requires_grad=True)
        b = torch.randn(D, dtype=DTYPE, requires_grad=True)
        if update:
            x = torch.randn(3, D, dtype=DTYPE)
            cache = torch.randn(3, D, W, dtype=DTYPE)
            causal_conv1d_update(x, cache, weight=w.detach(), bias=b.detach(), activation="silu")
            return
        x = torch.randn(B, T, D, dtype=DTYPE, requires_grad=True)
        cu = torch.tensor([0, 100, 160, T], dtype=torch.long) if varlen else None
        N = 3 if varlen else B
        h0 = torch.randn(N, D, W, dtype=DTYPE, requires_grad=True) if state else None
        y, ht = causal_conv1d(x, w, b if act else None, initial_state=h0, output_final_state=state,
                              activation="silu" if act else None, cu_seqlens=cu)
        _backward(y.float().sum() + (ht.float().sum() if ht is not None else 0.0))
    return run


def _rms_gated(D=128):
    def run():
        from fla_ascend.ops.norm.rms_norm_gated import rms_norm_gated

        x = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        g = torch.randn(2, 256, 4, D, dtype=DTYPE, requires_grad=True)
        w = torch.ones(D, dtype=DTYPE, requires_grad=True)
        _backward(rms_norm_gated(x, g, w).float().sum())
    return run


# The launch matrix. What the NPU launch plans choose from (tiles via the UB model, fla_ascend.ops.common.tiles):
# the chunk stages' BK/BV/multibuffer from K, V, the chunk size BT and the input dtype; the recurrence's BV from
# V; the conv tiles (BT, BD) from D (BD = min(128, next_pow2(D))) and the unrolled taps from W; the norms'
# (BM, BD) from D. Flags are constexprs: varlen changes every chunk/conv kernel, gates in kernel only the gate
# cumsum kernels, l2norm in kernel only the l2norm kernels (q and k are normalised before the chunk stages) and
# the fused recurrence. The full matrix crosses the dimensions that interact; launches that lower to the same
# text are merged before compiling (fla_ascend.check.compiled.merge_specialisations).
HEAD_DIMS = (16, 64, 100, 128, 256)
CHUNK_SIZES = (16, 32, 64)
CONV_DIMS = (16, 64, 100, 256, 2048)  # BD = 16, 64, 128 (masked), 128, 128 with many channel tiles
NORM_DIMS = (16, 64, 100, 128, 256, 512, 1024, 2048, 4096, 8192)

CHUNK_SCENARIOS: dict[str, Callable] = {
    "K128-BT64": _chunk(),
    "K128-BT32": _chunk(BT=32),
    "K128-BT16": _chunk(BT=16),
    "K256-V128-BT64": _chunk(K=256),
    "K256-BT64": _chunk(K=256, V=256),
    "K64-BT64": _chunk(K=64, V=64),
    "K100-V16-BT64": _chunk(K=100, V=16),
    "varlen-K128-BT64": _chunk(varlen=True),
    "gate-K128-BT64": _chunk(gate=True),
    "l2norm-K128-BT64": _chunk(l2norm=True),
}
CHUNK_FULL = {f"{'varlen-' if vl else ''}K{K}-V{V}-BT{BT}": _chunk(K=K, V=V, BT=BT, varlen=vl)
              for K in HEAD_DIMS for V in HEAD_DIMS for BT in CHUNK_SIZES for vl in (False, True)}
CHUNK_FULL.update({f"gate-{'varlen-' if vl else ''}K128-BT{BT}": _chunk(BT=BT, varlen=vl, gate=True)
                   for BT in CHUNK_SIZES for vl in (False, True)})
CHUNK_FULL.update({f"l2norm-K{K}-BT64": _chunk(K=K, V=K, l2norm=True) for K in HEAD_DIMS})

RECURRENT_SCENARIOS = {"K128": _recurrent(), "K256-V128": _recurrent(K=256), "K256": _recurrent(K=256, V=256),
                       "K16-V100": _recurrent(K=16, V=100), "varlen-K128": _recurrent(varlen=True),
                       "no-l2norm-K128": _recurrent(l2norm=False),
                       "gk-gv-vfirst-K128": _recurrent(fla_flags=True)}
RECURRENT_FULL = {f"{'varlen-' if vl else ''}{'' if l2 else 'no-l2norm-'}K{K}-V{V}": _recurrent(K, V, vl, l2)
                  for K in HEAD_DIMS for V in HEAD_DIMS for vl in (False, True) for l2 in (True, False)}

RMS_SCENARIOS = {"D128": _rms_gated(128), "D256": _rms_gated(256), "D8192": _rms_gated(8192)}
RMS_FULL = {f"D{D}": _rms_gated(D) for D in NORM_DIMS}
NORM_SCENARIOS = {"D128": _l2norm(128), "D256": _l2norm(256), "D8192": _l2norm(8192)}
NORM_FULL = {f"D{D}": _l2norm(D) for D in NORM_DIMS}

CONV_SCENARIOS = {"D256-W4": _conv(), "D2048-W4": _conv(D=2048), "varlen-D256-W4": _conv(varlen=True),
                  "D200-W3-plain": _conv(D=200, W=3, act=False, state=False), "D64-W2": _conv(D=64, W=2),
                  "D16-W1": _conv(D=16, W=1)}
CONV_FULL = {f"{'varlen-' if vl else ''}D{D}-W{W}{'' if act else '-plain'}":
             _conv(D=D, W=W, varlen=vl, act=act, state=act)
             for D in CONV_DIMS for W in (1, 2, 3, 4) for vl in (False, True) for act in (True, False)}
CONV_STATE_SCENARIOS = {k: v for k, v in CONV_SCENARIOS.items() if "plain" not in k}  # launched with states
CONV_STATE_FULL = {k: v for k, v in CONV_FULL.items() if "plain" not in k}
CONV_UPDATE_SCENARIOS = {"D256-W4": _conv(update=True), "D2048-W4": _conv(D=2048, update=True),
                         "D64-W2": _conv(D=64, W=2, update=True)}
CONV_UPDATE_FULL = {f"D{D}-W{W}": _conv(D=D, W=W, update=True) for D in CONV_DIMS for W in (1, 2, 3, 4)}

FULL = {id(CHUNK_SCENARIOS): CHUNK_FULL, id(RECURRENT_SCENARIOS): RECURRENT_FULL, id(RMS_SCENARIOS): RMS_FULL,
        id(NORM_SCENARIOS): NORM_FULL, id(CONV_SCENARIOS): CONV_FULL, id(CONV_STATE_SCENARIOS): CONV_STATE_FULL,
        id(CONV_UPDATE_SCENARIOS): CONV_UPDATE_FULL}
"""Representative scenario dict -> its full matrix (``fla-ascend check --full``); a kernel whose
scenarios have none (the context-parallel chain) keeps its representative ones."""


def _chain(K=128, V=128, transpose=False):
    def run():
        from fla_ascend.ops.cp.chain import compose

        A, b = torch.randn(3, 32, K, K), torch.randn(3, 32, K, V)  # fp32 maps of 3 parts, HV = 32
        compose(A, b, range(3), transpose)
    return run


CHAIN_SCENARIOS = {"K128-V128": _chain(), "K128-V128-transposed": _chain(transpose=True),
                   "K256-V256": _chain(256, 256)}

OP_OF_SCENARIOS = {id(CHUNK_SCENARIOS): "chunk_gated_delta_rule",
                   id(RECURRENT_SCENARIOS): "fused_recurrent_gated_delta_rule",
                   id(RMS_SCENARIOS): "rms_norm_gated", id(NORM_SCENARIOS): "l2norm",
                   id(CONV_SCENARIOS): "causal_conv1d",
                   id(CONV_STATE_SCENARIOS): "causal_conv1d", id(CONV_UPDATE_SCENARIOS): "causal_conv1d_update",
                   id(CHAIN_SCENARIOS): "cp"}
"""Representative scenario dict -> the public op its scenarios call (``fla-ascend check --ops``; the
benchmark's op names where the op is benchmarked; ``cp``: the context-parallel state chain)."""


# ----------------------------------------------------------------------------- kernels
@dataclass
class KernelInfo:
    """``kind``: core kind of its launch plan; ``tiles``: declared peak live tiles (shape names are
    the kernel's constexprs; ``"in"`` = the input dtype); ``scenarios``: name -> run."""

    kind: str
    scenarios: dict
    tiles: list | None = None
    sizes: Callable | None = None
    note: str = ""


_M = "fla_ascend.ops."
KERNELS: dict[str, KernelInfo] = {
    _M + "common.cumsum.chunk_gate_cumsum_kernel": KernelInfo(
        "vector", CHUNK_SCENARIOS,
        # bishengir-compile's plan (A2, with the GATE_FLOOR count): 32.2-32.6 [BT, BH] fp32 tiles, 74 with
        # the gate activation in the kernel
        tiles=[Tile(("33 + 42 * USE_GATE", "BT", "BH"), "fp32", "g, beta, cumsum and activation temporaries",
                    buffered=False)]),
    _M + "common.wy.chunk_wy_fwd_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=wy.WY_FWD_TILES,
        sizes=lambda s: {**{k: v for k, v in s.items() if not isinstance(v, str)},
                         "AI_LOAD": int(s["AI_MODE"] == "load")}),
    _M + "common.chunk_h.chunk_fwd_h_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=chunk_h.FWD_H_TILES),
    _M + "common.chunk_o.chunk_fwd_o_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=chunk_o.FWD_O_TILES),
    _M + "gated_delta_rule.fused_recurrent.fused_recurrent_gated_delta_rule_kernel": KernelInfo(
        "vector", RECURRENT_SCENARIOS,
        tiles=fused_recurrent.RECURRENT_TILES),
    _M + "common.cumsum.chunk_gate_cumsum_bwd_kernel": KernelInfo(
        "vector", CHUNK_SCENARIOS,
        # bishengir-compile's plan (A2, with the GATE_FLOOR mask): 33.3-34.4 [BT, BH] fp32 tiles, 85.5 with
        # the gate activation
        tiles=[Tile(("35 + 51 * USE_GATE", "BT", "BH"), "fp32", "dg, g, reverse cumsum and activation temporaries",
                    buffered=False)]),
    _M + "common.wy.chunk_wy_bwd_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=wy.WY_BWD_TILES),
    _M + "common.chunk_h.chunk_bwd_dh_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=chunk_h.BWD_DH_TILES),
    _M + "common.chunk_o.chunk_bwd_dv_local_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=chunk_o.BWD_DV_LOCAL_TILES),
    _M + "common.chunk_o.chunk_bwd_dqkwg_kernel": KernelInfo(
        "cube", CHUNK_SCENARIOS,
        tiles=chunk_o.BWD_DQKWG_TILES),
    _M + "common.gva.gva_group_sum_kernel": KernelInfo(
        "vector", CHUNK_SCENARIOS,
        tiles=gva.GVA_SUM_TILES),
    # flags (ACT, USE_H0, HAS_DHT) enter the sizes as 0/1: a tile of a switched-off path has size 0
    _M + "causal_conv1d.kernels.causal_conv1d_fwd_kernel": KernelInfo(
        "vector", CONV_SCENARIOS, tiles=conv_kernels.FWD_TILES),
    _M + "causal_conv1d.kernels.causal_conv1d_bwd_kernel": KernelInfo(
        "vector", CONV_SCENARIOS, tiles=conv_kernels.BWD_TILES),
    _M + "causal_conv1d.kernels.causal_conv1d_states_fwd_kernel": KernelInfo(
        "vector", CONV_STATE_SCENARIOS, tiles=conv_kernels.STATES_FWD_TILES),
    _M + "causal_conv1d.kernels.causal_conv1d_states_bwd_kernel": KernelInfo(
        "vector", CONV_STATE_SCENARIOS, tiles=conv_kernels.STATES_BWD_TILES),
    _M + "causal_conv1d.kernels.causal_conv1d_update_kernel": KernelInfo(
        "vector", CONV_UPDATE_SCENARIOS, tiles=conv_kernels.UPDATE_TILES),
    _M + "cp.chain.affine_step_kernel": KernelInfo(
        "cube", CHAIN_SCENARIOS,
        # bishengir-compile's plan (A2): one [BK, BV] fp32 buffer in UB (the dots' operands stay in L1 / L0)
        tiles=[Tile(("BK", "BV"), "fp32", "acc (b + A h)", buffered=False)]),
    _M + "norm.rms_norm_gated.rms_norm_gated_fwd_kernel": KernelInfo(
        # fitted to bishengir-compile's A2 plans: 125344 / 125664 B at D 128 / 256 (BM x BD = 4096), 180388 B at
        # D 8192 (BM 1): about 20 B per row element plus a fixed part
        "vector", RMS_SCENARIOS, tiles=[Tile((2, "BM", "BD"), "in", "x, g", buffered=False),
                                        Tile((4, "BM", "BD"), "fp32", "float32 x, g, y, a temporary", buffered=False),
                                        Tile((12288,), "fp32", "weight, bias, row statistics and scratch: the plan's "
                                             "fixed part", buffered=False)]),
    _M + "norm.rms_norm_gated.rms_norm_gated_bwd_kernel": KernelInfo(
        "vector", RMS_SCENARIOS, tiles=RMS_GATED_BWD_TILES),
    _M + "norm.l2norm.l2norm_fwd_kernel": KernelInfo(
        "vector", NORM_SCENARIOS, tiles=[Tile(("BM", "BD"), "in", "x", buffered=False),
                                         Tile((4, "BM", "BD"), "fp32", "x fp32, y, temps", buffered=False),
                                         Tile((24, "BM"), "fp32", "row norms", buffered=False),
                                         Tile((64,), "fp32", "scalars", buffered=False)]),
    _M + "norm.l2norm.l2norm_bwd_kernel": KernelInfo(
        "vector", NORM_SCENARIOS, tiles=[Tile((2, "BM", "BD"), "in", "x, dy", buffered=False),
                                         Tile((6, "BM", "BD"), "fp32", "float32 x, dy, dx and temporaries",
                                              buffered=False)]),
}


def _cases(full: bool = False) -> list[Case]:
    out = []
    for kernel, info in KERNELS.items():
        scenarios = FULL.get(id(info.scenarios), info.scenarios) if full else info.scenarios
        for cfg, run in scenarios.items():
            out.append(Case(kernel=kernel, config=cfg, kind=info.kind, run=run, tiles=info.tiles, sizes=info.sizes,
                            op=OP_OF_SCENARIOS.get(id(info.scenarios))))
    return out


CASES: list[Case] = _cases()
"""The representative launches (CI): per kernel every tile plan its launcher picks at the common shapes, each
head dim once, each chunk size, and each flag once."""

FULL_CASES: list[Case] = _cases(full=True)
"""The full launch matrix (``fla-ascend check --full``)."""

ALLOW: list[tuple[str, str, str, str]] = [
    # (kernel glob, finding code, config glob, reason)
    ("chunk_wy_fwd_kernel", "ub_headroom", "*BT64*", "BT = 64: ~12 [BT, BT] fp32 buffers of the inverse, "
     "independent of BK (docstring); chunk_size 32 plans 85%"),
    ("chunk_wy_bwd_kernel", "ub_headroom", "*BT64*", "BT = 64: the [BT, BT] fp32 gradients of A, independent "
     "of BK/BV (docstring); chunk_size 32 plans 77%"),
    ("chunk_bwd_dqkwg_kernel", "ub_headroom", "*BT64*", "BT = 64: ~12 [BT, BT] fp32 buffers, 166-195 KB for "
     "every BK, BV in {32, 64} (docstring); chunk_size 32 plans 84%"),
    ("rms_norm_gated_fwd_kernel", "ub_headroom", "D8192", "one 8192-wide row per task, 92% (docstring); fits"),
    ("l2norm_bwd_kernel", "ub_headroom", "D8192", "one 8192-wide row per task, 92% (docstring); fits"),
]
