"""The compile core shared by ``fla-ascend check``, ``fla-ascend estimate`` and ``fla-ascend ir``:
lower a kernel launch with triton-ascend's front end (:mod:`.lower`), compile it with Ascend's own
compiler, ``bishengir-compile`` from PyPI's ``ascendnpu-ir`` (:mod:`.bishengir`), read the facts of
the lowered IR (:mod:`.irscan`) and count what a compiled module does per launch (:mod:`.planeval`).

Needs no workbench library: triton-ascend and ascendnpu-ir (the ``npu-check`` extra) are imported
by the functions that use them."""
