"""Processes of this machine found by an entry of their environment (Linux's /proc; elsewhere none).

Every process a driver starts, and everything those start, inherit its environment: an entry there marks
a run's processes wherever they went (their own sessions, Ansible's workers, ssh, a local launch)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

# PAV_DRIVER=RUN_ID in the environment of everything a run's driver starts (pav.reaper ends them with it).
DRIVER_MARKER = "PAV_DRIVER"


def marked(entry: str) -> list[int]:
    """Live processes whose environment holds entry (NAME=value), this one left out."""
    proc = Path("/proc")
    found = []
    for pid in (p for p in proc.iterdir() if p.name.isdigit()) if proc.is_dir() else []:
        try:
            if int(pid.name) != os.getpid() and entry.encode() in (pid / "environ").read_bytes().split(b"\0"):
                found.append(int(pid.name))
        except (OSError, ValueError):
            continue
    return found


def named(needle: str) -> list[int]:
    """Live processes whose command line holds needle (ssh's ControlPersist masters rewrite theirs, and
    their environment with it, to "ssh: SOCKET [mux]": a socket's path finds them)."""
    proc = Path("/proc")
    found = []
    for pid in (p for p in proc.iterdir() if p.name.isdigit()) if proc.is_dir() else []:
        try:
            if int(pid.name) != os.getpid() and needle.encode() in (pid / "cmdline").read_bytes():
                found.append(int(pid.name))
        except (OSError, ValueError):
            continue
    return found


def kill(pids: list[int]) -> list[int]:
    """SIGKILL each; the pids it killed."""
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    return killed


def kill_marked(entry: str) -> list[int]:
    """SIGKILL every process whose environment holds entry; the pids it killed."""
    return kill(marked(entry))


def alive(pid: int) -> bool:
    """Whether pid runs (a zombie, dead but not yet waited for, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
