"""The one settings loader: every key family the driver reads (its pav_* settings, the k8s_* job settings)
and the variables it leaves to Ansible, from one read of the env's group_vars (pav.group_vars) and -e.

Precedence, every family alike: -e > the env's file > the default (Settings, templates/k8s/defaults.yml).
A pav_* or k8s_* key no part of the tool reads, in a file or in -e, stops the run here, naming the nearest
known key (pav.setting_keys)."""

from __future__ import annotations

from dataclasses import replace
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
from pav.group_vars import group_vars_files, read_group_vars, settings_file
from pav.k8s_settings import defaults_file, k8s_settings_from
from pav.setting_keys import reader, refuse_unknown

__all__ = [
    "LAUNCHERS", "PLATFORMS", "Settings", "group_vars_files", "load_settings", "settings_file",
    "settings_from",
]  # fmt: skip


def load_settings(
    inventory_dir: Path, extra_vars: dict[str, Any] | None = None, *, provisions: bool = True
) -> Settings:
    """The env's settings: its files, then -e over them (extra vars win in Ansible too). Hosts an env does
    not create are someone's: there tuning changes them only when the file or -e says so."""
    found = read_group_vars(inventory_dir)
    where = {who: str(settings_file(inventory_dir, who) or inventory_dir) for who in ("pav", "k8s")}
    settings = settings_from(found.of("pav"), where["pav"], Settings(apply_tuning=provisions))
    k8s = k8s_settings_from(found.of("k8s"), where["k8s"])
    role_vars, origins = found.of("roles"), found.origins
    if extra_vars:
        refuse_unknown(extra_vars, "-e")
        typed = typed_extra_vars(extra_vars, driver_defaults() | defaults_file())
        settings = settings_from(typed, "-e", settings)
        k8s = k8s_settings_from(typed, "-e", k8s)
        role_vars = role_vars | {k: v for k, v in extra_vars.items() if reader(k) == "roles"}
        origins = origins | dict.fromkeys(extra_vars, "-e")
    return replace(settings, k8s=k8s, role_vars=role_vars, origins=origins)
