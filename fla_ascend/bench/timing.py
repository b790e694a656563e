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
from dataclasses import dataclass
from typing import Callable

import torch

from fla_ascend import backend

__all__ = ["Timer", "make_timer", "measure_peak_memory_mb", "copy_bandwidth_gbps", "matmul_tflops", "synchronize"]


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


def copy_bandwidth_gbps(timer: Timer, nbytes: int = 2 ** 30) -> float | None:
    """Device-to-device copy bandwidth in GB/s (1e9 B/s): ``dst.copy_(src)`` of ``nbytes``
    counted as ``2 * nbytes`` moved. ``None`` on CPU."""
    if backend.device_type() not in ("cuda", "npu"):
        return None
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=backend.device()).fill_(1.0)
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    del src, dst
    return 2 * nbytes / (ms * 1e-3) / 1e9


def matmul_tflops(timer: Timer, n: int = 8192) -> float | None:
    """bf16 ``n x n x n`` matmul throughput in TFLOP/s (``2 n^3`` flops). ``None`` on CPU."""
    if backend.device_type() not in ("cuda", "npu"):
        return None
    a = torch.randn(n, n, device=backend.device(), dtype=torch.bfloat16)
    b = torch.randn(n, n, device=backend.device(), dtype=torch.bfloat16)
    ms = timer(lambda: a @ b)
    del a, b
    return 2 * n ** 3 / (ms * 1e-3) / 1e12
