"""vllm-ascend's Triton GDN prefill stages, captured for the estimate (calibration only).

vllm-ascend (https://github.com/vllm-project/vllm-ascend) ships flash-linear-attention-derived Triton
kernels for the GatedDeltaNet prefill in ``vllm_ascend/ops/triton/fla``. MegaGDN
(https://github.com/huawei-csl/megagdn-pto) timed them stage by stage on a 910B2
(``outputs/data/kernel_bench_L8192.json``, ``benchmarks/kernel/bench_gdn_kernels.py``; its Triton
baseline is vllm-ascend 0.18.0rc1's ``vllm_ascend/ops/triton/fla``, per its
``kernels/triton_baseline/fla_vendor/SOURCES.md``). Compiling the same kernels here and dividing gives
calibration points for the estimate on kernels that are not ours and not flash-linear-attention's.

vllm-ascend is never a dependency, and nothing of it is part of this package: download its wheel
(``pip download --no-deps vllm-ascend==0.18.0rc1 -d /tmp/vllm-ascend``), unzip it and put the folder
on ``PYTHONPATH``. Its kernels import ``vllm.triton_utils`` (vLLM's re-export of ``triton`` and
``triton.language``) and sit under ``vllm_ascend.ops``, whose package ``__init__`` imports vLLM and
torch_npu: while a stage is captured, :func:`_imports` stubs the minimum (a ``vllm.triton_utils``
module with ``tl``, ``triton`` and ``HAS_TRITON``, and the two parent packages ``vllm_ascend.ops`` and
``vllm_ascend.ops.triton`` as bare namespaces over the wheel's folders so that their ``__init__`` is
not run). Nothing of vLLM or torch_npu runs.

Each stage is called the way MegaGDN's benchmark calls it (:data:`STAGES`): packed varlen inputs
(``B = 1``, ``N`` sequences of ``L`` tokens, ``cu_seqlens`` int64), the dtypes it uses, the index
tensors it precomputes outside the timed call passed in, the others built inside the call as the
stage function does.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import types

__all__ = ["VERSION", "STAGES", "available", "capture_stage", "stage_shape"]

VERSION = "0.18.0rc1"
"""The vllm-ascend release whose kernels MegaGDN timed."""

STAGES = ("cumsum", "kkt", "solve_tril", "wy_fast", "chunk_h", "chunk_o", "forward")
"""The GDN forward stages, in MegaGDN's names, and ``forward``: the six in a row as vllm-ascend's
``chunk_gated_delta_rule_fwd`` chains them (no prebuilt index tensors), then the output read back
as float32 after a device synchronisation, as MegaGDN's pipeline benchmark
(``benchmarks/kernel/bench_pto_pipeline_latency.py``, ``tests/test_gdn_e2e.py``) times it."""


def available() -> str | None:
    """``None`` when vllm-ascend's Triton GDN kernels can be imported from ``PYTHONPATH`` (the
    unpacked wheel of :data:`VERSION`), else the reason."""
    spec = importlib.util.find_spec("vllm_ascend")
    if spec is None or not spec.submodule_search_locations:
        return (f"vllm-ascend {VERSION} is not importable: pip download --no-deps vllm-ascend=={VERSION}, "
                "unzip the wheel and put its folder on PYTHONPATH")
    root = list(spec.submodule_search_locations)[0]
    if not os.path.isfile(os.path.join(root, "ops", "triton", "fla", "chunk_delta_h.py")):
        return f"{root} has no ops/triton/fla (not a vllm-ascend {VERSION} wheel)"
    try:
        import importlib.metadata as md

        version = md.version("vllm-ascend")
    except Exception:  # noqa: BLE001 - no dist-info next to the package: cannot tell the version
        version = None
    if version is not None and version != VERSION:
        return f"vllm-ascend {version} is on PYTHONPATH; the calibration needs {VERSION} (the release MegaGDN timed)"
    return None


@contextlib.contextmanager
def _imports():
    """Stub what vllm-ascend's GDN kernels import beyond triton and torch (see the module docstring);
    the modules it put in ``sys.modules`` are removed after, the stubs too."""
    import triton
    import triton.language as tl

    spec = importlib.util.find_spec("vllm_ascend")
    root = list(spec.submodule_search_locations)[0]
    before = set(sys.modules)
    saved = {k: sys.modules.get(k) for k in ("vllm", "vllm.triton_utils")}
    vllm = types.ModuleType("vllm")
    vllm.__path__ = []
    tu = types.ModuleType("vllm.triton_utils")
    tu.tl, tu.triton, tu.HAS_TRITON = tl, triton, True
    vllm.triton_utils = tu
    sys.modules["vllm"], sys.modules["vllm.triton_utils"] = vllm, tu
    import vllm_ascend  # its __init__ only defines functions

    for name, sub in (("vllm_ascend.ops", "ops"), ("vllm_ascend.ops.triton", os.path.join("ops", "triton"))):
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [os.path.join(root, sub)]
            sys.modules[name] = pkg
    try:
        yield vllm_ascend
    finally:
        for k in set(sys.modules) - before:
            if k.startswith(("vllm_ascend", "vllm")):
                del sys.modules[k]
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def stage_shape(N: int, L: int, H: int, Hg: int = 16, D: int = 128, BT: int = 64) -> dict:
    """A stage call's sizes: ``N`` sequences of ``L`` tokens packed into one (``T = N * L``), ``H``
    value heads, ``Hg`` key heads, head dim ``D`` (keys and values), chunk ``BT``."""
    return dict(N=N, L=L, H=H, Hg=Hg, D=D, BT=BT)


def _prepare(stage: str, s: dict):
    """``(function, kwargs)`` of vllm-ascend's call for ``stage`` at sizes ``s`` (:func:`stage_shape`):
    inputs of MegaGDN's dtypes (uninitialised: no kernel runs under capture), and the index tensors its
    benchmark builds outside the timed call (the others the stage function builds itself)."""
    import torch
    from vllm_ascend.ops.triton.fla import utils

    N, L, H, Hg, D, BT = (s[k] for k in ("N", "L", "H", "Hg", "D", "BT"))
    T = N * L
    bf16, f32 = torch.bfloat16, torch.float32
    cu = torch.arange(0, T + 1, L, dtype=torch.int64)

    def e(*shape, dtype=bf16):
        return torch.empty(*shape, dtype=dtype)

    if stage == "cumsum":
        from vllm_ascend.ops.triton.fla.cumsum import chunk_local_cumsum

        return chunk_local_cumsum, dict(g=e(1, T, H, dtype=f32), chunk_size=BT, cu_seqlens=cu)
    if stage == "kkt":
        from vllm_ascend.ops.triton.fla.chunk_scaled_dot_kkt import chunk_scaled_dot_kkt_fwd

        return chunk_scaled_dot_kkt_fwd, dict(k=e(1, T, Hg, D), beta=e(1, T, H), g_cumsum=e(1, T, H, dtype=f32),
                                              cu_seqlens=cu, chunk_indices=utils.prepare_chunk_indices(cu, BT),
                                              chunk_size=BT, output_dtype=f32)
    if stage == "solve_tril":
        from vllm_ascend.ops.triton.fla.solve_tril import solve_tril

        return solve_tril, dict(A=e(1, T, H, BT, dtype=f32), cu_seqlens=cu)
    if stage == "wy_fast":
        from vllm_ascend.ops.triton.fla.wy_fast import recompute_w_u_fwd

        return recompute_w_u_fwd, dict(k=e(1, T, Hg, D), v=e(1, T, H, D), beta=e(1, T, H),
                                       g_cumsum=e(1, T, H, dtype=f32), A=e(1, T, H, BT), cu_seqlens=cu,
                                       chunk_indices=utils.prepare_chunk_indices(cu, BT))
    if stage == "chunk_h":
        from vllm_ascend.ops.triton.fla.chunk_delta_h import chunk_gated_delta_rule_fwd_h

        return chunk_gated_delta_rule_fwd_h, dict(k=e(1, T, Hg, D), w=e(1, T, H, D), u=e(1, T, H, D),
                                                  g=e(1, T, H, dtype=f32), initial_state=None,
                                                  output_final_state=False, cu_seqlens=cu,
                                                  chunk_indices=utils.prepare_chunk_indices(cu, BT),
                                                  chunk_offsets=utils.prepare_chunk_offsets(cu, BT), chunk_size=BT)
    if stage == "chunk_o":
        from vllm_ascend.ops.triton.fla.chunk_o import chunk_fwd_o

        NT = N * -(-L // BT)
        return chunk_fwd_o, dict(q=e(1, T, Hg, D), k=e(1, T, Hg, D), v=e(1, T, H, D), h=e(1, NT, H, D, D),
                                 g=e(1, T, H, dtype=f32), scale=D ** -0.5, cu_seqlens=cu, chunk_size=BT)
    if stage == "forward":
        f16 = torch.float16
        return _forward, dict(q=e(1, T, Hg, D, dtype=f16), k=e(1, T, Hg, D, dtype=f16), v=e(1, T, H, D, dtype=f16),
                              g=e(1, T, H, dtype=f32), beta=e(1, T, H, dtype=f16), scale=D ** -0.5, cu_seqlens=cu)
    raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")


def _forward(q, k, v, g, beta, scale, cu_seqlens):
    """The GDN forward as vllm-ascend 0.18.0rc1 chains its stages (chunk 64, no initial state, no
    final state, every index tensor built inside the stage calls), then a device synchronisation
    and the output as float32 (what MegaGDN's pipeline benchmark times)."""
    import torch
    from vllm_ascend.ops.triton.fla.chunk_delta_h import chunk_gated_delta_rule_fwd_h
    from vllm_ascend.ops.triton.fla.chunk_o import chunk_fwd_o
    from vllm_ascend.ops.triton.fla.chunk_scaled_dot_kkt import chunk_scaled_dot_kkt_fwd
    from vllm_ascend.ops.triton.fla.cumsum import chunk_local_cumsum
    from vllm_ascend.ops.triton.fla.solve_tril import solve_tril
    from vllm_ascend.ops.triton.fla.wy_fast import recompute_w_u_fwd

    g = chunk_local_cumsum(g, chunk_size=64, cu_seqlens=cu_seqlens)
    A = chunk_scaled_dot_kkt_fwd(k=k, beta=beta, g_cumsum=g, cu_seqlens=cu_seqlens, output_dtype=torch.float32)
    A = solve_tril(A=A, cu_seqlens=cu_seqlens, output_dtype=k.dtype)
    w, u = recompute_w_u_fwd(k=k, v=v, beta=beta, A=A, g_cumsum=g, cu_seqlens=cu_seqlens)
    h, v_new, _ = chunk_gated_delta_rule_fwd_h(k=k, w=w, u=u, g=g, initial_state=None, output_final_state=False,
                                               cu_seqlens=cu_seqlens)
    o = chunk_fwd_o(q=q, k=k, v=v_new, h=h, g=g, scale=scale, cu_seqlens=cu_seqlens)
    torch.npu.synchronize()
    return o.float()


def capture_stage(stage: str, shape: dict, chip, host=None) -> list:
    """Capture the kernel launches of one vllm-ascend stage call at ``shape`` (:func:`stage_shape`)
    planned for ``chip`` (:func:`fla_ascend.estimate.model.npu_standin`: its core counts); returns
    ``[("fwd", Launch)]``. ``host``: a :class:`fla_ascend.estimate.model.HostWork` that counts the
    framework ops of the call.

    Raises:
        RuntimeError: vllm-ascend is not importable (:func:`available` says why).
        ValueError: unknown stage.
    """
    from fla_ascend.compiler.capture import capture
    from fla_ascend.estimate.model import npu_standin, record_host

    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    reason = available()
    if reason:
        raise RuntimeError(reason)
    with npu_standin(chip) as drv, _imports():
        drv.npu = True
        with capture(chip) as launches:
            fn, kwargs = _prepare(stage, shape)
            with record_host(host) if host is not None else contextlib.nullcontext():
                fn(**kwargs)
    for la in launches:
        la.group = None
    return [("fwd", la) for la in launches]
