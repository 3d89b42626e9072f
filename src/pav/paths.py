"""Where the project's own files live: roles, playbooks, inventories, thresholds, payload.

A checkout holds them beside src/ (an editable install, or PYTHONPATH=src); a wheel carries a copy of them
as package data in pav/_project/ (setup.py's build_py puts it there); PAV_HOME names another copy.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# src/pav/../../: the checkout, when the code runs from one.
CHECKOUT = PACKAGE.parents[1]
# What a wheel installs: the checkout's run-time folders, copied by setup.py (RUNTIME_DIRS there).
INSTALLED = PACKAGE / "_project"
# A folder every copy of the project holds; its absence means the files are not there.
MARKER = "playbooks"


def project_root() -> Path:
    """PAV_HOME if set, else the checkout this code runs from, else the copy a wheel installed."""
    env = os.environ.get("PAV_HOME")
    if env:
        return Path(env).resolve()
    if (CHECKOUT / MARKER).is_dir():
        return CHECKOUT
    return INSTALLED


def from_checkout() -> bool:
    """Whether the files are a checkout's (PAV_HOME counts as one), not the copy inside an installed wheel."""
    return ROOT != INSTALLED


def missing() -> str | None:
    """None when ROOT holds the project's files, else one line naming where the tool looked and the fix."""
    if (ROOT / MARKER).is_dir():
        return None
    if os.environ.get("PAV_HOME"):
        looked = f"PAV_HOME={ROOT}"
    else:
        looked = f"{CHECKOUT} (a checkout) nor in {INSTALLED} (an installed wheel)"
    return (
        f"the project's files (roles/, playbooks/, inventories/, ...) are not in {looked}; install a wheel "
        "built from a checkout (pip wheel .) or set PAV_HOME to a checkout"
    )


ROOT = project_root()
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
INVENTORIES = ROOT / "inventories"
THRESHOLDS = ROOT / "thresholds"
PAYLOAD = ROOT / "payload"
TERRAFORM = ROOT / "terraform"
ANSIBLE_CFG = ROOT / "ansible" / "ansible.cfg"
SCRIPTS = ROOT / "scripts"
# The check of the tool's folders on a host: the roles run it, the driver's installer pastes it in.
SAFE_DIR_SH = ROLES / "torch_payload" / "files" / "pav-safe-dir.sh"


def make_private(folder: Path) -> Path:
    """The folder, made (or kept) 0700: Terraform's state, kubeconfigs and keys in it are credentials, and
    Terraform writes its state files with the user's umask (0644 under the usual 022)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_uid == os.geteuid():
        folder.chmod(0o700)
    return folder


def own_remote_dir() -> Path:
    """pav_remote_dir where the hosts are this machine and the tool runs as someone other than root: a
    folder under their own home, which no one else can make first ($XDG_STATE_HOME or ~/.local/state)."""
    return _state_base() / "provision-and-validate-host"


def _state_base() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")


def state_dir(env: str) -> Path:
    """Where a provisioning env keeps its Terraform state, never in the repo: PAV_STATE_DIR if set, else
    $XDG_STATE_HOME (or ~/.local/state)/provision-and-validate/ENV."""
    explicit = os.environ.get("PAV_STATE_DIR")
    if explicit:
        return Path(explicit).resolve()
    return _state_base() / "provision-and-validate" / env
