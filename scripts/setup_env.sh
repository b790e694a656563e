#!/usr/bin/env bash
# Create (or reuse) one of the two CPU-tier environments and install fla-ascend into it.
#   scripts/setup_env.sh ascend   -> .venv-ascend : triton-ascend 3.2.0 (CPython 3.10/3.11) and ascendnpu-ir
#                                                   (bishengir-compile, for `fla-ascend check`): the npu-check extra
#   scripts/setup_env.sh triton   -> .venv-triton : upstream Triton (newest release we support): the triton extra
# Both also get the lab (workbench), test and transformers extras, and fla-core 0.6.0 with einops in
# <venv>/fla-site, off the venv's path (tests/integrations/test_fla_backend.py says why and uses it).
# torch comes from `torch==2.13.0` (on this kind of machine a CPU wheel lies on disk; an
# unpinned torch would pull a multi-GB CUDA build). Prints the venv path on its last line.
set -euo pipefail
flavour=${1:?usage: setup_env.sh ascend|triton}
root=$(cd "$(dirname "$0")/.." && pwd)
TORCH_SPEC=${FLA_ASCEND_TORCH:-torch==2.13.0}
TRITON_SPEC=${FLA_ASCEND_TRITON:-triton==3.9.0}
# the transformers integration's tests (tests/integrations) run against this release (about 35 s
# and 180 MB per venv with its dependencies)
TRANSFORMERS_SPEC=${FLA_ASCEND_TRANSFORMERS:-transformers==5.24.0}
# flash-linear-attention for the fla backend's tests; with einops, 1 MB. Not in the venv itself:
# transformers binds fla's kernels whenever fla imports, in place of the PyTorch path its tests compare with
FLA_SPEC=${FLA_ASCEND_FLA:-fla-core==0.6.0}
# extras: lab (the workbench the tests and `fla-ascend bench` use: pandas, matplotlib, rich, NumPy),
# test, transformers, and the Triton: npu-check (triton-ascend, ascendnpu-ir) or triton (upstream,
# pinned to $TRITON_SPEC); pyproject.toml says why the Triton is an extra
case "$flavour" in
  ascend) venv="$root/.venv-ascend"; extras="lab,test,npu-check,transformers"; extra=() ;;
  triton) venv="$root/.venv-triton"; extras="lab,test,triton,transformers"; extra=("$TRITON_SPEC") ;;
  *) echo "unknown flavour $flavour (ascend|triton)" >&2; exit 2 ;;
esac
py=""
for cand in python3.11 python3.10; do
  if command -v "$cand" >/dev/null 2>&1; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "need CPython 3.10 or 3.11 (triton-ascend 3.2.0 wheels exist only for those)" >&2; exit 1; }
stamp="$venv/.fla-ascend-installed"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$0" -nt "$stamp" ]; then
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$TORCH_SPEC" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check ${extra[@]+"${extra[@]}"} "$TRANSFORMERS_SPEC" \
    -e "$root[$extras]" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$venv/fla-site" \
    "$FLA_SPEC" einops >&2
  touch "$stamp"
fi
echo "$venv"
