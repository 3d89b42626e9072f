"""The variables an inventory file sets itself: the group all's (all.vars, [all:vars]), another group's, and
a host's inline ones, each with where it stands in the file. The settings loader (pav.settings) holds the
pav_* and k8s_* keys among them to the checks of group_vars: an inventory names its hosts and often its
settings in one file, and a key there was dropped without a word.

YAML as the driver reads it everywhere (pav.yamlfile, its shape checked as pav.inventory checks it); INI by
Ansible's own INI plugin, so that a value reads as Ansible reads it (Python literals, else a string). A file
of neither form (a script, a plugin's config) is left to ansible-inventory, which refuses what it cannot
parse before any stage."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.inventory import check_yaml_shape
from pav.yamlfile import load_yaml

YAML_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class Scope:
    """One mapping of variables the file sets, and where: `all.vars`, `[gpu:vars]`, `all.hosts.box1`."""

    where: str
    values: dict[str, Any]
    run_wide: bool  # the group all's: the driver reads its settings here (group_vars/all is over it)
    ini: bool  # an INI file's: a value Python's literals do not read stays a string, as -e key=value's


def inventory_scopes(hosts_file: Path) -> list[Scope]:
    """Every mapping of variables the file sets, the group all's first."""
    if hosts_file.suffix in YAML_SUFFIXES:
        data = load_yaml(hosts_file)
        check_yaml_shape(data, hosts_file)
        found = list(_yaml_scopes(data, ""))
    else:
        found = _ini_scopes(hosts_file)
    return sorted(found, key=lambda s: not s.run_wide)


def all_group_label(hosts_file: Path) -> str:
    """Where the file sets the group all's variables, in its own form."""
    return "all.vars" if hosts_file.suffix in YAML_SUFFIXES else "[all:vars]"


def _yaml_scopes(groups: dict[str, Any], parent: str) -> Iterator[Scope]:
    for name, node in groups.items():
        where = f"{parent}{name}"
        node = node or {}
        if node.get("vars"):
            yield Scope(f"{where}.vars", dict(node["vars"]), run_wide=where == "all", ini=False)
        for host, host_vars in (node.get("hosts") or {}).items():
            if host_vars:
                yield Scope(f"{where}.hosts.{host}", dict(host_vars), run_wide=False, ini=False)
        yield from _yaml_scopes(node.get("children") or {}, f"{where}.children.")


def _ini_scopes(hosts_file: Path) -> list[Scope]:
    """The INI plugin's groups and hosts. An executable file is a script to Ansible; a file the plugin does
    not parse is ansible-inventory's to refuse (pav.inventory.resolve_hosts), in its own words."""
    if os.access(hosts_file, os.X_OK):
        return []
    from ansible.errors import AnsibleError  # only for an INI inventory: ~0.3 CPU-s of imports
    from ansible.inventory.data import InventoryData
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import inventory_loader

    parsed = InventoryData()
    try:
        inventory_loader.get("ini").parse(parsed, DataLoader(), str(hosts_file.resolve()), cache=False)
    except AnsibleError:
        return []
    except OSError as exc:
        raise PavError(
            f"cannot read {hosts_file}: {exc.strerror}; check the path and its permissions"
        ) from None
    found = [
        Scope(f"[{name}:vars]", _plain(group.vars), run_wide=name == "all", ini=True)
        for name, group in parsed.groups.items()
        if group.vars
    ]
    found += [
        Scope(f"host {name}", _plain(host.vars), run_wide=False, ini=True)
        for name, host in parsed.hosts.items()
        if host.vars
    ]
    return found


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """Ansible's tagged values as plain Python (the settings are compared and written to results.json)."""
    return dict(json.loads(json.dumps(dict(values), default=str)))
