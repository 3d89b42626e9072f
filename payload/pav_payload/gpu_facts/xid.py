"""Xid events: the NVIDIA driver's fault lines in the kernel log, from dmesg or else the journal."""

from __future__ import annotations

import re

from pav_payload.gpu_facts.commands import Run
from pav_payload.gpu_facts.decode import normalize_bus_id, strip_ansi
from pav_payload.gpu_facts.output import XidEvent, XidScan

LOG_TIMEOUT_S = 30.0
# A GPU that keeps failing fills the log; the newest lines are the ones worth keeping.
MAX_XID_EVENTS = 500
# "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus."; MIG adds " GPU-I:05" in the parens.
XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (?P<xid>\d+)"
)
# journalctl answers 0 to a user who may not read the kernel's messages, and says so on stderr.
JOURNAL_REFUSED = ("not seeing messages", "No journal files", "Permission denied")


def parse_xid_lines(text: str) -> list[XidEvent]:
    events = []
    for raw in strip_ansi(text).splitlines():
        match = XID_LINE.search(raw)
        if match:
            events.append(XidEvent(raw.strip(), normalize_bus_id(match["pci"]), int(match["xid"])))
    return events


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
