"""Driver settings an env chooses in its group_vars/all.yml (keys prefixed pav_), checked by type; a pav_* or
k8s_* key that no part of the tool reads is refused (pav.setting_keys)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from pav.catalog import DEFAULT_TESTS
from pav.errors import PavError
from pav.setting_keys import driver_read, refuse_unknown
from pav.yamlfile import load_mapping, load_yaml

PLATFORMS = ("hosts", "k8s")
LAUNCHERS = ("direct", "slurm")


@dataclass
class Settings:
    # auto: cpu where no host has a GPU, else the profile of the GPUs preflight finds (thresholds/profiles.py)
    threshold_profile: str = "auto"
    tests: list[str] = field(default_factory=lambda: list(DEFAULT_TESTS))
    apply_tuning: bool = True  # False: tuning roles run in check mode with diff and change nothing
    test_timeout_s: int = 900
    test_timeouts_s: dict[str, int] = field(default_factory=dict)  # per test, over test_timeout_s
    cpu_procs_per_host: int = 2
    remote_dir: str = "/var/tmp/pav"
    rdzv_port: int = 29400
    hosts: int = 3  # hosts an env that provisions creates (--hosts overrides)
    ssh_timeout_s: int = 300  # how long new hosts get to answer SSH
    isolate: bool = True  # re-run a failing multi-host test on pairs of hosts to name the bad one
    fold_launches: bool = True  # a host's torch tests of one world shape run as one suite (suites.py)
    platform: str = "hosts"  # hosts: Ansible over SSH; k8s: PyTorchJob/MPIJob (docs/kubernetes.md)
    launcher: str = "direct"  # direct: torchrun/mpirun over SSH; slurm: sbatch/srun (docs/slurm.md)
    shared_dir: str = ""  # a folder every host mounts (NFS, Lustre); Slurm jobs spanning hosts use it
    slurm_mpi: str = "pmix"  # srun --mpi=THIS starts nccl-tests' ranks across nodes under --launcher slurm
    # The hosts are this machine: the driver picks the payload's Python (torch_python.py) and the modules'
    # (module_python.py) unless -e sets them.
    payload_python_auto: bool = False


def group_vars_files(inventory_dir: Path) -> list[Path]:
    """The files Ansible reads for the group `all`: every file of the folder group_vars/all/ when there is
    one (in name order; Ansible then ignores group_vars/all.yml), else group_vars/all.yml (.yaml, .json)."""
    group_vars = inventory_dir / "group_vars"
    folder = group_vars / "all"
    if folder.is_dir():
        return sorted(
            p
            for p in folder.rglob("*")
            if p.is_file()
            and p.suffix in ("", ".yml", ".yaml", ".json")
            and not any(part.startswith(".") or part.endswith("~") for part in p.relative_to(folder).parts)
        )
    return [p for name in ("all.yml", "all.yaml", "all.json") if (p := group_vars / name).is_file()][:1]


def settings_file(inventory_dir: Path) -> Path | None:
    """The one file the driver reads its settings (and the k8s_* job settings) from: group_vars/all.yml, or
    group_vars/all/pav.yml where group_vars/all/ is a folder."""
    folder = inventory_dir / "group_vars" / "all"
    if folder.is_dir():
        return folder / "pav.yml" if (folder / "pav.yml").is_file() else None
    found = group_vars_files(inventory_dir)
    return found[0] if found else None


def load_settings(
    inventory_dir: Path, extra_vars: dict[str, Any] | None = None, *, provisions: bool = True
) -> Settings:
    """The env's settings file, then -e's pav_* keys over it (extra vars win in Ansible too). Hosts an env
    does not create are someone's: there tuning changes them only when the file or -e says so. A pav_* or
    k8s_* key no part of the tool reads, in any file of group_vars/all or in -e, stops the run here."""
    path = settings_file(inventory_dir)
    check_group_vars(inventory_dir, path)
    data = load_mapping(path) if path else {}
    settings = settings_from(data, str(path or inventory_dir), Settings(apply_tuning=provisions))
    if not extra_vars:
        return settings
    refuse_unknown(extra_vars, "-e")
    return settings_from(_typed(extra_vars), "-e", settings)


def check_group_vars(inventory_dir: Path, path: Path | None) -> None:
    """Every file Ansible reads for `all`: no unknown pav_*/k8s_* key, and the driver's own keys only in the
    one file the driver reads (elsewhere Ansible would see them and the driver not)."""
    group_vars = inventory_dir / "group_vars"
    folder = group_vars / "all"
    if folder.is_dir():
        for name in ("all.yml", "all.yaml", "all.json"):
            if (group_vars / name).is_file():
                raise PavError(
                    f"{group_vars / name}: Ansible ignores this file beside the folder {folder}/; move its "
                    f"keys into that folder (the driver's settings into {folder / 'pav.yml'})"
                )
    for file in group_vars_files(inventory_dir):
        keys = _top_level_keys(file)
        refuse_unknown(dict.fromkeys(keys), str(file))
        if file != path and (stray := next((k for k in keys if driver_read(k)), None)):
            target = path or folder / "pav.yml"
            raise PavError(f"{file}: {stray} is read by the driver from {target} only; move it there")


def _top_level_keys(path: Path) -> list[Any]:
    """The keys of a group_vars file. It may be vault-encrypted, whole or values tagged !vault: those are
    Ansible's to read (a local tag reads as None here), and hold no key of the tool's."""
    with contextlib.suppress(OSError):  # else load_yaml names what keeps it from reading the file
        if path.read_bytes().startswith(b"$ANSIBLE_VAULT"):
            return []
    data = load_yaml(path, local_tags=True)
    if data is not None and not isinstance(data, dict):
        raise PavError(f"{path}: top level must be a mapping of key: value, not {type(data).__name__}")
    return list(data or {})


def settings_from(data: dict[str, Any], source: str, base: Settings | None = None) -> Settings:
    settings, defaults = base or Settings(), Settings()
    for f in fields(Settings):
        key = f"pav_{f.name}"
        if key not in data:
            continue
        value = data[key]
        default = getattr(defaults, f.name)
        if not _same_kind(value, default):
            raise PavError(f"{source}: {key} must be {_kind(default)}, got {value!r}; fix that key")
        setattr(settings, f.name, value)
    if settings.launcher not in LAUNCHERS:
        choices = ", ".join(LAUNCHERS)
        raise PavError(f"{source}: pav_launcher must be one of {choices}, got {settings.launcher!r}")
    for name, limit in settings.test_timeouts_s.items():
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise PavError(f"{source}: pav_test_timeouts_s.{name} must be a positive number of seconds")
    if settings.test_timeout_s <= 0 or settings.cpu_procs_per_host <= 0:
        raise PavError(f"{source}: pav_test_timeout_s and pav_cpu_procs_per_host must be positive")
    if settings.platform not in PLATFORMS:
        raise PavError(f"{source}: pav_platform must be {' or '.join(PLATFORMS)}, got {settings.platform!r}")
    return settings


def _typed(extra_vars: dict[str, Any]) -> dict[str, Any]:
    """-e key=value gives strings: a setting that is not a string reads its value as YAML (5, true, [a])."""
    typed, defaults = {}, Settings()
    for f in fields(Settings):
        key = f"pav_{f.name}"
        if key not in extra_vars:
            continue
        typed[key] = extra_vars[key]
        if isinstance(typed[key], str) and not isinstance(getattr(defaults, f.name), str):
            # Left a string when it is no YAML: the type check then names the key and the value.
            with contextlib.suppress(yaml.YAMLError):
                typed[key] = yaml.safe_load(typed[key])
    return typed


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, dict):
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, list):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, type(default))


def _kind(default: Any) -> str:
    kinds = {bool: "true or false", int: "an integer", str: "a string", list: "a list of names",
             dict: "a mapping of test name to seconds"}  # fmt: skip
    return kinds[type(default)]
