"""Signal handling for in-process tests: the CLI installs pav's handlers once per process, a test run is one
process for many runs, so each test that installs them gives the previous handlers and pav's state back."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

from pav import interrupts

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def pav_handlers() -> Iterator[None]:
    """pav's SIGINT/SIGTERM handlers while the block runs, as cli.main installs them."""
    with handlers_given_back():
        interrupts.install()
        yield


@contextmanager
def handlers_given_back() -> Iterator[None]:
    """Whatever the block installs (cli.main installs pav's handlers), the handlers before it and a pav
    no signal reached are back after it."""
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        forget()


def forget() -> None:
    """Back to a process no signal reached and no wrap-up started. The module keeps this state for the one
    run a CLI process makes and offers no reset, so the test reaches into it."""
    interrupts._requested.clear()
    interrupts._wrapping_up.clear()
    interrupts.CANCEL.clear()
