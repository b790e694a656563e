"""IR capture of an op's kernels at every compilation stage, and listing / diffing of captures
(``fla-ascend ir``): :mod:`.capture` and the command (:mod:`.cli`). See docs/round.md.

Part of the workbench: it reads the benchmark's shape syntax, so it needs the ``lab`` extra;
without it importing this package raises an ``ImportError`` that says so."""
from fla_ascend._extras import require as _require

_require(__name__, "numpy", "rich")
