#!/usr/bin/env bash
# The GPU correctness tier on a CUDA machine (measured on an H200: Python 3.12, torch
# 2.11, Triton 3.6, no network), in three parts so that a slow or faulting part cannot hide the
# others' results:
#   1. every gpu test except the int32-limit test and the flash-linear-attention ones, 4 workers,
#      verbose (one line per test as it finishes, so a run cut short still names its failures);
#   2. the int32-limit test (long_t) alone: it holds about 70 GB;
#   3. the flash-linear-attention tests (its first-use autotune takes minutes per shape).
# flash-linear-attention comes from wheels placed in .whl/ (installed into .site/), as in
# scripts/gpu_bench.sh. Logs go to $OUT (default ./out): gpu_tier.log, gpu_long_t.log, gpu_fla.log;
# a summary is printed. Extra arguments go to every pytest call (e.g. -k K100).
#   bash scripts/gpu_tier.sh                 # all three parts
#   PARTS=1 bash scripts/gpu_tier.sh         # only the main part (PARTS=13, 2, ...)
set -uo pipefail
GPU_ENV_NEEDS="fla, xdist" source "$(dirname "$0")/gpu_env.sh"
PARTS=${PARTS:-123}
workers=()
"$PY" -c "import xdist" >/dev/null 2>&1 && workers=(-n "${GPU_TIER_WORKERS:-4}")
common=(-m gpu tests -p no:cacheprovider -o addopts= -rfE)
status=0
part() {  # part NAME LOG PYTEST_ARGS...
  local name=$1 log=$2; shift 2
  local t0=$SECONDS
  "$PY" -m pytest "${common[@]}" "$@" > "$OUT/$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s ($log)"
  grep -E "^(FAILED|ERROR) |node down|[0-9]+ (passed|failed|skipped)" "$OUT/$log" | cut -c1-240 | tail -25
  [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || status=1  # 5: nothing collected (e.g. no fla)
}
fla_tests="side_by_side_with_fla or fla_provider"
[[ $PARTS == *1* ]] && part "main" gpu_tier.log -v "${workers[@]}" --timeout 300 -k "not long_t and not ($fla_tests)" "$@"
[[ $PARTS == *2* ]] && part "long_t" gpu_long_t.log --timeout 300 -k long_t "$@"
[[ $PARTS == *3* ]] && part "flash-linear-attention" gpu_fla.log -v --timeout 900 -k "$fla_tests" "$@"
exit $status
