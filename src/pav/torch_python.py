"""The Python that runs the payload where the hosts are this machine (--env local): the driver's own
interpreter when it has torch, else python3 on PATH. A newcomer's torch often lives in a venv or conda env
the driver was not installed into; -e torch_payload_python=PATH still picks one by hand."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

# Finds torch without importing it (an import costs seconds): enough to choose, the configure stage then
# imports it for real and fails naming the Python when it is broken.
_HAS_TORCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"


def choose() -> str:
    """The driver's interpreter when it finds torch, else python3 on PATH when that does; else the driver's,
    so that configure fails naming it and the -e fix."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    python3 = shutil.which("python3")
    if python3 and _finds_torch(python3):
        return python3
    return sys.executable


def _finds_torch(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", _HAS_TORCH], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
