"""The forms the tools give, made the facts' own: bus ids, the clock-reason bitmask, ANSI colour codes,
pynvml's bytes, NVML field values and version numbers."""

from __future__ import annotations

import re
from typing import Any

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

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
BUS_ID = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?")


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


def sysfs_bus_id(bus_id: str) -> str:
    """0000:1b:00.0, the kernel's name for the device under /sys/bus/pci/devices (4-digit domain, lower
    case), from any form normalize_bus_id reads."""
    match = BUS_ID.fullmatch(normalize_bus_id(bus_id))
    if not match:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


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


def nvml_text(value: Any) -> str:
    """Older pynvml returns bytes where newer returns str; ctypes char arrays are bytes either way."""
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip("\x00").strip()
    return str(value).strip()


def enabled_state(state: Any) -> str:
    """nvmlEnableState_t (persistence, ECC and MIG modes) as the facts say it."""
    return "enabled" if int(state) else "disabled"


def cuda_version_text(version: int) -> str:
    """The CUDA version the driver supports, from NVML's integer: 13000 -> "13.0", 12080 -> "12.8"."""
    return f"{int(version) // 1000}.{int(version) % 1000 // 10}"


class FieldValueError(Exception):
    """An nvmlDeviceGetFieldValues entry that came back with an error: the call succeeded, the field not."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value  # nvmlReturn_t, where pynvml's NVMLError keeps it

    def __str__(self) -> str:
        return f"NVML error {self.value}"


def field_value(value: Any) -> int:
    """An nvmlFieldValue_t's value, read from the member of the nvmlValue_t union its valueType names."""
    if int(value.nvmlReturn) != 0:
        raise FieldValueError(int(value.nvmlReturn))
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(value.valueType), "uiVal"
    )
    return int(getattr(value.value, member))
