"""What NCCL says it used, read from its INFO lines in a launch's log (NCCL_DEBUG=INFO, subsystems INIT and
NET): the network between hosts, the paths within a host, and NVLink SHARP (NVLS).

A fallback to sockets where the hosts have InfiniBand shows only as low bandwidth (one cluster in the field
ran ~3 GB/s over TCP where its fabric gives ~489, issue 63): these lines name the cause. Reading records what
NCCL wrote and never judges it; thresholds/transport.py holds it to the hosts' fabric. The line shapes are
NCCL's own (2.4 to 2.2x), as users pasted them: tests/nccl_tests/fixtures/nccl_info/README.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# NCCL's INFO line: "HOST:PID:TID [DEV] NCCL INFO ...", under mpirun maybe behind "[1,6]<stdout>:" or "[1] ".
_INFO = re.compile(r"\bNCCL INFO (?P<text>.*)$")
# The network NCCL initialised for the communicator (2.5 on): "Using network IB", "Using network Socket",
# a plugin's name ("Using network IBext_v8", "Using network AWS Libfabric").
_USING = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
# A connection NCCL made: "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0", "... via NET/IB/5/GDRDMA",
# "Ring 00 : 43 -> 44 [receive] via NET/Socket/0" (before 2.5); within a host "via P2P/CUMEM",
# "via P2P/IPC/read", "via P2P/direct pointer", "via SHM/direct/direct", "via direct shared memory".
_VIA_NET = re.compile(r"\bvia NET/(?P<net>[^/\s]+)")
_VIA_INTRA = re.compile(r"\bvia (?P<path>P2P/[A-Za-z]+|SHM|direct shared memory)")
_NO_IB = re.compile(r"^NET/IB ?: No device found")
_IB_DISABLED = re.compile(r"^NCCL_IB_DISABLE set by environment to 1\b")
# NVLink SHARP: whether the GPU has multicast (2.17 on), and how many channels NCCL set up for it.
_NVLS = re.compile(r"^NVLS multicast support is (?P<not>not )?available on dev")
_NVLS_CHANNELS = re.compile(r"\b(?P<n>\d+) nvls channels\b")

IB = "IB"  # NCCL's own InfiniBand/RoCE verbs transport; the HPC-X plugin names its own IBext, IBext_v8, ...
SOCKET = "Socket"


def is_ib(net: str) -> bool:
    """Whether a network NCCL named is InfiniBand verbs (IB or RoCE): its own, or the RDMA/SHARP plugin's."""
    return net == IB or net.startswith("IBext")


@dataclass(frozen=True)
class Transport:
    """What NCCL's INFO lines say it used; info_lines 0: NCCL logged nothing at INFO (the transport is
    unknown, not absent)."""

    info_lines: int = 0
    nets: tuple[str, ...] = ()  # every network NCCL named, first seen first
    net_connections: int = 0  # "via NET/..." lines: connections NCCL made over the network
    intra: tuple[str, ...] = ()  # paths within a host: P2P/CUMEM, P2P/IPC, P2P/direct, SHM, ...
    no_ib_device: bool = False  # "NET/IB : No device found": NCCL looked for an HCA and found none
    ib_disabled: bool = False  # "NCCL_IB_DISABLE set by environment to 1": NCCL was told not to look
    nvls: bool | None = None  # multicast available on every GPU that said; None: no line said
    nvls_channels: int | None = None  # the most NVLS channels a communicator set up; None: no line said

    @property
    def net(self) -> str | None:
        """The network between hosts: Socket where any rank fell back to it (the slowest rank sets the pace),
        else the first NCCL named; None where no line named one."""
        if SOCKET in self.nets:
            return SOCKET
        return self.nets[0] if self.nets else None

    def record(self) -> dict[str, Any]:
        """results.json's metrics.nccl_transport (docs/results.md)."""
        return {
            "net": self.net,
            "nets": list(self.nets),
            "net_connections": self.net_connections,
            "intra": list(self.intra),
            "nvls": self.nvls,
            "nvls_channels": self.nvls_channels,
            "no_ib_device": self.no_ib_device,
            "ib_disabled": self.ib_disabled,
            "info_lines": self.info_lines,
        }


def parse(lines: Iterable[str]) -> Transport:
    """The transport NCCL's INFO lines among these name; any other line is skipped."""
    info, connections, no_ib, disabled = 0, 0, False, False
    nets: dict[str, None] = {}
    intra: dict[str, None] = {}
    multicast: list[bool] = []
    channels: list[int] = []
    for line in lines:
        found = _INFO.search(line)
        if found is None:
            continue
        info += 1
        text = found["text"].strip()
        if m := _USING.match(text):
            nets.setdefault(m["net"])
        elif m := _VIA_NET.search(text):
            nets.setdefault(m["net"])
            connections += 1
        elif m := _VIA_INTRA.search(text):
            intra.setdefault(_intra_name(m["path"]))
        elif _NO_IB.match(text):
            no_ib = True
        elif _IB_DISABLED.match(text):
            disabled = True
        elif m := _NVLS.match(text):
            multicast.append(not m["not"])
        elif m := _NVLS_CHANNELS.search(text):
            channels.append(int(m["n"]))
    nvls = all(multicast) if multicast else None
    most = max(channels) if channels else None
    return Transport(info, tuple(nets), connections, tuple(intra), no_ib, disabled, nvls, most)


def read(logs: Iterable[Path]) -> Transport:
    """The transport of a launch from its logs (each host's launcher.log; a missing one is skipped)."""
    lines: list[str] = []
    for path in logs:
        try:
            lines += path.read_text(errors="replace").splitlines()
        except OSError:
            continue
    return parse(lines)


def _intra_name(path: str) -> str:
    """NCCL's name of a path within a host, without its mode: P2P/IPC/read is P2P/IPC; NCCL before 2.5 said
    "direct shared memory" for SHM."""
    return "SHM" if path == "direct shared memory" else path
