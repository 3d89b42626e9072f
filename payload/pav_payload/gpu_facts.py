"""``facts`` subcommand: per-GPU facts from NVML (else nvidia-smi) and the kernel log's Xid lines.

Prints one JSON object on stdout and exits 0 whatever the host lacks: a fact that cannot be read is null
and named, with the reason, in the ``missing`` list beside it, so the driver can say which gate lacks
which fact instead of guessing. The torch_payload role runs it at configure; the driver stores the object
as the host's ``facts.gpus``. This module needs no torch: only the standard library and, where installed,
``pynvml`` (the nvidia-ml-py package).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

MIB = 1 << 20
# A GPU that fell off the bus can make nvidia-smi take minutes; NVML init alone takes seconds per GPU
# without persistence mode.
NVIDIA_SMI_TIMEOUT_S = 60.0
LOG_TIMEOUT_S = 30.0
# A GPU that keeps failing fills the log; the newest lines are the ones worth keeping.
MAX_XID_EVENTS = 500

# nvml.h nvmlClocksEventReason* bits, named as nvidia-smi names its clocks_event_reasons.* fields.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# nvmlDeviceGetNvLinkVersion answers with nvmlNvlinkVersion_t, not the NVLink generation (an H100 says 6,
# NVML_NVLINK_VERSION_4_0; an A100 5, NVML_NVLINK_VERSION_3_1): the facts carry the generation.
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
# nvmlNvLinkDeviceType_t; 1 is an IBM NPU (a POWER9 CPU), neither a GPU nor a switch.
NVLINK_REMOTE_TYPES = {0: "gpu", 2: "switch"}
NVML_FI_DEV_NVLINK_GET_SPEED = 164  # nvml.h; older bindings lack the constant but the driver knows it

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
BUS_ID = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?")
# "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus."; MIG adds " GPU-I:05" in the parens.
XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (?P<xid>\d+)"
)
SMI_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
# journalctl answers 0 to a user who may not read the kernel's messages, and says so on stderr.
JOURNAL_REFUSED = ("not seeing messages", "No journal files", "Permission denied")


# --- the output -------------------------------------------------------------------------------------------


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
class Device:
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
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


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str

    def why(self) -> str:
        """The tool's own words for a failure, first line only."""
        text = (self.stderr.strip() or self.stdout.strip() or f"exit code {self.rc}").splitlines()[0]
        return f"{text} (exit code {self.rc})" if self.rc not in (0, 127) else text


Run = Callable[[Sequence[str], float], CommandResult]


# --- pure parsers -----------------------------------------------------------------------------------------


def strip_ansi(text: str) -> str:
    return ANSI_ESCAPE.sub("", text)


def normalize_bus_id(text: str) -> str:
    """00000000:1B:00.0, the form NVML and nvidia-smi print; the kernel log says 0000:1b:00."""
    cleaned = text.strip().strip("\x00")
    match = BUS_ID.fullmatch(cleaned)
    if not match:
        return cleaned
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function or '0'}"


def decode_clock_reasons(mask: int) -> list[str]:
    """Names of the bits set; a bit this table does not know is kept as unknown_0x..., never dropped."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    bit = 1
    while unknown >= bit:
        if unknown & bit:
            names.append(f"unknown_{bit:#x}")
        bit <<= 1
    return names


def parse_xid_lines(text: str) -> list[XidEvent]:
    events = []
    for raw in strip_ansi(text).splitlines():
        match = XID_LINE.search(raw)
        if match:
            events.append(XidEvent(raw.strip(), normalize_bus_id(match["pci"]), int(match["xid"])))
    return events


def parse_smi_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of ``--format=csv,noheader,nounits`` as field -> cell text."""
    rows = []
    for cells in csv.reader(strip_ansi(text).splitlines(), skipinitialspace=True):
        if not cells:
            continue
        if len(cells) != len(fields):
            raise ValueError(f"nvidia-smi gave {len(cells)} columns for {len(fields)} fields: {cells!r}")
        rows.append(dict(zip(fields, (cell.strip() for cell in cells), strict=True)))
    return rows


def invalid_smi_field(output: str) -> str | None:
    """The field an nvidia-smi too old (or too new) for our query refused; it refuses the whole query."""
    match = SMI_INVALID_FIELD.search(strip_ansi(output))
    return match[1] if match else None


# --- NVML -------------------------------------------------------------------------------------------------


