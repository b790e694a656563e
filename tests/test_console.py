"""The console every fla-ascend command prints through: wide tables in logs and pipes."""
import io
import sys

import fla_ascend.console as C
from fla_ascend.console import LOG_WIDTH, make_console


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_console_width_off_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console(file=io.StringIO()).width == LOG_WIDTH
    assert make_console(file=io.StringIO(), width=90).width == 90  # an explicit width wins
    monkeypatch.setenv("COLUMNS", "123")
    assert make_console(file=io.StringIO()).width == 123  # rich reads COLUMNS itself
    monkeypatch.setenv("COLUMNS", "")
    assert make_console(file=io.StringIO()).width == LOG_WIDTH  # set but empty: as if unset


def test_console_width_follows_the_stream_it_writes(monkeypatch):
    """A terminal is left to rich (no width passed); with ``stderr=True`` it is stderr that is
    asked, not stdout (``fla-ascend bench`` prints its progress there)."""
    made = []
    monkeypatch.setattr(C, "_Console", lambda **kw: made.append(kw) or kw)
    monkeypatch.delenv("COLUMNS", raising=False)
    make_console(file=_Tty())
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", _Tty())
    make_console(stderr=True)  # stderr a terminal, stdout redirected
    monkeypatch.setattr(sys, "stdout", _Tty())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    make_console(stderr=True)  # `2> log` from a terminal
    assert ["width" in kw for kw in made] == [False, False, True]
