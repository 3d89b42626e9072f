"""--on-fail drain: the Slurm nodes a failed run names, each with the reason scontrol records.

A node is drained only where a bad part of the run (pav.reporting.bad_parts: isolation's suspects, the
failing tests' hosts) names its host, and only when the run's verdict is FAIL: an interrupted or broken run
(ERROR) names hosts for what happened to the run, not for what is wrong with them. The reason starts with
PREFIX so a later run knows the drains that are its own from an operator's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pav.reporting import bad_parts

PREFIX = "pav "
REASON_CHARS = 120  # scontrol shows reasons in sinfo -R columns; long ones are unreadable there


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
    """One drain per host a bad part names, its reason from the worst part (the most specific first); none
    unless the verdict is FAIL."""
    if results.get("verdict") != "FAIL":
        return []
    run_id = str(results.get("run_id") or "")
    by_host: dict[str, list[bad_parts.BadPart]] = {}
    for part in bad_parts.find(results):
        for host in part.hosts:
            by_host.setdefault(host, []).append(part)
    out = []
    for host, parts in by_host.items():
        tests = tuple(dict.fromkeys(t for p in parts for t in p.tests))
        out.append(Drain(host, reason(run_id, parts[0], tests, len(parts) - 1), tests))
    return out


def reason(run_id: str, part: bad_parts.BadPart, tests: tuple[str, ...], more: int = 0) -> str:
    """ "pav RUN_ID: <part> <figure> < <gate> [tests]", cut to REASON_CHARS in the figure, never in the
    run id or the tests (a recheck reads both)."""
    head, tail = f"{PREFIX}{run_id}: ", f" [{','.join(tests)}]"
    where = part.part or ("fabric" if len(part.hosts) > 1 else "host")
    figure = f"{where} {part.worst.measured}{_bound(part.worst.gate)}"
    figure += f" +{more} more" if more else ""
    room = max(REASON_CHARS - len(head) - len(tail), 8)
    if len(figure) > room:
        figure = figure[: room - 3] + "..."
    return _plain(head + figure + tail)


def is_ours(reason_text: str) -> bool:
    return reason_text.startswith(PREFIX)


def _bound(gate: str) -> str:
    """The gate the figure missed, as the bound it fell beyond: ">= 692.6 = 0.7 x 989.4" -> " < 692.6"."""
    limit = gate.split(" = ")[0]
    if " and " in limit or not limit:
        return f" (gate {limit})" if limit else ""
    if limit.startswith(">= "):
        return f" < {limit[3:]}"
    if limit.startswith("<= "):
        return f" > {limit[3:]}"
    return f" (gate {limit})"


def _plain(text: str) -> str:
    """One line of ASCII without quotes: scontrol's reason goes through Slurm's own parsing and the shell."""
    text = text.replace("…", "...").replace("->", "to")
    return "".join(c if c.isascii() and c.isprintable() and c not in "\"'" else " " for c in text)


def records(drains: list[Drain]) -> list[dict[str, Any]]:
    return [d.to_dict() for d in drains]


def asked(drains: list[Drain]) -> dict[str, str]:
    """The playbook's extra var: host -> reason."""
    return {d.host: d.reason for d in drains}
