"""gpu_health: the facts alone name a bad GPU or link (NVLink link or RDMA port down, an RDMA port below its
rate, a PCIe link trained narrow, ECC, remapping, throttling, power, Xid)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pav.results import HostRecord
from pav.thresholds.health import health_results, judge_host
from tests.thresholds.test_derive import NDR, down, hgx, real_4gpu

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
    assert result.metrics == {
        "gpus_checked": 1, "problems": 0, "xid_events": 0, "nvlink_links_down": 0, "pcie_links_narrow": 0,
        "rdma_ports_checked": 0, "rdma_ports_bad": 0,
    }  # fmt: skip


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


# --- issue 36: a down part is named, not taken as the host's normal ---------------------------------------


def judge(host_facts: dict[str, Any]) -> Any:
    """gpu_health as the report makes it: from the host's whole facts (gpus, rdma, nccl_env)."""
    [result] = health_results({"n1": HostRecord("n1", facts=host_facts)})
    return result


def test_a_healthy_8_gpu_host_with_8_infiniband_ports_has_no_problem() -> None:
    result = judge(hgx(8, ports=NDR))
    assert (result.status, result.reason) == ("pass", "")
    assert result.metrics["rdma_ports_checked"] == 8 and result.metrics["problems"] == 0
    assert judge(real_4gpu()).status == "pass"  # the real 4x H100 HGX record


def test_six_nvlinks_down_on_gpu_2_are_named() -> None:
    result = judge(hgx(8, down={2: 6}, ports=NDR))
    assert result.status == "fail" and result.metrics["nvlink_links_down"] == 6
    assert result.reason == "; ".join(
        f"GPU 2 (00000000:38:00.0, GPU-0002-uuid): NVLink link {k} down" for k in range(6)
    )
    real = judge(real_4gpu({2: [0, 3, 7, 8, 11, 17]}))
    assert real.reason.startswith(
        "GPU 2 (00000000:00:08.0, GPU-9119c732-cd1f-36fa-3d5a-001f998889eb): NVLink link 0"
    )


def test_a_down_infiniband_port_is_named() -> None:
    result = judge(hgx(8, ports=down(NDR, 3, rate="10 Gb/sec (4X SDR)")))
    assert (result.status, result.reason) == ("fail", "mlx5_3 port 1: DOWN (InfiniBand)")
    assert (result.metrics["rdma_ports_checked"], result.metrics["rdma_ports_bad"]) == (8, 1)


def test_a_port_below_the_rate_of_the_others_is_named() -> None:
    result = judge(hgx(8, ports=down(NDR, 5, "4: ACTIVE", "200 Gb/sec (4X HDR)")))
    assert result.reason == (
        "mlx5_5 port 1: 200 Gb/sec, below the 400 Gb/sec of the host's other InfiniBand ports"
    )


def test_ports_of_another_link_layer_and_socket_hosts_are_not_judged() -> None:
    eth_down = ["mlx5_8 1 1: DOWN|100 Gb/sec|Ethernet"]  # a front-end NIC beside the InfiniBand HCAs
    assert judge(hgx(8, ports=NDR + eth_down)).status == "pass"
    socket = {**hgx(8, ports=down(NDR, 3)), "nccl_env": {"fabric": "socket"}}
    result = judge(socket)
    assert result.status == "pass" and result.metrics["rdma_ports_checked"] == 0


def test_the_expected_port_count_leaves_extra_ports_alone_and_names_missing_ones() -> None:
    storage = ["mlx5_8 1 4: ACTIVE|200 Gb/sec (4X HDR)|InfiniBand", "mlx5_9 1 1: DOWN|200 Gb/sec|InfiniBand"]
    assert judge({**hgx(8), "rdma": {"ports": NDR + storage, "ports_expected": 8}}).status == "pass"
    result = judge({**hgx(8), "rdma": {"ports": down(NDR[:7], 2), "ports_expected": 8}})
    assert result.reason == (
        "mlx5_2 port 1: DOWN (InfiniBand); 7 InfiniBand ports listed of the 8 expected "
        "(preflight_rdma_ports_expected; facts.rdma.ports): an HCA is missing or not seen by its driver"
    )


def test_a_pcie_link_trained_narrow_is_named_and_an_idle_generation_is_not() -> None:
    host = hgx(8, ports=NDR)
    host["gpus"]["devices"][4]["pcie"].update(width_current=8)  # x8 of x16
    result = judge(host)
    assert result.reason == "GPU 4 (00000000:58:00.0, GPU-0004-uuid): PCIe link trained at x8 of its x16"
    assert result.metrics["pcie_links_narrow"] == 1
    # The facts are read idle: every GPU of hgx() idles at gen1 of gen5, which is no fault.
    assert {d["pcie"]["gen_current"] for d in host["gpus"]["devices"]} == {1}
    gpus = real_gpus()
    gpus["devices"][0]["pcie"].update(width_current=4)
    assert judge_host("n1", gpus).reason == f"{LABEL}: PCIe link trained at x4 of its x16"
