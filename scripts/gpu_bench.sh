#!/usr/bin/env bash
# Full benchmark table on a CUDA machine (measured on an H200 with Python 3.12, torch 2.11,
# Triton 3.6), all providers side by side, one process per op (--isolate case: one per
# (op, shape, mode)); the main job, scripts/bench.sh, is the same runner at the anchor shapes:
#   bash scripts/gpu_bench.sh                      # everything: anchors + fla defaults, fwd and fwd+bwd
#   bash scripts/gpu_bench.sh --shapes gdn-anchors --modes fwd --budget 500
#   bash scripts/gpu_bench.sh --shapes anchors --compare HEAD~1
# flash-linear-attention is installed from a wheel placed in .whl/ (for a machine without
# network) into .site/ when present. Writes $OUT/bench.{json,md,png} (and $OUT/parts/) after every case, so a
# run cut short keeps what it measured; prints a compact table at the end. Extra arguments go
# to benchmarks/run_all.py (--ops, --shapes, --modes, --providers, --dtype, --isolate, --compare,
# --timeout, --budget). flash-linear-attention's autotune results are kept in Triton's on-disk
# cache between runs (TRITON_CACHE_AUTOTUNING=1 unless set).
set -uo pipefail
GPU_ENV_NEEDS=fla source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_AUTOTUNING=${TRITON_CACHE_AUTOTUNING:-1}
"$PY" -c "import fla_ascend, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'device', fla_ascend.backend.device_type())"
"$PY" -c "import fla; print('fla importable')" 2>/dev/null || echo "fla not importable: provider left out"
"$PY" benchmarks/run_all.py --out "$OUT" "$@"
status=$?
echo "exit status $status (1 = some case failed its gate or raised; see the note column)"
exit $status
