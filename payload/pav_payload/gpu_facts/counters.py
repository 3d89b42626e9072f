"""A GPU's error counters since boot: PCIe replays and NVLink DL errors through NVML, PCIe AER totals from
sysfs. Gates judge their change between the reads before and after a run, not their size."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.decode import sysfs_bus_id
from pav_payload.gpu_facts.missing import LinkMissing, Missing, describe_error
from pav_payload.gpu_facts.output import Aer, GpuCounters, NvLinkErrors

PCI_ROOT = Path("/sys/bus/pci/devices")
# Counter -> (nvmlNvLinkErrorCounter_t name, its value in nvml.h). ECC-data is left out: it counts errors
# the link corrected, and climbs with traffic on healthy links (tests/payload/fixtures/node-state).
NVLINK_ERROR_COUNTERS = {
    "replay": ("NVML_NVLINK_ERROR_DL_REPLAY", 0),
    "recovery": ("NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    "crc_flit": ("NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    "crc_data": ("NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
}
# Aer field -> (the sysfs file, the line in it holding the total; the others count one error kind each).
AER_FILES = {
    "correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
    "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
    "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL"),
}


def read_counters(nvml: ModuleType, h: Any, up_links: list[int], missing: Missing) -> GpuCounters:
    """The NVML counters; ``up_links``: the NVLink links that are up (a down link counts nothing)."""
    return GpuCounters(
        pcie_replay=missing.read("counters.pcie_replay", lambda: int(nvml.nvmlDeviceGetPcieReplayCounter(h))),
        nvlink=_nvlink_errors(nvml, h, up_links, missing),
    )


def _nvlink_errors(nvml: ModuleType, h: Any, up_links: list[int], missing: Missing) -> list[NvLinkErrors]:
    per_link = LinkMissing("counters.nvlink")
    out = []
    for link in up_links:
        values: dict[str, int] = {}
        for name, (constant, default) in NVLINK_ERROR_COUNTERS.items():
            counter = int(getattr(nvml, constant, default))
            try:
                values[name] = int(nvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter))
            except Exception as exc:  # see Missing.read
                per_link.add(name, describe_error(exc), link)
        out.append(NvLinkErrors(link, **values))
    missing.items.extend(per_link.lines())
    return out


def read_aer(pci_root: Path, bus_id: str | None, missing: list[str]) -> Aer:
    """The GPU's AER totals; a VM's virtual PCIe device has no AER files at all."""
    if not bus_id:
        missing.append("counters.aer: the GPU's PCI bus id is unknown, so are its sysfs files")
        return Aer()
    try:
        device = pci_root / sysfs_bus_id(bus_id)
    except ValueError as exc:
        missing.append(f"counters.aer: {exc}")
        return Aer()
    if not any((device / name).exists() for name, _ in AER_FILES.values()):
        missing.append(f"counters.aer: no AER files in sysfs ({device})")
        return Aer()
    totals: dict[str, int | None] = {}
    for kind, (name, total) in AER_FILES.items():
        try:
            totals[kind] = aer_total((device / name).read_text(), total)
        except (OSError, ValueError) as exc:
            totals[kind] = None
            missing.append(f"counters.aer.{kind}: {describe_error(exc)} ({device / name})")
    return Aer(**totals)


def aer_total(text: str, total: str) -> int:
    """The count on the ``total`` line of an aer_dev_* file ("RxErr 0\\n...\\nTOTAL_ERR_COR 3\\n")."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == total:
            return int(words[1])
    raise ValueError(f"no {total} line")
