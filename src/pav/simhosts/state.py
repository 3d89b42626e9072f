"""The state dir: the cluster's network record, the host records, per-host runtime dirs and locks."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from pav.simhosts.errors import SimError, log
from pav.simhosts.net import Net

MAX_INDEX = 244  # 10 + 244 = .254, the last usable address of the /24
NUMBER_LIMIT = 100_000


def parse_uint(text: str) -> int | None:
    """A decimal number (leading zeros allowed) up to NUMBER_LIMIT, else None."""
    if re.fullmatch(r"[0-9]+", text) and int(text) <= NUMBER_LIMIT:
        return int(text)
    return None


def parse_net(cluster: str, subnet: str) -> Net:
    if not re.fullmatch(r"[a-z0-9]{1,6}", cluster):
        raise SimError("--cluster must be 1-6 chars of [a-z0-9]")
    index = parse_uint(subnet)
    if index is None:
        raise SimError("--subnet-index must be an integer 0-250")
    if index > 250:
        raise SimError("--subnet-index must be 0-250")
    return Net(cluster, index)


def parse_index(text: str) -> int:
    index = parse_uint(text)
    if index is None:
        raise SimError("--index must be a non-negative integer")
    if index > MAX_INDEX:
        raise SimError(f"--index must be <= {MAX_INDEX}")
    return index


@dataclass(frozen=True)
class HostRecord:
    """hosts/NAME.json: what Terraform's outputs and the tests read about a host."""

    name: str
    index: int
    ip: str
    port: int
    user: str
    netns: str
    pid: int
    upper: str

    def to_json(self) -> str:
        return json.dumps(asdict(self)) + "\n"


@dataclass(frozen=True)
class State:
    """A state dir, absolute and symlink-free (as /proc/self/mountinfo and the host records show it)."""

    root: Path

    @property
    def net_file(self) -> Path:
        return self.root / "sim-net.env"

    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    def host_dir(self, index: int) -> Path:
        return self.root / "run" / str(index)

    def record(self, name: str) -> Path:
        return self.hosts / f"{name}.json"

    def known_hosts(self, name: str) -> Path:
        return self.hosts / f"{name}.known_hosts"

    def lock_path(self, index: int) -> Path:
        return self.root / "locks" / f"{index}.lock"

    def load_net(self) -> Net | None:
        """The cluster id and subnet saved by net-up; None if there are none. Parsed, not sourced: the state
        dir may be shared with other tools."""
        if not self.net_file.is_file():
            return None
        lines = self.net_file.read_text().splitlines()
        values = dict(line.partition("=")[::2] for line in lines)
        return parse_net(values.get("CLUSTER", ""), values.get("SUBNET", ""))

    def save_net(self, net: Net) -> None:
        tmp = self.root / f".sim-net.env.{os.getpid()}"
        tmp.write_text(f"CLUSTER={net.cluster}\nSUBNET={net.subnet}\n")
        tmp.replace(self.net_file)

    def host_indices(self) -> list[int]:
        """Indices that have a runtime dir: hosts up, or half made or half removed."""
        run = self.root / "run"
        if not run.is_dir():
            return []
        return sorted(int(d.name) for d in run.iterdir() if re.fullmatch(r"[0-9]+", d.name) and d.is_dir())

    def host_name(self, index: int) -> str | None:
        try:
            return (self.host_dir(index) / "name").read_text().rstrip("\n")
        except OSError:
            return None

    def host_pid(self, index: int) -> int | None:
        try:
            text = (self.host_dir(index) / "pid").read_text().strip()
        except OSError:
            return None
        return int(text) if re.fullmatch(r"[0-9]+", text) else None

    def forget_cluster(self) -> None:
        """Nothing of the cluster is left: the next net-up may pick another id and subnet."""
        for name in ("run", "hosts", "locks"):
            remove_tree(self.root / name)
        self.net_file.unlink(missing_ok=True)


def open_state(path: str, create: bool) -> State | None:
    """The state dir named by --state-dir; None (after saying so) where it does not exist and create is
    false: teardown and list of a state dir that never existed have nothing to do."""
    if not path:
        raise SimError("--state-dir is required")
    # Mount points are matched against /proc/self/mountinfo, which escapes whitespace; refusing it keeps
    # that matching exact.
    if re.search(r"\s", path):
        raise SimError("state dir must not contain whitespace")
    if create:
        os.makedirs(path, exist_ok=True)
    elif not os.path.isdir(path):
        log(f"state dir {path} does not exist: nothing to do")
        return None
    return State(Path(path).resolve(strict=True))


def mounts_under(folder: Path) -> list[str]:
    """Mount points at or below a folder, deepest first."""
    with open("/proc/self/mountinfo") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    inside = [p for p in points if p == str(folder) or p.startswith(f"{folder}/")]
    return sorted(inside, reverse=True)


def remove_tree(path: Path) -> None:
    """rm -rf that never crosses into a mounted filesystem."""
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        if mounts_under(path):
            raise SimError(f"mounts remain under {path}; not removing it")
        shutil.rmtree(path)
    else:
        path.unlink()


def lock_index(state: State, index: int) -> int:
    """Serialises operations on one host; returns the lock's fd, held until closed or the process exits.

    The lock file is removed when the host goes away (so nothing of it is left behind); a waiter that then
    wakes up holding the removed file retries on the path's current file.
    """
    path = state.lock_path(index)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        held = os.fstat(fd)
        if current and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


def drop_index_lock(state: State, index: int) -> None:
    state.lock_path(index).unlink(missing_ok=True)
