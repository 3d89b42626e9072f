"""The JSON object ``facts`` prints: what the driver stores as the host's ``facts.gpus``."""

from __future__ import annotations

import json
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
class GpuFacts:
    source: str  # nvml | nvidia-smi | none
    driver: str | None = None
    nvml_version: str | None = None
    missing: list[str] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    xid: XidScan = field(default_factory=XidScan)

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=False)
