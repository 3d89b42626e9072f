"""Environments: inventories/NAME/ (hosts + group_vars); an env that provisions names its Terraform root
(terraform/envs/ROOT) and the values it fixes in inventories/NAME/provision.yml."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.yamlfile import load_mapping

PROVISION_FILE = "provision.yml"
_PROVISION_KEYS = {"terraform_root", "values", "defaults"}


@dataclass(frozen=True)
class EnvSpec:
    name: str
    inventory_dir: Path
    hosts_file: Path | None  # a static inventory; None when Terraform provides the hosts
    terraform_dir: Path | None
    # What provision.yml fixes for the root (region, platform) and what it only defaults.
    terraform_values: dict[str, Any] = field(default_factory=dict)
    terraform_defaults: dict[str, Any] = field(default_factory=dict)
    # The state dir a kept run recorded (its results.json), for the runs that act on that run's hosts: its
    # teardown, --reuse. None: the env's own (PAV_STATE_DIR, else the default).
    recorded_state_dir: Path | None = None

    @property
    def state_dir(self) -> Path:
        """Where this env's state is: the one a kept run recorded, when acting on that run, wins over
        PAV_STATE_DIR: the hosts are where that run put them, whatever the shell says now."""
        return self.recorded_state_dir or paths.state_dir(self.state_name)

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
    not_found = paths.missing()
    if not_found:
        raise PavError(not_found)
    if not (inventory_dir / "group_vars").is_dir():
        known = ", ".join(known_envs()) or "none"
        raise PavError(
            f"unknown env '{name}'; known envs: {known} (or pass --inventory FILE for your own hosts)"
        )
    hosts = inventory_dir / "hosts.yml"
    provision = inventory_dir / PROVISION_FILE
    if provision.is_file():
        return _provisioned(name, inventory_dir, provision)
    if not hosts.is_file():
        raise PavError(
            f"env '{name}' has no hosts: add {hosts} or {provision} naming the Terraform root to make them"
        )
    return EnvSpec(name=name, inventory_dir=inventory_dir, hosts_file=hosts, terraform_dir=None)


def _provisioned(name: str, inventory_dir: Path, path: Path) -> EnvSpec:
    data = load_mapping(path)
    unknown = sorted(set(data) - _PROVISION_KEYS)
    if unknown:
        raise PavError(f"{path}: unknown key {unknown[0]!r}; it takes {', '.join(sorted(_PROVISION_KEYS))}")
    root = paths.TERRAFORM / "envs" / str(data.get("terraform_root", ""))
    if not data.get("terraform_root") or not (root / "main.tf").is_file():
        known = ", ".join(sorted(p.name for p in (paths.TERRAFORM / "envs").iterdir() if p.is_dir()))
        raise PavError(f"{path}: terraform_root must name a folder of terraform/envs ({known})")
    for key in ("values", "defaults"):
        if not isinstance(data.get(key, {}), dict):
            raise PavError(f"{path}: {key} must be a mapping of Terraform values")
    return EnvSpec(
        name=name,
        inventory_dir=inventory_dir,
        hosts_file=None,
        terraform_dir=root,
        terraform_values=dict(data.get("values", {})),
        terraform_defaults=dict(data.get("defaults", {})),
    )


def custom_env(inventory: Path) -> EnvSpec:
    """A user's own SSH inventory (bare metal): its group_vars/host_vars beside it apply as Ansible does."""
    if not inventory.is_file():
        raise PavError(
            f"inventory file {inventory} does not exist; pass the path of an Ansible inventory file"
        )
    return EnvSpec(name="custom", inventory_dir=inventory.parent, hosts_file=inventory, terraform_dir=None)
