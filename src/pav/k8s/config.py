"""Job settings of a k8s env: templates/k8s/defaults.yml, then the env's group_vars, checked by type."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.setting_keys import K8S_DEFAULTS, unknown_key
from pav.settings import settings_file
from pav.yamlfile import load_mapping

TEMPLATES = paths.ROOT / "templates" / "k8s"
DEFAULTS = K8S_DEFAULTS  # templates/k8s/defaults.yml: every k8s_* key, with its default
PRESET = re.compile(r"^(\d+)gpu-(\d+)vcpu-(\d+)gb$")
CLEAN_POD_POLICIES = ("None", "Running", "All")


@dataclass(frozen=True)
class NodeShape:
    """What a worker asks for: every GPU of a node, its CPUs less the reserve, a share of its memory."""

    gpus: int
    cpu: int
    memory_request: str
    memory_limit: str


@dataclass
class K8sConfig:
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
    node_selector: dict[str, str] = field(default_factory=dict)
    ttl_seconds_after_finished: int = 600
    clean_pod_policy: str = "None"

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


def load_config(inventory_dir: Path) -> K8sConfig:
    defaults = load_mapping(DEFAULTS)
    path = settings_file(inventory_dir)
    env = load_mapping(path) if path else {}
    source = str(path or inventory_dir)
    values: dict[str, Any] = {}
    for key, default in defaults.items():
        value = env.get(key, default)
        if not _same_kind(value, default):
            raise PavError(f"{source}: {key} must be {type(default).__name__}, got {value!r}; fix that key")
        values[key.removeprefix("k8s_")] = value
    unknown = sorted(k for k in env if k.startswith("k8s_") and k not in defaults)
    if unknown:
        raise unknown_key(source, unknown[0], defaults)
    config = K8sConfig(**values)
    if config.clean_pod_policy not in CLEAN_POD_POLICIES:
        raise PavError(f"{source}: k8s_clean_pod_policy must be one of {', '.join(CLEAN_POD_POLICIES)}")
    if not 0 < config.memory_request_fraction <= 1:
        raise PavError(f"{source}: k8s_memory_request_fraction must be above 0 and at most 1")
    config.node_shape()
    return config


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
