"""Gates derived from host facts, for GPU shapes the hand-written profiles never knew.

Facts are built in the shape the torch_payload role's NVML reader writes (facts.gpus); the topologies are
the real ones of these boards: HGX 8-GPU (every GPU 18 NVLink4 links to NVSwitch; 18 NVLink5 links on
HGX B200/B300), a 4-GPU board partitioned from it, a GB200/GB300 NVL72 compute tray (4 GPUs, 18 NVLink5
links each to the rack's NVLink switches), PCIe cards, and H100 NVL pairs joined by NVLink bridges (12 links
per pair).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pav.results import HostRecord, TestResult, verdict_of
from pav.thresholds.apply import apply_derived, derive_hosts, gates_record
from pav.thresholds.derive import (
    SIZE,
    DerivedGate,
    Missing,
    NotApplicable,
    derive_fabric,
    derive_host,
)
from pav.thresholds.hardware import normalize_bus_id, read_hardware, read_rdma
from pav.thresholds.links import hardware_data
from pav.thresholds.relative import relative_gates
from tests.conftest import ROOT

H100 = "NVIDIA H100 80GB HBM3"
NDR = [f"mlx5_{i} 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand" for i in range(8)]
ETH = ["mlx5_8 1 4: ACTIVE|200 Gb/sec (4X HDR)|Ethernet"]


def bus(i: int) -> str:
    return f"00000000:{0x18 + 0x10 * i:02X}:00.0"


def device(
    i: int, name: str, links: list[dict[str, Any]], gen: int = 5, width: int = 16, nvlink: int = 4
) -> dict[str, Any]:
    return {
        "index": i, "name": name, "uuid": f"GPU-{i:04d}-uuid", "pci_bus_id": bus(i),
        "pcie": {"gen_current": 1, "gen_max": gen, "width_current": width, "width_max": width},
        "nvlink": {"version": nvlink if links else None, "links_total": len(links),
                   "links_up": sum(1 for link in links if link["up"]), "links": links},
        "missing": [],
    }  # fmt: skip


def switch_links(n: int, down: int = 0) -> list[dict[str, Any]]:
    return [{"link": k, "up": k >= down, "remote_bus_id": "", "remote_type": "switch"} for k in range(n)]


def peer_links(peer: int, n: int) -> list[dict[str, Any]]:
    return [{"link": k, "up": True, "remote_bus_id": bus(peer), "remote_type": "gpu"} for k in range(n)]


def facts(devices: list[dict[str, Any]], ports: list[str] | None = None) -> dict[str, Any]:
    return {
        "gpu": {"count": str(len(devices))},
        "gpus": {"source": "nvml", "devices": devices, "missing": []},
        "rdma": {"ports": ports or []},
    }


def hgx(
    n: int,
    name: str = H100,
    down: dict[int, int] | None = None,
    ports: list[str] | None = None,
    nvlink: int = 4,
    gen: int = 5,
) -> dict[str, Any]:
    """n GPUs, each with 18 NVLink links up to NVSwitch (less those `down` says are down)."""
    links = {i: switch_links(18, (down or {}).get(i, 0)) for i in range(n)}
    return facts([device(i, name, links[i], gen=gen, nvlink=nvlink) for i in range(n)], ports)


def gates_by_metric(found: list[Any], test: str | None = None) -> dict[str, Any]:
    return {d.metric: d for d in found if test is None or d.test == test}


def test_8x_h100_sxm_gates_come_from_the_datasheet_nvlink_and_pcie() -> None:
    found = derive_host(read_hardware("n1", hgx(8, ports=NDR)))
    assert not [d for d in found if isinstance(d, Missing)]
    probe = gates_by_metric(found, "gpu_probe")
    assert probe["gemm_bf16_tflops.7"].limit == 989.4 and probe["gemm_bf16_tflops.7"].min == pytest.approx(
        692.58
    )
    assert probe["hbm_copy_gbps.0"].limit == 3350
    assert probe["h2d_gbps.3"].limit == pytest.approx(63.008) and "gen5 x16" in probe["h2d_gbps.3"].source
    assert probe["p2p_gbps.0.7"].limit == 450 and "NVSwitch" in probe["p2p_gbps.0.7"].source
    assert len([m for m in probe if m.startswith("p2p_gbps.")]) == 8 * 7
    allreduce = gates_by_metric(found, "torch_nccl_allreduce")[f"busbw_gbps.all_reduce.{SIZE}"]
    assert (allreduce.limit, allreduce.fraction, allreduce.min) == (450, 0.70, 315)
    nccl = gates_by_metric(found, "nccl_tests_sendrecv")[f"busbw_gbps.{SIZE}"]
    assert nccl.fraction == 0.75 and nccl.limit == 450


# Blackwell hosts as NVML reports them (thresholds/hardware/gpus.yml names where each name was seen):
# (name, GPUs per host, PCIe generation NVML gives as the maximum, dense bf16 TFLOP/s of gpus.yml).
BLACKWELL = [
    pytest.param("NVIDIA B200", 8, 5, 2250, id="hgx-b200"),
    pytest.param("NVIDIA B300 SXM6 AC", 8, 5, 2250, id="hgx-b300"),
    pytest.param("NVIDIA GB200", 4, 5, 2500, id="gb200-nvl72-tray"),
    pytest.param("NVIDIA GB300", 4, 6, 2500, id="gb300-nvl72-tray"),  # a GB300 reports PCIe gen 6
]


@pytest.mark.parametrize(("name", "count", "gen", "tflops"), BLACKWELL)
def test_blackwell_hosts_derive_every_gate_from_the_table_and_nvlink5(
    name: str, count: int, gen: int, tflops: float
) -> None:
    found = derive_host(read_hardware("n1", hgx(count, name, nvlink=5, gen=gen, ports=NDR)))
    assert not [d for d in found if isinstance(d, Missing)]
    probe = gates_by_metric(found, "gpu_probe")
    gemm, hbm = probe["gemm_bf16_tflops.0"], probe[f"hbm_copy_gbps.{count - 1}"]
    assert (gemm.limit, gemm.min) == (tflops, round(0.70 * tflops, 3))
    assert f"{name}: {tflops:g} TFLOP/s dense bf16" in gemm.source
    assert (hbm.limit, hbm.min) == (8000, 6400)
    pcie = {5: 63.008, 6: 121.008}[gen]  # x16 at 3.938 and 7.563 GB/s per lane
    assert probe["h2d_gbps.1"].limit == pytest.approx(pcie) and f"gen{gen} x16" in probe["h2d_gbps.1"].source
    # 18 NVLink5 links up to the switches, 50 GB/s each per direction: 900 GB/s for a pair and for the host.
    pair = probe["p2p_gbps.0.1"]
    assert pair.limit == 18 * 50
    assert pair.source == "the full complement of 18 NVLink5 links to NVSwitch (18 wired, all up) x 50 GB/s"
    assert len([m for m in probe if m.startswith("p2p_gbps.")]) == count * (count - 1)
    allreduce = gates_by_metric(found, "torch_nccl_allreduce")[f"busbw_gbps.all_reduce.{SIZE}"]
    assert (allreduce.limit, allreduce.min) == (900, 630)
    assert allreduce.source == "the full complement of 18 NVLink5 links per GPU (18 wired, all up) x 50 GB/s"
    collectives = [d for d in found if d.test != "gpu_probe"]
    assert collectives and {d.limit for d in collectives} == {900}
    assert gates_by_metric(found, "nccl_tests_sendrecv")[f"busbw_gbps.{SIZE}"].min == 675


def test_the_docs_list_every_model_of_the_table() -> None:
    listed = (ROOT / "docs" / "thresholds.md").read_text()
    assert [name for name in hardware_data()["gpus"] if f"`{name}`" not in listed] == []


def test_an_h100_class_busbw_fails_8x_b200_nvlink5() -> None:
    b200 = hgx(8, "NVIDIA B200", nvlink=5)
    assert judge(nccl_allreduce(700.0), b200).status == "pass"
    slow = judge(nccl_allreduce(450.0), b200)  # what 8x H100 reach: NVLink5 should double it
    assert slow.status == "fail"
    assert "host: busbw_gbps.all_reduce.8589934592 450 GB/s, expected >= 630 = 0.7 x 900" in slow.reason


def limits(found: list[Any]) -> tuple[DerivedGate, dict[str, Any]]:
    """The host's all_reduce gate and its gpu_probe gates by metric."""
    return gates_by_metric(found, "torch_nccl_allreduce")[f"busbw_gbps.all_reduce.{SIZE}"], gates_by_metric(
        found, "gpu_probe"
    )


