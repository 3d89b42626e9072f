"""scripts/sim-hosts as the tests call it, and a cluster brought up on an id and subnet of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pav.provisioning.sim import SUBNETS, subnets_in_use

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "scripts" / "sim-hosts"
CLASH = ("already used by", "belongs to state dir")  # another run took the id or subnet first


def sim(*args: object, env: dict[str, str] | None = None, check: bool = True, timeout: float = 120):
    result = subprocess.run(
        [str(SIM), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"sim-hosts {' '.join(map(str, args))} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


@dataclass
class Up:
    cluster: str
    subnet: int
    stdout: str


def up_free(state_dir: Path, pubkey: Path, count: int, prefix: str, salt: int = 0) -> Up:
    """`up` a cluster whose id (prefix + 5 chars from the pid) and subnet no live cluster holds; retries on
    a clash with a run that got there first."""
    pid = os.getpid()
    for attempt in range(40):
        cid = prefix + _base36(pid * 1_000_003 + salt * 7919 + attempt * 104_729, 5)
        subnet = SUBNETS[(pid + salt * 61 + attempt * 17) % len(SUBNETS)]
        if subnet in subnets_in_use():
            continue
        result = sim(
            "up", "--state-dir", state_dir, "--cluster", cid, "--subnet-index", subnet,
            "--count", count, "--pubkey", pubkey, check=False,
        )  # fmt: skip
        if result.returncode == 0:
            return Up(cid, subnet, result.stdout)
        sim("down", "--state-dir", state_dir, check=False)  # whatever got made goes before the next try
        if not any(clash in result.stderr for clash in CLASH):
            raise AssertionError(f"sim-hosts up failed:\n{result.stdout}{result.stderr}")
    raise AssertionError("no free cluster id/subnet found")


@dataclass
class Hosts:
    state_dir: Path
    key: Path  # the private key; its .pub is every host's authorized key
    records: list[dict[str, Any]]  # hosts/NAME.json of each host: name, ip, port, ...

    def known_hosts(self, index: int) -> Path:
        return self.state_dir / "hosts" / f"{self.records[index]['name']}.known_hosts"


@contextmanager
def hosts_up(base: Path, count: int, prefix: str) -> Iterator[Hosts]:
    """`count` sim hosts with a fresh key under `base`, taken down afterwards; skips without root."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("simulated hosts need root on Linux (namespaces, mounts)")
    key = base / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    state_dir = base / "state"
    try:
        up = up_free(state_dir, Path(f"{key}.pub"), count, prefix)
        paths = [state_dir / "hosts" / f"sim-{up.cluster}-{i}.json" for i in range(count)]
        yield Hosts(state_dir, key, [json.loads(path.read_text()) for path in paths])
    finally:
        sim("down", "--state-dir", state_dir, check=False)


def _base36(n: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    for _ in range(width):
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out
