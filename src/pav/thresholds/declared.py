"""What the env declares its hardware to be (`pav_declared_hardware`): bars that do not follow the fault.

Without a declaration the derived gates take PCIe generation and width, NVLinks and RDMA ports and rate from
what each node reports, so a node whose slot or BIOS caps PCIe at Gen4, or a fabric whose ports all run at
200 Gb/s where 400 was bought, moves its own bar down with it. Declared, the bars come from the declaration,
and gpu_health names each part that reports less than declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pav.errors import PavError
from pav.thresholds.hardware import Gpu, HostHardware, Rdma

KEY = "pav_declared_hardware"
# key -> (what it declares, the values it may take)
KEYS = {
    "pcie_gen": "each GPU's PCIe generation (1-6)",
    "pcie_width": "each GPU's PCIe lanes (1, 2, 4, 8 or 16)",
    "nvlinks_per_gpu": "NVLinks each GPU has (0: none)",
    "rdma_ports": "RDMA ports of the fabric per node",
    "rdma_gbit": "each RDMA port's rate, Gb/s",
}
ALLOWED = {"pcie_gen": range(1, 7), "pcie_width": (1, 2, 4, 8, 16)}
UNDECLARED = (
    "bars from what the nodes report (no pav_declared_hardware): a PCIe link capped at a lower generation, "
    "NVLinks or RDMA ports missing from the listing, or a fabric at a lower rate than bought move the bar "
    "with them; declare them (docs/configuration.md)"
)


@dataclass(frozen=True)
class Declared:
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlinks_per_gpu: int | None = None
    rdma_ports: int | None = None
    rdma_gbit: int | None = None

    def record(self) -> dict[str, int]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def __bool__(self) -> bool:
        return bool(self.record())


def declared_from(raw: Mapping[str, Any], source: str) -> Declared:
    """The declaration of one mapping; a bad key or value is a PavError naming it and `source`."""
    values: dict[str, int] = {}
    for key, value in raw.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise PavError(f"{source}: {KEY} has no key {key!r}; known: {known}")
        allowed = ALLOWED.get(key)
        bad = not isinstance(value, int) or isinstance(value, bool) or value < 0
        if bad or (allowed is not None and value not in allowed) or (key == "rdma_gbit" and value == 0):
            raise PavError(f"{source}: {KEY}.{key} must be {KEYS[key]}, got {value!r}")
        values[key] = value
    return Declared(**values)


def bars(hw: HostHardware, declared: Declared) -> HostHardware:
    """The host as the derived gates count it: each declared figure in place of the one reported."""
    if not declared:
        return hw
    gpus = [_gpu_bars(g, declared) for g in hw.gpus]
    rdma = hw.rdma
    if declared.rdma_ports or declared.rdma_gbit:
        rdma = replace(rdma, expected=declared.rdma_ports or rdma.expected, declared_gbit=declared.rdma_gbit)
    return replace(hw, gpus=gpus, rdma=rdma)


def _gpu_bars(gpu: Gpu, declared: Declared) -> Gpu:
    changes: dict[str, Any] = {}
    if declared.pcie_gen:
        changes["pcie_gen"] = declared.pcie_gen
    if declared.pcie_width:
        changes["pcie_width"] = declared.pcie_width
    if declared.nvlinks_per_gpu is not None and gpu.nvlink_up is not None:
        changes["nvlink_total"] = declared.nvlinks_per_gpu
    return replace(gpu, **changes)


def problems(hw: HostHardware, declared: Declared) -> list[tuple[str, str]]:
    """(part, problem) for each part the node reports below its declaration."""
    out: list[tuple[str, str]] = []
    for gpu in hw.gpus:
        label = gpu.label()
        if declared.pcie_gen and gpu.pcie_gen and gpu.pcie_gen < declared.pcie_gen:
            why = f"gen{gpu.pcie_gen} at most, where gen{declared.pcie_gen} is declared ({KEY}.pcie_gen)"
            out.append((label, f"{label}: PCIe {why}: the slot, riser or BIOS caps the link"))
        if declared.pcie_width and gpu.pcie_width and gpu.pcie_width < declared.pcie_width:
            out.append((label, f"{label}: PCIe x{gpu.pcie_width} at most, where x{declared.pcie_width} is "
                               f"declared ({KEY}.pcie_width)"))  # fmt: skip
        wired = gpu.nvlink_total
        if declared.nvlinks_per_gpu is not None and wired is not None and wired < declared.nvlinks_per_gpu:
            out.append((label, f"{label}: {wired} NVLinks listed, where {declared.nvlinks_per_gpu} are "
                               f"declared ({KEY}.nvlinks_per_gpu)"))  # fmt: skip
    return out + _rdma_problems(hw.rdma, declared)


def _rdma_problems(rdma: Rdma, declared: Declared) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if declared.rdma_ports and len(rdma.ports) < declared.rdma_ports:
        out.append(("RDMA ports", f"{len(rdma.ports)} {rdma.layer or 'RDMA'} ports listed, where "
                                  f"{declared.rdma_ports} are declared ({KEY}.rdma_ports)"))  # fmt: skip
    if declared.rdma_gbit:
        for port in rdma.up:
            if port.gbit and port.gbit < declared.rdma_gbit:
                why = (
                    f"{port.gbit:g} Gb/sec, below the {declared.rdma_gbit} Gb/sec declared ({KEY}.rdma_gbit)"
                )
                out.append((port.name, f"{port.name}: {why}"))
    return out