def test_links_down_never_lower_the_bar_8x_h100() -> None:
    """Issue 36: with 6 of GPU 2's 18 NVLinks down every collective gate came from 12 links (210 instead of
    315 GB/s). The gates count the full complement, and say how many are up."""
    found = derive_host(read_hardware("n1", hgx(8, down={2: 6}, ports=NDR)))
    bus_gate, probe = limits(found)
    assert (bus_gate.limit, bus_gate.min) == (450, 315)
    assert (
        bus_gate.source
        == "the full complement of 18 NVLink4 links per GPU (18 wired, 12 up on GPU 2) x 25 GB/s"
    )
    collectives = [d for d in found if d.metric.startswith("busbw_gbps.")]
    assert len(collectives) == 12 and all(d.limit == 450 for d in collectives)
    assert probe["p2p_gbps.2.0"].limit == probe["p2p_gbps.5.2"].limit == probe["p2p_gbps.0.1"].limit == 450
    assert probe["p2p_gbps.2.0"].min == 450 * probe["p2p_gbps.2.0"].fraction
    assert probe["p2p_gbps.2.0"].source == (
        "the full complement of 18 NVLink4 links to NVSwitch (18 wired, 12 up on GPU 2; GPU 2's 6 down links "
        "taken to end where its up links do) x 25 GB/s"
    )
    assert (
        probe["p2p_gbps.0.1"].source
        == "the full complement of 18 NVLink4 links to NVSwitch (18 wired, all up) x 25 GB/s"
    )


