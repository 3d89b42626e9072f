"""The sim env's Terraform variables: hosts made by scripts/sim-hosts, reached with a key of the env's own."""

from __future__ import annotations

import hashlib
import ipaddress
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.paths import make_private
from pav.tools import require_tool


def ssh_key(state_dir: Path) -> Path:
    key = state_dir / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        keygen = require_tool("ssh-keygen", "install openssh-client")
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "pav-sim", "-f", str(key)], check=True)
    return key


def variables(state_dir: Path, hosts: int) -> dict[str, Any]:
    values = preview_variables(state_dir, hosts)
    make_private(state_dir)
    subnet_file(state_dir).write_text(f"{values['subnet_index']}\n")
    return {**values, "ssh_public_key_file": str(ssh_key(state_dir)) + ".pub"}


def preview_variables(state_dir: Path, hosts: int) -> dict[str, Any]:
    """The cluster id derives from the state dir, so two state dirs never share a bridge."""
    if not 1 <= hosts <= 64:
        raise PavError(f"--hosts {hosts}: the sim env makes 1 to 64 hosts")
    digest = int(hashlib.sha256(str(state_dir).encode()).hexdigest(), 16)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    cluster_id = "".join(alphabet[(digest >> (6 * i)) % 36] for i in range(5))
    return {
        "hosts": hosts,
        "cluster_id": cluster_id,
        "subnet_index": subnet_index(state_dir, digest),
        "state_dir": str(state_dir / "sim"),
        "ssh_public_key_file": str(private_key(state_dir)) + ".pub",
        **installed_script(),
    }


def installed_script() -> dict[str, str]:
    """Installed from a wheel, sim-hosts runs with the driver's Python (it has pav; the script's own pick,
    a checkout's .venv, else python3, may not). From a checkout the root's default, the script beside it."""
    if paths.from_checkout():
        return {}
    script = paths.SCRIPTS / "sim-hosts"
    return {"sim_hosts_script": f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"}


SUBNETS = range(20, 220)


def subnet_file(state_dir: Path) -> Path:
    return state_dir / "sim-subnet"


def subnet_index(state_dir: Path, digest: int) -> int:
    """The subnet this state dir was given, else the first free one from a place its digest picks.

    A digest alone maps two live clusters onto one /24 about once in 200 pairs, and the second one's
    bridge is then refused; probing what this machine's interfaces hold avoids that. The choice is
    saved so a later `--stages teardown` or a kept cluster's next run finds the same subnet.
    """
    saved = subnet_file(state_dir)
    if saved.exists():
        return int(saved.read_text().strip())
    used = subnets_in_use()
    start = (digest >> 40) % len(SUBNETS)
    for step in range(len(SUBNETS)):
        index = SUBNETS[(start + step) % len(SUBNETS)]
        if index not in used:
            return index
    raise PavError("sim subnets 10.77.20-219.0/24 are all in use: tear old clusters down (--stages teardown)")


def subnets_in_use() -> set[int]:
    """K of every 10.77.K.0/24 an interface on this machine has an address in."""
    ip = require_tool("ip", "install iproute2")
    out = subprocess.run([ip, "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    used = set()
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            addr = ipaddress.ip_interface(fields[fields.index("inet") + 1]).ip
            if addr in ipaddress.ip_network("10.77.0.0/16"):
                used.add(addr.packed[2])
    return used


def private_key(state_dir: Path) -> Path:
    return state_dir / "ssh" / "id_ed25519"
