"""Timing, peak memory and machine peaks for the benchmark suite.

- CUDA: ``triton.testing.do_bench`` (CUDA events), median.
- NPU: the same protocol written with ``torch.npu.Event`` (warm up for ``warmup_ms``, then
  time ``rep_ms`` worth of calls one event pair each, clearing the L2-sized buffer between
  calls), median. triton-ascend's own ``do_bench`` is not used because its behaviour changed
  across versions.
- CPU (Triton interpreter): wall-clock median of a few calls; absolute numbers mean nothing
  there, the run checks the suite itself.
"""
from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fla_ascend import backend

__all__ = ["Timer", "make_timer", "measure_peak_memory_mb", "peak_live_bytes", "copy_bandwidth_gbps", "matmul_tflops",
           "synchronize"]


def synchronize() -> None:
    """Wait for the device (no-op on CPU)."""
    if backend.device_type() == "cuda":
        torch.cuda.synchronize()
    elif backend.device_type() == "npu":
        torch.npu.synchronize()


@dataclass
class Timer:
    """How cases are timed on this machine.

    Attributes:
        method: the text recorded as ``meta.timing_method``.
        warmup_ms, rep_ms: do_bench budgets (device); on CPU ``rep_ms`` is unused.
        cpu_runs: timed calls on CPU (median taken).
    """

    method: str
    warmup_ms: float
    rep_ms: float
    cpu_runs: int = 3

    def __call__(self, fn: Callable[[], object], grad_to_none: list[torch.Tensor] | None = None) -> float:
        """Median time of ``fn()`` in milliseconds."""
        kind = backend.device_type()
        if kind == "cuda":
            import triton.testing

            return float(triton.testing.do_bench(
                fn, warmup=self.warmup_ms, rep=self.rep_ms, grad_to_none=grad_to_none, return_mode="median"
            ))
        if kind == "npu":
            return _npu_bench(fn, self.warmup_ms, self.rep_ms, grad_to_none)
        times = []
        for _ in range(self.cpu_runs):
            _clear_grads(grad_to_none)
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return float(statistics.median(times))


def _clear_grads(tensors):
    for x in tensors or ():
        x.grad = None


def _npu_bench(fn, warmup_ms, rep_ms, grad_to_none):
    """do_bench's protocol with NPU events (median of per-call event pairs)."""
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=backend.device())
    fn()
    torch.npu.synchronize()
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.npu.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup_ms / estimate))
    n_repeat = max(1, int(rep_ms / estimate))
    for _ in range(n_warmup):
        fn()
    starts = [torch.npu.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.npu.Event(enable_timing=True) for _ in range(n_repeat)]
    for i in range(n_repeat):
        _clear_grads(grad_to_none)
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.npu.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)))


def make_timer(quick: bool = False) -> Timer:
    """The timer for this machine; ``quick`` shortens the budgets (device: 10/30 ms instead of
    the anchors' 50/200 ms; CPU: 1 timed call instead of the median of 2)."""
    kind = backend.device_type()
    warmup, rep = (10.0, 30.0) if quick else (50.0, 200.0)
    if kind == "cuda":
        return Timer("do_bench median (CUDA events)", warmup, rep)
    if kind == "npu":
        return Timer("do_bench-style median (NPU events)", warmup, rep)
    return Timer("wall-clock median (CPU, Triton interpreter)", 0.0, 0.0, cpu_runs=1 if quick else 2)


def measure_peak_memory_mb(fn: Callable[[], object]) -> float | None:
    """Peak device memory allocated during one ``fn()`` above what was allocated before, in MiB;
    ``None`` on CPU (not measured)."""
    kind = backend.device_type()
    if kind not in ("cuda", "npu"):
        return None
    mod = torch.cuda if kind == "cuda" else torch.npu
    mod.synchronize()
    base = mod.memory_allocated()
    mod.reset_peak_memory_stats()
    fn()
    mod.synchronize()
    return (mod.max_memory_allocated() - base) / 2 ** 20


def peak_live_bytes(fn: Callable[[], object]) -> int:
    """Largest total size of the tensor storages that ``fn()`` allocated and still referenced at
    any moment during the call (bytes), on any device, CPU included.

    Measured with a ``TorchDispatchMode``: every op output on a storage that none of the op's
    inputs uses is counted until no tensor viewing that storage is alive (views and in-place
    results are not new). Tensors ``fn`` only receives are not counted. It sees what PyTorch
    allocates, not the caching allocator's rounding, so on a GPU it is a lower bound of
    :func:`measure_peak_memory_mb`.
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class _Tracker(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.live: dict[int, tuple[int, list]] = {}
            self.peak = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for ptr in [p for p, (_, refs) in self.live.items() if all(r() is None for r in refs)]:
                del self.live[ptr]
            seen = {x.untyped_storage().data_ptr() for x in tree_flatten((args, kwargs))[0]
                    if isinstance(x, torch.Tensor)}
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    if st.data_ptr() in self.live:  # a view of a counted storage keeps it alive
                        self.live[st.data_ptr()][1].append(weakref.ref(t))
                    elif st.data_ptr() not in seen and st.nbytes() > 0:
                        self.live[st.data_ptr()] = (st.nbytes(), [weakref.ref(t)])
            self.peak = max(self.peak, sum(n for n, _ in self.live.values()))
            return out

    tracker = _Tracker()
    with tracker:
        fn()
    return tracker.peak


def copy_bandwidth_gbps(timer: Timer, nbytes: int = 2 ** 30) -> float | None:
    """Device-to-device copy bandwidth in GB/s (1e9 B/s): ``dst.copy_(src)`` of ``nbytes``
    counted as ``2 * nbytes`` moved. ``None`` on CPU."""
    if backend.device_type() not in ("cuda", "npu"):
        return None
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=backend.device()).fill_(1.0)
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    src = dst = None  # free the buffers before returning (the lambda's cells hold them)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def matmul_tflops(timer: Timer, n: int = 8192) -> float | None:
    """bf16 ``n x n x n`` matmul throughput in TFLOP/s (``2 n^3`` flops). ``None`` on CPU."""
    if backend.device_type() not in ("cuda", "npu"):
        return None
    a = torch.randn(n, n, device=backend.device(), dtype=torch.bfloat16)
    b = torch.randn(n, n, device=backend.device(), dtype=torch.bfloat16)
    ms = timer(lambda: a @ b)
    a = b = None  # free the operands before returning (the lambda's cells hold them)
    return 2 * n ** 3 / (ms * 1e-3) / 1e12
