"""Isolation's links as the report and marking read them from results.json `isolation.links`: a fault
between two sets of hosts that each pass a test alone and fail it together (pav.isolation.Link), so the
part at fault is what lies between them (a rack's uplink, a spine switch, a cable), not a host.

A link is a bad part (bad_parts.py) that no host carries: report.html lists it with both sides as host
ranges, their racks and the evidence steps; marking drains or taints no host for it, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pav.hostlist import compress

CAUSE = (
    "a link between the two sides: a rack's uplink, a spine or leaf switch port, or a cable; each side "
    "passes alone, so neither side's hosts are at fault (ibstat, the switches' port counters, the cabling "
    "plan)"
)


@dataclass(frozen=True)
class FoundLink:
    test: str
    sides: tuple[tuple[str, ...], ...]  # two sets of hosts
    racks: tuple[tuple[str, ...], ...]  # each side's racks (pav_rack); () where the inventory names none
    reason: str
    evidence: tuple[dict[str, Any], ...]  # isolation steps: each side alone, then the pairs across

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h for side in self.sides for h in side)

    @property
    def between(self) -> str:
        """ "h[0-3] (rack r0) and h[4-7] (rack r1)" """
        return " and ".join(self.side_text(i) for i in range(len(self.sides)))

    def side_text(self, index: int) -> str:
        racks = self.racks[index] if index < len(self.racks) else ()
        label = f" (rack{'s' if len(racks) > 1 else ''} {', '.join(racks)})" if racks else ""
        return compress(self.sides[index]) + label


def found(results: dict[str, Any]) -> list[FoundLink]:
    """The run's links; a record from before links named their test takes it from their evidence."""
    out = []
    for raw in (results.get("isolation") or {}).get("links") or []:
        if not isinstance(raw, dict):
            continue
        evidence = tuple(e for e in raw.get("evidence") or [] if isinstance(e, dict))
        test = str(raw.get("test") or next((e.get("test") for e in evidence if e.get("test")), ""))
        sides = tuple(
            tuple(str(h) for h in side) for side in raw.get("sides") or [] if isinstance(side, list)
        )
        racks = tuple(
            tuple(str(r) for r in side) for side in raw.get("racks") or [] if isinstance(side, list)
        )
        out.append(FoundLink(test, sides, racks, str(raw.get("reason") or ""), evidence))
    return out
