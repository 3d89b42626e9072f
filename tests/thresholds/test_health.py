"""gpu_health: the facts alone name a bad GPU or link (link down, ECC, remapping, throttling, power, Xid)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pav.results import HostRecord
from pav.thresholds.health import health_results, judge_host

REAL = Path(__file__).parent / "fixtures" / "h100-1gpu-healthy.json"


def real_gpus() -> dict[str, Any]:
    """The NVML facts of a real, healthy H100 (fixtures/README.md)."""
    return json.loads(REAL.read_text())["hosts"]["localhost"]["facts"]["gpus"]


def with_nvlink(gpus: dict[str, Any], down: list[int]) -> dict[str, Any]:
    dev = gpus["devices"][0]
    links = [
        {"link": k, "up": k not in down, "remote_bus_id": "", "remote_type": "switch"} for k in range(18)
    ]
    dev["nvlink"] = {"version": 4, "links_total": 18, "links_up": 18 - len(down), "links": links}
    return gpus


def test_the_real_healthy_h100_is_healthy() -> None:
    result = judge_host("n1", real_gpus())
    assert (result.status, result.reason) == ("pass", "")
    assert result.metrics == {"gpus_checked": 1, "problems": 0, "xid_events": 0, "nvlink_links_down": 0}


LABEL = "GPU 0 (00000000:00:06.0, GPU-cb742177-16ad-07fd-6e4c-07514ed69b1d)"


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data[key]
    data[last] = value


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("ecc.uncorrectable_volatile", 2, "2 uncorrectable ECC errors since boot"),
        ("remapped_rows.pending", True, "row remapping pending (reset the GPU to apply it)"),
        ("remapped_rows.failed", True, "row remapping failed (the GPU needs replacing)"),
        ("clock_event_reasons", ["gpu_idle", "hw_slowdown"], "clocks held back by hw_slowdown"),
        ("power.limit_w", 500.0, "power limit 500 W under the default 700 W"),
    ],
)
def test_each_bad_fact_fails_naming_the_gpu(path: str, value: Any, expected: str) -> None:
    gpus = real_gpus()
    set_path(gpus["devices"][0], path, value)
    result = judge_host("n1", gpus)
    assert result.status == "fail" and result.reason == f"{LABEL}: {expected}"


def test_a_down_nvlink_link_is_named() -> None:
    result = judge_host("n1", with_nvlink(real_gpus(), down=[5, 11]))
    assert result.reason == f"{LABEL}: NVLink link 5 down; {LABEL}: NVLink link 11 down"
    assert result.metrics["nvlink_links_down"] == 2
    assert judge_host("n1", with_nvlink(real_gpus(), down=[])).status == "pass"


def test_a_fatal_xid_is_mapped_to_its_gpu_and_an_application_xid_is_only_counted() -> None:
    gpus = real_gpus()
    line = "NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off the bus."
    gpus["xid"]["events"] = [{"line": line, "pci_bus_id": "00000000:00:06.0", "xid": 79}]
    assert judge_host("n1", gpus).reason == f"{LABEL}: Xid 79 in the kernel log since boot"
    gpus["xid"]["events"] = [{"line": "...", "pci_bus_id": "00000000:00:06.0", "xid": 13}]
    result = judge_host("n1", gpus)
    assert result.status == "pass" and result.metrics["xid_events"] == 1


def test_only_hosts_with_nvml_facts_get_a_result() -> None:
    hosts = {
        "gpu": HostRecord("gpu", facts={"gpus": real_gpus()}),
        "cpu": HostRecord("cpu", facts={"gpus": {"source": "none", "devices": []}}),
        "old": HostRecord("old", facts={"gpu": {"count": "2"}}),
    }
    assert [r.hosts for r in health_results(hosts)] == [["gpu"]]


def test_facts_are_not_changed() -> None:
    gpus = real_gpus()
    before = copy.deepcopy(gpus)
    judge_host("n1", gpus)
    assert gpus == before