def test_a_gpu_with_every_link_down_is_wired_as_the_healthy_gpus_are() -> None:
    """No link of GPU 2 up: its far ends are unknown, the healthy GPUs' all end at NVSwitch, so do its."""
    host = hgx(4, "NVIDIA H200", down={2: 18})
    host["gpus"]["devices"][2]["nvlink"]["version"] = None  # NVML reads the generation from a link that is up
    bus_gate, probe = limits(derive_host(read_hardware("n1", host)))
    assert bus_gate.limit == 450 and "(18 wired, 0 up on GPU 2)" in bus_gate.source
    assert probe["p2p_gbps.2.3"].limit == 450
    assert (
        "GPU 2's 18 down links taken to end where the healthy GPUs' links do" in probe["p2p_gbps.2.3"].source
    )


def nvl(down: dict[int, int]) -> dict[str, Any]:
    """4 H100 NVL cards bridged 0-1 and 2-3 (12 links a pair), the first `down[i]` links of card i down."""
    devices = [device(i, "NVIDIA H100 NVL", peer_links(i ^ 1, 12)) for i in range(4)]
    for i, n in down.items():
        for link in devices[i]["nvlink"]["links"][:n]:
            link.update(up=False, remote_bus_id=None, remote_type="unknown")  # as the NVML reader records it
        devices[i]["nvlink"]["links_up"] = 12 - n
    return facts(devices)


def test_a_bridged_pair_keeps_its_bridge_limit_with_links_down() -> None:
    _, probe = limits(derive_host(read_hardware("n1", nvl({0: 4, 1: 4}))))
    assert probe["p2p_gbps.0.1"].limit == probe["p2p_gbps.1.0"].limit == 300
    assert (
        "(12 wired, 8 up; GPU 0's 4 down links taken to end where its up links do;"
        in probe["p2p_gbps.0.1"].source
    )
    assert probe["p2p_gbps.0.2"].limit == pytest.approx(63.008)  # never bridged: PCIe, as before
    # The whole bridge down: no link says where it went; the two GPUs with links down are counted as joined.
    _, probe = limits(derive_host(read_hardware("n1", nvl({0: 12, 1: 12}))))
    assert probe["p2p_gbps.0.1"].limit == 300
    assert "12 down links of GPU 0 and of GPU 1, their far end unknown, counted as between them" in (
        probe["p2p_gbps.0.1"].source
    )
    assert probe["p2p_gbps.0.2"].limit == probe["p2p_gbps.1.3"].limit == pytest.approx(63.008)


