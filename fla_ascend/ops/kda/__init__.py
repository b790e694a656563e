"""Kimi Delta Attention (KDA): the gated delta rule with a per-channel decay ``g`` ``[B, T, HV, K]``."""
