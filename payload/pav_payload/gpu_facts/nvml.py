"""Per-GPU facts through NVML (pynvml); the NVLink links are read by ``nvlink``, the GPU's settings by
``state``, its error counters by ``counters``."""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.counters import read_counters
from pav_payload.gpu_facts.decode import (
    cuda_version_text,
    decode_clock_reasons,
    enabled_state,
    normalize_bus_id,
    nvml_text,
)
from pav_payload.gpu_facts.missing import Missing
from pav_payload.gpu_facts.nvlink import read_nvlink, resolve_remote_types
from pav_payload.gpu_facts.output import Device, Ecc, GpuFacts, GpuProcess, Pcie, Power, RemappedRows
from pav_payload.gpu_facts.state import read_state

MIB = 1 << 20


def read_nvml(nvml: ModuleType) -> GpuFacts:
    """Facts of every GPU NVML lists; ``nvml`` is pynvml (or a stand-in) after a successful nvmlInit."""
    top = Missing()
    driver = top.read("driver", lambda: nvml_text(nvml.nvmlSystemGetDriverVersion()))
    version = top.read("nvml_version", lambda: nvml_text(nvml.nvmlSystemGetNVMLVersion()))
    cuda = top.read("cuda_driver", lambda: cuda_version_text(_cuda_driver_version(nvml)))
    count = top.read("devices", lambda: int(nvml.nvmlDeviceGetCount())) or 0
    devices = [_nvml_device(nvml, index) for index in range(count)]
    resolve_remote_types(devices)
    return GpuFacts("nvml", driver, version, top.items, devices, cuda_driver=cuda)


def _cuda_driver_version(nvml: ModuleType) -> int:
    read = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None) or nvml.nvmlSystemGetCudaDriverVersion
    return int(read())


def _nvml_device(nvml: ModuleType, index: int) -> Device:
    missing = Missing()
    handle = missing.read("handle", lambda: nvml.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        # A GPU NVML counts but cannot open (fallen off the bus) is still listed: its absence is the news.
        return Device(index, missing=missing.items)
    h = handle
    device = Device(
        index=index,
        name=missing.read("name", lambda: nvml_text(nvml.nvmlDeviceGetName(h))),
        uuid=missing.read("uuid", lambda: nvml_text(nvml.nvmlDeviceGetUUID(h))),
        pci_bus_id=missing.read(
            "pci_bus_id", lambda: normalize_bus_id(nvml_text(nvml.nvmlDeviceGetPciInfo(h).busId))
        ),
        memory_total_mib=missing.read(
            "memory_total_mib", lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).total) // MIB
        ),
        memory_used_mib=missing.read(
            "memory_used_mib", lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).used) // MIB
        ),
        processes=missing.read("processes", lambda: _nvml_processes(nvml, h)),
        sm_clock_max_mhz=missing.read(
            "sm_clock_max_mhz", lambda: int(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
        ),
        pcie=_nvml_pcie(nvml, h, missing),
        nvlink=read_nvlink(nvml, h, missing),
        ecc=_nvml_ecc(nvml, h, missing),
        remapped_rows=_nvml_remapped_rows(nvml, h, missing),
        clock_event_reasons=missing.read("clock_event_reasons", lambda: _nvml_clock_reasons(nvml, h)),
        power=Power(
            limit_w=missing.read("power.limit_w", lambda: nvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0),
            default_limit_w=missing.read(
                "power.default_limit_w", lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
            ),
        ),
    )
    device.state = read_state(nvml, h, missing)
    device.counters = read_counters(nvml, h, [link.link for link in device.nvlink.links if link.up], missing)
    device.missing = missing.items
    return device


def _nvml_pcie(nvml: ModuleType, h: Any, missing: Missing) -> Pcie:
    return Pcie(
        gen_current=missing.read(
            "pcie.gen_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h))
        ),
        gen_max=missing.read("pcie.gen_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))),
        width_current=missing.read("pcie.width_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))),
        width_max=missing.read("pcie.width_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(h))),
    )


def _nvml_ecc(nvml: ModuleType, h: Any, missing: Missing) -> Ecc:
    uncorrected = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    return Ecc(
        mode_current=missing.read("ecc.mode_current", lambda: enabled_state(nvml.nvmlDeviceGetEccMode(h)[0])),
        uncorrectable_volatile=missing.read(
            "ecc.uncorrectable_volatile",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, nvml.NVML_VOLATILE_ECC)),
        ),
        uncorrectable_aggregate=missing.read(
            "ecc.uncorrectable_aggregate",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, nvml.NVML_AGGREGATE_ECC)),
        ),
    )


def _nvml_remapped_rows(nvml: ModuleType, h: Any, missing: Missing) -> RemappedRows:
    # One call answers all four, so one line in missing covers them (pre-Ampere GPUs retire pages instead).
    rows = missing.read("remapped_rows", lambda: tuple(nvml.nvmlDeviceGetRemappedRows(h)))
    if rows is None:
        return RemappedRows()
    correctable, uncorrectable, pending, failed = rows
    return RemappedRows(int(correctable), int(uncorrectable), bool(pending), bool(failed))


def _nvml_clock_reasons(nvml: ModuleType, h: Any) -> list[str]:
    read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if read is None:  # bindings before the 535 driver spell it "throttle"
        read = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return decode_clock_reasons(int(read(h)))


def _nvml_processes(nvml: ModuleType, h: Any) -> list[GpuProcess]:
    """The compute processes on the GPU, but this one (the reader holds no context, but a caller might)."""
    mine = os.getpid()
    out = []
    for proc in nvml.nvmlDeviceGetComputeRunningProcesses(h):
        pid = int(proc.pid)
        if pid == mine:
            continue
        used = getattr(proc, "usedGpuMemory", None)  # None: NVML_VALUE_NOT_AVAILABLE (a container's)
        out.append(GpuProcess(pid, int(used) // MIB if used is not None else None, *_owner(pid)))
    return out


def _owner(pid: int, proc: Path = Path("/proc")) -> tuple[str | None, str | None]:
    """(name, user) of a process of this host; (None, None) where its PID is not visible here."""
    try:
        name = (proc / str(pid) / "comm").read_text().strip()
        uid = (proc / str(pid)).stat().st_uid
    except OSError:
        return None, None
    try:
        return name, pwd.getpwuid(uid).pw_name
    except KeyError:
        return name, str(uid)
