"""The one settings loader: every key family the driver reads (its pav_* settings, the k8s_* job settings)
and the variables it leaves to Ansible, from one read of the env's group_vars (pav.group_vars), of the
inventory file's own variables (pav.inventory_vars) and -e.

Precedence, every family alike: -e > the env's group_vars/all > the inventory file's group all > the default
(Settings, templates/k8s/defaults.yml). A pav_* or k8s_* key no part of the tool reads, in a file or in -e,
stops the run here, naming the nearest known key (pav.setting_keys); so does a driver or k8s setting written
for another group or a host, naming where it belongs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pav.driver_settings import (
    LAUNCHERS,
    PLATFORMS,
    Settings,
    driver_defaults,
    settings_from,
    typed_extra_vars,
)
from pav.group_vars import GroupVars, group_vars_files, home, read_group_vars, read_other_vars, settings_file
from pav.inventory_vars import Scope, all_group_label, inventory_scopes
from pav.k8s_settings import default_k8s_settings, defaults_file, k8s_settings_from
from pav.setting_keys import reader, refuse_outside_all, refuse_unknown

FAMILIES = ("pav", "k8s")  # the driver's settings, the k8s job settings (pav.setting_keys.reader)

__all__ = [
    "LAUNCHERS", "PLATFORMS", "Settings", "group_vars_files", "load_settings", "settings_file",
    "settings_from",
]  # fmt: skip


def load_settings(
    inventory_dir: Path,
    extra_vars: dict[str, Any] | None = None,
    *,
    provisions: bool = True,
    hosts_file: Path | None = None,
) -> Settings:
    """The env's settings: the inventory file's group all (hosts_file: a static inventory), its group_vars/all
    over them, then -e over both (Ansible's order too). Hosts an env does not create are someone's: there
    tuning changes them only when a file or -e says so. Every other group's and host's variables, in the
    inventory file and in group_vars/ and host_vars/, are checked and hold no setting of the driver's."""
    scopes = inventory_scopes(hosts_file) if hosts_file is not None else []
    layers = [*_inventory_layer(hosts_file, scopes), _group_vars_layer(inventory_dir)]
    _refuse_other_vars(inventory_dir, hosts_file, scopes)
    if extra_vars:
        refuse_unknown(extra_vars, "-e")
        layers.append(_Layer(_by_reader(_typed(extra_vars), "-e"), dict.fromkeys(FAMILIES, "-e")))
    settings, k8s = Settings(apply_tuning=provisions), default_k8s_settings()
    role_vars: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for layer in layers:  # the lowest first
        settings = settings_from(layer.found.of("pav"), layer.where["pav"], settings)
        k8s = k8s_settings_from(layer.found.of("k8s"), layer.where["k8s"], k8s)
        role_vars |= layer.found.of("roles")
        origins |= layer.found.origins
    return replace(settings, k8s=k8s, role_vars=role_vars, origins=origins)


@dataclass(frozen=True)
class _Layer:
    """One place settings are written, and what a bad value of each family names there."""

    found: GroupVars
    where: dict[str, str]


def _group_vars_layer(inventory_dir: Path) -> _Layer:
    found = read_group_vars(inventory_dir)
    return _Layer(found, {who: str(settings_file(inventory_dir, who) or inventory_dir) for who in FAMILIES})


def _inventory_layer(hosts_file: Path | None, scopes: list[Scope]) -> list[_Layer]:
    """The inventory file's group all, named as the file and all.vars ([all:vars]); a value Python's
    literals do not read in an INI file (false, 5m) is read as -e's key=value is."""
    for scope in scopes:
        if scope.run_wide:
            source = f"{hosts_file} ({scope.where})"
            refuse_unknown(scope.values, source)
            values = _typed(scope.values) if scope.ini else scope.values
            return [_Layer(_by_reader(values, source), dict.fromkeys(FAMILIES, source))]
    return []


def _refuse_other_vars(inventory_dir: Path, hosts_file: Path | None, scopes: list[Scope]) -> None:
    """Other groups' and hosts' variables hold no driver or k8s setting: each is the whole run's."""
    in_file = f"{all_group_label(hosts_file)} of {hosts_file}, or " if hosts_file is not None else ""
    homes = {who: f"{in_file}{home(inventory_dir, who)}" for who in FAMILIES}
    for scope in scopes:
        if not scope.run_wide:
            refuse_outside_all(scope.values, f"{hosts_file} ({scope.where})", homes)
    for file, values in read_other_vars(inventory_dir):
        refuse_outside_all(values, str(file), homes)


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    return typed_extra_vars(values, driver_defaults() | defaults_file())


def _by_reader(values: dict[str, Any], source: str) -> GroupVars:
    by_reader: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        by_reader.setdefault(reader(key), {})[key] = value
    return GroupVars(by_reader, dict.fromkeys(values, source))
