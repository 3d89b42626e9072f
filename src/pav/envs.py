"""Environments: inventories/NAME/ (hosts + group_vars), plus terraform/envs/NAME/ if it provisions."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pav import paths
from pav.errors import PavError


@dataclass(frozen=True)
class EnvSpec:
    name: str
    inventory_dir: Path
    hosts_file: Path | None  # a static inventory; None when Terraform provides the hosts
    terraform_dir: Path | None

    @property
    def state_name(self) -> str:
        """Names the env's state dir; a custom inventory gets one per inventory file."""
        if self.name != "custom" or self.hosts_file is None:
            return self.name
        digest = hashlib.sha256(str(self.hosts_file.resolve()).encode()).hexdigest()[:10]
        return f"custom-{digest}"

    @property
    def provisions(self) -> bool:
        return self.terraform_dir is not None


def known_envs() -> list[str]:
    if not paths.INVENTORIES.is_dir():
        return []
    return sorted(p.name for p in paths.INVENTORIES.iterdir() if (p / "group_vars").is_dir())


def resolve_env(name: str) -> EnvSpec:
    inventory_dir = paths.INVENTORIES / name
    if not (inventory_dir / "group_vars").is_dir():
        known = ", ".join(known_envs()) or "none"
        raise PavError(
            f"unknown env '{name}'; known envs: {known} (or pass --inventory FILE for your own hosts)"
        )
    hosts = inventory_dir / "hosts.yml"
    tf = paths.TERRAFORM / "envs" / name
    if not hosts.is_file() and not tf.is_dir():
        raise PavError(f"env '{name}' has no hosts: add {hosts}, or a Terraform root {tf} that creates them")
    return EnvSpec(
        name=name,
        inventory_dir=inventory_dir,
        hosts_file=hosts if hosts.is_file() else None,
        terraform_dir=tf if tf.is_dir() else None,
    )


def custom_env(inventory: Path) -> EnvSpec:
    """A user's own SSH inventory (bare metal): its group_vars/host_vars beside it apply as Ansible does."""
    if not inventory.is_file():
        raise PavError(
            f"inventory file {inventory} does not exist; pass the path of an Ansible inventory file"
        )
    return EnvSpec(name="custom", inventory_dir=inventory.parent, hosts_file=inventory, terraform_dir=None)
