"""The JSON object ``facts`` prints: what the driver stores as the host's ``facts.gpus``."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field


@dataclass
class Pcie:
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


@dataclass
class NvLinkLink:
    link: int
    up: bool
    remote_bus_id: str | None = None
    remote_type: str = "unknown"  # gpu | switch | unknown (a link that is down has no peer to name)
    speed_mbps: int | None = None  # NVML's per-link speed field: MB/s (1e6 B) per direction


@dataclass
class NvLink:
    """A board without NVLink has 0 links (a fact); null counts mean the links could not be read."""

    version: int | None = None  # the NVLink generation (4 for H100 and H200)
    links_total: int | None = 0
    links_up: int | None = 0
    links: list[NvLinkLink] = field(default_factory=list)

    @classmethod
    def unknown(cls) -> NvLink:
        return cls(None, None, None, [])


@dataclass
class Ecc:
    mode_current: str | None = None  # enabled | disabled
    uncorrectable_volatile: int | None = None
    uncorrectable_aggregate: int | None = None


@dataclass
class RemappedRows:
    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failed: bool | None = None


@dataclass
class Power:
    limit_w: float | None = None
    default_limit_w: float | None = None


@dataclass
class GpuProcess:
    """A compute process holding the GPU when the facts were read (issue 50: a leftover is a user problem)."""

    pid: int
    used_mib: int | None = None  # None where NVML cannot say (a process of another container, some drivers)
    name: str | None = None  # /proc/PID/comm; None where the PID is not this host's to see (a container)
    user: str | None = None  # the owner of /proc/PID, by name where the host knows it, else its uid


@dataclass
class GpuFabric:
    """The GPU's NVSwitch fabric registration, as nvmlDeviceGetGpuFabricInfoV gives it (version 2)."""

    state: int | None = None  # nvmlGpuFabricState_t: 1 not started, 2 in progress, 3 completed
    status: int | None = None  # the nvmlReturn_t of the registration: 0 success
    clique_id: int | None = None
    cluster_uuid: str | None = None  # all zeros where no IMEX domain names one
    health_mask: int | None = None  # NVML_GPU_FABRIC_HEALTH_MASK_* bits: 0 healthy


@dataclass
class GpuState:
    """Settings and standing the node-state gates compare with the fleet's (issue 50)."""

    persistence_mode: str | None = None  # enabled | disabled
    mig_mode: str | None = None  # enabled | disabled (current) | unsupported (a GPU without MIG)
    inforom_valid: bool | None = None  # False: NVML says the InfoROM is corrupted
    vbios: str | None = None
    app_clock_sm_mhz: int | None = None
    app_clock_sm_default_mhz: int | None = None
    recovery_action: int | None = None  # 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset
    fabric: GpuFabric | None = None  # None: no NVSwitch fabric on this board (or unread: see missing)


@dataclass
class Aer:
    """PCIe AER totals since boot, from the device's sysfs files (none in most VMs)."""

    correctable: int | None = None
    nonfatal: int | None = None
    fatal: int | None = None


@dataclass
class NvLinkErrors:
    """One up link's DL error counters since boot; their change between two reads is what gates judge."""

    link: int
    replay: int | None = None
    recovery: int | None = None
    crc_flit: int | None = None
    crc_data: int | None = None


@dataclass
class Violations:
    """How long, in ns since the driver loaded, NVML says each perf policy held the GPU's clocks under what
    was asked (nvmlDeviceGetViolationStatus): read before and after the tests, the change is the time it
    throttled under load, which the idle reads of clock_event_reasons never see (issue 63)."""

    power_ns: int | None = None
    thermal_ns: int | None = None
    sync_boost_ns: int | None = None
    board_limit_ns: int | None = None
    low_utilization_ns: int | None = None
    not_supported: list[str] = field(default_factory=list)  # policies this GPU answers NotSupported for


@dataclass
class GpuCounters:
    pcie_replay: int | None = None
    aer: Aer = field(default_factory=Aer)
    nvlink: list[NvLinkErrors] = field(default_factory=list)  # the links that are up
    violations: Violations = field(default_factory=Violations)


@dataclass
class Device:
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None  # ~0.5 GiB on an idle H100 or H200: the driver's own
    processes: list[GpuProcess] | None = None  # compute processes; None: not read (see missing)
    sm_clock_max_mhz: int | None = None
    pcie: Pcie = field(default_factory=Pcie)
    nvlink: NvLink = field(default_factory=NvLink.unknown)
    ecc: Ecc = field(default_factory=Ecc)
    remapped_rows: RemappedRows = field(default_factory=RemappedRows)
    clock_event_reasons: list[str] | None = None
    power: Power = field(default_factory=Power)
    state: GpuState = field(default_factory=GpuState)  # NVML only: nvidia-smi leaves it null
    counters: GpuCounters = field(default_factory=GpuCounters)  # likewise, but for AER (from sysfs)
    missing: list[str] = field(default_factory=list)  # "field.path: why it is null"


@dataclass
class XidEvent:
    line: str
    pci_bus_id: str  # normalised like the devices' pci_bus_id, so an event names its GPU
    xid: int


@dataclass
class XidScan:
    source: str = "none"  # dmesg | journalctl | none
    events: list[XidEvent] = field(default_factory=list)
    missing: str = ""  # why the log could not be read, or what of it was left out; "" when complete


@dataclass
class RdmaCounters:
    """The port's error counters since boot (IB_ROOT/<dev>/ports/<n>/counters/<name>)."""

    symbol_error: int | None = None
    link_downed: int | None = None
    link_error_recovery: int | None = None
    port_rcv_errors: int | None = None
    excessive_buffer_overrun_errors: int | None = None


@dataclass
class RdmaPortFacts:
    device: str  # mlx5_0
    port: int
    state: str  # ACTIVE, DOWN, INIT, ...: sysfs's word without its number; "" where unreadable
    rate: str  # as sysfs writes it: "400 Gb/sec (4X NDR)"
    link_layer: str  # InfiniBand | Ethernet
    fw_ver: str | None  # the adapter's firmware
    counters: RdmaCounters = field(default_factory=RdmaCounters)


def _kernel_release() -> str:
    return os.uname().release


@dataclass
class HostMemory:
    total_mib: int | None = None
    available_mib: int | None = None  # MemAvailable: free plus what the kernel can reclaim (page cache)


@dataclass
class GpuFacts:
    source: str  # nvml | nvidia-smi | none
    driver: str | None = None
    nvml_version: str | None = None
    missing: list[str] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    xid: XidScan = field(default_factory=XidScan)
    # When the read began: the driver divides two reads' counter changes by the time between them.
    read_at: float = field(default_factory=time.time)
    kernel: str = field(default_factory=_kernel_release)
    cuda_driver: str | None = None  # the CUDA version the driver supports (NVML only)
    rdma: list[RdmaPortFacts] = field(default_factory=list)  # every InfiniBand/RoCE port of the host
    host_memory: HostMemory = field(default_factory=HostMemory)

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=False)
