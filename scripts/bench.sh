#!/usr/bin/env bash
# The main job: a correctness-gated benchmark of the ops on the best available device.
# On a machine with no accelerator it sets up the upstream-Triton environment and runs on
# the Triton interpreter at scaled-down shapes. Extra arguments go to `fla-ascend bench`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if python3 -c "import torch, triton, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
   || python3 -c "import torch_npu" 2>/dev/null; then
  # the lab extra (the benchmark's tables and plots); without a registry (a device image), the
  # package alone, and `fla-ascend` names what is missing
  python3 -m pip install -q --no-build-isolation -e ".[lab]" >&2 \
    || python3 -m pip install -q --no-deps --no-build-isolation -e . >&2 || true
  exec python3 -m fla_ascend.cli bench "$@"
fi
venv=$(bash scripts/setup_env.sh triton | tail -n 1)
exec "$venv/bin/fla-ascend" bench "$@"
