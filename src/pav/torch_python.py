"""The Python that runs the payload where the hosts are this machine (--env local): the driver's own
interpreter when it has torch, else python3 on PATH. A newcomer's torch often lives in a venv or conda env
the driver was not installed into; -e torch_payload_python=PATH still picks one by hand. Where neither has
torch, a run that configures or validates stops before its first stage, naming the install that gives the
driver's Python the `local` extra's torch (it failed 13 s in, in configure, with a fix that left it out)."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, requires

from pav import paths

# Finds torch without importing it (an import costs seconds): enough to choose, the configure stage then
# imports it for real and fails naming the Python when it is broken.
_HAS_TORCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
DISTRIBUTION, EXTRA = "provision-and-validate", "local"


def choose() -> str | None:
    """The driver's interpreter when it finds torch, else python3 on PATH when that does; None where
    neither does."""
    if _driver_has_torch():
        return sys.executable
    python3 = shutil.which("python3")
    if python3 and _finds_torch(python3):
        return python3
    return None


def no_torch(env: str) -> str:
    """The one line for a run whose payload Python has no torch: where it looked, and the fix as a command
    that runs as printed."""
    python3 = shutil.which("python3") or "none"
    return (
        f"env {env} runs the payload on this machine and needs torch, which neither the driver's Python "
        f"({sys.executable}) nor python3 on PATH ({python3}) has: install the {EXTRA} extra's torch into the "
        f"driver's Python ({install_command()}; what `pip install '{DISTRIBUTION}[{EXTRA}]'` installs), or "
        "pass -e torch_payload_python=PATH of a Python that has torch"
    )


def install_command() -> str:
    """pip, of the driver's Python, installing the `local` extra's requirements: the extra itself names a
    distribution that may be on no index (a wheel from dist/ installs it), its pinned torch is on one."""
    wanted = " ".join(shlex.quote(r) for r in local_extra())
    return f"{shlex.quote(sys.executable)} -m pip install {wanted}"


def local_extra() -> list[str]:
    """The `local` extra's requirements (torch, pinned: a looser one pulls a multi-GB CUDA build), as the
    installed distribution records them, else as pyproject.toml declares them (a checkout on PYTHONPATH)."""
    marker = f'extra == "{EXTRA}"'
    try:
        found = [r.split(";")[0].strip() for r in requires(DISTRIBUTION) or [] if marker in r]
    except PackageNotFoundError:
        found = []
    return found or _declared()


def _declared() -> list[str]:
    import tomllib

    try:
        project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]
        return [str(r) for r in project["optional-dependencies"][EXTRA]]
    except (OSError, KeyError, ValueError):
        return ["torch"]


def _driver_has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _finds_torch(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", _HAS_TORCH], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
