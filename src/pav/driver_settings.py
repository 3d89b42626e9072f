"""The driver's settings (pav_*), typed: each field of Settings is the key pav_<field>. pav.settings loads
them, with the k8s_* job settings and the variables left to Ansible, from one read of the env's files."""

from __future__ import annotations

import contextlib
from dataclasses import Field, dataclass, field, fields
from typing import Any

import yaml

from pav.catalog import DEFAULT_TESTS
from pav.errors import PavError
from pav.k8s_settings import K8sSettings, default_k8s_settings

PLATFORMS = ("hosts", "k8s")
LAUNCHERS = ("direct", "slurm")
GPU_LEFTOVERS = ("stop", "warn")  # pav_gpu_leftovers (thresholds/leftovers.py)
PREFIX = "pav_"
# A field that is what the same load read for another reader, not a pav_* key.
NOT_A_KEY = {"key": False}


@dataclass
class Settings:
    # auto: cpu where no host has a GPU, else the profile of the GPUs preflight finds (thresholds/profiles.py)
    threshold_profile: str = "auto"
    tests: list[str] = field(default_factory=lambda: list(DEFAULT_TESTS))
    apply_tuning: bool = True  # False: tuning roles run in check mode with diff and change nothing
    test_timeout_s: int = 900
    test_timeouts_s: dict[str, int] = field(default_factory=dict)  # per test, over test_timeout_s
    cpu_procs_per_host: int = 2
    burn_in_s: int = 0  # seconds of burn-in (the gpu_burn test); 0: none (--burn-in overrides)
    remote_dir: str = "/var/lib/pav"
    rdzv_port: int = 29400
    hosts: int = 3  # hosts an env that provisions creates (--hosts overrides)
    ssh_timeout_s: int = 300  # how long new hosts get to answer SSH
    isolate: bool = True  # re-run a failing multi-host test on pairs of hosts to name the bad one
    fold_launches: bool = True  # a host's torch tests of one world shape run as one suite (suites.py)
    # A GPU another process holds when the tests start: stop the run before them, or warn and go on
    # (thresholds/leftovers.py).
    gpu_leftovers: str = "stop"
    # What each GPU's settings must be: persistence_mode, mig_mode, ecc_mode, app_clocks; a key left out keeps
    # its default (thresholds/node_policy.py, docs/configuration.md).
    gpu_state: dict[str, str] = field(default_factory=dict)
    # component -> the version every node must have (driver, cuda_driver, vbios, kernel, torch, nccl, hca_fw);
    # unpinned, the nodes of a run must agree (thresholds/versions.py).
    expected_versions: dict[str, str] = field(default_factory=dict)
    # What the hardware should be (pcie_gen, pcie_width, nvlinks_per_gpu, rdma_ports, rdma_gbit): the derived
    # gates' bars come from it, and gpu_health names a part reported below it (thresholds/declared.py).
    declared_hardware: dict[str, int] = field(default_factory=dict)
    platform: str = "hosts"  # hosts: Ansible over SSH; k8s: PyTorchJob/MPIJob (docs/kubernetes.md)
    launcher: str = "direct"  # direct: torchrun/mpirun over SSH; slurm: sbatch/srun (docs/slurm.md)
    shared_dir: str = ""  # a folder every host mounts (NFS, Lustre); Slurm jobs spanning hosts use it
    slurm_mpi: str = "pmix"  # srun --mpi=THIS starts nccl-tests' ranks across nodes under --launcher slurm
    # The hosts are this machine: the driver picks the payload's Python (torch_python.py) and the modules'
    # (module_python.py) unless -e sets them.
    payload_python_auto: bool = False
    # The k8s_* job settings: read on every platform, so that --platform k8s finds them checked.
    k8s: K8sSettings = field(default_factory=default_k8s_settings, metadata=NOT_A_KEY)
    # The other variables of the group all (role variables, ansible_*, the playbooks' pav_* keys), files
    # then -e, as Ansible sees them: where the driver does a role's work (k8s pods' NCCL environment) or
    # names what a role will write (the dry run), it reads them here.
    role_vars: dict[str, Any] = field(default_factory=dict, metadata=NOT_A_KEY)
    # Where each key read was last set: the file, or -e; errors found after the load name it.
    origins: dict[str, str] = field(default_factory=dict, metadata=NOT_A_KEY)


def key_fields() -> list[Field[Any]]:
    """The fields read as pav_<name> keys."""
    return [f for f in fields(Settings) if f.metadata.get("key", True)]


def settings_from(data: dict[str, Any], source: str, base: Settings | None = None) -> Settings:
    """`base` with the pav_* keys of `data` over it, each checked against its default's type."""
    settings, defaults = base or Settings(), Settings()
    for f in key_fields():
        key = f"{PREFIX}{f.name}"
        if key not in data:
            continue
        value = data[key]
        default = getattr(defaults, f.name)
        if not _same_kind(value, default):
            raise PavError(f"{source}: {key} must be {_kind(f.name, default)}, got {value!r}; fix that key")
        setattr(settings, f.name, value)
    if settings.launcher not in LAUNCHERS:
        choices = ", ".join(LAUNCHERS)
        raise PavError(f"{source}: pav_launcher must be one of {choices}, got {settings.launcher!r}")
    for name, limit in settings.test_timeouts_s.items():
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise PavError(f"{source}: pav_test_timeouts_s.{name} must be a positive number of seconds")
    if settings.test_timeout_s <= 0 or settings.cpu_procs_per_host <= 0:
        raise PavError(f"{source}: pav_test_timeout_s and pav_cpu_procs_per_host must be positive")
    if settings.hosts < 1:
        # An env that provisions creates this many; --hosts is checked the same way (cli.py).
        raise PavError(f"{source}: pav_hosts must be at least 1, got {settings.hosts}; fix that key")
    if settings.burn_in_s < 0:
        raise PavError(f"{source}: pav_burn_in_s must be 0 (no burn-in) or a number of seconds")
    if settings.gpu_leftovers not in GPU_LEFTOVERS:
        choices = " or ".join(GPU_LEFTOVERS)
        raise PavError(f"{source}: pav_gpu_leftovers must be {choices}, got {settings.gpu_leftovers!r}")
    if settings.platform not in PLATFORMS:
        raise PavError(f"{source}: pav_platform must be {' or '.join(PLATFORMS)}, got {settings.platform!r}")
    return settings


def typed_extra_vars(extra_vars: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """-e key=value gives strings: a key whose default is not a string reads its value as YAML (5, true, [a]).
    `defaults`: key -> default, for the keys to read so."""
    typed = dict(extra_vars)
    for key, default in defaults.items():
        if isinstance(typed.get(key), str) and not isinstance(default, str):
            # Left a string when it is no YAML: the type check then names the key and the value.
            with contextlib.suppress(yaml.YAMLError):
                typed[key] = yaml.safe_load(typed[key])
    return typed


def driver_defaults() -> dict[str, Any]:
    """pav_<field> -> its default, for every driver setting."""
    defaults = Settings()
    return {f"{PREFIX}{f.name}": getattr(defaults, f.name) for f in key_fields()}


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


# What a mapping setting maps.
MAPPINGS = {"test_timeouts_s": "test name to seconds", "gpu_state": "setting to value",
            "expected_versions": "component to version", "declared_hardware": "part to figure"}  # fmt: skip


def _kind(name: str, default: Any) -> str:
    if isinstance(default, dict):
        return f"a mapping of {MAPPINGS.get(name, 'name to value')}"
    kinds = {bool: "true or false", int: "an integer", str: "a string", list: "a list of names"}
    return kinds[type(default)]
