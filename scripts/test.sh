#!/usr/bin/env bash
# The CPU test tier, run twice: under triton-ascend 3.2.0 and under upstream Triton, both on
# the Triton interpreter; then the static NPU readiness check. Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
status=0
for flavour in ascend triton; do
  venv=$(bash scripts/setup_env.sh "$flavour" | tail -n 1)
  echo "=== CPU tier with $flavour ($("$venv/bin/python" -c 'import importlib.metadata as m
for d in ("triton-ascend", "triton"):
    try: print(d, m.version(d)); break
    except m.PackageNotFoundError: pass'))"
  # two workers (pytest-xdist) with one thread each: the interpreter is single-threaded Python
  OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -q -n "${FLA_ASCEND_TEST_WORKERS:-2}" -m "not gpu and not slow" \
    -p no:cacheprovider "$@" || status=1
  if [ "$flavour" = ascend ]; then
    echo "=== static NPU readiness check (triton-ascend front end)"
    "$venv/bin/python" -m fla_ascend.cli check --chip Ascend910B2 --chip Ascend910B3 || status=1
  fi
done
exit $status
