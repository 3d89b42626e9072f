"""The forms the tools give, made the facts' own: bus ids, the clock-reason bitmask, ANSI colour codes,
pynvml's bytes."""

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
