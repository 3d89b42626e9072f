"""SIGINT/SIGTERM become a request to stop (pav.interrupts): the first signal is the one the run reports,
it cancels the running playbook, and once wrap-up starts a further Ctrl-C cancels nothing (teardown must
finish). Real signals, sent to this process."""

from __future__ import annotations

import signal

import pytest

from pav import interrupts
from pav.errors import Interrupted
from tests.driver.signals import pav_handlers


def test_no_signal_no_request() -> None:
    with pav_handlers():
        assert not interrupts.requested()
        assert interrupts.interruption() is None
        interrupts.raise_if_requested()  # nothing to raise
        assert not interrupts.CANCEL.is_set()


def test_the_first_signal_is_kept_and_cancels_the_playbook() -> None:
    with pav_handlers():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        assert interrupts.requested() and interrupts.CANCEL.is_set()
        with pytest.raises(Interrupted, match="interrupted by SIGTERM") as raised:
            interrupts.raise_if_requested()
        assert raised.value.exit_code == 128 + signal.SIGTERM
        stop = interrupts.interruption()
        assert isinstance(stop, Interrupted) and str(stop) == "interrupted by SIGTERM"


def test_during_wrap_up_a_signal_cancels_nothing() -> None:
    with pav_handlers():
        signal.raise_signal(signal.SIGINT)
        interrupts.wrapping_up()
        assert not interrupts.CANCEL.is_set()  # the playbooks of collect, report and teardown run
        signal.raise_signal(signal.SIGINT)  # a second Ctrl-C
        assert not interrupts.CANCEL.is_set()
        assert str(interrupts.interruption()) == "interrupted by SIGINT"


def test_install_starts_a_run_that_is_not_wrapping_up() -> None:
    with pav_handlers():
        interrupts.wrapping_up()
        interrupts.install()
        signal.raise_signal(signal.SIGINT)
        assert interrupts.CANCEL.is_set()
        assert signal.getsignal(signal.SIGTERM) is signal.getsignal(signal.SIGINT)
