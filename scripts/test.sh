#!/usr/bin/env bash
# The CPU test tier, run twice: under triton-ascend 3.2.0 and under upstream Triton, both on
# the Triton interpreter; then the NPU check: every representative launch lowered by triton-ascend
# and compiled by bishengir-compile (ascendnpu-ir) for Ascend910B2 (A2/A3) and Ascend910_9599 (A5),
# FLA_ASCEND_CHECK_JOBS compiles at a time, each killed after FLA_ASCEND_COMPILE_TIMEOUT s
# (docs/check.md: why the representative matrix, and the full one's command); before the upstream
# Triton tier, a plain venv with torch and fla-ascend[triton] alone (scripts/bare_install_check.sh;
# FLA_ASCEND_BARE_INSTALL=0 skips it); first, ruff over the tree (ruff.toml). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
status=0
for flavour in ascend triton; do
  venv=$(bash scripts/setup_env.sh "$flavour" | tail -n 1)
  if [ "$flavour" = ascend ]; then
    echo "=== lint: ruff check (ruff.toml)"
    "$venv/bin/python" -m ruff check --output-format concise . || status=1
  fi
  if [ "$flavour" = triton ] && [ "${FLA_ASCEND_BARE_INSTALL:-1}" != 0 ]; then
    # about 40 s, after setup_env.sh has fetched Triton: a plain venv with torch and fla-ascend[triton]
    # only (tests/test_packaging.py checks the same inside the test venvs by blocking the workbench's packages)
    echo "=== bare install: the kernels with torch and Triton alone"
    bash scripts/bare_install_check.sh 2>&1 | grep -v "^WARNING: Location 'file://" || status=1
  fi
  echo "=== CPU tier with $flavour ($("$venv/bin/python" -c 'import importlib.metadata as m
for d in ("triton-ascend", "triton"):
    try: print(d, m.version(d)); break
    except m.PackageNotFoundError: pass'))"
  # two workers (pytest-xdist) with one thread each: the interpreter is single-threaded Python
  OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -q -n "${FLA_ASCEND_TEST_WORKERS:-2}" -m "not gpu and not slow" \
    -p no:cacheprovider "$@" || status=1
  if [ "$flavour" = ascend ]; then
    echo "=== NPU check: triton-ascend lowering + bishengir-compile, Ascend910B2 and Ascend910_9599"
    "$venv/bin/python" -m fla_ascend.cli check --jobs "${FLA_ASCEND_CHECK_JOBS:-2}" \
      --compile-timeout "${FLA_ASCEND_COMPILE_TIMEOUT:-120}" || status=1
  fi
done
exit $status
