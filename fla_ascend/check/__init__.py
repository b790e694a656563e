"""Static NPU readiness check: lower each kernel with triton-ascend's front end for an Ascend
chip, read the IR (mix mode, on-chip bytes, gathers, strided DMAs), lint the sources for known
traps, and compare with the UB model. Entry point: ``fla-ascend check`` (:mod:`.cli`); the
lowering runs in a worker process (:mod:`.worker`). See docs/check.md."""
