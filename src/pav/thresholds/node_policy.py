"""What a node's state and software are expected to be (issue 50): `pav_gpu_state` and
`pav_expected_versions`, checked once and recorded in results.json (`node_policy`) so that `judge` holds a
recorded run to the same expectations.

The defaults are what a node handed to researchers should be (docs/thresholds.md, "Node state"):
persistence mode on (DCGM's deployment check and gpud flag it off), MIG off (a training node's GPUs whole),
ECC on, application clocks not under their default. "any" leaves a setting unjudged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pav.errors import PavError
from pav.thresholds.declared import Declared, declared_from

# setting -> (its default, the values it may take)
GPU_STATE: dict[str, tuple[str, tuple[str, ...]]] = {
    "persistence_mode": ("enabled", ("enabled", "disabled", "any")),
    "mig_mode": ("disabled", ("enabled", "disabled", "any")),
    "ecc_mode": ("enabled", ("enabled", "disabled", "any")),
    # default: not under the GPU's default application clock; max: at its maximum SM clock
    "app_clocks": ("default", ("default", "max", "any")),
}
# What software_versions compares across a run's nodes (thresholds/versions.py), and what
# pav_expected_versions may pin.
COMPONENTS = ("driver", "cuda_driver", "vbios", "kernel", "torch", "nccl", "hca_fw")


@dataclass(frozen=True)
class NodePolicy:
    gpu_state: dict[str, str] = field(default_factory=lambda: {k: v[0] for k, v in GPU_STATE.items()})
    expected_versions: dict[str, str] = field(default_factory=dict)
    declared: Declared = field(default_factory=Declared)  # pav_declared_hardware (declared.py)

    def record(self) -> dict[str, Any]:
        return {
            "gpu_state": dict(self.gpu_state), "expected_versions": dict(self.expected_versions),
            "declared_hardware": self.declared.record(),
        }  # fmt: skip


def node_policy(
    gpu_state: Mapping[str, Any],
    versions: Mapping[str, Any],
    source: str | Callable[[str], str],
    declared: Mapping[str, Any] | None = None,
) -> NodePolicy:
    """The policy from the two settings (each a mapping; unset keys keep their defaults); a bad key or value
    is a PavError naming it and `source` (the file, or -e; or, given the setting's key, where it was set)."""
    where = source if callable(source) else lambda _: source
    state_from, pins_from = where("pav_gpu_state"), where("pav_expected_versions")
    state = NodePolicy().gpu_state
    for key, value in gpu_state.items():
        if key not in GPU_STATE:
            raise PavError(
                f"{state_from}: pav_gpu_state has no setting {key!r}; known: {', '.join(GPU_STATE)}"
            )
        allowed = GPU_STATE[key][1]
        if value not in allowed:
            raise PavError(
                f"{state_from}: pav_gpu_state.{key} must be one of {', '.join(allowed)}, got {value!r}"
            )
        state[key] = value
    for key, value in versions.items():
        if key not in COMPONENTS:
            known = ", ".join(COMPONENTS)
            raise PavError(f"{pins_from}: pav_expected_versions has no component {key!r}; known: {known}")
        if not isinstance(value, str) or not value:
            raise PavError(
                f"{pins_from}: pav_expected_versions.{key} must be a version string, got {value!r}"
            )
    pins = {k: str(v) for k, v in versions.items()}
    return NodePolicy(state, pins, declared_from(declared or {}, where("pav_declared_hardware")))


def recorded_policy(record: Mapping[str, Any] | None) -> NodePolicy:
    """results.json's node_policy; a run recorded before it: the defaults."""
    if not record:
        return NodePolicy()
    return node_policy(
        record.get("gpu_state") or {},
        record.get("expected_versions") or {},
        "results.json",
        record.get("declared_hardware") or {},
    )
