"""A GPU's error counters since boot: PCIe replays, NVLink DL errors and clock violation times through NVML,
PCIe AER totals from sysfs. Gates judge their change between the reads before and after a run, not their
size."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.decode import sysfs_bus_id
from pav_payload.gpu_facts.missing import LinkMissing, Missing, describe_error, error_code
from pav_payload.gpu_facts.output import Aer, GpuCounters, NvLinkErrors, Violations

PCI_ROOT = Path("/sys/bus/pci/devices")
# Counter -> (nvmlNvLinkErrorCounter_t name, its value in nvml.h). ECC-data is left out: it counts errors
# the link corrected, and climbs with traffic on healthy links (tests/payload/fixtures/node-state).
NVLINK_ERROR_COUNTERS = {
    "replay": ("NVML_NVLINK_ERROR_DL_REPLAY", 0),
    "recovery": ("NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    "crc_flit": ("NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    "crc_data": ("NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
}
# Violations field -> (nvmlPerfPolicyType_t name, its value in nvml.h); older bindings lack some names.
VIOLATION_POLICIES = {
    "power_ns": ("NVML_PERF_POLICY_POWER", 0),
    "thermal_ns": ("NVML_PERF_POLICY_THERMAL", 1),
    "sync_boost_ns": ("NVML_PERF_POLICY_SYNC_BOOST", 2),
    "board_limit_ns": ("NVML_PERF_POLICY_BOARD_LIMIT", 3),
    "low_utilization_ns": ("NVML_PERF_POLICY_LOW_UTILIZATION", 4),
}
NVML_ERROR_NOT_SUPPORTED = 3
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
        violations=read_violations(nvml, h, missing),
    )


def read_violations(nvml: ModuleType, h: Any, missing: Missing) -> Violations:
    """Each policy's violation time; one NotSupported (a policy the board does not count) is a fact of the
    board, listed in not_supported, not a gap in the read."""
    read = getattr(nvml, "nvmlDeviceGetViolationStatus", None)
    if read is None:  # bindings too old to have it: one line, not one per policy
        missing.items.append("counters.violations: this pynvml has no nvmlDeviceGetViolationStatus")
        return Violations()
    not_supported = int(getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED))
    found = Violations()
    for name, (constant, default) in VIOLATION_POLICIES.items():
        try:
            setattr(found, name, int(read(h, int(getattr(nvml, constant, default))).violationTime))
        except Exception as exc:  # see Missing.read
            if error_code(exc) == not_supported:
                found.not_supported.append(name.removesuffix("_ns"))
            else:
                missing.items.append(f"counters.violations.{name}: {describe_error(exc)}")
    return found


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
