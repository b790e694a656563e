"""Routes other libraries' kernel calls to fla-ascend's ops (``transformers``)."""
