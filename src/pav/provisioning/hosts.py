"""Terraform's host map (the same shape from every env) becomes Ansible inventory host vars."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError

REQUIRED = ("name", "public_ip", "private_ip", "ssh_user")


@dataclass(frozen=True)
class ProvisionedHost:
    name: str
    public_ip: str
    private_ip: str
    ssh_user: str
    ssh_port: int = 22
    gpus: int = 0
    fabric: str = "socket"


def parse_hosts(outputs: dict[str, Any]) -> list[ProvisionedHost]:
    raw = outputs.get("hosts")
    if not isinstance(raw, dict):
        raise PavError("the env's Terraform has no 'hosts' output map; every env root must output one")
    hosts = []
    for name, item in raw.items():
        missing = [k for k in REQUIRED if not item.get(k)]
        if missing:
            raise PavError(f"Terraform output hosts.{name} lacks {', '.join(missing)}")
        hosts.append(
            ProvisionedHost(
                name=str(item["name"]),
                public_ip=_trim(item["public_ip"]),
                private_ip=_trim(item["private_ip"]),
                ssh_user=str(item["ssh_user"]),
                ssh_port=int(item.get("ssh_port") or 22),
                gpus=int(item.get("gpus") or 0),
                fabric=str(item.get("fabric") or "socket"),
            )
        )
    return hosts


def host_vars(host: ProvisionedHost, key: Path, known_hosts: Path) -> dict[str, Any]:
    return {
        "ansible_host": host.public_ip,
        "ansible_port": host.ssh_port,
        "ansible_user": host.ssh_user,
        "ansible_ssh_private_key_file": str(key),
        # Keys were pinned when the run first reached each host; any other key is refused.
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes",
        "pav_private_ip": host.private_ip,
        "pav_gpus": host.gpus,
        "pav_fabric": host.fabric,
    }


def _trim(address: str) -> str:
    """Cloud APIs give addresses as CIDR (10.0.0.5/32)."""
    return str(address).split("/")[0]
