"""A stop signal ends a command with 128 + its number, even where code it interrupted
turned it into another exception."""

from __future__ import annotations

import signal

import pytest

from livesym import cli, interrupts
from livesym.commands import maps
from livesym.interrupts import Interrupted


def _no_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interrupts, "install", lambda: None)  # pytest's own handlers stay


def test_an_interrupt_wrapped_by_the_code_it_hit_ends_as_the_signal(monkeypatch, capsys):
    # GIVEN a command interrupted inside code that re-raised it as something else (Python
    # wraps an exception from __set_name__ in a RuntimeError, as Textual's import met it)
    _no_handlers(monkeypatch)

    def run(_args: object) -> int:
        try:
            raise Interrupted(signal.SIGTERM)
        except KeyboardInterrupt as e:
            raise RuntimeError("Error calling __set_name__") from e

    monkeypatch.setattr(maps, "run", run)
    # WHEN it ends, THEN with the signal's code and one line, no traceback
    assert cli.main(["maps", "1"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "livesym: interrupted (SIGTERM)\n"


def test_a_clean_up_that_fails_after_an_interrupt_ends_as_the_signal(monkeypatch, capsys):
    # GIVEN a clean-up that fails on what the interrupt left half made (a thread joined
    # before it started), raised while the interrupt was handled
    _no_handlers(monkeypatch)

    def run(_args: object) -> int:
        try:
            raise Interrupted(signal.SIGHUP)
        finally:
            raise RuntimeError("cannot join thread before it is started")

    monkeypatch.setattr(maps, "run", run)
    assert cli.main(["maps", "1"]) == 129
    assert capsys.readouterr().err == "livesym: interrupted (SIGHUP)\n"


def test_a_failure_with_no_interrupt_behind_it_is_not_taken_for_one(monkeypatch):
    _no_handlers(monkeypatch)

    def run(_args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(maps, "run", run)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["maps", "1"])


def test_a_held_signal_interrupts_after_the_block_not_inside_it():
    # GIVEN a block that must not be interrupted half way (an import of a C extension)
    before = signal.getsignal(signal.SIGTERM)
    finished = False
    # WHEN SIGTERM arrives inside it
    with pytest.raises(Interrupted) as raised, interrupts.held():
        signal.raise_signal(signal.SIGTERM)
        finished = True
    # THEN the block ran to its end, the interrupt came after it, and the handler is back
    assert finished
    assert raised.value.signum == signal.SIGTERM and raised.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before
