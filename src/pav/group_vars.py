"""The env's variables for the group `all`, read once and sorted by who reads them: the driver's settings
(pav_*), the k8s_* job settings, and the rest, Ansible's (role variables, ansible_*, the playbooks' pav_*).

One file, group_vars/all.yml, may hold all three. A folder group_vars/all/ splits them by reader: pav.yml
and k8s.yml hold the driver's two families and nothing else; every other file there is Ansible's (roles.yml
in the shipped envs). Ansible reads every file of the folder either way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.setting_keys import reader, refuse_unknown
from pav.yamlfile import load_yaml

SINGLE = ("all.yml", "all.yaml", "all.json")
# The driver's files of group_vars/all/, by reader (setting_keys.reader).
DRIVER_FILES = {"pav": "pav.yml", "k8s": "k8s.yml"}
ROLES_FILE = "roles.yml"
WHO = {
    "pav": "a driver setting",
    "k8s": "a k8s job setting",
    "roles": "Ansible's (a role variable, ansible_* or a playbook key)",
}


@dataclass(frozen=True)
class GroupVars:
    """Every key of the group's files by reader (setting_keys.reader), and the file each came from."""

    by_reader: dict[str, dict[str, Any]]
    origins: dict[str, str]

    def of(self, who: str) -> dict[str, Any]:
        return self.by_reader.get(who, {})


def group_vars_files(inventory_dir: Path) -> list[Path]:
    """The files Ansible reads for the group `all`: every file of the folder group_vars/all/ when there is
    one (in name order; Ansible then ignores group_vars/all.yml), else group_vars/all.yml (.yaml, .json)."""
    group_vars = inventory_dir / "group_vars"
    folder = group_vars / "all"
    if folder.is_dir():
        return _folder_files(folder)
    return [p for name in SINGLE if (p := group_vars / name).is_file()][:1]


def other_vars_files(inventory_dir: Path) -> list[Path]:
    """The files Ansible reads for the other groups (group_vars/NAME.yml or the folder group_vars/NAME/) and
    for each host (host_vars/ alike): the driver reads no setting there, and refuses one written there."""
    found: list[Path] = []
    for sub in ("group_vars", "host_vars"):
        base = inventory_dir / sub
        entries = sorted(base.iterdir()) if base.is_dir() else []
        for entry in entries:
            if sub == "group_vars" and (entry.name == "all" or entry.name in SINGLE):
                continue
            if entry.is_dir():
                found += _folder_files(entry)
            elif _vars_file(entry):
                found.append(entry)
    return found


def _folder_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if _vars_file(p)
        and not any(part.startswith(".") or part.endswith("~") for part in p.relative_to(folder).parts)
    )


def _vars_file(path: Path) -> bool:
    return path.is_file() and path.suffix in ("", ".yml", ".yaml", ".json") and not path.name.startswith(".")


def settings_file(inventory_dir: Path, who: str = "pav") -> Path | None:
    """The file the driver reads a family of its settings from (who: pav or k8s): group_vars/all.yml, or
    group_vars/all/pav.yml (k8s.yml) where group_vars/all/ is a folder; None where there is none."""
    folder = inventory_dir / "group_vars" / "all"
    if folder.is_dir():
        path = folder / DRIVER_FILES[who]
        return path if path.is_file() else None
    found = group_vars_files(inventory_dir)
    return found[0] if found else None


def home(inventory_dir: Path, who: str) -> Path:
    """Where group_vars/all holds a family of the driver's settings (who: pav or k8s)."""
    folder = inventory_dir / "group_vars" / "all"
    if folder.is_dir():
        return folder / DRIVER_FILES[who]
    return settings_file(inventory_dir, who) or inventory_dir / "group_vars" / SINGLE[0]


def read_other_vars(inventory_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each other group's and host's file, read as read_group_vars reads the group all's."""
    return [(file, _read(file, driver_file=False)) for file in other_vars_files(inventory_dir)]


def read_group_vars(inventory_dir: Path) -> GroupVars:
    """Each file once. A pav_* or k8s_* key no part of the tool reads stops the run here, as does a key in a
    file of the folder that is not its reader's (elsewhere Ansible would see it and the driver not)."""
    folder = inventory_dir / "group_vars" / "all"
    if folder.is_dir():
        _refuse_beside(folder)
    by_reader: dict[str, dict[str, Any]] = {}
    origins: dict[str, str] = {}
    for file in group_vars_files(inventory_dir):
        data = _read(file, driver_file=file.parent == folder and file.name in DRIVER_FILES.values())
        refuse_unknown(data, str(file))
        for key, value in data.items():
            who = reader(key)
            if folder.is_dir():
                _check_place(file, folder, key, who)
            by_reader.setdefault(who, {})[key] = value
            origins[key] = str(file)
    return GroupVars(by_reader, origins)


def _refuse_beside(folder: Path) -> None:
    for name in SINGLE:
        if (beside := folder.parent / name).is_file():
            raise PavError(
                f"{beside}: Ansible ignores this file beside the folder {folder}/; move its keys into that "
                f"folder (the driver's settings into {folder / 'pav.yml'}, the roles' into "
                f"{folder / ROLES_FILE})"
            )


def _check_place(file: Path, folder: Path, key: str, who: str) -> None:
    """In the folder, a driver family's keys live in its own file, and that file holds nothing else."""
    home = DRIVER_FILES.get(who)
    if home is not None and file != folder / home:
        raise PavError(f"{file}: {key} is read by the driver from {folder / home} only; move it there")
    if home is None and file.parent == folder and file.name in DRIVER_FILES.values():
        owner = WHO[_owner(file)]
        raise PavError(f"{file}: {key} is {WHO[who]}, not {owner}; move it to {folder / ROLES_FILE}")


def _owner(file: Path) -> str:
    return next(who for who, name in DRIVER_FILES.items() if name == file.name)


def _read(path: Path, *, driver_file: bool) -> dict[str, Any]:
    """A group_vars file's mapping. It may be vault-encrypted, whole or values tagged !vault: those are
    Ansible's to read (a tagged value reads as None here); an encrypted file of the driver's is refused."""
    with contextlib.suppress(OSError):  # else load_yaml names what keeps it from reading the file
        if path.read_bytes().startswith(b"$ANSIBLE_VAULT"):
            if driver_file or path.name in SINGLE:
                raise PavError(
                    f"{path}: vault-encrypted, so the driver cannot read its settings; keep them unencrypted "
                    "in group_vars/all/pav.yml (k8s.yml) and the secrets in another file of that folder"
                )
            return {}
    data = load_yaml(path, local_tags=True)
    if data is not None and not isinstance(data, dict):
        raise PavError(f"{path}: top level must be a mapping of key: value, not {type(data).__name__}")
    return data or {}
