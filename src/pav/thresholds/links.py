"""What a host's links can carry, from its facts and thresholds/hardware/gpus.yml: the per-link NVLink and
per-lane PCIe rates, and where each GPU's NVLink links end, down ones included (a down part never lowers a
bar: derive.py counts the full complement)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from pav import paths
from pav.thresholds.hardware import Gpu, HostHardware
from pav.yamlfile import load_mapping


@cache
def hardware_data() -> dict[str, Any]:
    return load_mapping(paths.THRESHOLDS / "hardware" / "gpus.yml")


def nvlink_rate(gpu: Gpu) -> float | None:
    rates = hardware_data()["nvlink_gbps_per_link"]
    return float(rates[gpu.nvlink_version]) if gpu.nvlink_version in rates else None


def pcie_gbps(gpu: Gpu) -> float | None:
    lanes = hardware_data()["pcie_gbps_per_lane"]
    if not gpu.pcie_width or gpu.pcie_gen not in lanes:
        return None
    return round(float(lanes[gpu.pcie_gen]) * gpu.pcie_width, 3)


@dataclass(frozen=True)
class Wiring:
    """Where a GPU's NVLink links end, down ones included: NVML names the far end of a link that is up
    only (a down link reads as no remote device, `remote_type: unknown`), so a down link is placed by
    its GPU's up links or the healthy GPUs' links (nvlink_wiring); `placed` says which."""

    switch: int  # links to NVSwitch
    peers: dict[str, int]  # peer GPU bus id -> links to it
    unplaced: int = 0  # down links whose far end neither rule could tell
    placed: str = ""  # "" (no link down, or unplaced) | "its up links" | "the healthy GPUs' links"


def nvlink_wiring(hw: HostHardware) -> dict[int, Wiring]:
    """Each GPU's links as wired. A GPU with links down: where its up links all end at one place (NVSwitch,
    or one peer GPU) and the healthy GPUs' links (those with none down) do too, its down links end there;
    else, where every healthy GPU's links all end at NVSwitch, so do its down links; else their far end is
    unknown (`unplaced`; pair_links counts them between two GPUs that both have such links)."""
    healthy = [g for g in hw.gpus if g.nvlink_wired and not g.nvlink_down]
    one_end_everywhere = all(_one_end(g) for g in healthy)
    all_switch = bool(healthy) and all(g.nvlink_switch_links == g.nvlink_wired for g in healthy)
    out: dict[int, Wiring] = {}
    for g in hw.gpus:
        down, peers = g.nvlink_down, dict(g.nvlink_peers)
        if not down:
            out[g.index] = Wiring(g.nvlink_switch_links, peers)
        elif _one_end(g) and one_end_everywhere:
            if g.nvlink_switch_links:
                out[g.index] = Wiring(g.nvlink_switch_links + down, peers, placed="its up links")
            else:
                [peer] = peers
                out[g.index] = Wiring(0, {peer: peers[peer] + down}, placed="its up links")
        elif all_switch and not peers:
            out[g.index] = Wiring(g.nvlink_switch_links + down, peers, placed="the healthy GPUs' links")
        else:
            out[g.index] = Wiring(g.nvlink_switch_links, peers, unplaced=down)
    return out


def pair_links(hw: HostHardware, wiring: dict[int, Wiring], src: Gpu, dst: Gpu) -> tuple[int, int]:
    """The NVLink links wired directly between two GPUs, and how many of them are down links whose far end
    is unknown: a link between two GPUs of the host is down at both ends, so up to the fewer of the two
    GPUs' unplaced links count, never past the most links any GPU of the host has to one peer."""
    a, b = wiring[src.index], wiring[dst.index]
    direct = max(a.peers.get(dst.bus_id, 0), b.peers.get(src.bus_id, 0))
    most = max((n for w in wiring.values() for n in w.peers.values()), default=0)
    unknown = max(min(a.unplaced, b.unplaced, most - direct), 0)
    return direct + unknown, unknown


def host_nvlink_rate(hw: HostHardware, gpu: Gpu) -> tuple[float | None, int | None]:
    """Per-link rate and NVLink generation of a GPU; where NVML gave none (read from a link that is up, so a
    GPU with every link down may have none), another GPU's of the same model."""
    same = [gpu, *(g for g in hw.gpus if g.name == gpu.name and g is not gpu)]
    found = next((g for g in same if nvlink_rate(g)), None)
    return (nvlink_rate(found), found.nvlink_version) if found else (None, gpu.nvlink_version)


def _one_end(gpu: Gpu) -> bool:
    """Whether every link of the GPU that is up ends at one place: NVSwitch alone, or one peer GPU alone."""
    if gpu.nvlink_switch_links:
        return not gpu.nvlink_peers
    return len(gpu.nvlink_peers) == 1
