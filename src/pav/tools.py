"""External programs the driver needs, found or named in a one-line error with the fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from pav.errors import PavError


def find_tool(name: str) -> str | None:
    """PATH first, then beside this interpreter: a venv used without activation still finds its tools."""
    found = shutil.which(name)
    if found:
        return found
    sibling = Path(sys.executable).parent / name
    return str(sibling) if sibling.exists() else None


def require_tool(name: str, fix: str) -> str:
    found = find_tool(name)
    if not found:
        raise PavError(f"{name} not found on PATH; {fix}")
    return found