def test_with_no_link_up_anywhere_nothing_says_where_links_go_and_pcie_bounds() -> None:
    """PCIe cards whose NVLink bridge is absent may list their links as down: no GPU of the host has one up,
    so no wiring is known; the gates fall back to PCIe (gpu_health names every link down)."""
    bus_gate, probe = limits(derive_host(read_hardware("n1", nvl({i: 12 for i in range(4)}))))
    assert bus_gate.limit == probe["p2p_gbps.0.1"].limit == pytest.approx(63.008)
    assert "no NVLink between them" in probe["p2p_gbps.0.1"].source


def test_a_direct_mesh_keeps_the_pair_and_the_host_bus_with_a_pair_down() -> None:
    """4 GPUs joined directly, 4 links to each other GPU (12 each); the 4 links between GPUs 0 and 3 down.
    Their up links end at two peers each, so the down ones are placed by what both ends lack."""
    devices = []
    for i in range(4):
        links = [
            {"link": 4 * n + k, "up": {i, peer} != {0, 3}, "remote_bus_id": bus(peer), "remote_type": "gpu"}
            for n, peer in enumerate(p for p in range(4) if p != i)
            for k in range(4)
        ]
        for link in links:
            if not link["up"]:
                link.update(remote_bus_id=None, remote_type="unknown")
        devices.append(device(i, H100, links))
    bus_gate, probe = limits(derive_host(read_hardware("n1", facts(devices))))
    assert probe["p2p_gbps.0.3"].limit == probe["p2p_gbps.3.0"].limit == probe["p2p_gbps.0.1"].limit == 100
    assert "4 down links of GPU 0 and of GPU 3" in probe["p2p_gbps.0.3"].source
    assert bus_gate.limit == 300 and "(12 wired, 8 up on GPU 0, 8 up on GPU 3)" in bus_gate.source


REAL_4GPU = Path(__file__).parent / "fixtures" / "h100-4gpu-nvml-facts.json"


def real_4gpu(down: dict[int, list[int]] | None = None) -> dict[str, Any]:
    """The NVML facts of a real 4x H100 HGX host (fixtures/README.md), links taken down as NVML records a
    down link: up false, no remote bus id, far end unknown."""
    gpus = json.loads(REAL_4GPU.read_text())
    for index, links in (down or {}).items():
        nvlink = gpus["devices"][index]["nvlink"]
        for k in links:
            nvlink["links"][k].update(up=False, remote_bus_id=None, remote_type="unknown", speed_mbps=None)
        nvlink["links_up"] -= len(links)
    return {"gpus": gpus, "rdma": {"ports": []}}


def test_the_real_4x_h100_record_derives_the_same_gates_with_links_down() -> None:
    healthy = {d.metric: d for d in derive_host(read_hardware("n1", real_4gpu())) if d.test == "gpu_probe"}
    bus_gate, probe = limits(derive_host(read_hardware("n1", real_4gpu({2: [0, 3, 7, 8, 11, 17]}))))
    assert bus_gate.limit == 450 and "(18 wired, 12 up on GPU 2)" in bus_gate.source
    assert {m: g.limit for m, g in probe.items()} == {m: g.limit for m, g in healthy.items()}
    assert healthy["p2p_gbps.2.3"].source.endswith("(18 wired, all up) x 25 GB/s")


def test_nvl_bridged_pairs_gate_pairs_on_their_bridge_and_collectives_on_pcie() -> None:
    name = "NVIDIA H100 NVL"
    devices = [device(i, name, peer_links(i ^ 1, 12)) for i in range(4)]  # 0-1 and 2-3 bridged
    found = derive_host(read_hardware("n1", facts(devices)))
    probe = gates_by_metric(found, "gpu_probe")
    assert probe["p2p_gbps.0.1"].limit == 300 and "12 NVLink4 links" in probe["p2p_gbps.0.1"].source
    assert (
        probe["p2p_gbps.0.2"].limit == pytest.approx(63.008) and "no NVLink" in probe["p2p_gbps.0.2"].source
    )
    bus_gate = gates_by_metric(found, "torch_nccl_allreduce")[f"busbw_gbps.all_reduce.{SIZE}"]
    assert "PCIe gen5 x16" in bus_gate.source and bus_gate.limit == pytest.approx(63.008)


