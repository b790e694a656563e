"""Correctness-gated benchmarks behind ``fla-ascend bench`` and the scripts in ``benchmarks/``.

- :mod:`fla_ascend.bench.cases`: named shapes, ``--shapes`` parsing, the op registry (input
  builders, reference functions, providers, counted bytes and flops);
- :mod:`fla_ascend.bench.timing`: device timing, peak memory, copy bandwidth and matmul peak;
- :mod:`fla_ascend.bench.suite`: :func:`run_suite` (gate, then time) and the JSON artifact;
- :mod:`fla_ascend.bench.report`: terminal table, Markdown table and PNG plots;
- :mod:`fla_ascend.bench.layer`: :func:`~fla_ascend.bench.layer.bench_layer`, a whole GatedDeltaNet layer timed;
- :mod:`fla_ascend.bench.cli`: the ``fla-ascend bench`` subcommand.

Importing this package does not import torch or the kernels; the submodules do. Its tables and
plots need rich, NumPy and matplotlib, from the ``lab`` extra (``pip install "fla-ascend[lab]"``);
without them importing this package raises an ``ImportError`` that says so.
"""
from fla_ascend._extras import require as _require

_require(__name__, "numpy", "matplotlib", "rich")
