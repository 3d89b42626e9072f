"""GPU and link health from the facts alone (facts.gpus, read through NVML): one `gpu_health` result per
GPU host, failing with every bad part named. Speed gates (derive.py) say a part is slow; these say why a
part is not what a healthy one is: a link down, memory errors, throttling, a capped power limit, Xids.
"""

from __future__ import annotations

from typing import Any

from pav.results import HostRecord, TestResult
from pav.thresholds.hardware import normalize_bus_id, read_hardware

NAME = "gpu_health"
# Clock event reasons that mean the hardware is holding the GPU back (gpu_idle, app clocks: by design).
THROTTLES = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
# Xids NVIDIA's Xid catalog lists as hardware or driver faults that need a reset, a drain or an RMA
# (48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fell off the bus, 92 high single-bit ECC rate,
# 94/95 contained/uncontained ECC, 119/120 GSP); others (13, 31, 43: an application's fault) are listed only.
FATAL_XIDS = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}
# A power limit under the default by more than this is a cap someone set, not rounding.
POWER_SLACK = 0.95


def health_results(hosts: dict[str, HostRecord]) -> list[TestResult]:
    """A result per host whose facts hold NVML GPU facts; none for CPU hosts or older fact sources."""
    out = []
    for name, record in hosts.items():
        gpus = record.facts.get("gpus")
        if isinstance(gpus, dict) and gpus.get("devices"):
            out.append(judge_host(name, gpus))
    return out


def judge_host(host: str, gpus: dict[str, Any]) -> TestResult:
    devices = gpus["devices"]
    named = read_hardware(host, {"gpus": gpus}).gpus  # the same labels the speed gates use
    problems = [p for d, gpu in zip(devices, named, strict=True) for p in device_problems(d, gpu.label())]
    labels = {gpu.bus_id: gpu.label() for gpu in named}
    xids = (gpus.get("xid") or {}).get("events") or []
    problems += xid_problems(xids, labels)
    metrics = {
        "gpus_checked": len(devices),
        "problems": len(problems),
        "xid_events": len(xids),
        "nvlink_links_down": sum(len(_down_links(d)) for d in devices),
    }
    threshold = {
        "gates": [{"metric": "problems", "max": 0, "why": "every GPU and link healthy (facts.gpus)"}]
    }
    status = "fail" if problems else "pass"
    return TestResult(NAME, [host], status, "; ".join(problems), metrics, threshold)


def device_problems(dev: dict[str, Any], label: str) -> list[str]:
    out = [f"{label}: NVLink link {k} down" for k in _down_links(dev)]
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


def xid_problems(events: list[dict[str, Any]], labels: dict[str, str]) -> list[str]:
    out = []
    for event in events:
        xid = event.get("xid")
        if xid in FATAL_XIDS:
            where = labels.get(
                normalize_bus_id(str(event.get("pci_bus_id") or "")), str(event.get("pci_bus_id"))
            )
            out.append(f"{where}: Xid {xid} in the kernel log since boot")
    return out


def _down_links(dev: dict[str, Any]) -> list[int]:
    links = (dev.get("nvlink") or {}).get("links") or []
    return [int(link.get("link", i)) for i, link in enumerate(links) if link.get("up") is False]
