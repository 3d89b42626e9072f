"""A lock file held for a run's life (flock): the kernel lets it go when the run's driver exits, however it
exits. The file names its holder, so a run that finds it taken can say by whom."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

# Locks this process holds, by path.
_HELD: dict[Path, int] = {}


@dataclass(frozen=True)
class Holder:
    run_id: str
    run_dir: str
    pid: int
    by: str  # user@host
    since: str  # UTC, ISO 8601

    def describe(self) -> str:
        return f"run {self.run_id} (pid {self.pid}, {self.by}, since {self.since})"

    @classmethod
    def parse(cls, data: object) -> Holder | None:
        if not isinstance(data, dict):
            return None
        try:
            fields = (str(data["run_id"]), str(data["run_dir"]), int(data["pid"]))
            return cls(*fields, by=str(data["by"]), since=str(data["since"]))
        except (KeyError, TypeError, ValueError):
            return None


def take(path: Path, holder: Holder) -> Holder | None:
    """Hold the lock at path and write holder into it; None once held, else who holds it (the file as
    read; a holder caught between taking it and writing itself reads as one with pid 0)."""
    fd = _open(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = read(path) or Holder("(unknown)", "", 0, "?", "?")
        os.close(fd)
        return other
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(asdict(holder)) + "\n").encode(), 0)
    _HELD[path] = fd
    return None


def _open(path: Path) -> int:
    """The lock file, made with its folder; again where another run removed that folder, found empty, between
    the two."""
    for _ in range(3):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            continue
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def take_over(path: Path) -> Holder | None:
    """Hold the lock at path if its holder is gone (its driver exited): who held it, as the file says;
    None while it is held, or when the file is gone."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    gone = read(path)
    # Empty: a run that made its file and has not locked it yet. Unlinked: a run that ended as it should
    # (it removes its file, then lets the lock go). Neither is a gone run.
    if gone is None or os.fstat(fd).st_nlink == 0:
        os.close(fd)
        return None
    _HELD[path] = fd
    return gone


def read(path: Path) -> Holder | None:
    try:
        return Holder.parse(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def release(path: Path, remove: bool = False) -> None:
    """Let the lock go; remove the file first where nothing should find it again (a run registry's entry)."""
    fd = _HELD.pop(path, None)
    if remove:
        path.unlink(missing_ok=True)
    if fd is not None:
        os.close(fd)
