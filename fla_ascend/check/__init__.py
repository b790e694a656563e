"""Static NPU readiness check: lower each kernel with triton-ascend's front end for an Ascend
chip, read the IR (mix mode, on-chip bytes, gathers, strided DMAs), lint the sources for known
traps, and compare with the UB model. Entry point: ``fla-ascend check`` (:mod:`.cli`); the
lowering runs in a worker process (:mod:`.worker`). See docs/check.md.

Part of the workbench: its reports need rich and matplotlib, from the ``lab`` extra (the
``npu-check`` extra brings them too, with the Ascend compiler); without them importing this
package raises an ``ImportError`` that says so."""
from fla_ascend._extras import require as _require

_require(__name__, "rich", "matplotlib")
