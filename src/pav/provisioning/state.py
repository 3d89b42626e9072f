"""Each provisioning env keeps its Terraform state in one documented folder, never in the repo."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir(env: str) -> Path:
    """PAV_STATE_DIR if set, else $XDG_STATE_HOME (or ~/.local/state)/provision-and-validate/ENV."""
    explicit = os.environ.get("PAV_STATE_DIR")
    if explicit:
        return Path(explicit).resolve()
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "provision-and-validate" / env
