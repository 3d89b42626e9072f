"""Threshold profiles (thresholds/NAME.yml): gates on a test's metrics, each a min and/or max, and the
profile's nccl-tests gates per collective."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.nccl_ops import KNOWN_OPS
from pav.thresholds.gate import Gate
from pav.units import parse_size
from pav.yamlfile import load_mapping


def known_profiles() -> list[str]:
    return sorted(p.stem for p in paths.THRESHOLDS.glob("*.yml"))


# pav_threshold_profile: auto picks by the GPUs preflight found: (name contains, GPUs per host, profile).
AUTO = (("H100", 8, "h100-sxm-8gpu"), ("H200", 8, "h200-sxm-8gpu"), ("H200", 2, "h200-2gpu"))
AUTO_UNKNOWN_GPU = "gpu-correctness"
# nvidia-smi names boards that are not SXM so: "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL".
NOT_SXM = ("PCIe", "NVL")


def auto_profile(host_facts: list[dict[str, Any]], platform: str = "hosts") -> str:
    if platform == "k8s":
        # Every k8s test is a GPU test on the GPU nodes configure found, but no pod reports the GPU model.
        return AUTO_UNKNOWN_GPU
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


def planned_profile(name: str, platform: str = "hosts") -> str:
    """The profile as a dry run names it: auto with what it will pick."""
    if name != "auto":
        return name
    if platform == "k8s":
        why = "pods report no GPU model; set pav_threshold_profile for bandwidth gates"
        return f"auto: {AUTO_UNKNOWN_GPU} ({why})"
    shapes = ", ".join(f"{profile} for {count}x {gpu} SXM" for gpu, count, profile in AUTO)
    return f"auto: by the GPUs preflight finds, cpu without any, {shapes}, else {AUTO_UNKNOWN_GPU}"


def profile_path(name: str, asked_by: str = "pav_threshold_profile") -> Path:
    """asked_by: where the user named the profile (a setting or an option), so the error says what to fix."""
    path = paths.THRESHOLDS / f"{name}.yml"
    if not re.fullmatch(r"[\w.-]+", name) or not path.is_file():
        known = ", ".join(known_profiles())
        raise PavError(f"unknown threshold profile '{name}'; known: auto, {known}; fix {asked_by}")
    return path


@dataclass(frozen=True)
class Profile:
    """Every gate of a profile, its `extends` chain folded in, each file read once."""

    name: str
    tests: dict[str, list[Gate]]  # test -> its gates
    nccl_tests: dict[str, list[Gate]]  # collective -> busbw gates, nccl-tests on one host's GPUs
    nccl_tests_inter_node: dict[str, list[Gate]]  # the same for ranks across hosts

    def nccl_gates(self, scope: str) -> dict[str, list[Gate]]:
        """The nccl-tests gates of a launch's scope: across hosts nccl-tests crosses the fabric."""
        return self.nccl_tests_inter_node if scope == "cluster" else self.nccl_tests


def read_profile(name: str) -> Profile:
    """The whole profile: per-test gates (`extends: BASE` starts from BASE's; a test listed here replaces
    BASE's) and both nccl-tests sections (a collective listed here replaces BASE's)."""
    path = profile_path(name)
    data = load_mapping(path)
    base = read_profile(str(data["extends"])) if data.get("extends") else Profile(name, {}, {}, {})
    tests = data.get("tests") or {}
    if not isinstance(tests, dict):
        raise PavError(f"{path}: 'tests' must map test names to lists of gates")
    return Profile(
        name,
        base.tests | {test: [_gate(path, test, g) for g in gates or []] for test, gates in tests.items()},
        base.nccl_tests | parse_nccl_gates(data.get("nccl_tests"), str(path)),
        base.nccl_tests_inter_node | parse_nccl_gates(data.get("nccl_tests_inter_node"), str(path)),
    )


def load_profile(name: str) -> dict[str, list[Gate]]:
    """A profile's gates per test (read_profile's `tests`)."""
    return read_profile(name).tests


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


def load_gates(profile: str, section: str = "nccl_tests") -> dict[str, list[Gate]]:
    """The profile's nccl-tests gates, on top of the ones of the profile it extends.

    ``section`` is ``nccl_tests`` (one host's GPUs) or ``nccl_tests_inter_node`` (ranks across hosts).
    """
    path = profile_path(profile)
    data = load_mapping(path)
    base = load_gates(str(data["extends"]), section) if data.get("extends") else {}
    return base | parse_nccl_gates(data.get(section), str(path))


_GATE_KEYS = {"size", "min_busbw_gbps", "why"}
_OPS = ", ".join(KNOWN_OPS)


def parse_nccl_gates(raw: Any, where: str) -> dict[str, list[Gate]]:
    """The nccl_tests: section of a threshold profile: op name -> list of {size, min_busbw_gbps}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise PavError(f"{where}: 'nccl_tests' must map collectives ({_OPS}) to lists of gates")
    gates: dict[str, list[Gate]] = {}
    for op, entries in raw.items():
        if op not in KNOWN_OPS:
            raise PavError(f"{where}: unknown collective '{op}' under nccl_tests; known: {_OPS}")
        if not isinstance(entries, list):
            raise PavError(f"{where}: nccl_tests.{op} must be a list of {{size, min_busbw_gbps}} gates")
        gates[str(op)] = [_nccl_gate(where, str(op), entry) for entry in entries]
    return gates


def _nccl_gate(where: str, op: str, entry: Any) -> Gate:
    if not isinstance(entry, dict) or not {"size", "min_busbw_gbps"} <= entry.keys():
        raise PavError(f"{where}: each gate of nccl_tests.{op} needs 'size' and 'min_busbw_gbps'")
    unknown = sorted(set(entry) - _GATE_KEYS)
    if unknown:
        raise PavError(f"{where}: gate of nccl_tests.{op} has unknown key(s) {', '.join(unknown)}")
    try:
        return Gate.busbw(
            parse_size(entry["size"]), float(entry["min_busbw_gbps"]), str(entry.get("why", ""))
        )
    except (TypeError, ValueError) as exc:
        fix = "use e.g. size: 8G, min_busbw_gbps: 300"
        raise PavError(f"{where}: gate of nccl_tests.{op}: {exc}; {fix}") from None
