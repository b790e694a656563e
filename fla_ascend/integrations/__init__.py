"""Routes other libraries' kernel calls to fla-ascend's ops: ``transformers`` (Hugging Face models'
kernel names) and ``fla`` (a backend of flash-linear-attention's own registry)."""
