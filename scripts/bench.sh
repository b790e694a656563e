#!/usr/bin/env bash
# The main job: a correctness-gated benchmark of the ops on the best available device.
#
# On a GPU or NPU (python3 has torch and sees one): every anchor shape (--shapes anchors), fwd and
# fwd+bwd, providers fla_ascend, torch_ref (where its size limit allows) and flash-linear-attention
# when it imports, through benchmarks/run_all.py with one process per op (docs/bench.md, "The main
# job"). Writes $OUT/bench.{json,md,png} (default ./out) after every case. Arguments go to
# benchmarks/run_all.py after those defaults, so they add to them or replace them:
#   bash scripts/bench.sh                              # the anchor job
#   bash scripts/bench.sh --compare HEAD~1             # beside an earlier revision, x fla_ascend@<commit>
#   bash scripts/bench.sh --ops l2norm --modes fwd     # a part of it
#   bash scripts/bench.sh --isolate case               # one process per (op, shape, mode)
# On a machine with no accelerator it sets up the upstream-Triton environment and runs
# `fla-ascend bench` on the Triton interpreter at scaled-down shapes (seconds); there extra
# arguments go to `fla-ascend bench`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if python3 -c "import torch, triton, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  accel=cuda
elif python3 -c "import torch_npu" 2>/dev/null; then
  accel=npu
else
  accel=
fi
if [ -n "$accel" ]; then
  # the lab extra (the benchmark's tables and plots), unless its packages import already; without a
  # registry (a device image), the package alone, and `fla-ascend` names what is missing
  if ! python3 -c "import numpy, pandas, matplotlib, rich" 2>/dev/null; then
    python3 -m pip install -q --no-build-isolation -e ".[lab]" >&2 \
      || python3 -m pip install -q --no-deps --no-build-isolation -e . >&2 || true
  fi
  # flash-linear-attention's autotune results kept on disk (Triton's cache) from one run to the next
  export TRITON_CACHE_AUTOTUNING=${TRITON_CACHE_AUTOTUNING:-1}
  if [ "$accel" = cuda ]; then
    # OUT (default ./out), PYTHONPATH with .site/ and this checkout; a flash-linear-attention wheel
    # placed in .whl/ is installed into .site/
    PYTHON=python3 GPU_ENV_NEEDS=fla source scripts/gpu_env.sh
  else
    OUT=${OUT:-$root/out}
    mkdir -p "$OUT"
    export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  fi
  exec python3 benchmarks/run_all.py --out "$OUT" --shapes anchors --modes fwd,fwdbwd "$@"
fi
venv=$(bash scripts/setup_env.sh triton | tail -n 1)
exec "$venv/bin/fla-ascend" bench "$@"