def test_pcie_cards_without_nvlink_use_the_pcie_link() -> None:
    devices = [device(i, "NVIDIA H100 PCIe", [], gen=5, width=16) for i in range(2)]
    found = derive_host(read_hardware("n1", facts(devices)))
    assert not [d for d in found if isinstance(d, Missing)]
    assert gates_by_metric(found, "gpu_probe")["gemm_bf16_tflops.0"].limit == 756.5
    assert gates_by_metric(found, "torch_nccl_allreduce")[
        f"busbw_gbps.all_reduce.{SIZE}"
    ].limit == pytest.approx(63.008)


def test_one_gpu_has_no_pair_and_no_collective_gates() -> None:
    found = derive_host(read_hardware("n1", facts([device(0, H100, switch_links(18))])))
    assert {d.test for d in found} == {"gpu_probe"}
    assert not [d for d in found if d.metric.startswith("p2p_gbps")]


def test_a_gpu_whose_slot_allows_gen4_x8_gets_that_limit() -> None:
    found = derive_host(read_hardware("n1", facts([device(0, H100, switch_links(18), gen=4, width=8)])))
    assert gates_by_metric(found, "gpu_probe")["h2d_gbps.0"].limit == pytest.approx(15.752)


def test_a_pcie_link_trained_below_its_width_keeps_the_host_copy_limit() -> None:
    """The host-copy, pair and bus gates read NVML's max generation and width (GPU and slot), never the
    current: a link trained at x8 of x16 is gpu_health's to name, not a lower bar."""
    host = facts([device(i, "NVIDIA H100 PCIe", []) for i in range(2)])
    host["gpus"]["devices"][1]["pcie"].update(gen_current=1, width_current=8)
    found = derive_host(read_hardware("n1", host))
    bus_gate, probe = limits(found)
    assert probe["h2d_gbps.1"].limit == probe["d2h_gbps.1"].limit == pytest.approx(63.008)
    assert "gen5 x16" in probe["h2d_gbps.1"].source
    assert probe["p2p_gbps.0.1"].limit == bus_gate.limit == pytest.approx(63.008)


def test_an_unknown_model_is_missing_with_the_fix() -> None:
    found = derive_host(read_hardware("n1", facts([device(0, "NVIDIA Foo 9000", [])])))
    missing = [d for d in found if isinstance(d, Missing)]
    assert {m.metric for m in missing} == {"gemm_bf16_tflops.0", "hbm_copy_gbps.0"}
    assert "'NVIDIA Foo 9000' has no entry in thresholds/hardware/gpus.yml" in missing[0].fact
    assert "pav_threshold_profile" in missing[0].fact


def test_inter_node_gate_is_the_slowest_hosts_infiniband_ports() -> None:
    a = read_hardware("a", hgx(8, ports=NDR))
    b = read_hardware("b", hgx(8, ports=NDR[:6] + ETH))  # two HCAs gone: the Ethernet port does not count
    gate = derive_fabric([a, b], "nccl_tests_all_reduce_multi")
    assert isinstance(gate, DerivedGate)
    assert gate.limit == 300 and gate.min == 240
    assert gate.source == (
        "the full complement of 6 InfiniBand ports on b (6 listed, 6 active) x 400 Gb/s "
        "= 300 GB/s per direction"
    )
    gate = derive_fabric([a, read_hardware("c", hgx(8))], "torch_nccl_allreduce_multi")
    assert isinstance(gate, Missing) and "no active InfiniBand or RoCE port on c" in gate.fact


def down(
    lines: list[str], index: int, state: str = "1: DOWN", rate: str = "400 Gb/sec (4X NDR)"
) -> list[str]:
    """Port `index` of `lines` in another state or at another rate, as the sysfs files would say."""
    out = list(lines)
    out[index] = f"mlx5_{index} 1 {state}|{rate}|InfiniBand"
    return out


