"""Fault injection for tests, by environment variable naming a host index.

PAV_SIM_FAIL_HOST=I: host-up of index I fails after its namespace and sshd exist, so the cleanup path is
what gets exercised. PAV_SIM_DEAF_HOST=I: host I comes up, then its link goes down: it exists (and goes at
teardown like any host) but never answers, like a VM that did not boot.
"""

from __future__ import annotations

import os

from pav.simhosts.errors import SimError

FAIL_HOST = "PAV_SIM_FAIL_HOST"
DEAF_HOST = "PAV_SIM_DEAF_HOST"


def _names(variable: str, index: int) -> bool:
    return os.environ.get(variable, "") == str(index)


def check_fail(name: str, index: int) -> None:
    if _names(FAIL_HOST, index):
        raise SimError(f"host-up {name} (index {index}) failed: injected by {FAIL_HOST}={index}")


def deaf(index: int) -> bool:
    return _names(DEAF_HOST, index)


def deaf_reason(index: int) -> str:
    return f"injected by {DEAF_HOST}={index}"
