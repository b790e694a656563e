# Sourced by scripts/gpu_bench.sh and scripts/gpu_tier.sh: the set-up both need on a CUDA
# machine (possibly without network). Sets root (and cd's there), OUT (default ./out, created) and PY
# ($PYTHON or python3); installs the wheels placed in .whl/ (flash-linear-attention,
# pytest-xdist, ...; see shared/anchors.md) into .site/ unless the modules named in
# $GPU_ENV_NEEDS already import; exports PYTHONPATH with .site/ and the checkout first. Exits
# with status 2 ("needs a CUDA GPU") on a machine where torch sees no CUDA device.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
PY=${PYTHON:-python3}
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "$(basename "$0") needs a CUDA GPU ($PY sees none: torch.cuda.is_available() is False or torch does not import); nothing was run" >&2
  exit 2
fi
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1 && ! PYTHONPATH=.site "$PY" -c "import ${GPU_ENV_NEEDS:-fla}" >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --target .site .whl/*.whl \
    || echo "warning: could not install the wheels in .whl/" >&2
fi
export PYTHONPATH="$root/.site:$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
