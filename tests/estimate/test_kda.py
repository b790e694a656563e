"""``fla-ascend estimate --against fla``: a missing import of flash-linear-attention's ops is named
before any work (on the CPU, nothing imported)."""
from __future__ import annotations

import importlib.util
import types

from fla_ascend.estimate import model as M


def test_fla_available_names_a_missing_einops(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        if name == "fla":
            return types.SimpleNamespace(submodule_search_locations=[])
        if name == "einops":
            return None
        return real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    reason = M.fla_available()
    assert reason and "einops" in reason and "pip install einops" in reason
