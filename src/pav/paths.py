"""Where the project's own files live: roles, playbooks, inventories, thresholds, payload.

A checkout holds them beside src/ (an editable install, or PYTHONPATH=src); a wheel carries a copy of them
as package data in pav/_project/ (setup.py's build_py puts it there); PAV_HOME names another copy.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from pav.errors import PavError

PACKAGE = Path(__file__).resolve().parent
# src/pav/../../: the checkout, when the code runs from one.
CHECKOUT = PACKAGE.parents[1]
# What a wheel installs: the checkout's run-time folders, copied by setup.py (RUNTIME_DIRS there).
INSTALLED = PACKAGE / "_project"
# A folder every copy of the project holds; its absence means the files are not there.
MARKER = "playbooks"


def is_checkout(folder: Path) -> bool:
    """Whether folder is a checkout of this very package: its src/pav is the code running. An installed
    wheel's site-packages/.. may hold a playbooks/ folder of anyone's; it is not taken for one (issue 62)."""
    return (folder / MARKER).is_dir() and (folder / "src" / "pav").resolve() == PACKAGE


def project_root() -> Path:
    """PAV_HOME if set, else the checkout this code runs from, else the copy a wheel installed."""
    env = os.environ.get("PAV_HOME")
    if env:
        return Path(env).resolve()
    if is_checkout(CHECKOUT):
        return CHECKOUT
    return INSTALLED


def from_checkout() -> bool:
    """Whether the files are a checkout's (PAV_HOME counts as one), not the copy inside an installed wheel."""
    return ROOT != INSTALLED


def missing() -> str | None:
    """None when ROOT holds the project's files and only this user (or root) can change them, else one line
    naming where the tool looked, or the folder another account could change, and the fix."""
    if (ROOT / MARKER).is_dir():
        where = "PAV_HOME" if os.environ.get("PAV_HOME") else "the project's files"
        return untrusted(ROOT, where)
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
START_JOB_SH = ROLES / "torch_payload" / "files" / "pav-start-job.sh"


def untrusted(path: Path, what: str) -> str | None:
    """One line when another account could change what lies at path: path, or a folder on the way to it,
    owned by anyone but this user or root, or writable by others (a root-owned sticky folder such as /tmp
    may lie on the way); None when it is safe. Whoever can write the roles, the payload or the state dir
    makes the next run do anything it does, as the user it runs as (root on the hosts)."""
    me = os.geteuid()
    for part in [*reversed(path.parents), path]:
        try:
            info = part.stat()
        except OSError:
            break  # what is not there yet is made by this user
        mode = stat.S_IMODE(info.st_mode)
        sticky_root = part != path and info.st_uid == 0 and mode & stat.S_ISVTX
        if info.st_uid not in (0, me) or (mode & 0o022 and not sticky_root):
            return (
                f"{what} {path}: {part} is owned by {_user(info.st_uid)} (uid {info.st_uid}), mode {mode:o}, "
                f"so another account could change what this run does; it must be owned by {_user(me)}"
                f"{'' if me == 0 else ' or root'} and writable by no one else: chown it or chmod go-w it"
            )
    return None


def refuse_untrusted(path: Path, what: str) -> Path:
    """path, when untrusted() finds nothing; else PavError with its line."""
    line = untrusted(path, what)
    if line:
        raise PavError(line)
    return path


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def make_private(folder: Path) -> Path:
    """The folder, made (or kept) 0700: Terraform's state, kubeconfigs and keys in it are credentials, and
    Terraform writes its state files with the user's umask (0644 under the usual 022). Another account's
    folder is refused, never used (issue 62)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    refuse_untrusted(folder.parent, "state dir")
    if folder.stat().st_uid != os.geteuid():
        info = folder.stat()
        raise PavError(
            f"state dir {folder} is owned by {_user(info.st_uid)} (uid {info.st_uid}), not by this user "
            f"({_user(os.geteuid())}): another account's Terraform state and keys would drive this run; "
            "use a folder of your own (PAV_STATE_DIR) or chown it"
        )
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
