"""The Kubernetes job settings (k8s_*), typed: templates/k8s/defaults.yml names every key with its default,
K8sSettings holds them once read (pav.settings loads them with the driver's settings, in one read)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.yamlfile import load_mapping

TEMPLATES = paths.ROOT / "templates" / "k8s"
K8S_DEFAULTS = TEMPLATES / "defaults.yml"
PREFIX = "k8s_"
PRESET = re.compile(r"^(\d+)gpu-(\d+)vcpu-(\d+)gb$")
CLEAN_POD_POLICIES = ("None", "Running", "All")
JOB_APIS = ("auto", "trainer", "v1")


@dataclass(frozen=True)
class NodeShape:
    """What a worker asks for: every GPU of a node, its CPUs less the reserve, a share of its memory."""

    gpus: int
    cpu: int
    memory_request: str
    memory_limit: str


@dataclass(frozen=True)
class K8sSettings:
    """Each field is the key k8s_<field>, its default in defaults.yml (a test holds both to the same keys)."""

    job_api: str
    namespace: str
    node_preset: str
    cpu_reserved: int
    memory_request_fraction: float
    shm_size: str
    pytorch_image: str
    nccl_tests_image: str
    nccl_tests_dir: str
    privileged: bool
    rdma_resource: str
    node_selector: dict[str, str]
    ttl_seconds_after_finished: int
    clean_pod_policy: str

    def node_shape(self) -> NodeShape:
        match = PRESET.match(self.node_preset)
        if not match:
            raise PavError(
                f"k8s_node_preset {self.node_preset!r} is not a Nebius preset (like 8gpu-128vcpu-1600gb)"
            )
        gpus, vcpus, gb = map(int, match.groups())
        if gpus < 1 or vcpus <= self.cpu_reserved:
            raise PavError(
                f"k8s_node_preset {self.node_preset}: needs at least one GPU and more vCPUs than "
                f"k8s_cpu_reserved ({self.cpu_reserved})"
            )
        request = int(gb * self.memory_request_fraction)
        return NodeShape(gpus, vcpus - self.cpu_reserved, f"{request}G", f"{gb}G")


@cache
def defaults_file() -> dict[str, Any]:
    """defaults.yml as written: its keys are the k8s_* keys there are."""
    return load_mapping(K8S_DEFAULTS)


@cache
def default_k8s_settings() -> K8sSettings:
    """The settings of an env that sets no k8s_* key."""
    return K8sSettings(**{key.removeprefix(PREFIX): value for key, value in defaults_file().items()})


def k8s_settings_from(data: dict[str, Any], source: str, base: K8sSettings | None = None) -> K8sSettings:
    """`base` (default: the defaults) with the k8s_* keys of `data` over it, each checked by kind."""
    base = base or default_k8s_settings()
    changes: dict[str, Any] = {}
    for key, default in defaults_file().items():
        if key in data:
            if not _same_kind(data[key], default):
                raise PavError(f"{source}: {key} must be {_kind(default)}, got {data[key]!r}; fix that key")
            changes[key.removeprefix(PREFIX)] = data[key]
    settings = replace(base, **changes)
    if settings.clean_pod_policy not in CLEAN_POD_POLICIES:
        raise PavError(f"{source}: k8s_clean_pod_policy must be one of {', '.join(CLEAN_POD_POLICIES)}")
    if settings.job_api not in JOB_APIS:
        choices = ", ".join(JOB_APIS)
        raise PavError(f"{source}: k8s_job_api must be one of {choices}, got {settings.job_api!r}")
    if not 0 < settings.memory_request_fraction <= 1:
        raise PavError(f"{source}: k8s_memory_request_fraction must be above 0 and at most 1")
    try:
        settings.node_shape()
    except PavError as exc:
        raise PavError(f"{source}: {exc}") from None
    return settings


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, dict):
        return isinstance(value, dict) and all(isinstance(v, str | int) for v in value.values())
    return isinstance(value, type(default))


def _kind(default: Any) -> str:
    kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             dict: "a mapping of label to value"}  # fmt: skip
    return kinds[type(default)]
