"""What a host's facts say its hardware is: GPUs with their links, and its RDMA ports.

Read from results.json's host facts: `gpus` (NVML, the torch_payload role) where present, else the
preflight `gpu` rows (name and bus id only: a results.json of an earlier release). Whatever a fact source
does not give stays None, so derivation can name it as missing instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str = ""
    bus_id: str = ""
    pcie_gen: int | None = None  # the highest the GPU and its slot allow, not the current (idle GPUs drop it)
    pcie_width: int | None = None
    nvlink_version: int | None = None
    nvlink_up: int | None = None  # None: not read (no NVML); 0: a board without NVLink, or all links down
    nvlink_total: int | None = None  # every link the board has, up or down (the full complement)
    nvlink_peers: dict[str, int] = field(default_factory=dict)  # peer GPU bus id -> links up to it
    nvlink_switch_links: int = 0  # links up to an NVSwitch
    # The key the probe's figures name this GPU by: its position among the GPUs the probe's process was
    # given (CUDA_VISIBLE_DEVICES), which is NVML's index only where every GPU is visible (given_gpus()).
    key: str = ""

    @property
    def metric_key(self) -> str:
        return self.key or str(self.index)

    def label(self) -> str:
        ids = ", ".join(x for x in (self.bus_id, self.uuid) if x)
        return f"GPU {self.index} ({ids})" if ids else f"GPU {self.index}"

    @property
    def nvlink_wired(self) -> int:
        """The links the board has, up or down (links up where the total was not read)."""
        return self.nvlink_total if self.nvlink_total is not None else self.nvlink_up or 0

    @property
    def nvlink_down(self) -> int:
        return max(self.nvlink_wired - (self.nvlink_up or 0), 0)


@dataclass(frozen=True)
class HostHardware:
    host: str
    gpus: list[Gpu]
    source: str  # nvml | nvidia-smi | preflight | none
    source_missing: list[str] = field(default_factory=list)  # what the fact source said it could not read
    rdma: Rdma = field(default_factory=lambda: Rdma(""))
    fabric: str = ""  # nccl_env_fabric the host was set up for (infiniband | roce | socket); "" unknown

    @property
    def rdma_gbps(self) -> float | None:
        """The RDMA ports' limit per direction, GB/s: every port counted at the healthy ports' rate."""
        return self.rdma.gbps

    @property
    def rdma_ports(self) -> int:
        """The ports that limit counts: the expected number where the env sets one, else every port listed."""
        return self.rdma.counted

    @property
    def model(self) -> str:
        names = sorted({g.name for g in self.gpus})
        return names[0] if len(names) == 1 else " + ".join(names)

    @property
    def nvlink_known(self) -> bool:
        return bool(self.gpus) and all(g.nvlink_up is not None for g in self.gpus)

    @property
    def pcie_known(self) -> bool:
        return bool(self.gpus) and all(g.pcie_gen and g.pcie_width for g in self.gpus)


def read_hardware(host: str, facts: dict[str, Any]) -> HostHardware:
    nvml = facts.get("gpus") if isinstance(facts.get("gpus"), dict) else None
    fabric = str((facts.get("nccl_env") or {}).get("fabric", ""))
    rdma = read_rdma(facts.get("rdma") or {}, fabric)
    if nvml and nvml.get("devices"):
        gpus = _owned([_gpu_from_nvml(d) for d in nvml["devices"]], facts.get("gpu") or {})
        missing = [str(m) for m in nvml.get("missing") or []]
        return HostHardware(host, gpus, str(nvml.get("source", "nvml")), missing, rdma, fabric)
    rows = facts.get("gpu", {}).get("devices") or []
    gpus = [_gpu_from_preflight(i, row) for i, row in enumerate(rows)]
    source = "preflight" if gpus else "none"
    missing = [str(m) for m in (nvml or {}).get("missing") or []]
    return HostHardware(host, gpus, source, missing, rdma, fabric)


def _owned(gpus: list[Gpu], preflight: dict[str, Any]) -> list[Gpu]:
    """A host given part of a machine's GPUs (preflight_gpu_ids) owns those: NVML lists every GPU of the
    machine, preflight's nvidia-smi only the ones asked for. Matched by bus id: NVML's and nvidia-smi's
    indices agree, CUDA's need not."""
    if not preflight.get("ids"):
        return gpus
    owned = {normalize_bus_id(str(row[4])) for row in preflight.get("devices") or [] if len(row) > 4}
    return [g for g in gpus if g.bus_id in owned]


