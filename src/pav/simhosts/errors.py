"""How sim-hosts reports: lines on stderr that start with the program's name."""

from __future__ import annotations

import sys

PROG = "sim-hosts"


class SimError(Exception):
    """A failure; its message is the one line printed (`sim-hosts: MESSAGE`) before the command exits 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def log(message: str) -> None:
    """Progress and diagnostics; stdout is kept for machine-readable output (record paths, list lines)."""
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
