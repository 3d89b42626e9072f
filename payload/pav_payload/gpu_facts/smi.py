"""The fallback when NVML is not readable: nvidia-smi --query-gpu, its CSV, and the fields an older (or
newer) nvidia-smi refuses."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pav_payload.gpu_facts.commands import CommandResult, Run
from pav_payload.gpu_facts.decode import decode_clock_reasons, normalize_bus_id, strip_ansi
from pav_payload.gpu_facts.output import Device, Ecc, GpuFacts, NvLink, Pcie, Power, RemappedRows

# A GPU that fell off the bus can make nvidia-smi take minutes; NVML init alone takes seconds per GPU
# without persistence mode.
NVIDIA_SMI_TIMEOUT_S = 60.0
SMI_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


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
