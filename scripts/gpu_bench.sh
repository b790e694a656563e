#!/usr/bin/env bash
# Full benchmark table on the device machine (H200 image: Python 3.12, torch 2.11, Triton 3.6,
# no network), all providers side by side, one process per (op, shape, mode):
#   bash scripts/gpu_bench.sh                      # everything: anchors + fla defaults, fwd and fwd+bwd
#   bash scripts/gpu_bench.sh --shapes gdn-anchors --modes fwd --budget 500
# flash-linear-attention is installed from the carried wheel (.whl/, see shared/anchors.md) into
# .site/ when present. Writes $OUT/bench.{json,md,png} (and $OUT/parts/) after every case, so a
# run cut short keeps what it measured; prints a compact table at the end. Extra arguments go
# to benchmarks/run_all.py (--ops, --shapes, --modes, --providers, --dtype, --timeout, --budget).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1 && ! PYTHONPATH=.site "$PY" -c "import fla" >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --target .site .whl/*.whl \
    || echo "warning: could not install the carried wheel; fla provider left out" >&2
fi
export PYTHONPATH="$root/.site:$root${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import fla_ascend, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'device', fla_ascend.backend.device_type())"
"$PY" -c "import fla; print('fla importable')" 2>/dev/null || echo "fla not importable: provider left out"
"$PY" benchmarks/run_all.py --out "$OUT" "$@"
status=$?
echo "exit status $status (1 = some case failed its gate or raised; see the note column)"
exit $status
