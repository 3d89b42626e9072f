"""The Python that runs Ansible's modules where the hosts are this machine (--env local): the system's
/usr/bin/python3 when ansible-core can use it, else the driver's own interpreter. Every module run starts
that Python afresh, and a torch venv's start runs its .pth hooks (a coverage hook, numba's CUDA redirector on
the lent H100 box: a module run took 0.43-0.52 s there with the venv's Python, 0.26-0.31 s with the
system's; docs/benchmarks.md). -e ansible_python_interpreter=PATH still picks one by hand."""

from __future__ import annotations

import subprocess
import sys

SYSTEM = "/usr/bin/python3"
# The oldest Python ansible-core 2.19 runs modules with.
_USABLE = "import sys; sys.exit(sys.version_info < (3, 8))"


def choose(system: str = SYSTEM) -> str:
    return system if _usable(system) else sys.executable


def _usable(python: str) -> bool:
    try:
        return subprocess.run([python, "-S", "-c", _USABLE], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
