"""The sim env's Terraform variables: hosts made by scripts/sim-hosts, reached with a key of the env's own."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.tools import require_tool


def ssh_key(state_dir: Path) -> Path:
    key = state_dir / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        keygen = require_tool("ssh-keygen", "install openssh-client")
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "pav-sim", "-f", str(key)], check=True)
    return key


def variables(state_dir: Path, hosts: int) -> dict[str, Any]:
    return {**preview_variables(state_dir, hosts), "ssh_public_key_file": str(ssh_key(state_dir)) + ".pub"}


def preview_variables(state_dir: Path, hosts: int) -> dict[str, Any]:
    """Cluster id and subnet derive from the state dir, so two state dirs never share a bridge or subnet."""
    if not 1 <= hosts <= 64:
        raise PavError(f"--hosts {hosts}: the sim env makes 1 to 64 hosts")
    digest = int(hashlib.sha256(str(state_dir).encode()).hexdigest(), 16)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    cluster_id = "".join(alphabet[(digest >> (6 * i)) % 36] for i in range(5))
    return {
        "hosts": hosts,
        "cluster_id": cluster_id,
        "subnet_index": 20 + (digest >> 40) % 200,
        "state_dir": str(state_dir / "sim"),
        "ssh_public_key_file": str(private_key(state_dir)) + ".pub",
    }


def private_key(state_dir: Path) -> Path:
    return state_dir / "ssh" / "id_ed25519"
