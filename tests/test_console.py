"""The console every fla-ascend command prints through: wide tables in logs and pipes."""
import io

from fla_ascend.console import LOG_WIDTH, make_console


def test_console_width_off_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console(file=io.StringIO()).width == LOG_WIDTH
    assert make_console(file=io.StringIO(), width=90).width == 90  # an explicit width wins
    monkeypatch.setenv("COLUMNS", "123")
    assert make_console(file=io.StringIO()).width == 123  # rich reads COLUMNS itself


def test_console_keeps_the_terminal_width(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console(file=Tty(), force_terminal=True).width != LOG_WIDTH  # rich sizes a terminal itself
