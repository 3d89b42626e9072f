"""The host's InfiniBand and RoCE ports from sysfs: state, rate, link layer, firmware and error counters.
Plain file reads (ibstat and friends may be missing, and cost a process each)."""

from __future__ import annotations

from pathlib import Path

from pav_payload.gpu_facts.missing import describe_error
from pav_payload.gpu_facts.output import RdmaCounters, RdmaPortFacts

IB_ROOT = Path("/sys/class/infiniband")
IB_COUNTERS = (
    "symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
    "excessive_buffer_overrun_errors",
)  # fmt: skip


def read_rdma(ib_root: Path, missing: list[str]) -> list[RdmaPortFacts]:
    """Every port of every device under ``ib_root``; a host without RDMA has no such folder: no ports."""
    if not ib_root.is_dir():
        return []
    ports = []
    for device in sorted(ib_root.iterdir(), key=lambda p: p.name):
        fw_ver = _read(device / "fw_ver", f"rdma.{device.name}.fw_ver", missing)
        port_dirs = (device / "ports").iterdir() if (device / "ports").is_dir() else ()
        for port in sorted((p for p in port_dirs if p.name.isdigit()), key=lambda p: int(p.name)):
            ports.append(_port(device.name, port, fw_ver, missing))
    return ports


def _port(device: str, port: Path, fw_ver: str | None, missing: list[str]) -> RdmaPortFacts:
    name = f"rdma.{device}/{port.name}"
    state = _read(port / "state", f"{name}.state", missing) or ""
    return RdmaPortFacts(
        device=device,
        port=int(port.name),
        state=state.split(":", 1)[-1].strip(),  # "4: ACTIVE": the number says no more than the word
        rate=_read(port / "rate", f"{name}.rate", missing) or "",
        link_layer=_read(port / "link_layer", f"{name}.link_layer", missing) or "",
        fw_ver=fw_ver,
        counters=_counters(port / "counters", name, missing),
    )


def _counters(folder: Path, name: str, missing: list[str]) -> RdmaCounters:
    values: dict[str, int] = {}
    failed: dict[str, list[str]] = {}  # reason -> counters: one line per reason, as for NVLink links
    for counter in IB_COUNTERS:
        try:
            values[counter] = int((folder / counter).read_text().strip())
        except (OSError, ValueError) as exc:
            failed.setdefault(describe_error(exc), []).append(counter)
    missing.extend(f"{name}.counters: {reason} ({', '.join(names)})" for reason, names in failed.items())
    return RdmaCounters(**values)


def _read(path: Path, fact: str, missing: list[str]) -> str | None:
    try:
        return path.read_text().strip()
    except OSError as exc:
        missing.append(f"{fact}: {describe_error(exc)}")
        return None
