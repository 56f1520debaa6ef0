"""Stop signals: SIGINT, SIGTERM and SIGHUP end a session the same careful way.

Outside an event loop (start-up, building the demo, printing a report) SIGTERM
and SIGHUP raise ``Interrupted``, a KeyboardInterrupt, so every ``finally`` that
detaches a sampler or stops a launched target runs, as it does for Ctrl-C. While a
session runs, ``routed`` sends them to the session's own handler instead, and
puts the previous handlers back afterwards.
A signal the user chose to ignore (``nohup``) stays ignored.

Some code does not survive an exception raised at an arbitrary bytecode: a C
extension's module set-up (orjson's dereferences the NULL that a call interrupted
inside it returns: a segmentation fault), or Textual's driver half started. ``held``
keeps stop signals out of such a block and interrupts right after it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived outside an event loop; exit with 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install() -> None:
    """SIGTERM and SIGHUP interrupt like Ctrl-C (unless ignored)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise)


@contextmanager
def routed(handler: Callable[[int], None]) -> Iterator[None]:
    """While inside, each stop signal calls ``handler(signum)`` instead.

    The handler runs in the main thread between two bytecodes, even while an event
    loop there is busy or blocked, so it must only set flags and hand work to the
    loop (``loop.call_soon_threadsafe``). Unlike ``loop.add_signal_handler`` this
    still reaches a loop that never gets back to its selector.
    """
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    mine = [sig for sig in STOP_SIGNALS if saved[sig] is not signal.SIG_IGN]
    for sig in mine:
        signal.signal(sig, lambda signum, _frame: handler(signum))
    try:
        yield
    finally:
        for sig in mine:
            previous = saved[sig]
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


@contextmanager
def held() -> Iterator[None]:
    """Stop signals that arrive inside wait until the block is done, then interrupt
    as they would have (the first one's ``Interrupted``). For imports of modules that
    load C extensions, which take a fraction of a second."""
    arrived: list[int] = []
    with routed(arrived.append):
        yield
    if arrived:
        raise Interrupted(arrived[0])