def test_a_down_or_slow_rdma_port_never_lowers_the_inter_node_bar() -> None:
    """Issue 36: with one of 8 InfiniBand ports DOWN the gate came from the 7 left. A DOWN port's sysfs rate
    means nothing (10 Gb/s here); every port counts at the rate the healthy ones run."""
    healthy = read_hardware("a", hgx(8, ports=NDR))
    for ports, note in (
        (down(NDR, 3, rate="10 Gb/sec (4X SDR)"), "8 listed, 7 active"),
        (down(NDR, 5, "4: ACTIVE", "200 Gb/sec (4X HDR)"), "8 listed, 8 active, 1 below that rate"),
    ):
        hw = read_hardware("b", hgx(8, ports=ports))
        assert (hw.rdma_gbps, hw.rdma_ports) == (400, 8)
        gate = derive_fabric([healthy, hw], "torch_nccl_allreduce_multi")
        assert isinstance(gate, DerivedGate) and (gate.limit, gate.min) == (400, 320)
        assert f"8 InfiniBand ports on b ({note}) x 400 Gb/s = 400 GB/s" in gate.source


def test_the_expected_port_count_sets_the_complement() -> None:
    lost = {**hgx(8, ports=NDR[:6]), "rdma": {"ports": NDR[:6], "ports_expected": 8}}  # two HCAs gone
    gate = derive_fabric([read_hardware("b", lost)], "torch_nccl_allreduce_multi")
    assert isinstance(gate, DerivedGate) and gate.limit == 400
    assert (
        "8 InfiniBand ports on b (8 expected (preflight_rdma_ports_expected); 6 listed, 6 active)"
        in gate.source
    )
    storage = ["mlx5_8 1 4: ACTIVE|200 Gb/sec (4X HDR)|InfiniBand", "mlx5_9 1 1: DOWN|200 Gb/sec|InfiniBand"]
    extra = {**hgx(8), "rdma": {"ports": NDR + storage, "ports_expected": 8}}  # a storage HCA's ports too
    assert read_hardware("c", extra).rdma_gbps == 400


def test_read_rdma_picks_the_fabric_link_layer_and_bus_ids() -> None:
    both = {"ports": NDR + ETH}
    assert read_rdma(both).layer == "InfiniBand" and len(read_rdma(both).ports) == 8
    assert read_rdma({"ports": ETH}).gbps == 25.0  # RoCE where there is no InfiniBand
    roce = read_rdma(both, "roce")  # nccl_env_fabric says which layer the fabric runs over
    assert (roce.layer, [p.name for p in roce.ports], roce.gbps) == ("Ethernet", ["mlx5_8 port 1"], 25.0)
    only_down = read_rdma({"ports": ["mlx5_0 1 1: DOWN|400 Gb/sec (4X NDR)|InfiniBand"]})
    assert (only_down.counted, only_down.gbps) == (1, None)  # no port active: no rate to count at
    [port] = read_rdma({"ports": ["mlx5_1 1 1: DOWN||unknown", "mlx5_2 2 4: ACTIVE|bad|InfiniBand"]}).ports
    assert (port.name, port.state, port.gbit, port.active) == ("mlx5_2 port 2", "ACTIVE", None, True)
    assert normalize_bus_id("0000:1b:00.0") == "00000000:1B:00.0"


# --- judging ------------------------------------------------------------------------------------------


def probe_metrics(gemm: list[float], pairs: dict[tuple[int, int], float] | None = None) -> dict[str, Any]:
    n = len(gemm)
    p2p: dict[str, dict[str, float]] = {}
    for i in range(n):
        for j in range(n):
            if i != j:
                p2p.setdefault(str(i), {})[str(j)] = (pairs or {}).get((i, j), 380.0)
    return {
        "gpu_count": n,
        "gemm_bf16_tflops": {str(i): v for i, v in enumerate(gemm)},
        "hbm_copy_gbps": {str(i): 3000.0 for i in range(n)},
        "h2d_gbps": {str(i): 55.0 for i in range(n)},
        "d2h_gbps": {str(i): 54.0 for i in range(n)},
        "p2p_gbps": p2p,
        "wrong_total": 0,
    }


def judge(test: TestResult, host_facts: dict[str, Any], profile: str = "auto") -> TestResult:
    hosts = {h: HostRecord(h, facts=host_facts) for h in test.hosts}
    apply_derived([test], derive_hosts(hosts), profile)
    return test


def probe(metrics: dict[str, Any]) -> TestResult:
    return TestResult("gpu_probe", ["n1"], "pass", metrics=metrics, threshold={"gates": []})


