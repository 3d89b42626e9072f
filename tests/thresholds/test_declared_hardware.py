"""Declared hardware (pav_declared_hardware, thresholds/declared.py): the bars come from the declaration, and
gpu_health names each part a node reports below it. Judged on a healthy real run's record, as `judge` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pav.errors import PavError
from pav.thresholds.declared import Declared, declared_from
from tests.thresholds.fault_catalogue import judge, record_of

RUN = "h200x2c-healthy-default"  # 2x H200, PCIe gen5 x16, 18 NVLinks per GPU
BED = "h200x4b-split-2x2-nvlink"  # two hosts: the shape that has a fabric between nodes
H100_LIKE = {"pcie_gen": 5, "pcie_width": 16, "nvlinks_per_gpu": 18}
IB_PORTS = 8


def declared(record: dict[str, Any], **figures: int) -> dict[str, Any]:
    record.setdefault("node_policy", {})["declared_hardware"] = figures
    return record


def gen4(record: dict[str, Any]) -> dict[str, Any]:
    """The slot caps every GPU at Gen4 (NVML's max generation reads 4); the copies are left as healthy, so
    only the declaration can tell."""
    for host in record["hosts"].values():
        for device in host["facts"]["gpus"]["devices"]:
            device["pcie"]["gen_max"] = device["pcie"]["gen_current"] = 4
    return record


def with_ports(record: dict[str, Any], gbit: int) -> dict[str, Any]:
    """Each host of the bed given 8 active InfiniBand ports at `gbit` (the bed's VMs have none)."""
    for host in record["hosts"].values():
        lines = [f"mlx5_{i} 1 4: ACTIVE|{gbit} Gb/sec (4X NDR)|InfiniBand" for i in range(IB_PORTS)]
        host["facts"]["rdma"] = {"ports": lines, "hcas": [f"mlx5_{i}" for i in range(IB_PORTS)]}
        host["facts"].setdefault("nccl_env", {})["fabric"] = "infiniband"
    return record


def health(found: Any) -> list[str]:
    return [r.test.reason for r in found.tests if r.test.name == "gpu_health" and r.test.status == "fail"]


def test_a_declaration_is_checked_key_by_key() -> None:
    assert declared_from({"pcie_gen": 5, "rdma_gbit": 400}, "x.yml") == Declared(pcie_gen=5, rdma_gbit=400)
    with pytest.raises(
        PavError, match=r"^x.yml: pav_declared_hardware has no key 'pcie_generation'; known: "
    ):
        declared_from({"pcie_generation": 5}, "x.yml")
    with pytest.raises(PavError, match=r"pav_declared_hardware.pcie_width must be each GPU's PCIe lanes"):
        declared_from({"pcie_width": 12}, "x.yml")
    with pytest.raises(PavError, match=r"pav_declared_hardware.rdma_gbit must be"):
        declared_from({"rdma_gbit": "400"}, "x.yml")


def test_the_healthy_run_passes_what_it_is_declared_to_be(tmp_path: Path) -> None:
    found = judge(declared(record_of(RUN), **H100_LIKE), tmp_path)
    assert found.verdict == "PASS", health(found)


def test_gen4_where_gen5_is_declared_fails_naming_each_gpu(tmp_path: Path) -> None:
    found = judge(declared(gen4(record_of(RUN)), **H100_LIKE), tmp_path)
    assert found.verdict == "FAIL"
    [reason] = health(found)
    assert reason.count("PCIe gen4 at most, where gen5 is declared (pav_declared_hardware.pcie_gen)") == 2
    assert reason.startswith("GPU 0 (00000000:00:06.0, ")
    probe = next(r.test for r in found.tests if r.test.name == "gpu_probe")
    h2d = next(
        g for g in probe.threshold["gates"] if g["metric"] == "h2d_gbps.0" and g["basis"] == "absolute"
    )
    assert h2d["source"] == "PCIe gen5 x16"  # the bar is the declaration's, not the capped link's


def test_undeclared_the_bar_follows_the_capped_link_and_the_run_says_so(tmp_path: Path) -> None:
    """The hole a declaration closes: NVML's gen4 lowers the absolute bar with it."""
    found = judge(gen4(record_of(RUN)), tmp_path)
    assert found.verdict == "PASS"
    probe = next(r.test for r in found.tests if r.test.name == "gpu_probe")
    h2d = next(
        g for g in probe.threshold["gates"] if g["metric"] == "h2d_gbps.0" and g["basis"] == "absolute"
    )
    assert h2d["source"] == "PCIe gen4 x16"
    assert all(g["bars"].startswith("bars from what the nodes report") for g in found.gates.values())


def test_rails_at_half_the_declared_rate_fail_naming_every_port(tmp_path: Path) -> None:
    healthy = judge(
        declared(with_ports(record_of(BED), 400), rdma_ports=IB_PORTS, rdma_gbit=400), tmp_path / "a"
    )
    assert healthy.verdict == "PASS", health(healthy)
    half = judge(
        declared(with_ports(record_of(BED), 200), rdma_ports=IB_PORTS, rdma_gbit=400), tmp_path / "b"
    )
    assert half.verdict == "FAIL"
    reasons = health(half)
    assert len(reasons) == 2  # each host
    assert all(
        r.count("Gb/sec, below the 400 Gb/sec declared (pav_declared_hardware.rdma_gbit)") == 8
        for r in reasons
    )
    assert "mlx5_0 port 1: 200 Gb/sec, below the 400 Gb/sec declared" in reasons[0]


def test_undeclared_rails_at_half_rate_pass_as_the_issue_found(tmp_path: Path) -> None:
    """Without the declaration every port at 200 is the host's top rate: nothing to compare with."""
    found = judge(with_ports(record_of(BED), 200), tmp_path)
    assert not health(found)
