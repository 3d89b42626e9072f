"""A rank's SIGTERM as an exception, for torchrun's ranks (pav_payload.runner) and the plain ones
(pav_payload.plain) alike. Only the standard library: the plain ranks import no torch."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(Exception):
    pass


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """The agent SIGTERMs the other ranks when one fails: make that an exception, so the report says so.

    Signals reach Python only between bytecodes: a rank blocked inside a collective keeps its provisional
    report instead. Outside the body the default action is back, so a late SIGTERM cannot break off the
    final report half written.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(f"received {signal.Signals(signum).name}")