def test_healthy_probe_passes_with_every_gate_recorded() -> None:
    test = judge(probe(probe_metrics([760.0, 755.0, 758.0, 761.0])), hgx(4))
    assert test.status == "pass", test.reason
    gates = test.threshold["gates"]
    bases = {(g["metric"], g["basis"]) for g in gates}
    assert ("gemm_bf16_tflops.0", "absolute") in bases and ("gemm_bf16_tflops.0", "relative") in bases
    assert ("p2p_gbps.3.2", "relative") in bases
    assert all(g["status"] == "pass" and {"limit", "fraction", "source", "part"} <= g.keys() for g in gates)


def test_a_shared_gpu_fails_naming_that_gpu() -> None:
    # Another process busy on GPU 2: 0.42x of its healthy GEMM rate (issue 14's H100 measurement).
    test = judge(probe(probe_metrics([760.0, 757.0, 0.42 * 760.0, 759.0])), hgx(4))
    assert test.status == "fail"
    assert "GPU 2 (00000000:38:00.0, GPU-0002-uuid): gemm_bf16_tflops.2 319.2 TFLOP/s" in test.reason
    assert all(reason.startswith("GPU 2 (") for reason in test.reason.split("; "))
    failed = {(g["metric"], g["basis"]) for g in test.threshold["gates"] if g["status"] == "fail"}
    assert failed == {("gemm_bf16_tflops.2", "absolute"), ("gemm_bf16_tflops.2", "relative")}


def test_relative_gate_catches_a_gpu_that_is_slow_but_above_the_absolute_floor() -> None:
    test = judge(probe(probe_metrics([780.0, 778.0, 700.0, 779.0])), hgx(4))
    assert test.status == "fail"
    failed = [g for g in test.threshold["gates"] if g["status"] == "fail"]
    assert [(g["metric"], g["basis"]) for g in failed] == [("gemm_bf16_tflops.2", "relative")]
    assert "median of the host's other 3 GPUs: 779" in failed[0]["source"]


def test_a_slow_pair_fails_naming_the_pair() -> None:
    test = judge(probe(probe_metrics([760.0] * 4, {(1, 3): 150.0})), hgx(4))
    assert test.status == "fail"
    assert "GPU 1 -> GPU 3: p2p_gbps.1.3 150 GB/s" in test.reason
    failed = {g["metric"] for g in test.threshold["gates"] if g["status"] == "fail"}
    assert failed == {"p2p_gbps.1.3"}


def test_relative_gate_for_a_shape_with_no_facts_at_all() -> None:
    gates = relative_gates("gpu_probe", probe_metrics([700.0, 300.0]), None)
    failing = [g for g in gates if (g.check(probe_metrics([700.0, 300.0]))["status"]) == "fail"]
    assert [g.part for g in failing] == ["GPU 1"]


def nccl_allreduce(busbw: float, threshold: dict[str, Any] | None = None) -> TestResult:
    metrics = {"busbw_gbps": {"all_reduce": {str(SIZE): busbw}}, "wrong_total": 0}
    return TestResult(
        "torch_nccl_allreduce", ["n1"], "pass", metrics=metrics, threshold=threshold or {"gates": []}
    )


def test_p2p_disabled_on_4_nvlink_gpus_fails_the_derived_busbw_gate() -> None:
    # Issue 14: 4x H200 with NCCL_P2P_DISABLE=1 measured 23 GB/s where the healthy run gave 365.
    assert judge(nccl_allreduce(365.0), hgx(4, "NVIDIA H200")).status == "pass"
    slow = judge(nccl_allreduce(23.0), hgx(4, "NVIDIA H200"))
    assert slow.status == "fail"
    assert "host: busbw_gbps.all_reduce.8589934592 23 GB/s, expected >= 315 = 0.7 x 450" in slow.reason


def test_a_profile_gate_overrides_the_derived_gate_on_the_same_metric() -> None:
    metric = f"busbw_gbps.all_reduce.{SIZE}"
    test = nccl_allreduce(200.0, {"gates": [{"metric": metric, "min": 150.0}]})
    judged = judge(test, hgx(4, "NVIDIA H200"))
    assert judged.status == "pass" and len(judged.threshold["gates"]) == 1


