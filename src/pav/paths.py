"""Where the project's own files live: roles, playbooks, inventories, thresholds, payload."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout that holds roles/ and playbooks/ (installed editable, or PAV_HOME)."""
    env = os.environ.get("PAV_HOME")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


ROOT = project_root()
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
INVENTORIES = ROOT / "inventories"
THRESHOLDS = ROOT / "thresholds"
PAYLOAD = ROOT / "payload"
TERRAFORM = ROOT / "terraform"
ANSIBLE_CFG = ROOT / "ansible" / "ansible.cfg"