class _Missing:
    """Reads one fact at a time; a read that fails leaves None and a line saying which fact and why."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def read(self, name: str, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except Exception as exc:  # NVMLError_*, or a function this binding lacks: unknown, not fatal
            self.items.append(f"{name}: {describe_error(exc)}")
            return None


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def _text(value: Any) -> str:
    """Older pynvml returns bytes where newer returns str; ctypes char arrays are bytes either way."""
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip("\x00").strip()
    return str(value).strip()


def _error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def read_nvml(nvml: ModuleType) -> GpuFacts:
    """Facts of every GPU NVML lists; ``nvml`` is pynvml (or a stand-in) after a successful nvmlInit."""
    top = _Missing()
    driver = top.read("driver", lambda: _text(nvml.nvmlSystemGetDriverVersion()))
    version = top.read("nvml_version", lambda: _text(nvml.nvmlSystemGetNVMLVersion()))
    count = top.read("devices", lambda: int(nvml.nvmlDeviceGetCount())) or 0
    devices = [_nvml_device(nvml, index) for index in range(count)]
    resolve_remote_types(devices)
    return GpuFacts("nvml", driver, version, top.items, devices)


def _nvml_device(nvml: ModuleType, index: int) -> Device:
    missing = _Missing()
    handle = missing.read("handle", lambda: nvml.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        # A GPU NVML counts but cannot open (fallen off the bus) is still listed: its absence is the news.
        return Device(index, missing=missing.items)
    h = handle
    device = Device(
        index=index,
        name=missing.read("name", lambda: _text(nvml.nvmlDeviceGetName(h))),
        uuid=missing.read("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(h))),
        pci_bus_id=missing.read(
            "pci_bus_id", lambda: normalize_bus_id(_text(nvml.nvmlDeviceGetPciInfo(h).busId))
        ),
        memory_total_mib=missing.read(
            "memory_total_mib", lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).total) // MIB
        ),
        sm_clock_max_mhz=missing.read(
            "sm_clock_max_mhz", lambda: int(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM))
        ),
        pcie=_nvml_pcie(nvml, h, missing),
        nvlink=_nvml_nvlink(nvml, h, missing),
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
    device.missing = missing.items
    return device


def _nvml_pcie(nvml: ModuleType, h: Any, missing: _Missing) -> Pcie:
    return Pcie(
        gen_current=missing.read(
            "pcie.gen_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h))
        ),
        gen_max=missing.read("pcie.gen_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(h))),
        width_current=missing.read("pcie.width_current", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))),
        width_max=missing.read("pcie.width_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(h))),
    )


def _nvml_ecc(nvml: ModuleType, h: Any, missing: _Missing) -> Ecc:
    uncorrected = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    return Ecc(
        mode_current=missing.read("ecc.mode_current", lambda: _enabled(nvml.nvmlDeviceGetEccMode(h)[0])),
        uncorrectable_volatile=missing.read(
            "ecc.uncorrectable_volatile",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, nvml.NVML_VOLATILE_ECC)),
        ),
        uncorrectable_aggregate=missing.read(
            "ecc.uncorrectable_aggregate",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(h, uncorrected, nvml.NVML_AGGREGATE_ECC)),
        ),
    )


def _enabled(state: Any) -> str:
    return "enabled" if int(state) else "disabled"


def _nvml_remapped_rows(nvml: ModuleType, h: Any, missing: _Missing) -> RemappedRows:
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


def _nvml_nvlink(nvml: ModuleType, h: Any, missing: _Missing) -> NvLink:
    """Every link index NVML answers for; NotSupported or InvalidArgument means no such link on the board."""
    if not hasattr(nvml, "nvmlDeviceGetNvLinkState"):
        missing.items.append("nvlink: this pynvml has no nvmlDeviceGetNvLinkState")
        return NvLink.unknown()
    absent = {getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3), getattr(nvml, "NVML_ERROR_INVALID_ARGUMENT", 2)}
    links: list[NvLinkLink] = []
    per_link = _LinkMissing()
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # see _Missing.read
            if _error_code(exc) not in absent:
                per_link.add("up", describe_error(exc), link)
            continue
        links.append(NvLinkLink(link=link, up=bool(state)))
    unreadable = bool(per_link.failed)
    if not links and not unreadable:
        return NvLink()  # a board without NVLink: a fact, not a gap
    up = [entry for entry in links if entry.up]
    _nvml_link_peers(nvml, h, up, per_link)
    _nvml_link_speeds(nvml, h, up, per_link)
    missing.items.extend(per_link.lines())
    asked = up[0] if up else (links[0] if links else None)
    version = None
    if asked is not None:
        version = missing.read(
            "nvlink.version", lambda: _nvlink_generation(nvml.nvmlDeviceGetNvLinkVersion(h, asked.link))
        )
    if unreadable:  # some link's state is unknown, so are the counts
        return NvLink(version, None, None, links)
    return NvLink(version, len(links), sum(1 for entry in links if entry.up), links)


def _nvlink_generation(code: Any) -> int:
    if int(code) not in NVLINK_GENERATION:
        raise ValueError(f"unknown nvmlNvlinkVersion_t {int(code)}")
    return NVLINK_GENERATION[int(code)]


class _LinkMissing:
    """Per-link failures: one missing line per (fact, reason), naming its links; 18 lines say no more."""

    def __init__(self) -> None:
        self.failed: dict[tuple[str, str], list[int]] = {}

    def add(self, fact: str, reason: str, link: int) -> None:
        self.failed.setdefault((fact, reason), []).append(link)

    def lines(self) -> list[str]:
        return [
            f"nvlink.links.{fact}: {reason} (links {', '.join(map(str, links))})"
            for (fact, reason), links in self.failed.items()
        ]


def _nvml_link_peers(nvml: ModuleType, h: Any, up: list[NvLinkLink], per_link: _LinkMissing) -> None:
    remote_pci = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or getattr(
        nvml, "nvmlDeviceGetNvLinkRemotePciInfo", None
    )
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    for entry in up:
        if remote_pci is None:
            per_link.add("remote_bus_id", "this pynvml has no nvmlDeviceGetNvLinkRemotePciInfo", entry.link)
        else:
            try:
                bus = normalize_bus_id(_text(remote_pci(h, entry.link).busId))
                # A switch port without a PCI function of its own reads as all zeros: no bus id to give.
                entry.remote_bus_id = None if bus == "00000000:00:00.0" else bus
            except Exception as exc:  # see _Missing.read
                per_link.add("remote_bus_id", describe_error(exc), entry.link)
        # Empty until resolve_remote_types: NVML's answer where it gives one, else the bus id decides.
        entry.remote_type = ""
        if remote_type is not None:
            try:
                entry.remote_type = NVLINK_REMOTE_TYPES.get(int(remote_type(h, entry.link)), "unknown")
            except Exception:  # older drivers: the bus id rule below answers instead
                entry.remote_type = ""


def _nvml_link_speeds(nvml: ModuleType, h: Any, up: list[NvLinkLink], per_link: _LinkMissing) -> None:
    if not up:
        return
    field_id = int(getattr(nvml, "NVML_FI_DEV_NVLINK_GET_SPEED", NVML_FI_DEV_NVLINK_GET_SPEED))
    try:
        values = nvml.nvmlDeviceGetFieldValues(h, [(field_id, entry.link) for entry in up])
    except Exception as exc:  # see _Missing.read
        for entry in up:
            per_link.add("speed_mbps", describe_error(exc), entry.link)
        return
    for entry, value in zip(up, values, strict=False):
        if int(value.nvmlReturn) != 0:
            per_link.add("speed_mbps", f"NVML error {int(value.nvmlReturn)}", entry.link)
            continue
        entry.speed_mbps = _field_value(value)


def _field_value(value: Any) -> int:
    # nvmlValueType_t -> the member of the nvmlValue_t union holding it
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(value.valueType), "uiVal"
    )
    return int(getattr(value.value, member))


def resolve_remote_types(devices: list[Device]) -> None:
    """Where NVML did not say what is at a link's far end: one of this host's GPUs if its bus id is, else
    a switch. A GPU's NVLink ends at a GPU of its host or at a switch, so a peer that is not one of its
    GPUs (or has no PCI function to name, as NVSwitch ports often have not) is a switch. A link that is
    down has no far end: unknown."""
    gpus = {device.pci_bus_id for device in devices if device.pci_bus_id}
    for device in devices:
        for link in device.nvlink.links:
            if not link.up:
                link.remote_type = "unknown"
            elif not link.remote_type:
                link.remote_type = "gpu" if link.remote_bus_id in gpus else "switch"


# --- nvidia-smi -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmiField:
    query: str  # the --query-gpu name
    path: str  # where it lands: a Device field, "a.b" inside one, or "driver"
    parse: Callable[[str], Any]


def _yes_no(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("yes", "true", "1", "active"):
        return True
    if lowered in ("no", "false", "0", "not active"):
        return False
    raise ValueError(text)


def _ecc_mode(text: str) -> str:
    if text.lower() not in ("enabled", "disabled"):
        raise ValueError(text)
    return text.lower()


def _mask(text: str) -> list[str]:
    return decode_clock_reasons(int(text, 16))


SMI_FIELDS = (
    SmiField("index", "index", int),
    SmiField("name", "name", str),
    SmiField("uuid", "uuid", str),
    SmiField("pci.bus_id", "pci_bus_id", normalize_bus_id),
    SmiField("memory.total", "memory_total_mib", int),
    SmiField("clocks.max.sm", "sm_clock_max_mhz", int),
    SmiField("pcie.link.gen.current", "pcie.gen_current", int),
    SmiField("pcie.link.gen.max", "pcie.gen_max", int),
    SmiField("pcie.link.width.current", "pcie.width_current", int),
    SmiField("pcie.link.width.max", "pcie.width_max", int),
    SmiField("ecc.mode.current", "ecc.mode_current", _ecc_mode),
    SmiField("ecc.errors.uncorrected.volatile.total", "ecc.uncorrectable_volatile", int),
    SmiField("ecc.errors.uncorrected.aggregate.total", "ecc.uncorrectable_aggregate", int),
    SmiField("remapped_rows.correctable", "remapped_rows.correctable", int),
    SmiField("remapped_rows.uncorrectable", "remapped_rows.uncorrectable", int),
    SmiField("remapped_rows.pending", "remapped_rows.pending", _yes_no),
    SmiField("remapped_rows.failure", "remapped_rows.failed", _yes_no),
    SmiField("clocks_event_reasons.active", "clock_event_reasons", _mask),
    SmiField("power.limit", "power.limit_w", float),
    SmiField("power.default_limit", "power.default_limit_w", float),
    SmiField("driver_version", "driver", str),
)
# Drivers before 535 know the reasons only by their old name.
SMI_ALTERNATIVES = {
    "clocks_event_reasons.active": SmiField("clocks_throttle_reasons.active", "clock_event_reasons", _mask)
}
NVLINK_NEEDS_NVML = "nvlink: per-link facts need NVML (nvidia-smi --query-gpu has none)"


def smi_cell(text: str) -> tuple[str | None, str]:
    """The cell's value, or None and nvidia-smi's reason ("[N/A]", "[Not Supported]", "[Unknown Error]")."""
    cell = text.strip()
    if cell.startswith("[") and cell.endswith("]"):
        return None, cell[1:-1]
    if cell in ("N/A", ""):
        return None, cell or "empty"
    return cell, ""


def device_from_smi(
    row: Mapping[str, str], fields: Sequence[SmiField], absent: Mapping[str, str], position: int = 0
) -> Device:
    """The ``position``-th CSV row; ``absent``: paths this nvidia-smi cannot be asked for, and why."""
    values: dict[str, Any] = {}
    missing = [f"{path}: {reason}" for path, reason in absent.items() if path != "driver"]
    for spec in fields:
        if spec.path == "driver":
            continue
        cell, reason = smi_cell(row.get(spec.query, "[not in the output]"))
        if cell is None:
            missing.append(f"{spec.path}: {reason} (nvidia-smi {spec.query})")
            continue
        try:
            values[spec.path] = spec.parse(cell)
        except ValueError:
            missing.append(f"{spec.path}: unreadable value {cell!r} (nvidia-smi {spec.query})")
    missing.append(NVLINK_NEEDS_NVML)
    return Device(
        index=values.get("index", position),
        name=values.get("name"),
        uuid=values.get("uuid"),
        pci_bus_id=values.get("pci_bus_id"),
        memory_total_mib=values.get("memory_total_mib"),
        sm_clock_max_mhz=values.get("sm_clock_max_mhz"),
        pcie=Pcie(
            *(values.get(f"pcie.{k}") for k in ("gen_current", "gen_max", "width_current", "width_max"))
        ),
        nvlink=NvLink.unknown(),
        ecc=Ecc(
            *(
                values.get(f"ecc.{k}")
                for k in ("mode_current", "uncorrectable_volatile", "uncorrectable_aggregate")
            )
        ),
        remapped_rows=RemappedRows(
            *(values.get(f"remapped_rows.{k}") for k in ("correctable", "uncorrectable", "pending", "failed"))
        ),
        clock_event_reasons=values.get("clock_event_reasons"),
        power=Power(values.get("power.limit_w"), values.get("power.default_limit_w")),
        missing=missing,
    )


def read_nvidia_smi(run: Run, why_not_nvml: str) -> GpuFacts:
    fields = list(SMI_FIELDS)
    absent: dict[str, str] = {}
    result = _query_smi(run, fields)
    # nvidia-smi refuses a whole query for one field it does not know: drop (or rename) it and ask again.
    while result.rc != 0 and (bad := invalid_smi_field(result.stdout + result.stderr)) in {
        f.query for f in fields
    }:
        spec = next(f for f in fields if f.query == bad)
        fields.remove(spec)
        if bad in SMI_ALTERNATIVES:
            fields.append(SMI_ALTERNATIVES[bad])
        else:
            absent[spec.path] = f"this nvidia-smi has no field {bad}"
        result = _query_smi(run, fields)
    if result.rc != 0:
        return GpuFacts("none", missing=[why_not_nvml, f"nvidia-smi: {result.why()}"])
    try:
        rows = parse_smi_csv(result.stdout, [f.query for f in fields])
    except ValueError as exc:
        return GpuFacts("none", missing=[why_not_nvml, f"nvidia-smi: {exc}"])
    devices = [device_from_smi(row, fields, absent, position) for position, row in enumerate(rows)]
    driver = smi_cell(rows[0].get("driver_version", "[N/A]"))[0] if rows else None
    missing = [why_not_nvml, "nvml_version: NVML is not readable here"]
    if driver is None:
        missing.append("driver: nvidia-smi did not report driver_version")
    return GpuFacts("nvidia-smi", driver, None, missing, devices)


def _query_smi(run: Run, fields: Sequence[SmiField]) -> CommandResult:
    query = ",".join(f.query for f in fields)
    return run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"], NVIDIA_SMI_TIMEOUT_S)


# --- kernel log -------------------------------------------------------------------------------------------


def scan_xid(run: Run) -> XidScan:
    """Xid lines since boot: dmesg, else the journal; both may be refused to a user who is not root."""
    refused = []
    for source, argv in (("dmesg", ["dmesg"]), ("journalctl", ["journalctl", "-k", "-b", "--no-pager"])):
        result = run(argv, LOG_TIMEOUT_S)
        blocked = source == "journalctl" and any(hint in result.stderr for hint in JOURNAL_REFUSED)
        if result.rc != 0 or blocked:
            refused.append(f"{source}: {result.why()}")
            continue
        events = parse_xid_lines(result.stdout)
        kept = events[-MAX_XID_EVENTS:]
        note = (
            f"only the last {len(kept)} of {len(events)} Xid lines are listed"
            if len(kept) < len(events)
            else ""
        )
        return XidScan(source, kept, note)
    return XidScan("none", [], "; ".join(refused))


# --- the subcommand ---------------------------------------------------------------------------------------


def run_command(argv: Sequence[str], timeout_s: float) -> CommandResult:
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]} not found on PATH")
    except PermissionError as exc:
        return CommandResult(126, "", f"{argv[0]}: {exc}")
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{argv[0]} did not answer within {timeout_s:g} s")
    return CommandResult(proc.returncode, strip_ansi(proc.stdout), strip_ansi(proc.stderr))


def import_pynvml() -> ModuleType:
    return importlib.import_module("pynvml")


def collect(load_nvml: Callable[[], ModuleType] = import_pynvml, run: Run = run_command) -> GpuFacts:
    nvml, why_not = _open_nvml(load_nvml)
    if nvml is None:
        facts = read_nvidia_smi(run, why_not)
    else:
        try:
            facts = read_nvml(nvml)
        finally:
            _close_nvml(nvml)
    facts.xid = scan_xid(run)
    return facts


def _open_nvml(load_nvml: Callable[[], ModuleType]) -> tuple[ModuleType | None, str]:
    try:
        nvml = load_nvml()
    except ImportError as exc:
        return None, f"nvml: pynvml is not importable ({exc}; it comes with the nvidia-ml-py package)"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no NVML on this host
        return None, f"nvml: nvmlInit failed: {describe_error(exc)}"
    return nvml, ""


def _close_nvml(nvml: ModuleType) -> None:
    # The facts are read by now; a failed shutdown changes none of them.
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


def print_facts(_args: argparse.Namespace) -> int:
    """The ``facts`` subcommand: one JSON object on stdout, exit 0, whatever the host has."""
    try:
        text = collect().to_json()
    except Exception as exc:  # a bug here must still leave an answer that says what went wrong
        text = GpuFacts("none", missing=[f"facts: {type(exc).__name__}: {exc}"]).to_json()
    print(text, flush=True)
    return 0
