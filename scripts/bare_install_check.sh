#!/usr/bin/env bash
# The kernels install and run with torch and Triton alone: a plain venv (no system site packages)
# gets torch ($FLA_ASCEND_TORCH, default torch==2.13.0, as scripts/setup_env.sh) and then
# fla-ascend[triton] built from a copy of this tree (Triton pinned to $FLA_ASCEND_TRITON, default
# triton==3.9.0, so pip takes what setup_env.sh already downloaded). From outside the tree it checks
# that the metadata's unconditional dependency is torch alone, that fla_ascend, ops, modules,
# layers and integrations.transformers import without pandas, matplotlib, rich or transformers and
# an op runs, that every workbench package raises an ImportError naming the lab extra, and that
# `fla-ascend` says what to install. About 40 s and 2 GB of disk (removed afterwards).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
TORCH_SPEC=${FLA_ASCEND_TORCH:-torch==2.13.0}
TRITON_SPEC=${FLA_ASCEND_TRITON:-triton==3.9.0}
py=""
for cand in python3.11 python3.10; do
  if command -v "$cand" >/dev/null 2>&1; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "need CPython 3.10 or 3.11" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
# the tree as git sees it (tracked and new files, nothing ignored): no venvs, no build outputs
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) \
    | tar -xf - -C "$tmp/src"
else
  (cd "$root" && tar -cf - --exclude='./.venv*' --exclude=./build --exclude='*.egg-info' .) | tar -xf - -C "$tmp/src"
fi
"$py" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "$TORCH_SPEC" >&2
# setuptools comes with torch: no build isolation, so nothing else is fetched to build the wheel
"${pip[@]}" --no-build-isolation "$TRITON_SPEC" "$tmp/src[triton]" >&2
cd "$tmp"
"$tmp/venv/bin/python" - <<'EOF'
import importlib
import importlib.metadata as md
import importlib.util
import re
import sys

unconditional = sorted(re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in md.requires("fla-ascend") if "extra ==" not in r)
assert unconditional == ["torch"], unconditional
for name in ("pandas", "matplotlib", "rich", "transformers", "einops"):
    assert importlib.util.find_spec(name) is None, f"{name} is installed in the bare venv"

import torch  # noqa: E402

import fla_ascend  # noqa: E402
import fla_ascend.integrations.transformers  # noqa: E402, F401
import fla_ascend.layers  # noqa: E402, F401
import fla_ascend.modules  # noqa: E402, F401
from fla_ascend.ops import chunk_gated_delta_rule, l2norm  # noqa: E402

assert fla_ascend.__file__.startswith(sys.prefix), fla_ascend.__file__
q, k = l2norm(torch.randn(1, 16, 2, 32)), l2norm(torch.randn(1, 16, 2, 32))
o, _ = chunk_gated_delta_rule(q, k, torch.randn(1, 16, 2, 32), torch.rand(1, 16, 2).log(), torch.rand(1, 16, 2))
assert o.shape == (1, 16, 2, 32) and bool(torch.isfinite(o).all())
for name in ("fla_ascend.profiling", "fla_ascend.check", "fla_ascend.bench", "fla_ascend.round", "fla_ascend.console"):
    try:
        importlib.import_module(name)
    except ImportError as e:
        assert str(e).startswith(f"{name} needs ") and 'pip install "fla-ascend[lab]"' in str(e), e
    else:
        raise AssertionError(f"{name} imported without the lab extra")
print("bare install: requires", unconditional, "; ops ran; the workbench names the lab extra")
EOF
set +e
out=$("$tmp/venv/bin/fla-ascend" info 2>&1)
status=$?
set -e
[ "$status" = 1 ] && [[ "$out" == *'pip install "fla-ascend[lab]"'* ]] || { echo "fla-ascend info: status $status: $out" >&2; exit 1; }
echo "bare install: fla-ascend info exits 1 naming the lab extra"
