"""--on-fail drain: the Slurm nodes a failed run names, each with the reason scontrol records.

The hosts and reasons are pav.reporting.marks' (the same marks --on-fail taint puts on Kubernetes nodes): a
node is drained only where a bad part of a FAIL names its host. The reason starts with PREFIX so a later run
knows the drains that are its own from an operator's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pav.reporting import marks
from pav.reporting.marks import PREFIX, REASON_CHARS, is_ours, reason

__all__ = ["PREFIX", "REASON_CHARS", "Drain", "asked", "from_marks", "is_ours", "plan", "reason", "records"]
_bound = marks.bound


@dataclass(frozen=True)
class Drain:
    host: str  # the inventory host; its Slurm NodeName is its short hostname, read on the host
    reason: str
    tests: tuple[str, ...]  # the tests that failed on it: the ones a recheck runs
    ok: bool | None = None  # None: not tried yet
    detail: str = ""  # what happened, or what failed and the fix

    def to_dict(self) -> dict[str, Any]:
        return {"action": "slurm drain", **asdict(self), "tests": list(self.tests)}


def plan(results: dict[str, Any]) -> list[Drain]:
    """One drain per host a bad part names (pav.reporting.marks.plan); none unless the verdict is FAIL."""
    return from_marks(marks.plan(results))


def from_marks(planned: list[marks.Mark]) -> list[Drain]:
    return [Drain(m.host, m.reason, m.tests) for m in planned]


def records(drains: list[Drain]) -> list[dict[str, Any]]:
    return [d.to_dict() for d in drains]


def asked(drains: list[Drain]) -> dict[str, str]:
    """The playbook's extra var: host -> reason."""
    return {d.host: d.reason for d in drains}