def given_gpus(hw: HostHardware, probe_metrics: dict[str, Any] | None) -> HostHardware:
    """The host's GPUs as the probe's process saw them, matched by UUID, else bus id, never by index: each
    GPU gets the key the probe's figures use. Where the probe was given part of the GPUs
    (CUDA_VISIBLE_DEVICES, a scheduler's allocation), the host's GPUs are those; where it was given all,
    a GPU the facts list and CUDA did not see stays, so its gates say it was not measured."""
    seen = (probe_metrics or {}).get("gpu")
    if not isinstance(seen, dict) or not hw.gpus:
        return hw
    keys: dict[int, str] = {}
    for key, ident in seen.items():
        ident = ident if isinstance(ident, dict) else {}
        uuid, bus = str(ident.get("uuid") or ""), normalize_bus_id(str(ident.get("pci_bus_id") or ""))
        match = next((g for g in hw.gpus if (uuid and g.uuid == uuid) or (bus and g.bus_id == bus)), None)
        if match is not None:
            keys[match.index] = str(key)
    if not keys:
        return hw  # a probe that named no GPU (an older payload): its keys are NVML's indices
    restricted = bool((probe_metrics or {}).get("cuda_visible_devices"))
    unseen = "{}-unseen-by-cuda"  # a key no probe figure has: the GPU's gates then say "not measured"
    gpus = [
        replace(g, key=keys.get(g.index, unseen.format(g.index)))
        for g in hw.gpus
        if g.index in keys or not restricted
    ]
    return replace(hw, gpus=gpus)


def _gpu_from_nvml(dev: dict[str, Any]) -> Gpu:
    pcie = dev.get("pcie") or {}
    nvlink = dev.get("nvlink")
    peers: dict[str, int] = {}
    switch = 0
    up = None
    if isinstance(nvlink, dict) and nvlink.get("links_up") is not None:
        up = int(nvlink["links_up"])
        for link in nvlink.get("links") or []:
            if not link.get("up"):
                continue
            if link.get("remote_type") == "switch":
                switch += 1
            elif link.get("remote_bus_id"):
                bus = normalize_bus_id(str(link["remote_bus_id"]))
                peers[bus] = peers.get(bus, 0) + 1
    return Gpu(
        index=int(dev.get("index", 0)),
        name=str(dev.get("name") or "unknown"),
        uuid=str(dev.get("uuid") or ""),
        bus_id=device_bus_id(dev),
        pcie_gen=_int(pcie.get("gen_max")),
        pcie_width=_int(pcie.get("width_max")),
        nvlink_version=_int((nvlink or {}).get("version")),
        nvlink_up=up,
        nvlink_total=_int((nvlink or {}).get("links_total")),
        nvlink_peers=peers,
        nvlink_switch_links=switch,
    )


def _gpu_from_preflight(position: int, row: Any) -> Gpu:
    """nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id,... as a list of strings."""
    cells = [str(c).strip() for c in row] if isinstance(row, list) else []
    index = _int(cells[0]) if cells else None
    return Gpu(
        index=position if index is None else index,
        name=cells[1] if len(cells) > 1 else "unknown",
        bus_id=normalize_bus_id(cells[4]) if len(cells) > 4 else "",
    )


def device_bus_id(dev: dict[str, Any]) -> str:
    """A facts.gpus device's PCI bus id, normalized: what the speed gates, health, leftovers and the
    counters match a device to its GPU by."""
    return normalize_bus_id(str(dev.get("pci_bus_id") or ""))


