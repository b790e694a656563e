"""Nesting ``enable()`` handles shared by the integrations (:mod:`.transformers`, :mod:`.fla`).

Each integration counts what its open handles route; a handle closing releases its share, and
``disable()`` ends every open handle at once by starting a new generation, after which older
handles close without effect.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any


class Handles:
    """The handles of one integration: ``release(token)`` undoes what one ``enable`` call counted."""

    def __init__(self, release: Callable[[Any], None]):
        self._release = release
        self.generation = 0

    def open(self, token: Any) -> Handle:
        """A handle whose exit releases ``token``, unless :meth:`end_all` ran in between."""
        return Handle(self, token)

    def end_all(self) -> None:
        """Close every open handle without releasing its token (the caller resets its counts)."""
        self.generation += 1


class Handle(contextlib.AbstractContextManager):
    """Returned by an integration's ``enable``; as a context manager it undoes that call on exit
    (releasing it once: a second exit, or one after ``disable()``, does nothing)."""

    def __init__(self, owner: Handles, token: Any):
        self._owner = owner
        self._token = token
        self._generation = owner.generation
        self.open = True

    def __exit__(self, *exc) -> None:
        if not self.open or self._generation != self._owner.generation:
            return
        self.open = False
        self._owner._release(self._token)