def test_nccl_tests_result_gets_the_derived_gate_unless_the_profile_sets_its_size() -> None:
    metrics = {"op": "all_reduce", "busbw_gbps": {str(SIZE): 100.0}, "wrong_total": 0}
    test = TestResult(
        "nccl_tests_all_reduce", ["n1"], "pass", metrics=dict(metrics), threshold={"nccl_tests": []}
    )
    assert judge(test, hgx(8)).status == "fail"
    covered = {"nccl_tests": [{"size_bytes": SIZE, "min_busbw_gbps": 90.0}]}
    test = TestResult("nccl_tests_all_reduce", ["n1"], "pass", metrics=dict(metrics), threshold=covered)
    assert judge(test, hgx(8)).status == "pass"


def test_no_silent_pass_an_unknown_gpu_is_an_error_naming_the_fact() -> None:
    host = facts([device(0, "NVIDIA Foo 9000", [])])
    test = judge(probe(probe_metrics([500.0])), host)
    assert test.status == "error"
    assert "no performance gate for gemm_bf16_tflops.0" in test.reason and "gpus.yml" in test.reason
    assert verdict_of([test]) == "FAIL"
    record = gates_record([test], derive_hosts({"n1": HostRecord("n1", facts=host)}), "auto")
    assert any("NVIDIA Foo 9000" in m for m in record["n1"]["missing"])


def test_chosen_gpu_correctness_turns_the_derived_gates_off_and_says_so() -> None:
    host = facts([device(0, "NVIDIA Foo 9000", [])])
    test = judge(probe(probe_metrics([1.0])), host, "gpu-correctness")
    assert test.status == "pass" and test.threshold["gates"] == []
    record = gates_record([test], derive_hosts({"n1": HostRecord("n1", facts=host)}), "gpu-correctness")
    assert record == {"n1": {"derived": False, "note": "no performance gates (chosen)"}}


def test_inter_node_result_is_judged_by_the_fabric_gate() -> None:
    metrics = {"busbw_gbps": {"all_reduce": {str(SIZE): 120.0}}, "wrong_total": 0}
    test = TestResult(
        "torch_nccl_allreduce_multi", ["a", "b"], "pass", metrics=metrics, threshold={"gates": []}
    )
    hosts = {"a": HostRecord("a", facts=hgx(8, ports=NDR)), "b": HostRecord("b", facts=hgx(8, ports=NDR))}
    apply_derived([test], derive_hosts(hosts), "auto")
    assert test.status == "fail" and "fabric: busbw_gbps.all_reduce.8589934592 120 GB/s" in test.reason


def test_on_a_socket_fabric_no_inter_node_bandwidth_gate_applies_and_the_run_says_so() -> None:
    """Hosts set up for sockets (nccl_env_fabric: socket, facts.nccl_env) have no RDMA rate to bound the
    bandwidth between them: the inter-node test is judged without that gate, and says why. Hosts set up for
    InfiniBand without an active port are still a missing fact (an error), not this."""
    socket = {**hgx(8), "nccl_env": {"fabric": "socket"}}
    gate = derive_fabric(
        [read_hardware("a", socket), read_hardware("b", socket)], "torch_nccl_allreduce_multi"
    )
    assert isinstance(gate, NotApplicable) and "the fabric is sockets" in gate.why
    metrics = {"busbw_gbps": {"all_reduce": {str(SIZE): 3.4}}, "wrong_total": 0}
    test = TestResult(
        "torch_nccl_allreduce_multi", ["a", "b"], "pass", metrics=metrics, threshold={"gates": []}
    )
    hosts = {"a": HostRecord("a", facts=socket), "b": HostRecord("b", facts=socket)}
    apply_derived([test], derive_hosts(hosts), "auto")
    assert test.status == "pass", test.reason
    assert test.threshold["not_applicable"][-1:] == [
        {"metric": f"busbw_gbps.all_reduce.{SIZE}", "not_applicable": gate.why}
    ]
    infiniband = {**hgx(8), "nccl_env": {"fabric": "infiniband"}}
    gate = derive_fabric(
        [read_hardware("a", infiniband), read_hardware("b", socket)], "torch_nccl_allreduce_multi"
    )
    assert isinstance(gate, Missing)


def test_cpu_hosts_get_no_derived_gates() -> None:
    test = TestResult(
        "torch_gloo_allreduce", ["n1"], "pass", metrics={"wrong_total": 0}, threshold={"gates": []}
    )
    judged = judge(test, {"gpu": {"count": "0", "devices": []}})
    assert judged.status == "pass" and judged.threshold["gates"] == []
