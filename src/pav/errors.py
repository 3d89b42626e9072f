"""Errors a user can act on. Raised anywhere, caught once in the CLI."""

from __future__ import annotations


class PavError(Exception):
    """A run that could not go on. The message names the problem and the fix, on one line."""

    exit_code = 2


class Interrupted(PavError):
    """SIGINT or SIGTERM arrived; teardown still runs."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum
