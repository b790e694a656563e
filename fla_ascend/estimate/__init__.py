"""Static NPU time estimates per kernel launch from the compiled plan (``fla-ascend estimate``):
the model (:mod:`.model`), the command with its reports (:mod:`.cli`), the calibration against public
hardware timings (:mod:`.calibration`, with vllm-ascend's stages captured by :mod:`.vllm_ascend`) and
the published timings of the fastest Ascend code shown beside the estimates (:mod:`.published`). See
docs/estimate.md.

Part of the workbench: its reports need rich and matplotlib, from the ``lab`` extra (the
``npu-check`` extra brings them too, with the Ascend compiler); without them importing this
package raises an ``ImportError`` that says so."""
from fla_ascend._extras import require as _require

_require(__name__, "rich", "matplotlib")
