"""Threshold profiles (thresholds/NAME.yml): gates on a test's metrics, each a min and/or max, and the
profile's nccl-tests gates per collective."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.nccl_tests.grade import Gate as NcclGate
from pav.nccl_tests.grade import parse_gates
from pav.yamlfile import load_mapping


@dataclass(frozen=True)
class Gate:
    metric: str
    min: float | None = None
    max: float | None = None
    why: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            k: v for k, v in (("metric", self.metric), ("min", self.min), ("max", self.max)) if v is not None
        }

    def check(self, metrics: dict[str, Any]) -> str:
        """Empty when the gate holds, else the reason it does not."""
        value = lookup(metrics, self.metric)
        if value is None:
            return f"{self.metric} was not measured"
        if self.min is not None and value < self.min:
            return f"{self.metric}={value:g} below the minimum {self.min:g}"
        if self.max is not None and value > self.max:
            return f"{self.metric}={value:g} above the maximum {self.max:g}"
        return ""


def lookup(metrics: dict[str, Any], dotted: str) -> float | None:
    node: Any = metrics
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) else None


def known_profiles() -> list[str]:
    return sorted(p.stem for p in paths.THRESHOLDS.glob("*.yml"))


# pav_threshold_profile: auto picks by the GPUs preflight found: (name contains, GPUs per host, profile).
AUTO = (("H100", 8, "h100-sxm-8gpu"), ("H200", 8, "h200-sxm-8gpu"), ("H200", 2, "h200-2gpu"))
AUTO_UNKNOWN_GPU = "gpu-correctness"
# nvidia-smi names boards that are not SXM so: "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL".
NOT_SXM = ("PCIe", "NVL")


def auto_profile(host_facts: list[dict[str, Any]]) -> str:
    gpu_hosts = [f["gpu"] for f in host_facts if int(f.get("gpu", {}).get("count", 0) or 0) > 0]
    if not gpu_hosts:
        return "cpu"
    first = gpu_hosts[0]
    name = str((first.get("devices") or [["", ""]])[0][1])
    if any(form in name for form in NOT_SXM):
        return AUTO_UNKNOWN_GPU  # the same GPU name on PCIe or NVL boards has other links than the gates
    for needle, count, profile in AUTO:
        if needle in name and int(first["count"]) == count:
            return profile
    return AUTO_UNKNOWN_GPU


def profile_path(name: str) -> Path:
    path = paths.THRESHOLDS / f"{name}.yml"
    if not re.fullmatch(r"[\w.-]+", name) or not path.is_file():
        known = ", ".join(known_profiles())
        raise PavError(f"unknown threshold profile '{name}'; known: auto, {known}; fix pav_threshold_profile")
    return path


def load_profile(name: str) -> dict[str, list[Gate]]:
    """A profile's gates per test. `extends: BASE` starts from BASE's; a test listed here replaces BASE's."""
    path = profile_path(name)
    data = load_mapping(path)
    base = load_profile(str(data["extends"])) if data.get("extends") else {}
    tests = data.get("tests") or {}
    if not isinstance(tests, dict):
        raise PavError(f"{path}: 'tests' must map test names to lists of gates")
    return base | {test: [_gate(path, test, g) for g in gates or []] for test, gates in tests.items()}


def _gate(path: Any, test: str, raw: Any) -> Gate:
    if not isinstance(raw, dict) or "metric" not in raw or not ({"min", "max"} & raw.keys()):
        raise PavError(f"{path}: each gate of {test} needs 'metric' and 'min' or 'max'")
    try:
        return Gate(
            str(raw["metric"]),
            None if raw.get("min") is None else float(raw["min"]),
            None if raw.get("max") is None else float(raw["max"]),
            str(raw.get("why", "")),
        )
    except (TypeError, ValueError):
        raise PavError(f"{path}: gate {raw.get('metric')} of {test}: min/max must be numbers") from None


def load_gates(profile: str, section: str = "nccl_tests") -> dict[str, list[NcclGate]]:
    """The profile's nccl-tests gates, on top of the ones of the profile it extends.

    ``section`` is ``nccl_tests`` (one host's GPUs) or ``nccl_tests_inter_node`` (ranks across hosts).
    """
    path = profile_path(profile)
    data = load_mapping(path)
    base = load_gates(str(data["extends"]), section) if data.get("extends") else {}
    return base | parse_gates(data.get(section), str(path))