def normalize_bus_id(bus: str) -> str:
    """NVML and nvidia-smi print 00000000:1B:00.0; the kernel log and sysfs 0000:1b:00.0."""
    match = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", bus.strip())
    if not match:
        return bus.strip()
    domain, b, d, f = match.groups()
    return f"{int(domain or '0', 16):08X}:{b.upper()}:{d.upper()}.{f}"


# "mlx5_0 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand" (preflight's pav_host_probe: device, port, the sysfs
# state, rate and link_layer files)
_PORT = re.compile(
    r"^(?P<device>\S+) (?P<port>\S+) (?:\d+: *)?(?P<state>[^|]*)"
    r"\|(?:(?P<rate>[\d.]+) Gb/sec)?[^|]*\|(?P<layer>\S+)"
)
# The link layer each nccl_env_fabric runs over; RoCE ports say Ethernet.
FABRIC_LAYERS = {"infiniband": "InfiniBand", "roce": "Ethernet"}


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: str
    state: str  # the sysfs state without its number: ACTIVE, DOWN, INIT, ARMED, ...
    gbit: float | None  # the rate the port runs at now, Gb/s (a port that is down may say anything)
    layer: str  # InfiniBand | Ethernet | unknown

    @property
    def name(self) -> str:
        return f"{self.device} port {self.port}"

    @property
    def active(self) -> bool:
        return self.state.startswith("ACTIVE")


@dataclass(frozen=True)
class Rdma:
    """The host's RDMA ports of one link layer, the full complement: a port that is down or slow stays
    counted (at the rate the healthy ports run), so a down part never lowers the inter-node bar."""

    layer: str  # InfiniBand | Ethernet (RoCE); "" when the host lists no RDMA port
    ports: tuple[RdmaPort, ...] = ()
    expected: int | None = None  # preflight_rdma_ports_expected: the ports the env says the host has
    declared_gbit: int | None = None  # pav_declared_hardware.rdma_gbit: the rate the bar counts (declared.py)

    @property
    def up(self) -> tuple[RdmaPort, ...]:
        return tuple(p for p in self.ports if p.active)

    @property
    def port_gbit(self) -> float | None:
        """The rate a healthy port of this layer runs at: the declared rate, else the highest of the active
        ports."""
        if self.declared_gbit:
            return float(self.declared_gbit)
        return max((p.gbit for p in self.up if p.gbit), default=None)

    @property
    def counted(self) -> int:
        return self.expected or len(self.ports)

    @property
    def gbps(self) -> float | None:
        """GB/s per direction of the full complement; None when no port is active (no rate to count at)."""
        rate = self.port_gbit
        return self.counted * rate / 8 if rate and self.counted else None

    @property
    def healthy(self) -> tuple[RdmaPort, ...]:
        return tuple(p for p in self.up if p.gbit == self.port_gbit)


def parse_rdma_port(line: str) -> RdmaPort | None:
    match = _PORT.match(str(line))
    if not match:
        return None
    rate = float(match["rate"]) if match["rate"] else None
    return RdmaPort(match["device"], match["port"], match["state"].strip(), rate, match["layer"])


def read_rdma(rdma: dict[str, Any], fabric: str = "") -> Rdma:
    """facts.rdma (preflight): the ports of the host's RDMA link layer (the one its nccl_env_fabric runs
    over; else InfiniBand where the host has an InfiniBand port, else Ethernet for RoCE), whatever their
    state. A port of another layer (an Ethernet NIC beside InfiniBand HCAs) or of none stated is left out."""
    ports = [p for p in (parse_rdma_port(line) for line in rdma.get("ports") or []) if p is not None]
    layers = {p.layer for p in ports}
    layer = FABRIC_LAYERS.get(fabric) or next((x for x in ("InfiniBand", "Ethernet") if x in layers), "")
    expected = _int(rdma.get("ports_expected"))
    mine = tuple(p for p in ports if p.layer == layer)
    return Rdma(layer, mine, expected if expected and expected > 0 else None)


def _int(value: Any) -> int | None:
    try:
        return None if value is None or value == "" else int(value)
    except (TypeError, ValueError):
        return None
