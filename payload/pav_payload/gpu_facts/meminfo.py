"""The host's memory as /proc/meminfo gives it: what a leftover process holds of the host, not the GPU, shows
as memory not available on a node that runs nothing (issue 50)."""

from __future__ import annotations

from pathlib import Path

from pav_payload.gpu_facts.output import HostMemory

MEMINFO = Path("/proc/meminfo")


def read_host_memory(missing: list[str], meminfo: Path = MEMINFO) -> HostMemory:
    """Total and available MiB ("MemTotal: 263998500 kB"); both None, with a line in `missing`, where the
    file cannot be read."""
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        total, available = (int(fields[key].split()[0]) // 1024 for key in ("MemTotal", "MemAvailable"))
    except (OSError, KeyError, ValueError, IndexError) as exc:
        missing.append(f"host_memory: {meminfo} unreadable ({exc})")
        return HostMemory()
    return HostMemory(total, available)
