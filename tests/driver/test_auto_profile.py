"""pav_threshold_profile auto: the profile from the GPUs preflight found (names as nvidia-smi prints them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pav.thresholds.profiles import auto_profile, planned_profile

REAL_RUN = Path(__file__).parents[1] / "report" / "fixtures" / "h200-2gpu-results.json"


def facts(name: str, count: int) -> dict[str, Any]:
    devices = [
        [str(i), name, "81559", "580.159.04", f"00000000:0{i}:00.0", "Disabled", "96.00"]
        for i in range(count)
    ]
    return {"gpu": {"count": str(count), "devices": devices}}


def test_the_real_2x_h200_hosts_facts_pick_h200_2gpu() -> None:
    hosts = json.loads(REAL_RUN.read_text())["hosts"]
    assert auto_profile([h["facts"] for h in hosts.values()]) == "h200-2gpu"


@pytest.mark.parametrize(
    ("name", "count", "profile"),
    [
        ("NVIDIA H100 80GB HBM3", 8, "h100-sxm-8gpu"),
        ("NVIDIA H200", 8, "h200-sxm-8gpu"),
        ("NVIDIA H100 PCIe", 8, "gpu-correctness"),  # no NVLink4 mesh: the SXM gates would fail a good host
        ("NVIDIA H100 NVL", 8, "gpu-correctness"),
        ("NVIDIA H200 NVL", 2, "gpu-correctness"),
        ("NVIDIA H100 80GB HBM3", 4, "gpu-correctness"),
        ("NVIDIA A100-SXM4-80GB", 8, "gpu-correctness"),
        # Blackwell has no hand-written profile: the derived gates (thresholds/hardware/gpus.yml) judge it.
        ("NVIDIA B200", 8, "gpu-correctness"),
        ("NVIDIA B300 SXM6 AC", 8, "gpu-correctness"),
        ("NVIDIA GB200", 4, "gpu-correctness"),
        ("NVIDIA GB300", 4, "gpu-correctness"),
    ],
)
def test_gpu_name_and_count_pick_the_profile(name: str, count: int, profile: str) -> None:
    assert auto_profile([facts(name, count)]) == profile


def test_no_gpu_is_the_cpu_profile() -> None:
    assert auto_profile([{"gpu": {"count": "0", "devices": []}}]) == "cpu"


def test_on_k8s_auto_is_gpu_correctness() -> None:
    """Every k8s test is a GPU test, and no pod reports the GPU model: cpu would fail every one of them."""
    assert auto_profile([{"k8s": {"node": "n1", "pods": []}}], "k8s") == "gpu-correctness"
    assert planned_profile("auto", "k8s").startswith("auto: gpu-correctness (pods report no GPU model")
    assert planned_profile("h100-sxm-8gpu", "k8s") == "h100-sxm-8gpu"
