"""Fixtures for the simulated-host tests (scripts/sim-hosts)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def sim_deps():
    """Make sure sshd, ip and MPI are installed (a no-op when they are)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("simulated hosts need root on Linux (namespaces, mounts)")
    result = subprocess.run(
        [str(REPO / "scripts" / "install-sim-deps")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail("scripts/install-sim-deps failed:\n" + result.stdout + result.stderr)
