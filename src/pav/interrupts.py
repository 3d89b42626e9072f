"""SIGINT/SIGTERM become a request to stop: the running playbook is cancelled, then teardown runs."""

from __future__ import annotations

import signal
import threading

from pav.errors import Interrupted

_requested: list[int] = []
CANCEL = threading.Event()
_wrapping_up = threading.Event()


def install() -> None:
    _wrapping_up.clear()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _handler)


def _handler(signum: int, _frame: object) -> None:
    if not _requested:
        _requested.append(signum)
    if not _wrapping_up.is_set():
        CANCEL.set()


def wrapping_up() -> None:
    """Collect, report and teardown are starting: let their playbooks run, and keep them running through
    a second Ctrl-C (a cancelled teardown would leave hosts behind)."""
    _wrapping_up.set()
    CANCEL.clear()


def raise_if_requested() -> None:
    if _requested:
        raise Interrupted(_requested[0])


def requested() -> bool:
    return bool(_requested)


def interruption() -> Interrupted | None:
    """The Interrupted error for the first signal that arrived, if one did."""
    return Interrupted(_requested[0]) if _requested else None
