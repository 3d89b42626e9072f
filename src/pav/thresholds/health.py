"""GPU and link health from the facts alone (facts.gpus, read through NVML; facts.rdma from preflight): one
`gpu_health` result per GPU host, failing with every bad part named. Speed gates (derive.py) say a part is
slow, and count a part that is down as if it were up (a down part never lowers a bar); these say why a part
is not what a healthy one is: an NVLink link or an RDMA port down, an RDMA port below its rate, a PCIe link
trained below its width, memory errors, throttling, a capped power limit, Xids; and the GPU's settings and
state against the node policy (gpu_state.py: persistence, MIG, ECC, InfoROM, recovery action, application
clocks, the NVSwitch fabric).

The host's RDMA ports are judged here too, not in a result of their own: they are the host's part of the
fabric the GPUs talk through, read with the same facts, and one result per host keeps one place to look.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pav.results import HostRecord, TestResult
from pav.thresholds import gpu_state
from pav.thresholds.declared import problems as declared_problems
from pav.thresholds.hardware import Rdma, RdmaPort, device_bus_id, read_hardware
from pav.thresholds.node_policy import NodePolicy

NAME = "gpu_health"
# Clock event reasons that mean the hardware is holding the GPU back (gpu_idle, app clocks: by design).
THROTTLES = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
# Xids NVIDIA's Xid catalog lists as hardware or driver faults that need a reset, a drain or an RMA
# (48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fell off the bus, 92 high single-bit ECC rate,
# 94/95 contained/uncontained ECC, 119/120 GSP); others (13, 31, 43: an application's fault) are listed only.
FATAL_XIDS = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}
# A power limit under the default by more than this is a cap someone set, not rounding.
POWER_SLACK = 0.95


def health_results(hosts: dict[str, HostRecord], policy: NodePolicy | None = None) -> list[TestResult]:
    """A result per host whose facts hold NVML GPU facts; none for CPU hosts or older fact sources."""
    out = []
    for name, record in hosts.items():
        gpus = record.facts.get("gpus")
        if isinstance(gpus, dict) and gpus.get("devices"):
            out.append(judge_host(name, gpus, record.facts, policy))
    return out


def judge_host(
    host: str, gpus: dict[str, Any], facts: dict[str, Any] | None = None, policy: NodePolicy | None = None
) -> TestResult:
    """`facts`: the host's other facts (facts.rdma, facts.nccl_env); without them no RDMA port is judged.
    `policy`: the GPU state expected (thresholds/node_policy.py), its defaults where None."""
    policy = policy or NodePolicy()
    hw = read_hardware(host, {**(facts or {}), "gpus": gpus})
    named = hw.gpus  # the same labels the speed gates use
    # A host given part of a machine's GPUs (preflight_gpu_ids) answers for those alone: NVML lists all.
    owned = {gpu.bus_id for gpu in named}
    devices = [d for d in gpus["devices"] if device_bus_id(d) in owned]
    # (part, problem): the part is what a report lists the problem under (a GPU's label, an RDMA port).
    pairs = list(zip(devices, named, strict=True))
    found = [(gpu.label(), p) for d, gpu in pairs for p in device_problems(d, gpu.label())]
    found += [(gpu.label(), p) for d, gpu in pairs for p in gpu_state.state_problems(d, gpu.label())]
    settings = [
        (gpu.label(), p) for d, gpu in pairs for p in gpu_state.setting_problems(d, gpu.label(), policy)
    ]
    if policy.gpu_state["ecc_mode"] == "any":
        settings += gpu_state.ecc_mixed(devices, [gpu.label() for gpu in named])
    found += settings
    labels = {gpu.bus_id: gpu.label() for gpu in named}
    xids = [
        event
        for event in (gpus.get("xid") or {}).get("events") or []
        if len(owned) == len(gpus["devices"]) or device_bus_id(event) in owned
    ]
    found += xid_problems(xids, labels)
    # A host set up for sockets sends nothing over its RDMA ports: an uncabled one there is no fault.
    rdma = hw.rdma if hw.fabric != "socket" else Rdma("")
    bad_ports = bad_rdma_ports(rdma)
    found += [(port.name, f"{port.name}: {why}") for port, why in bad_ports]
    found += [("RDMA ports", p) for p in rdma_count_problems(rdma)]
    found += declared_problems(replace(hw, rdma=rdma), policy.declared)
    problems = [p for _, p in found]
    metrics = {
        "gpus_checked": len(devices),
        "problems": len(problems),
        "xid_events": len(xids),
        "nvlink_links_down": sum(len(_down_links(d)) for d in devices),
        "pcie_links_narrow": sum(1 for d in devices if _narrow(d)),
        "rdma_ports_checked": len(rdma.ports),
        "rdma_ports_bad": len(bad_ports),
    }
    why = (
        "every GPU, link and RDMA port healthy, each GPU as the node policy expects (facts.gpus, facts.rdma)"
    )
    threshold: dict[str, Any] = {"gates": [{"metric": "problems", "max": 0, "why": why}]}
    if found:
        config = set(settings)
        threshold["problems"] = [
            {"part": part, "problem": p} | ({"category": gpu_state.CATEGORY} if (part, p) in config else {})
            for part, p in found
        ]
    status = "fail" if problems else "pass"
    return TestResult(NAME, [host], status, "; ".join(problems), metrics, threshold)


def device_problems(dev: dict[str, Any], label: str) -> list[str]:
    out = [f"{label}: NVLink link {k} down" for k in _down_links(dev)]
    narrow = _narrow(dev)
    if narrow:
        out.append(f"{label}: PCIe link trained at x{narrow[0]} of its x{narrow[1]}")
    ecc = dev.get("ecc") or {}
    if (ecc.get("uncorrectable_volatile") or 0) > 0:
        out.append(f"{label}: {ecc['uncorrectable_volatile']} uncorrectable ECC errors since boot")
    rows = dev.get("remapped_rows") or {}
    if rows.get("failed"):
        out.append(f"{label}: row remapping failed (the GPU needs replacing)")
    elif rows.get("pending"):
        out.append(f"{label}: row remapping pending (reset the GPU to apply it)")
    throttled = sorted(THROTTLES & set(dev.get("clock_event_reasons") or []))
    if throttled:
        out.append(f"{label}: clocks held back by {', '.join(throttled)}")
    power = dev.get("power") or {}
    limit, default = power.get("limit_w"), power.get("default_limit_w")
    if limit and default and limit < default * POWER_SLACK:
        out.append(f"{label}: power limit {limit:g} W under the default {default:g} W")
    return out


def xid_problems(events: list[dict[str, Any]], labels: dict[str, str]) -> list[tuple[str, str]]:
    """(the GPU, the problem) for each fatal Xid."""
    out = []
    for event in events:
        xid = event.get("xid")
        if xid in FATAL_XIDS:
            where = labels.get(device_bus_id(event), str(event.get("pci_bus_id")))
            out.append((where, f"{where}: Xid {xid} in the kernel log since boot"))
    return out


def _down_links(dev: dict[str, Any]) -> list[int]:
    links = (dev.get("nvlink") or {}).get("links") or []
    return [int(link.get("link", i)) for i, link in enumerate(links) if link.get("up") is False]


def _narrow(dev: dict[str, Any]) -> tuple[int, int] | None:
    """(current, max) PCIe width where the link trained narrower than the GPU and its slot allow. Only the
    width is judged: the facts are read at configure, the GPUs idle, and an idle GPU drops its link
    generation to save power (gen1 of gen5 is normal then) but keeps its width, so a narrow link is a fault
    (a bad riser, slot or seating) whenever it is read. The generation would be judged only under load."""
    pcie = dev.get("pcie") or {}
    current, most = pcie.get("width_current"), pcie.get("width_max")
    if isinstance(current, int) and isinstance(most, int) and 0 < current < most:
        return current, most
    return None


def bad_rdma_ports(rdma: Rdma) -> list[tuple[RdmaPort, str]]:
    """Each RDMA port of the host's link layer that is not active, or active below the rate its healthy
    ports run at (the highest of the host's active ports of that layer), with why: `mlx5_3 port 1: DOWN`.
    Where the env sets the ports it expects (preflight_rdma_ports_expected), the host is healthy with that
    many active at the top rate: ports past those (a storage HCA's, say) are left alone."""
    if rdma.expected and len(rdma.healthy) >= rdma.expected:
        return []
    rate, out = rdma.port_gbit, []
    for port in rdma.ports:
        if not port.active:
            out.append((port, f"{port.state or 'not active'} ({port.layer})"))
        elif rate and port.gbit and port.gbit < rate:
            why = f"{port.gbit:g} Gb/sec, below the {rate:g} Gb/sec of the host's other {port.layer} ports"
            out.append((port, why))
    return out


def rdma_count_problems(rdma: Rdma) -> list[str]:
    """A host listing fewer ports than the env expects: an HCA gone from the bus or its driver."""
    if not rdma.expected or len(rdma.ports) >= rdma.expected:
        return []
    return [
        f"{len(rdma.ports)} {rdma.layer or 'RDMA'} ports listed of the {rdma.expected} expected "
        "(preflight_rdma_ports_expected; facts.rdma.ports): an HCA is missing or not seen by its driver"
    ]
