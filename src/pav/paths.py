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


def make_private(folder: Path) -> Path:
    """The folder, made (or kept) 0700: Terraform's state, kubeconfigs and keys in it are credentials, and
    Terraform writes its state files with the user's umask (0644 under the usual 022)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_uid == os.geteuid():
        folder.chmod(0o700)
    return folder
