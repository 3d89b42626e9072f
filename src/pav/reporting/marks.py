"""What --on-fail marks, on any scheduler: one mark per host a bad part of a FAIL names
(pav.reporting.bad_parts: isolation's suspects, the failing tests' hosts), with the reason and the tests a
recheck runs again.

Slurm drains the marks' nodes (pav.slurm.drain), Kubernetes taints them (pav.k8s.taint): both act on
exactly these hosts. Only a FAIL marks: an interrupted or broken run (ERROR) names hosts for what happened to
the run, not for what is wrong with them. The reason starts with PREFIX so a later run knows its own marks
from an operator's.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.reporting import bad_parts

PREFIX = "pav "
REASON_CHARS = 120  # scontrol shows reasons in sinfo -R columns; long ones are unreadable there


@dataclass(frozen=True)
class Mark:
    host: str  # the run's host: an inventory host (Slurm), a node (k8s)
    reason: str  # "pav RUN_ID: <part> <figure> < <gate> [tests]"
    tests: tuple[str, ...]  # the tests that failed on it, worst part's first: the ones a recheck runs


def plan(results: dict[str, Any]) -> list[Mark]:
    """One mark per host a bad part names, its reason from the worst part (the most specific first); none
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
        out.append(Mark(host, reason(run_id, parts[0], tests, len(parts) - 1), tests))
    return out


def reason(run_id: str, part: bad_parts.BadPart, tests: tuple[str, ...], more: int = 0) -> str:
    """ "pav RUN_ID: <part> <figure> < <gate> [tests]", cut to REASON_CHARS in the figure, never in the
    run id or the tests (a recheck reads both)."""
    head, tail = f"{PREFIX}{run_id}: ", f" [{','.join(tests)}]"
    where = part.part or ("fabric" if len(part.hosts) > 1 else "host")
    figure = f"{where} {part.worst.measured}{bound(part.worst.gate)}"
    figure += f" +{more} more" if more else ""
    room = max(REASON_CHARS - len(head) - len(tail), 8)
    if len(figure) > room:
        figure = figure[: room - 3] + "..."
    return plain(head + figure + tail)


def is_ours(reason_text: str) -> bool:
    return reason_text.startswith(PREFIX)


def bound(gate: str) -> str:
    """The gate the figure missed, as the bound it fell beyond: ">= 692.6 = 0.7 x 989.4" -> " < 692.6"."""
    limit = gate.split(" = ")[0]
    if " and " in limit or not limit:
        return f" (gate {limit})" if limit else ""
    if limit.startswith(">= "):
        return f" < {limit[3:]}"
    if limit.startswith("<= "):
        return f" > {limit[3:]}"
    return f" (gate {limit})"


def plain(text: str) -> str:
    """One line of ASCII without quotes: scontrol's reason goes through Slurm's own parsing and the shell;
    a Kubernetes annotation is shown by kubectl describe."""
    text = text.replace("…", "...").replace("->", "to")
    return "".join(c if c.isascii() and c.isprintable() and c not in "\"'" else " " for c in text)


def passed(host: str, tests: tuple[str, ...], results: dict[str, Any]) -> tuple[bool, str]:
    """(True, why) where every test the host failed passed on it now and no bad part names it: a recheck
    returns only such a host (a drained Slurm node, a tainted Kubernetes node). A recheck run that reached
    no verdict (ERROR, NONE) returns none."""
    if results.get("verdict") not in ("PASS", "FAIL"):
        return False, f"the recheck run ended {results.get('verdict')}"
    named = [p for p in bad_parts.find(results) if host in p.hosts]
    if named:
        return False, f"still failing: {named[0].line()}"
    status = {
        t.get("name"): t.get("status") for t in results.get("tests") or [] if host in (t.get("hosts") or [])
    }
    missing = [t for t in tests if status.get(t) != "pass"]
    if missing:
        return False, "not passed again: " + ", ".join(f"{t} {status.get(t, 'not run')}" for t in missing)
    return True, f"passed {', '.join(tests)}"


def guarded(
    run_dir: Path, actions: list[dict[str, Any]], action: str, step: Callable[[], None], left: str
) -> None:
    """Run a marking step after the report; a bug in it is an `actions` entry and driver-error.txt, never an
    exception (it must not cost the teardown after it). left: what the failed step did not change."""
    try:
        step()
    except Exception as exc:
        with (run_dir / "driver-error.txt").open("a") as out:
            out.write(f"{action}:\n" + traceback.format_exc() + "\n")
        note = f"internal error: {exc!r}; see driver-error.txt ({left})"
        actions.append({"action": action, "host": "", "reason": "", "tests": [], "ok": False, "detail": note})
